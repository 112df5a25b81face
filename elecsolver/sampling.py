"""Collocation point clouds and the quasi-random sequences they are drawn from.

Sequences come from :mod:`scipy.stats.qmc` (Sobol, Halton, Latin hypercube) or numpy's PCG64
(uniform).  Every draw is seeded from (run seed, constraint name, resampling round), so a cloud
can be re-created exactly in any process without stored random state.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.stats import qmc

__all__ = ["METHODS", "PointCloud", "derive_seed", "unit_samples"]

METHODS = ("sobol", "halton", "lhs", "uniform")


@dataclass
class PointCloud:
    """Points of one constraint, nondimensional.

    Attributes
    ----------
    points : np.ndarray
        float64 [N, d], columns in the problem's input order.
    normals : np.ndarray or None
        float64 [N, s], outward unit normals over the s spatial columns (boundary clouds only).
    weights : np.ndarray or None
        float64 [N], optional: the measure (length, area, volume, in the units of ``points``) each
        point stands for, e.g. measure / N for a uniform cloud; None means equal weights.
    """

    points: np.ndarray
    normals: np.ndarray | None = None
    weights: np.ndarray | None = None

    def __len__(self) -> int:
        return self.points.shape[0]

    def subset(self, index: np.ndarray) -> PointCloud:
        """The cloud restricted to rows ``index``."""
        return PointCloud(
            self.points[index],
            None if self.normals is None else self.normals[index],
            None if self.weights is None else self.weights[index],
        )


def derive_seed(seed: int, *keys: object) -> int:
    """A 63-bit seed from a run seed and any labels (stable across processes and platforms)."""
    text = "/".join([str(int(seed))] + [str(k) for k in keys])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def unit_samples(n: int, d: int, method: str, seed: int) -> np.ndarray:
    """``n`` points in the unit cube [0, 1)^d, float64 [n, d].

    Sobol points use scrambling and are drawn with ``random`` (not ``random_base2``) so any n works.

    Raises
    ------
    ValueError
        For an unknown method or n < 0.
    """
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; choose one of {METHODS}")
    if n < 0:
        raise ValueError(f"number of points must be >= 0, got {n}")
    if n == 0:
        return np.zeros((0, d))
    if method == "uniform":
        return np.random.default_rng(seed).random((n, d))
    engine = {"sobol": qmc.Sobol, "halton": qmc.Halton, "lhs": qmc.LatinHypercube}[method]
    sampler = engine(d=d, seed=np.random.default_rng(seed))
    if method == "sobol":
        import warnings

        with warnings.catch_warnings():  # balance warning for n not a power of two: harmless here
            warnings.simplefilter("ignore", UserWarning)
            return sampler.random(n)
    return sampler.random(n)
