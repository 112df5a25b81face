"""Collocation point clouds and the quasi-random sequences they are drawn from.

Sequences come from :mod:`scipy.stats.qmc` (Sobol, Halton, Latin hypercube) or numpy's PCG64
(uniform).  Every draw is seeded from (run seed, constraint name, resampling round), so a cloud
can be re-created exactly in any process without stored random state.

Local sampling (``sampling.shard = "local"``): a :class:`Part` ``(rank, world)`` asks a geometry draw
for only part ``rank`` of ``world`` equal-measure parts of the set it samples (the domain, its boundary
or its initial slice), with the global count's balanced share of the points; see
:mod:`elecsolver.geometry.base` for how a domain splits itself.  :func:`local_part` makes a part the
default of every geometry draw inside a ``with`` block (so a problem's samplers need no new argument)
and collects one :class:`PartDraw` per draw: the global count and the weight of a point, from which the
caller knows the global loss denominators without communication.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.stats import qmc

__all__ = ["METHODS", "Part", "PartDraw", "PointCloud", "active_part", "derive_seed", "local_part", "unit_samples"]

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


@dataclass(frozen=True)
class Part:
    """Part ``rank`` of ``world`` equal-measure parts of a point set (local sampling).

    Raises
    ------
    ValueError
        Unless 0 <= rank < world.
    """

    rank: int
    world: int

    def __post_init__(self):
        if not (isinstance(self.world, (int, np.integer)) and isinstance(self.rank, (int, np.integer))
                and 0 <= self.rank < self.world):
            raise ValueError(f"a part needs integers 0 <= rank < world, got rank={self.rank!r}, world={self.world!r}")

    def count(self, n: int) -> int:
        """This part's share of ``n`` points: the balanced split (sizes differ by at most one, larger first),
        the same as :func:`elecsolver.sharding.balanced_sizes`."""
        base, extra = divmod(int(n), self.world)
        return base + (1 if self.rank < extra else 0)

    def seed(self, seed: int) -> int:
        """The seed of this part's draw from the seed of the whole set's draw (the same seed for a single part,
        whose draw is then the global draw itself)."""
        return int(seed) if self.world == 1 else derive_seed(seed, "part", self.world, self.rank)


@dataclass(frozen=True)
class PartDraw:
    """What one geometry draw of a part reports (identical on every rank but for ``n_local``).

    Attributes
    ----------
    kind : str
        "interior", "boundary" or "initial".
    n_global : int
        Points of the whole set over all parts (the count asked for).
    n_local : int
        Points of this part.
    weight : float
        The measure every point stands for: the whole set's measure / n_global (as in a global draw).
    whole : bool
        True where the set has no local parts and the part was cut from the whole set's cloud (the
        global cloud drawn from the unchanged seed, split by recursive coordinate bisection: exact, O(N)).
    """

    kind: str
    n_global: int
    n_local: int
    weight: float
    whole: bool = False


_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("elecsolver_local_part", default=None)


@contextmanager
def local_part(rank: int, world: int) -> Iterator[list[PartDraw]]:
    """Within the block, every geometry draw (``sample_interior``, ``sample_boundary``, ``sample_initial``)
    that is not given a ``part`` draws only part ``rank`` of ``world``; yields the list the draws append
    their :class:`PartDraw` to, in order.

    Raises
    ------
    ValueError
        Unless 0 <= rank < world.
    """
    log: list[PartDraw] = []
    token = _ACTIVE.set((Part(rank, world), log))
    try:
        yield log
    finally:
        _ACTIVE.reset(token)


def active_part() -> tuple[Part, list[PartDraw]] | None:
    """The (part, log) of the innermost :func:`local_part` block, or None outside one."""
    return _ACTIVE.get()

