"""Spatially balanced partition of a point cloud over data-parallel ranks.

Recursive coordinate bisection (Berger & Bokhari, IEEE Trans. Comput. C-36 (1987) 570): split the
points along the coordinate of largest extent so that the two halves hold numbers of points in
proportion to the ranks they go to; recurse.  Part sizes differ by at most one point and the split
depends only on the points, so every rank computes the same partition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["balanced_sizes", "partition", "shard_indices"]


def balanced_sizes(n: int, parts: int) -> list[int]:
    """Sizes of ``parts`` parts of ``n`` points differing by at most one (larger parts first)."""
    base, extra = divmod(n, parts)
    return [base + (1 if r < extra else 0) for r in range(parts)]


def partition(coords: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Split rows of ``coords`` [N, s] into spatially compact parts with the given sizes.

    Returns a list of index arrays (sorted), one per part, disjoint and covering range(N).

    Raises
    ------
    ValueError
        If the sizes do not add up to N or one is negative.
    """
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != coords.shape[0]:
        raise ValueError(f"part sizes {sizes} must be >= 0 and add up to {coords.shape[0]} points")
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(sizes)

    def recurse(idx: np.ndarray, first: int, part_sizes: list[int]) -> None:
        if len(part_sizes) == 1:
            out[first] = np.sort(idx)
            return
        half = len(part_sizes) // 2
        n_left = sum(part_sizes[:half])
        pts = coords[idx]
        axis = int(np.argmax(pts.max(0) - pts.min(0))) if len(idx) else 0
        order = np.argsort(pts[:, axis], kind="stable") if len(idx) else np.zeros(0, dtype=np.int64)
        recurse(idx[order[:n_left]], first, part_sizes[:half])
        recurse(idx[order[n_left:]], first + half, part_sizes[half:])

    recurse(np.arange(coords.shape[0]), 0, sizes)
    return out


def shard_indices(coords: np.ndarray, rank: int, world: int, sizes: Sequence[int] | None = None) -> np.ndarray:
    """Indices of the rows of ``coords`` that rank ``rank`` of ``world`` holds.

    ``sizes`` (one entry per rank) overrides the balanced split, e.g. for tests of uneven shards.
    """
    if sizes is None:
        sizes = balanced_sizes(coords.shape[0], world)
    if len(sizes) != world:
        raise ValueError(f"need one part size per rank ({world}), got {list(sizes)}")
    return partition(coords, sizes)[rank]
