"""Space-time domains: a spatial domain times a time interval [t0, t1].

Points are [N, d + 1] with the spatial columns first and t last.  Boundary clouds lie on the
spatial boundary (the lateral boundary of the space-time cylinder) and carry the spatial outward
normals [N, d] and tags; :meth:`TimeDomain.sample_initial` gives points at t = t0.

Local parts (see :mod:`elecsolver.geometry.base`) are the spatial domain's times the whole time window:
interior and initial parts are ``part_box`` of the spatial domain (cuts on the spatial columns only),
boundary parts those of the spatial boundary; times are drawn as for a global draw.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..sampling import derive_seed, unit_samples
from .base import (
    INTERIOR_METHODS,
    Domain,
    TaggedCloud,
    check_count,
    check_dtype,
    check_finite,
    check_method,
    check_points,
    resolve_part,
)

__all__ = ["TimeDomain"]


class TimeDomain(Domain):
    """``domain`` x [t0, t1].

    Parameters
    ----------
    domain : Domain
        Spatial domain, d = domain.dim.
    t0, t1 : float
        Start and end time (s), t0 < t1.

    Attributes
    ----------
    dim : int
        d + 1.

    Notes
    -----
    Interior points of a box x [t0, t1] come from one (d + 1)-dimensional sequence of the method; for
    other domains they pair the spatial points of the domain's own sampler with times from a
    one-dimensional sequence of the same method taken in a seeded random order, so that space and time
    are sampled independently (``"grid"``: a product of a spatial grid and evenly spaced times).
    Boundary points pair the spatial boundary sampler with such times.  :meth:`measure` is the spatial measure times t1 - t0;
    :meth:`boundary_measure` is that of the lateral boundary (spatial boundary measure times
    t1 - t0).

    Raises
    ------
    ValueError
        If ``domain`` is not a Domain or the times are not finite with t0 < t1.
    """

    def __init__(self, domain: Domain, t0: float, t1: float):
        if not isinstance(domain, Domain) or isinstance(domain, TimeDomain):
            raise ValueError(f"domain must be a spatial Domain, got {type(domain).__name__}")  # noqa: TRY004
        t0, t1 = float(check_finite("t0", t0)), float(check_finite("t1", t1))
        if not t1 > t0:
            raise ValueError(f"need t0 < t1, got t0={t0}, t1={t1}")
        self.domain, self.t0, self.t1 = domain, t0, t1
        self.dim = domain.dim + 1

    def __repr__(self) -> str:
        return f"TimeDomain({self.domain!r}, {self.t0}, {self.t1})"

    def signed_distance(self, points) -> np.ndarray:
        pts = check_points(points, self.dim)
        t = pts[:, -1].astype(np.float64)
        dt = np.maximum(self.t0 - t, t - self.t1)
        return np.maximum(self.domain.signed_distance(pts[:, :-1]), dt)

    def bbox(self):
        lo, hi = self.domain.bbox()
        return np.append(lo, self.t0), np.append(hi, self.t1)

    def measure(self) -> float:
        return self.domain.measure() * (self.t1 - self.t0)

    def boundary_tags(self):
        return self.domain.boundary_tags()

    def boundary_measure(self, tags=None) -> float:
        return self.domain.boundary_measure(tags) * (self.t1 - self.t0)

    def _times(self, n: int, method: str, seed: int) -> np.ndarray:
        """n times in [t0, t1) from a 1D sequence of ``method``, in a seeded random order.

        The order matters: the spatial sampler and this one are both driven by the point index, and two
        (differently scrambled) low-discrepancy sequences paired index by index are nearly functions of each
        other (the first Sobol coordinate and a 1D Sobol sequence are both scrambled van der Corput
        sequences), which would put the space-time points on a curve; a random permutation keeps the times
        evenly spread in [t0, t1) and pairs them with the spatial points independently."""
        u = unit_samples(n, 1, method, derive_seed(seed, "time"))[:, 0]
        u = u[np.random.default_rng(derive_seed(seed, "time-order")).permutation(n)]
        return self.t0 + (self.t1 - self.t0) * u

    def _interior(self, n, method, seed):
        from .primitives import _AxisBox

        if isinstance(self.domain, _AxisBox):  # a box: one (d + 1)-dimensional sequence, low discrepancy in x and t
            lo = np.append(self.domain.lo, self.t0)
            hi = np.append(self.domain.hi, self.t1)
            return lo + unit_samples(n, self.dim, method, derive_seed(seed, "space-time")) * (hi - lo)
        x = self.domain._interior(n, method, derive_seed(seed, "space"))
        return np.column_stack([x, self._times(n, method, seed)])

    def _space_dim(self) -> int:
        return self.domain.dim

    def part_box(self, rank, world):
        """The spatial domain's :meth:`~elecsolver.geometry.Domain.part_box` (over the spatial columns)."""
        return self.domain.part_box(rank, world)

    def _interior_part(self, k, method, seed, part):
        from .primitives import _AxisBox

        if isinstance(self.domain, _AxisBox):  # as _interior: one (d + 1)-dimensional sequence on the part's box
            lo, hi = self.domain.part_box(part.rank, part.world)
            lo, hi = np.append(lo, self.t0), np.append(hi, self.t1)
            return lo + unit_samples(k, self.dim, method, derive_seed(seed, "space-time")) * (hi - lo)
        x = self.domain._interior_part(k, method, derive_seed(seed, "space"), part)
        return np.column_stack([x, self._times(k, method, seed)])

    def _boundary_part(self, k, method, seed, tags, part):
        got = self.domain._boundary_part(k, method, derive_seed(seed, "space"), tags, part)
        if got is None:
            return None
        x, nrm, tg = got
        return np.column_stack([x, self._times(k, method, seed)]), nrm, tg

    def _grid(self, n):
        # choose the number of time levels so the time step is about the spatial spacing (in the
        # units of the columns), at least 2
        h = (self.measure() / n) ** (1.0 / self.dim)
        nt = int(max(2, round((self.t1 - self.t0) / h)))
        x = self.domain._grid(max(1, round(n / nt)))
        t = self.t0 + (np.arange(nt) + 0.5) * (self.t1 - self.t0) / nt
        return np.column_stack([np.repeat(x, nt, axis=0), np.tile(t, len(x))])

    def _boundary(self, n, method, seed, tags):
        x, nrm, tg = self.domain._boundary(n, method, derive_seed(seed, "space"), tags)
        return np.column_stack([x, self._times(n, method, seed)]), nrm, tg

    def sample_boundary(self, n, method="uniform", seed=0, tags=None, dtype=np.float64, part=None) -> TaggedCloud:
        """Points (x, t) with x on the spatial boundary, uniform in boundary measure and in t.

        Returns
        -------
        TaggedCloud
            ``points`` [n, d + 1] (m, then s); ``normals`` [n, d] spatial outward unit normals;
            ``tags`` str [n]; ``weights`` [n] = lateral boundary measure / n.

        Raises
        ------
        ValueError
            As :meth:`Domain.sample_boundary`.
        """
        return super().sample_boundary(n, method, seed, tags, dtype, part)

    def sample_initial(self, n: int, method: str = "uniform", seed: int = 0, dtype=np.float64,
                       part=None) -> TaggedCloud:
        """Points (x, t0) with x in the spatial domain.

        Parameters
        ----------
        n, method, seed, dtype, part
            As :meth:`Domain.sample_interior` of the spatial domain (a part: of the spatial domain's).

        Returns
        -------
        TaggedCloud
            ``points`` [n, d + 1] with the last column t0; ``weights`` = spatial measure / n.

        Raises
        ------
        ValueError
            For a bad ``n``, method or dtype.
        """
        n = check_count(n)
        check_method(method, INTERIOR_METHODS, "interior")
        dt = check_dtype(dtype)
        part, log = resolve_part(part)
        if part is not None:
            cloud, draw = self.domain._interior_part_cloud(n, method, derive_seed(int(seed), "initial"), dt, part)
            if log is not None:
                log.append(replace(draw, kind="initial"))
        else:
            cloud = self.domain.sample_interior(n, method, derive_seed(seed, "initial"), dtype)
        pts = np.column_stack([cloud.points, np.full(len(cloud), self.t0, dtype=cloud.points.dtype)])
        return TaggedCloud(pts, None, cloud.weights)
