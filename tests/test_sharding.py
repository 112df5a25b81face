"""Spatial sharding: disjoint, covering, balanced to one point, and loss-preserving."""

from __future__ import annotations

import numpy as np
import pytest

from elecsolver.sharding import balanced_sizes, partition, shard_indices


@pytest.mark.parametrize("n,parts", [(1000, 2), (1001, 3), (17, 5), (3, 4), (0, 2)])
def test_parts_disjoint_cover_balanced(n, parts):
    pts = np.random.default_rng(0).random((n, 2))
    idx = partition(pts, balanced_sizes(n, parts))
    joined = np.concatenate(idx)
    assert sorted(joined.tolist()) == list(range(n))
    sizes = [len(i) for i in idx]
    assert max(sizes) - min(sizes) <= 1


def test_parts_are_spatially_compact():
    pts = np.random.default_rng(1).random((4000, 2))
    parts = partition(pts, balanced_sizes(4000, 4))
    # each part's bounding box covers about a quarter of the square, not the whole of it
    for i in parts:
        extent = pts[i].max(0) - pts[i].min(0)
        assert np.prod(extent) < 0.3


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_weighted_loss_from_parts_equals_whole(parts):
    """sum over parts of (local sum of w r^2) / (global sum of w) equals the whole cloud's loss."""
    rng = np.random.default_rng(2)
    pts, res, w = rng.random((513, 3)), rng.normal(size=513), rng.random(513) + 0.1
    whole = np.sum(w * res**2) / np.sum(w)
    total_w = np.sum(w)
    assembled = sum(np.sum(w[i] * res[i] ** 2) / total_w for i in partition(pts[:, :2], balanced_sizes(513, parts)))
    assert abs(assembled - whole) / whole < 1e-12


def test_partition_is_deterministic():
    pts = np.random.default_rng(3).random((999, 2))
    a = partition(pts, balanced_sizes(999, 4))
    b = partition(pts.copy(), balanced_sizes(999, 4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_bad_sizes():
    with pytest.raises(ValueError, match="add up"):
        partition(np.zeros((5, 2)), [2, 2])
    with pytest.raises(ValueError, match="one part size per rank"):
        shard_indices(np.zeros((5, 2)), 0, 2, [5])
