"""The domain abstraction: where collocation points are drawn from.

A :class:`Domain` is a closed set in R^d (d = 1, 2, 3) described by a signed distance (negative
inside, zero on the boundary, positive outside).  It draws interior points (uniform, Sobol, Halton,
Latin hypercube or a regular grid) and boundary points with outward unit normals and a tag naming
the face or part each point lies on.  Coordinates are in metres or in whatever unit the caller uses
consistently (the training code passes nondimensional coordinates).

Sampling is deterministic: the same arguments give the same points in every process.  Interior
points of a shape without a direct map are drawn by rejection from its bounding box, taking the first
``n`` accepted points of one sequence of the given method (for Sobol and Halton that is a prefix of
a low-discrepancy sequence restricted to the domain).

Local parts (``part=Part(rank, world)`` on the samplers, or an active
:func:`elecsolver.sampling.local_part` block): a draw of ``n`` points returns only part ``rank`` of
``world`` parts of equal measure, with ``Part.count(n)`` points (the balanced share, so the counts add
up to ``n``) of the same weight as a global draw's (measure / n), drawn from ``Part.seed(seed)``; the
union over the parts is distributed like a global draw (uniform in measure).  The parts:

- interior (and the initial slice of a space-time domain): boxes :meth:`Domain.part_box` from
  recursive bisection of the bounding box, along its longest side, with the cut placed so that the
  two sides hold measures in proportion to their numbers of parts (exact for boxes; else the quantile
  of a fixed Sobol reference cloud of at least 2^16 points inside the domain, so equal to that
  accuracy); a part's points are drawn by rejection from its box (a box: directly), O(n / world);
- boundary of a primitive (patches) or a mesh (facets): equal intervals of the first boundary
  coordinate, which picks the patch or facet by measure (and, for a patch, the position along it), so
  a part is a run of patches (facets) and pieces of them in the domain's order, of measure exactly
  1/world of the selected boundary; O(n / world);
- boundary of a CSG result: no local parts; the part is cut from the whole cloud (drawn from ``seed``
  itself) by recursive coordinate bisection of its spatial columns, as the exact sharding does (O(n),
  reported as ``PartDraw.whole``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..sampling import METHODS, Part, PartDraw, PointCloud, active_part, derive_seed, unit_samples

__all__ = ["BOUNDARY_METHODS", "INTERIOR_METHODS", "Domain", "Patch", "PatchDomain", "TaggedCloud"]

INTERIOR_METHODS = (*METHODS, "grid")
BOUNDARY_METHODS = METHODS

_MAX_DRAW = 1 << 25  # most candidate points one rejection loop may draw


@dataclass
class TaggedCloud(PointCloud):
    """A :class:`~elecsolver.sampling.PointCloud` with a tag per point.

    Attributes
    ----------
    tags : np.ndarray or None
        str [N]: the face or part of the boundary each point lies on (boundary clouds); None for
        interior clouds.
    """

    tags: np.ndarray | None = None

    def subset(self, index: np.ndarray) -> TaggedCloud:
        """The cloud restricted to rows ``index`` (tags included)."""
        base = PointCloud.subset(self, index)
        return TaggedCloud(base.points, base.normals, base.weights, None if self.tags is None else self.tags[index])


def check_points(points, dim: int) -> np.ndarray:
    """``points`` as a float array [N, dim] (a single point [dim] becomes [1, dim]).

    Raises
    ------
    ValueError
        If the array cannot be shaped [N, dim].
    """
    pts = np.asarray(points)
    if pts.dtype.kind not in "fiu":
        raise ValueError(f"points must be a real array [N, {dim}], got dtype {pts.dtype}")
    if pts.ndim == 1 and pts.shape[0] == dim:
        pts = pts[None, :]
    if pts.ndim != 2 or pts.shape[1] != dim:
        raise ValueError(f"points must have shape [N, {dim}] for this {dim}D domain, got {list(pts.shape)}")
    return pts.astype(np.float64, copy=False) if pts.dtype.kind != "f" else pts


def check_count(n) -> int:
    """``n`` as a non-negative int (raises ValueError otherwise)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"number of points must be an integer >= 0, got {n!r}")
    return int(n)


def check_method(method: str, allowed: tuple[str, ...], where: str) -> str:
    """Return ``method`` if it is one of ``allowed``; else raise ValueError naming the choices."""
    if method not in allowed:
        raise ValueError(f"unknown {where} sampling method {method!r}; choose one of {allowed}")
    return method


def resolve_part(part) -> tuple[Part | None, list | None]:
    """(part, log) for one draw: ``part`` if given, else the active :func:`~elecsolver.sampling.local_part`'s;
    the log is the active block's list (or None).

    Raises
    ------
    ValueError
        If ``part`` is neither None nor a :class:`~elecsolver.sampling.Part`.
    """
    active = active_part()
    if part is None:
        return active if active is not None else (None, None)
    if not isinstance(part, Part):
        raise ValueError(f"part must be an elecsolver.sampling.Part(rank, world) or None, got {part!r}")  # noqa: TRY004
    return part, (active[1] if active is not None else None)


def check_dtype(dtype) -> np.dtype:
    """``np.dtype(dtype)`` if it is float32 or float64; else raise ValueError."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    return dt


def unit_normals(normals: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Rows of ``normals`` scaled to length 1 and cast to ``dtype`` (normalised again in it)."""
    nrm = normals / np.linalg.norm(normals, axis=1, keepdims=True)
    nrm = nrm.astype(dtype)
    return nrm / np.linalg.norm(nrm, axis=1, keepdims=True)


def check_finite(name: str, value) -> np.ndarray:
    """``value`` as a float64 array; raise ValueError naming ``name`` if any entry is not finite."""
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return arr


class Domain:
    """Base class of a closed domain in R^d.

    Subclasses implement :meth:`signed_distance`, :meth:`bbox`, :meth:`measure`,
    :meth:`boundary_tags`, :meth:`boundary_measure` and ``_boundary``; they may override
    ``_interior`` (default: rejection from the bounding box).  Domains combine with ``|`` (union),
    ``&`` (intersection) and ``-`` (difference), see :mod:`elecsolver.geometry.csg`.

    Attributes
    ----------
    dim : int
        Spatial dimension d (number of point columns).
    """

    dim: int = 0

    # geometry ---------------------------------------------------------------------------
    def level_set(self, x):
        """A smooth (C-infinity) level set of the domain as a torch function of points x [N, d] (m) -> [N]:
        negative inside, zero on the boundary; what a subdomain of a problem needs (``Problem.subdomains``).

        Raises
        ------
        NotImplementedError
            For a domain without one (the primitives Interval, Rectangle, Box, Disk and Sphere have one).
        """
        raise NotImplementedError(f"{type(self).__name__} has no smooth level set; a subdomain must be an Interval, "
                                  "Rectangle, Box, Disk or Sphere")

    def signed_distance(self, points) -> np.ndarray:
        """Signed distance to the boundary, float64 [N] (m): < 0 inside, 0 on it, > 0 outside.

        Exact for the primitives; for CSG results and space-time domains it is min/max of the
        operands' distances, which has the right sign and zero set but may underestimate the
        distance away from the boundary.

        Parameters
        ----------
        points : array [N, d]

        Raises
        ------
        ValueError
            If ``points`` is not [N, d].
        """
        raise NotImplementedError

    def contains(self, points, tol: float = 0.0) -> np.ndarray:
        """Whether each point lies in the closed domain, bool [N].

        Parameters
        ----------
        points : array [N, d]
            Coordinates (m).
        tol : float
            Points up to ``tol`` (m) outside also count as inside.

        Raises
        ------
        ValueError
            If ``points`` is not [N, d].
        """
        return self.signed_distance(points) <= tol

    def bbox(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounding box ``(lo, hi)``, each float64 [d] (m)."""
        raise NotImplementedError

    def size(self) -> float:
        """Diagonal of the bounding box (m): the length scale used for tolerances."""
        lo, hi = self.bbox()
        return float(np.linalg.norm(hi - lo))

    def measure(self) -> float:
        """Length (1D), area (2D, m^2) or volume (3D, m^3) of the domain."""
        raise NotImplementedError

    def boundary_tags(self) -> tuple[str, ...]:
        """Names of the boundary parts, in the order the domain lists them."""
        raise NotImplementedError

    def boundary_measure(self, tags: Iterable[str] | str | None = None) -> float:
        """Size of the boundary (number of end points in 1D, length in 2D, area in 3D).

        Parameters
        ----------
        tags : str or iterable of str, optional
            Only these boundary parts (default all).

        Raises
        ------
        ValueError
            For an unknown tag.
        """
        raise NotImplementedError

    def select_tags(self, tags: Iterable[str] | str | None) -> tuple[str, ...]:
        """The known tags among ``tags`` (all if None), in the domain's order.

        Raises
        ------
        ValueError
            If a tag is not a boundary part of this domain.
        """
        known = self.boundary_tags()
        if tags is None:
            return known
        wanted = [tags] if isinstance(tags, str) else [str(t) for t in tags]
        unknown = [t for t in wanted if t not in known]
        if unknown:
            raise ValueError(f"unknown boundary tag(s) {unknown}; this domain has {list(known)}")
        return tuple(t for t in known if t in wanted)

    # sampling ---------------------------------------------------------------------------
    def sample_interior(self, n: int, method: str = "uniform", seed: int = 0, dtype=np.float64,
                        part: Part | None = None) -> TaggedCloud:
        """Points in the domain.

        Parameters
        ----------
        n : int
            Number of points.  For ``method="grid"`` the count is only approximately ``n``: a
            regular cell-centred grid over the bounding box whose spacing is tuned so that about
            ``n`` nodes fall inside.
        method : {"uniform", "sobol", "halton", "lhs", "grid"}
            Sequence (:func:`elecsolver.sampling.unit_samples`, scipy.stats.qmc) or regular grid.
        seed : int
            Seed; the same seed gives the same points (ignored by "grid").
        dtype : float32 or float64
        part : Part, optional
            Only this part of the domain (see the module docstring); default: the active
            :func:`~elecsolver.sampling.local_part`'s, else the whole domain.

        Returns
        -------
        TaggedCloud
            ``points`` [n, d] of ``dtype`` (m), ``weights`` float64 [n] = measure / n, no normals (with a
            part: ``part.count(n)`` points in :meth:`part_box`, weights still measure / n).

        Raises
        ------
        ValueError
            For a bad ``n``, method or dtype, or an empty domain; ``"grid"`` with a part.
        """
        n = check_count(n)
        check_method(method, INTERIOR_METHODS, "interior")
        dt = check_dtype(dtype)
        part, log = resolve_part(part)
        if part is not None:
            cloud, draw = self._interior_part_cloud(n, method, int(seed), dt, part)
            if log is not None:
                log.append(draw)
            return cloud
        if n == 0:
            pts = np.zeros((0, self.dim))
        elif method == "grid":
            pts = self._grid(n)
        else:
            pts = self._interior(n, method, int(seed))
        m = len(pts)
        weights = np.full(m, self.measure() / m) if m else np.zeros(0)
        return TaggedCloud(pts.astype(dt), None, weights)

    def sample_boundary(
        self,
        n: int,
        method: str = "uniform",
        seed: int = 0,
        tags: Iterable[str] | str | None = None,
        dtype=np.float64,
        part: Part | None = None,
    ) -> TaggedCloud:
        """Points on the boundary, uniform with respect to boundary length (2D) or area (3D).

        Parameters
        ----------
        n : int
            Number of points.
        method : {"uniform", "sobol", "halton", "lhs"}
        seed : int
        tags : str or iterable of str, optional
            Sample only these boundary parts (default all).
        dtype : float32 or float64
        part : Part, optional
            Only this part of the boundary (see the module docstring); default: the active
            :func:`~elecsolver.sampling.local_part`'s, else the whole boundary.

        Returns
        -------
        TaggedCloud
            ``points`` [n, d] (m); ``normals`` [n, d] outward unit normals (length 1 within 1e-12
            in float64, 1e-6 in float32; at a corner the normalised mean of the faces' normals);
            ``tags`` str [n]; ``weights`` float64 [n] = boundary measure / n (with a part:
            ``part.count(n)`` points, weights still boundary measure / n).

        Raises
        ------
        ValueError
            For a bad ``n``, method, dtype or tag, or a boundary of zero measure.
        """
        n = check_count(n)
        check_method(method, BOUNDARY_METHODS, "boundary")
        dt = check_dtype(dtype)
        sel = self.select_tags(tags)
        if not sel:
            raise ValueError("this domain has no boundary parts to sample (for a MeshDomain pass boundary_groups)")
        part, log = resolve_part(part)
        if part is not None:
            cloud, draw = self._boundary_part_cloud(n, method, int(seed), sel, dt, part)
            if log is not None:
                log.append(draw)
            return cloud
        if n == 0:
            return TaggedCloud(np.zeros((0, self.dim), dt), np.zeros((0, self.dim), dt), np.zeros(0),
                               np.zeros(0, dtype=str))
        bm = self.boundary_measure(sel)
        if not bm > 0:
            raise ValueError(f"the boundary parts {list(sel)} of this domain have zero measure: nothing to sample")
        pts, nrm, tg = self._boundary(n, method, int(seed), sel)
        return TaggedCloud(pts.astype(dt), unit_normals(nrm, dt), np.full(n, bm / n), np.asarray(tg, dtype=str))

    # local parts ------------------------------------------------------------------------
    def _space_dim(self) -> int:
        """Number of spatial columns (the leading ones)."""
        return self.dim

    def part_box(self, rank: int, world: int) -> tuple[np.ndarray, np.ndarray]:
        """The box ``(lo, hi)`` over the spatial columns that holds part ``rank`` of ``world`` of the interior.

        Recursive bisection of the bounding box: the longest side of the current box is cut so that the
        two sides hold measures in proportion to their numbers of parts (the first ``world // 2`` parts on
        the low side, as :func:`elecsolver.sharding.partition` does); the boxes are disjoint (half-open)
        and tile the bounding box.  Deterministic and cached, so every rank computes the same cuts.

        Raises
        ------
        ValueError
            Unless 0 <= rank < world, or for a flat bounding box.
        """
        part = Part(rank, world)
        cache = self.__dict__.setdefault("_part_boxes", {})
        key = (part.rank, part.world)
        if key not in cache:
            lo, hi = (np.array(a, dtype=np.float64) for a in self.bbox())
            if np.any(hi <= lo):
                raise ValueError("the domain is empty or flat (its bounding box has no volume): no interior parts")
            first, m = 0, part.world
            while m > 1:
                k = m // 2
                axis = int(np.argmax(hi - lo))
                c = float(np.clip(self._cut(lo, hi, axis, k / m, part.world), lo[axis], hi[axis]))
                if part.rank < first + k:
                    hi[axis], m = c, k
                else:
                    lo[axis], first, m = c, first + k, m - k
            cache[key] = (lo, hi)
        lo, hi = cache[key]
        return lo.copy(), hi.copy()

    def _cut(self, lo: np.ndarray, hi: np.ndarray, axis: int, frac: float, world: int) -> float:
        """Where to cut the box [lo, hi) along ``axis`` so that ``frac`` of the domain's measure in the box lies
        below: the quantile of the reference cloud's points in the box (the middle when it holds too few)."""
        ref = self._part_reference(world)
        x = ref[np.all((ref >= lo) & (ref < hi), axis=1), axis]
        if len(x) < 2:
            return float(lo[axis] + frac * (hi[axis] - lo[axis]))
        return float(np.quantile(x, frac))

    def _part_reference(self, world: int) -> np.ndarray:
        """The points inside of max(2^16, 256 world) (a power of two) Sobol points in the bounding box (fixed
        seed, cached): the measure estimate the cuts of :meth:`part_box` are quantiles of."""
        m = 1 << max(16, math.ceil(math.log2(256 * world)))
        cache = self.__dict__.setdefault("_part_refs", {})
        if m not in cache:
            lo, hi = self.bbox()
            pts = lo + unit_samples(m, self.dim, "sobol", derive_seed(0, "part-reference")) * (hi - lo)
            cache[m] = pts[self.contains(pts)]
        return cache[m]

    def _interior_part(self, k: int, method: str, seed: int, part: Part) -> np.ndarray:
        """``k`` points of the part's interior [k, d] (default: rejection from :meth:`part_box`)."""
        return self._rejection(k, method, seed, self.part_box(part.rank, part.world))

    def _interior_part_cloud(self, n: int, method: str, seed: int, dt, part: Part) -> tuple[TaggedCloud, PartDraw]:
        """The part's share of an n-point interior draw and its report (``n``, method, dtype checked)."""
        if method == "grid":
            raise ValueError("a regular grid has no local parts; sample with a sequence method (sobol, halton, lhs, "
                             "uniform)")
        k = part.count(n)
        if k == 0:
            pts = np.zeros((0, self.dim))
        elif part.world == 1:  # the whole domain: the global draw itself
            pts = self._interior(k, method, seed)
        else:
            pts = self._interior_part(k, method, part.seed(seed), part)
        w = self.measure() / n if n else 0.0
        return TaggedCloud(pts.astype(dt), None, np.full(k, w)), PartDraw("interior", n, k, w)

    def _boundary_part(self, k: int, method: str, seed: int, tags: tuple[str, ...], part: Part):
        """``k`` points of the part of the boundary parts ``tags`` (points, normals, tags), or None where the
        domain has no local boundary parts (default)."""

    def _boundary_part_cloud(self, n: int, method: str, seed: int, sel: tuple[str, ...], dt,
                             part: Part) -> tuple[TaggedCloud, PartDraw]:
        """The part's share of an n-point boundary draw and its report (``n``, method, dtype, tags checked)."""
        from ..sharding import shard_indices

        k, s = part.count(n), self._space_dim()
        if n == 0:
            return (TaggedCloud(np.zeros((0, self.dim), dt), np.zeros((0, s), dt), np.zeros(0), np.zeros(0, dtype=str)),
                    PartDraw("boundary", 0, 0, 0.0))
        bm = self.boundary_measure(sel)
        if not bm > 0:
            raise ValueError(f"the boundary parts {list(sel)} of this domain have zero measure: nothing to sample")
        whole = False
        if k == 0:
            pts, nrm, tg = np.zeros((0, self.dim)), np.zeros((0, s)), np.zeros(0, dtype=str)
        else:
            got = self._boundary_part(k, method, part.seed(seed), sel, part)
            if got is None:  # no local parts: cut the part from the whole cloud, as the exact sharding does
                pts, nrm, tg = self._boundary(n, method, seed, sel)
                idx = shard_indices(pts[:, :s], part.rank, part.world)
                pts, nrm, tg, whole = pts[idx], nrm[idx], np.asarray(tg)[idx], True
            else:
                pts, nrm, tg = got
        cloud = TaggedCloud(pts.astype(dt), unit_normals(nrm, dt), np.full(k, bm / n), np.asarray(tg, dtype=str))
        return cloud, PartDraw("boundary", n, k, bm / n, whole)

    # hooks ------------------------------------------------------------------------------
    def _fill_guess(self) -> float:
        """Rough fraction of the bounding box the domain fills (first rejection batch size)."""
        return 0.5

    def _interior(self, n: int, method: str, seed: int) -> np.ndarray:
        return self._rejection(n, method, seed)

    def _rejection(self, n: int, method: str, seed: int, box=None) -> np.ndarray:
        """The first ``n`` points of one ``method`` sequence in the bounding box (or in ``box`` = (lo, hi))
        that are inside."""
        lo, hi = self.bbox() if box is None else box
        if np.any(hi <= lo):
            raise ValueError("the domain is empty or flat (its bounding box has no volume): no interior points")
        m = max(64, int(1.2 * n / max(self._fill_guess(), 1e-3)) + 16)
        while True:
            pts = lo + unit_samples(m, self.dim, method, seed) * (hi - lo)
            inside = self.contains(pts)
            hits = int(inside.sum())
            if hits >= n:
                return pts[inside][:n]
            if m >= _MAX_DRAW:
                raise ValueError(
                    f"found only {hits} of {n} interior points among {m} candidates in the bounding box; "
                    "the domain is empty or fills too little of its bounding box"
                )
            m = min(_MAX_DRAW, max(2 * m, int(1.3 * m * n / hits) + 16) if hits else 8 * m)

    def _grid(self, n: int) -> np.ndarray:
        """Cell-centred regular grid over the bounding box, same spacing h on every axis, keeping the
        nodes inside; h is tuned (secant steps, then a sweep if needed) to get about n nodes."""
        lo, hi = self.bbox()
        ext = hi - lo
        if np.any(ext <= 0):
            raise ValueError("the domain is empty or flat (its bounding box has no volume): no interior points")
        meas = self.measure()
        if not meas > 0:
            raise ValueError("the domain has zero measure: no grid points inside")

        def nodes(h: float) -> np.ndarray:
            counts = np.maximum(1, np.round(ext / h)).astype(np.int64)
            if np.prod(counts.astype(float)) > _MAX_DRAW:
                raise ValueError(f"a grid of about {n} points inside needs more than {_MAX_DRAW} nodes")
            axes = [lo[i] + (np.arange(c) + 0.5) * ext[i] / c for i, c in enumerate(counts)]
            pts = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
            return pts[self.contains(pts)]

        def miss(pts: np.ndarray) -> float:  # how far the count is from n, as a ratio
            return abs(math.log(len(pts) / n)) if len(pts) else math.inf

        h = (meas / n) ** (1.0 / self.dim)
        best, best_h = np.zeros((0, self.dim)), h
        for _ in range(10):
            pts = nodes(h)
            if miss(pts) < miss(best):
                best, best_h = pts, h
            if miss(best) <= math.log(1.02):
                break
            h = h / 2 if len(pts) == 0 else h * (len(pts) / n) ** (1.0 / self.dim)
        if miss(best) > math.log(1.25):  # counts jump (thin domains): sweep around the best spacing
            for k in range(-12, 13):
                pts = nodes(best_h * 2.0 ** (k / 12))
                if miss(pts) < miss(best):
                    best = pts
        if len(best) == 0:
            raise ValueError(f"no regular-grid point fell inside the domain for n={n}; ask for more points")
        return best

    def _boundary(self, n: int, method: str, seed: int, tags: tuple[str, ...]):
        """``n`` boundary points of the parts ``tags``: (points [n, d], normals [n, d], tags [n])."""
        raise NotImplementedError

    # CSG --------------------------------------------------------------------------------
    def __or__(self, other: Domain) -> Domain:
        from .csg import Union

        return Union(self, other)

    def __and__(self, other: Domain) -> Domain:
        from .csg import Intersection

        return Intersection(self, other)

    def __sub__(self, other: Domain) -> Domain:
        from .csg import Difference

        return Difference(self, other)


@dataclass
class Patch:
    """One smooth piece of a primitive's boundary.

    Attributes
    ----------
    tag : str
    measure : float
        Length or area (m or m^2); 1 for an end point of an interval.
    map : callable
        ``map(u)`` with u float64 [m, k] in [0, 1]^k -> (points [m, d], normals [m, d]), preserving
        measure up to the constant factor ``measure`` (uniform u gives uniform points).
    """

    tag: str
    measure: float
    map: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class PatchDomain(Domain):
    """A domain whose boundary is a list of :class:`Patch` (all the primitives)."""

    def patches(self) -> list[Patch]:
        raise NotImplementedError

    def boundary_tags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.tag for p in self.patches()))

    def boundary_measure(self, tags=None) -> float:
        sel = self.select_tags(tags)
        return float(sum(p.measure for p in self.patches() if p.tag in sel))

    def _boundary(self, n, method, seed, tags):
        k = max(self.dim - 1, 1)
        u = unit_samples(n, k, method, derive_seed(seed, "boundary"))
        return self._map_boundary(u, tags)

    def _boundary_part(self, k, method, seed, tags, part):
        # the first coordinate runs over the selected patches by measure: part r takes [r, r + 1) / world of it
        u = unit_samples(k, max(self.dim - 1, 1), method, derive_seed(seed, "boundary"))
        u[:, 0] = (part.rank + u[:, 0]) / part.world
        return self._map_boundary(u, tags)

    def _map_boundary(self, u: np.ndarray, tags: tuple[str, ...]):
        """Boundary points of the parts ``tags`` at parameters ``u`` [n, k] in [0, 1]^k: (points, normals, tags)."""
        n = len(u)
        patches = [p for p in self.patches() if p.tag in tags and p.measure > 0]
        cum = np.cumsum([p.measure for p in patches])
        edges = np.concatenate([[0.0], cum / cum[-1]])
        # the first coordinate picks a patch (by measure) and is stretched back to [0, 1] inside it
        idx = np.clip(np.searchsorted(edges, u[:, 0], side="right") - 1, 0, len(patches) - 1)
        s = np.clip((u[:, 0] - edges[idx]) / (edges[idx + 1] - edges[idx]), 0.0, 1.0)
        local = np.column_stack([s, u[:, 1:]])
        pts = np.empty((n, self.dim))
        nrm = np.empty((n, self.dim))
        tg = np.empty(n, dtype=object)
        for j, p in enumerate(patches):
            sel = idx == j
            if sel.any():
                pts[sel], nrm[sel] = p.map(local[sel])
                tg[sel] = p.tag
        return pts, nrm, tg.astype(str)
