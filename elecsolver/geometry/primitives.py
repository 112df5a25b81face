"""Primitive domains: Interval, Rectangle, Box (axis-aligned boxes), Disk, Sphere, Cylinder (z axis)
and Polygon (any simple polygon).

Each has an exact signed distance and a boundary made of patches with measure-preserving maps, so
boundary points are uniform in length or area.  Tags name the faces: ``"xmin"``, ``"xmax"``,
``"ymin"``, ... for the boxes, ``"circle"`` / ``"sphere"`` for the round ones, ``"side"``,
``"zmin"``, ``"zmax"`` for the cylinder and ``"edge0"``, ``"edge1"``, ... (edge i from vertex i to
vertex i+1, unless ``edge_tags`` is given) for polygons.  A domain built with ``name="pec"`` prefixes
its tags: ``"pec:xmin"``.

Sources: the box and capped-cylinder signed distances are the standard exact formulas (e.g. I. Quilez,
"Distance functions", iquilezles.org); boundary maps are area-preserving (sphere: Archimedes' hat-box
theorem; disk caps: r = R sqrt(u)); polygon inside-ness is the crossing-number test (Shimrat,
Comm. ACM 5 (1962) 434, algorithm 112).
"""

from __future__ import annotations

import math

import numpy as np

from .base import Patch, PatchDomain, check_finite, check_points

__all__ = ["Box", "Cylinder", "Disk", "Interval", "Polygon", "Rectangle", "Sphere"]

_AXES = "xyz"


def _prefix(name: str | None, tag: str) -> str:
    return tag if name is None else f"{name}:{tag}"


def _check_name(name) -> str | None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}")
    return name


class _AxisBox(PatchDomain):
    """Axis-aligned box [lo, hi] in R^d."""

    def __init__(self, lo, hi, dim: int, name: str | None = None):
        lo = check_finite("lo", lo).reshape(-1)
        hi = check_finite("hi", hi).reshape(-1)
        if lo.shape != (dim,) or hi.shape != (dim,):
            raise ValueError(f"lo and hi must each have {dim} coordinates, got {lo.tolist()} and {hi.tolist()}")
        if np.any(hi <= lo):
            raise ValueError(f"need lo < hi in every coordinate, got lo={lo.tolist()}, hi={hi.tolist()}")
        self.dim = dim
        self.lo, self.hi = lo, hi
        self.name = _check_name(name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lo.tolist()}, {self.hi.tolist()})"

    def signed_distance(self, points) -> np.ndarray:
        pts = check_points(points, self.dim).astype(np.float64)
        c, half = (self.lo + self.hi) / 2, (self.hi - self.lo) / 2
        q = np.abs(pts - c) - half
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
        return outside + np.minimum(q.max(axis=1), 0.0)

    def level_set(self, x):
        """A smooth level set of the box, a torch function of points x [N, d] (m) -> [N] (m): negative inside,
        zero on the faces (and on their planes beyond the box), -prod_a f_a with f_a = (x_a - lo_a)(hi_a - x_a) /
        h_a (h the edge lengths) and every factor but the first divided by its value h_a / 4 at the centre.  On a
        face its gradient is the outward normal times a factor that is 1 at the face's centre (in 1D: exactly
        the signed distance's gradient at both ends)."""
        import torch

        lo = torch.as_tensor(self.lo, dtype=x.dtype, device=x.device)
        hi = torch.as_tensor(self.hi, dtype=x.dtype, device=x.device)
        f = (x[:, : self.dim] - lo) * (hi - x[:, : self.dim]) / (hi - lo)  # distance to the nearer face, to first order
        out = f[:, 0]
        for a in range(1, self.dim):
            out = out * f[:, a] / float((self.hi[a] - self.lo[a]) / 4)  # f_a / (h_a / 4) = 1 at the centre
        return -out

    def bbox(self):
        return self.lo.copy(), self.hi.copy()

    def measure(self) -> float:
        return float(np.prod(self.hi - self.lo))

    def _fill_guess(self) -> float:
        return 1.0

    def _interior(self, n, method, seed):
        from ..sampling import unit_samples

        return self.lo + unit_samples(n, self.dim, method, seed) * (self.hi - self.lo)

    def _cut(self, lo, hi, axis, frac, world):
        # the measure in a sub-box is its volume: cut at the fraction of the side (exact)
        return float(lo[axis] + frac * (hi[axis] - lo[axis]))

    def _interior_part(self, k, method, seed, part):
        from ..sampling import unit_samples

        lo, hi = self.part_box(part.rank, part.world)
        return lo + unit_samples(k, self.dim, method, seed) * (hi - lo)

    def patches(self) -> list[Patch]:
        out = []
        ext = self.hi - self.lo
        for a in range(self.dim):
            others = [b for b in range(self.dim) if b != a]
            area = float(np.prod(ext[others])) if others else 1.0
            for side, value in (("min", self.lo[a]), ("max", self.hi[a])):
                normal = np.zeros(self.dim)
                normal[a] = -1.0 if side == "min" else 1.0

                def fmap(u, a=a, others=others, value=value, normal=normal):
                    pts = np.empty((len(u), self.dim))
                    pts[:, a] = value
                    nrm = np.broadcast_to(normal, pts.shape).copy()
                    for j, b in enumerate(others):
                        pts[:, b] = self.lo[b] + u[:, j] * ext[b]
                        # exactly on an edge or corner: add the other faces' normals (normalised later)
                        nrm[u[:, j] <= 0.0, b] = -1.0
                        nrm[u[:, j] >= 1.0, b] = 1.0
                        pts[u[:, j] >= 1.0, b] = self.hi[b]
                    return pts, nrm / np.linalg.norm(nrm, axis=1, keepdims=True)

                out.append(Patch(_prefix(self.name, f"{_AXES[a]}{side}"), area, fmap))
        return out


class Interval(_AxisBox):
    """The interval [a, b] (m); boundary tags "xmin", "xmax" (measure 1 each: counting measure).

    Raises
    ------
    ValueError
        If a >= b or either is not finite.
    """

    def __init__(self, a: float, b: float, name: str | None = None):
        super().__init__([a], [b], 1, name)


class Rectangle(_AxisBox):
    """The rectangle [x0, x1] x [y0, y1] (m), given by corners ``lo`` = (x0, y0), ``hi`` = (x1, y1).

    Tags "xmin", "xmax", "ymin", "ymax" (the edges x = x0, x = x1, y = y0, y = y1).

    Raises
    ------
    ValueError
        If lo and hi are not 2 finite numbers each with lo < hi.
    """

    def __init__(self, lo, hi, name: str | None = None):
        super().__init__(lo, hi, 2, name)


class Box(_AxisBox):
    """The box [x0, x1] x [y0, y1] x [z0, z1] (m), corners ``lo``, ``hi``.

    Tags "xmin", "xmax", "ymin", "ymax", "zmin", "zmax".

    Raises
    ------
    ValueError
        If lo and hi are not 3 finite numbers each with lo < hi.
    """

    def __init__(self, lo, hi, name: str | None = None):
        super().__init__(lo, hi, 3, name)


class _Ball(PatchDomain):
    def __init__(self, center, radius: float, dim: int, name: str | None):
        c = check_finite("center", center).reshape(-1)
        if c.shape != (dim,):
            raise ValueError(f"center must have {dim} coordinates, got {c.tolist()}")
        r = float(check_finite("radius", radius))
        if not r > 0:
            raise ValueError(f"radius must be > 0, got {radius!r}")
        self.dim, self.center, self.radius = dim, c, r
        self.name = _check_name(name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.center.tolist()}, {self.radius})"

    def signed_distance(self, points) -> np.ndarray:
        pts = check_points(points, self.dim).astype(np.float64)
        return np.linalg.norm(pts - self.center, axis=1) - self.radius

    def level_set(self, x):
        """A smooth level set, a torch function of points x [N, d] (m) -> [N] (m): (|x - c|^2 - r^2) / (2 r),
        negative inside, zero on the sphere, the signed distance to first order there."""
        import torch

        c = torch.as_tensor(self.center, dtype=x.dtype, device=x.device)
        return (((x[:, : self.dim] - c) ** 2).sum(1) - self.radius**2) / (2 * self.radius)

    def bbox(self):
        return self.center - self.radius, self.center + self.radius


class Disk(_Ball):
    """The closed disk |x - center| <= radius (m); boundary tag "circle".

    Raises
    ------
    ValueError
        If center is not 2 finite numbers or radius <= 0.
    """

    def __init__(self, center, radius: float, name: str | None = None):
        super().__init__(center, radius, 2, name)

    def measure(self) -> float:
        return math.pi * self.radius**2

    def _fill_guess(self) -> float:
        return math.pi / 4

    def patches(self) -> list[Patch]:
        def fmap(u):
            th = 2 * math.pi * u[:, 0]
            nrm = np.column_stack([np.cos(th), np.sin(th)])
            return self.center + self.radius * nrm, nrm

        return [Patch(_prefix(self.name, "circle"), 2 * math.pi * self.radius, fmap)]


class Sphere(_Ball):
    """The closed ball |x - center| <= radius in 3D (m); boundary tag "sphere".

    Boundary points use Archimedes' area-preserving map (z uniform, azimuth uniform).

    Raises
    ------
    ValueError
        If center is not 3 finite numbers or radius <= 0.
    """

    def __init__(self, center, radius: float, name: str | None = None):
        super().__init__(center, radius, 3, name)

    def measure(self) -> float:
        return 4.0 / 3.0 * math.pi * self.radius**3

    def _fill_guess(self) -> float:
        return math.pi / 6

    def patches(self) -> list[Patch]:
        def fmap(u):
            z = 1.0 - 2.0 * u[:, 0]
            rho = np.sqrt(np.maximum(0.0, 1.0 - z * z))
            ph = 2 * math.pi * u[:, 1]
            nrm = np.column_stack([rho * np.cos(ph), rho * np.sin(ph), z])
            return self.center + self.radius * nrm, nrm

        return [Patch(_prefix(self.name, "sphere"), 4 * math.pi * self.radius**2, fmap)]


class Cylinder(PatchDomain):
    """A solid circular cylinder with its axis along z (m).

    Parameters
    ----------
    center : (x, y)
        Axis position.
    radius : float
    z0, z1 : float
        Bottom and top, z0 < z1.
    name : str, optional
        Tag prefix.

    Notes
    -----
    Tags "side", "zmin" (bottom cap), "zmax" (top cap).

    Raises
    ------
    ValueError
        For a non-finite input, radius <= 0 or z0 >= z1.
    """

    def __init__(self, center, radius: float, z0: float, z1: float, name: str | None = None):
        c = check_finite("center", center).reshape(-1)
        if c.shape != (2,):
            raise ValueError(f"center must be the (x, y) of the axis, got {c.tolist()}")
        r = float(check_finite("radius", radius))
        z0, z1 = float(check_finite("z0", z0)), float(check_finite("z1", z1))
        if not r > 0:
            raise ValueError(f"radius must be > 0, got {radius!r}")
        if not z1 > z0:
            raise ValueError(f"need z0 < z1, got z0={z0}, z1={z1}")
        self.dim, self.center, self.radius, self.z0, self.z1 = 3, c, r, z0, z1
        self.name = _check_name(name)

    def __repr__(self) -> str:
        return f"Cylinder({self.center.tolist()}, {self.radius}, {self.z0}, {self.z1})"

    def signed_distance(self, points) -> np.ndarray:
        pts = check_points(points, 3).astype(np.float64)
        dr = np.linalg.norm(pts[:, :2] - self.center, axis=1) - self.radius
        dz = np.abs(pts[:, 2] - (self.z0 + self.z1) / 2) - (self.z1 - self.z0) / 2
        outside = np.hypot(np.maximum(dr, 0.0), np.maximum(dz, 0.0))
        return outside + np.minimum(np.maximum(dr, dz), 0.0)

    def bbox(self):
        return (np.array([*(self.center - self.radius), self.z0]), np.array([*(self.center + self.radius), self.z1]))

    def measure(self) -> float:
        return math.pi * self.radius**2 * (self.z1 - self.z0)

    def _fill_guess(self) -> float:
        return math.pi / 4

    def patches(self) -> list[Patch]:
        r, h = self.radius, self.z1 - self.z0

        def side(u):
            ph = 2 * math.pi * u[:, 0]
            nrm = np.column_stack([np.cos(ph), np.sin(ph), np.zeros(len(u))])
            pts = np.column_stack([self.center + r * nrm[:, :2], self.z0 + h * u[:, 1]])
            nrm[u[:, 1] <= 0.0, 2] = -1.0  # exactly on a rim: mean of the side and cap normals
            nrm[u[:, 1] >= 1.0, 2] = 1.0
            return pts, nrm / np.linalg.norm(nrm, axis=1, keepdims=True)

        def cap(z, sign):
            def fmap(u):
                rho = r * np.sqrt(u[:, 0])  # area-preserving map of the unit square to the disk
                th = 2 * math.pi * u[:, 1]
                pts = np.column_stack([self.center[0] + rho * np.cos(th), self.center[1] + rho * np.sin(th),
                                       np.full(len(u), z)])
                nrm = np.zeros((len(u), 3))
                nrm[:, 2] = sign
                rim = u[:, 0] >= 1.0  # exactly on the rim: mean of the cap and side normals
                nrm[rim, 0], nrm[rim, 1] = np.cos(th[rim]), np.sin(th[rim])
                return pts, nrm / np.linalg.norm(nrm, axis=1, keepdims=True)

            return fmap

        return [
            Patch(_prefix(self.name, "side"), 2 * math.pi * r * h, side),
            Patch(_prefix(self.name, "zmin"), math.pi * r * r, cap(self.z0, -1.0)),
            Patch(_prefix(self.name, "zmax"), math.pi * r * r, cap(self.z1, 1.0)),
        ]


def _segments_cross(p, q, r, s) -> bool:
    """Whether closed segments pq and rs intersect (orientation test with exact collinear handling)."""

    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if v == 0 else (1 if v > 0 else -1)

    def on_seg(a, b, c):
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    o1, o2, o3, o4 = orient(p, q, r), orient(p, q, s), orient(r, s, p), orient(r, s, q)
    if o1 != o2 and o3 != o4:
        return True
    return (
        (o1 == 0 and on_seg(p, q, r)) or (o2 == 0 and on_seg(p, q, s))
        or (o3 == 0 and on_seg(r, s, p)) or (o4 == 0 and on_seg(r, s, q))
    )


class Polygon(PatchDomain):
    """A simple polygon (convex or not), vertices in either orientation (m).

    Parameters
    ----------
    vertices : array [M, 2]
        M >= 3 corners in order around the boundary; the closing edge is implied.
    edge_tags : sequence of str, optional
        One tag per edge (edge i joins vertex i and i+1); default "edge0", "edge1", ...  Equal tags
        group edges into one boundary part.
    name : str, optional
        Tag prefix.

    Notes
    -----
    Edge normals point out of the polygon whatever the vertex orientation.  The signed distance is
    the distance to the nearest edge with the sign of the even-odd (crossing-number) test.

    Raises
    ------
    ValueError
        For fewer than 3 vertices, non-finite coordinates, a zero-length edge, zero area, two edges
        that cross or touch (not a simple polygon), or a wrong number of edge tags.
    """

    def __init__(self, vertices, edge_tags=None, name: str | None = None):
        v = check_finite("vertices", vertices)
        if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3:
            raise ValueError(f"vertices must be an array [M, 2] with M >= 3, got shape {list(v.shape)}")
        m = len(v)
        e = np.roll(v, -1, axis=0) - v
        lengths = np.linalg.norm(e, axis=1)
        if np.any(lengths == 0):
            raise ValueError(f"vertices {np.flatnonzero(lengths == 0).tolist()} repeat the next vertex; "
                             "remove the duplicates")
        for i in range(m):
            for j in range(i + 1, m):
                if j == i + 1 or (i == 0 and j == m - 1):
                    continue  # neighbours share a vertex
                if _segments_cross(v[i], v[(i + 1) % m], v[j], v[(j + 1) % m]):
                    raise ValueError(f"edges {i} and {j} of the polygon cross or touch; give a simple polygon")
        area2 = float(np.sum(v[:, 0] * np.roll(v[:, 1], -1) - np.roll(v[:, 0], -1) * v[:, 1]))
        if area2 == 0:
            raise ValueError("the polygon has zero area")
        if edge_tags is None:
            edge_tags = [f"edge{i}" for i in range(m)]
        edge_tags = [str(t) for t in edge_tags]
        if len(edge_tags) != m:
            raise ValueError(f"need one edge tag per edge ({m}), got {len(edge_tags)}")
        self.dim = 2
        self.vertices = v
        self.name = _check_name(name)
        self.edge_tags = [_prefix(self.name, t) for t in edge_tags]
        self._edges = e
        self._lengths = lengths
        sign = 1.0 if area2 > 0 else -1.0  # counter-clockwise: outward normal is the edge turned right
        self._normals = sign * np.column_stack([e[:, 1], -e[:, 0]]) / lengths[:, None]
        self._area = abs(area2) / 2

    def __repr__(self) -> str:
        return f"Polygon({self.vertices.tolist()})"

    def signed_distance(self, points) -> np.ndarray:
        pts = check_points(points, 2).astype(np.float64)
        x, y = pts[:, 0], pts[:, 1]
        dist2 = np.full(len(pts), np.inf)
        inside = np.zeros(len(pts), dtype=bool)
        for i in range(len(self.vertices)):
            a = self.vertices[i]
            b = self.vertices[(i + 1) % len(self.vertices)]
            e = self._edges[i]
            w = pts - a
            t = np.clip((w @ e) / (e @ e), 0.0, 1.0)
            d = w - t[:, None] * e
            dist2 = np.minimum(dist2, np.einsum("ij,ij->i", d, d))
            straddle = (a[1] > y) != (b[1] > y)
            with np.errstate(divide="ignore", invalid="ignore"):
                xc = a[0] + (y - a[1]) * (b[0] - a[0]) / (b[1] - a[1])
            inside ^= straddle & (x < xc)
        dist = np.sqrt(dist2)
        return np.where(inside, -dist, dist)

    def bbox(self):
        return self.vertices.min(axis=0), self.vertices.max(axis=0)

    def measure(self) -> float:
        return self._area

    def _fill_guess(self) -> float:
        lo, hi = self.bbox()
        return self._area / float(np.prod(hi - lo))

    def patches(self) -> list[Patch]:
        m = len(self.vertices)
        out = []
        for i in range(m):

            def fmap(u, i=i):
                s = u[:, 0]
                pts = self.vertices[i] + s[:, None] * self._edges[i]
                nrm = np.broadcast_to(self._normals[i], pts.shape).copy()
                corner = s <= 0.0
                if corner.any():  # exactly at vertex i: mean of the two edge normals
                    avg = self._normals[i] + self._normals[i - 1]
                    if np.linalg.norm(avg) > 1e-12:
                        nrm[corner] = avg / np.linalg.norm(avg)
                corner = s >= 1.0
                if corner.any():
                    avg = self._normals[i] + self._normals[(i + 1) % m]
                    if np.linalg.norm(avg) > 1e-12:
                        nrm[corner] = avg / np.linalg.norm(avg)
                return pts, nrm

            out.append(Patch(self.edge_tags[i], float(self._lengths[i]), fmap))
        return out
