"""Domains, CSG and space-time sampling (elecsolver.geometry).

The property tests check the samplers against an oracle written here independently of the library:
inside tests and distances to the boundary per primitive (polygons through matplotlib's Path for
inside-ness and point-segment distances), combined with min/max for set operations.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.path import Path

from elecsolver.geometry import (
    Box,
    Cylinder,
    Difference,
    Disk,
    Intersection,
    Interval,
    Polygon,
    Rectangle,
    Sphere,
    TaggedCloud,
    TimeDomain,
    Union,
)
from elecsolver.sampling import PointCloud, unit_samples

# (|measure - oracle| / oracle, |measure - oracle| / bounding-box volume, oracle / bounding-box volume)
# per property-test domain; for CSG results both are Monte-Carlo estimates (2**15 Sobol points each)
MEASURE_ERRORS: list[tuple[float, float, float]] = []
# ELECSOLVER_GEOMETRY_EXAMPLES=500 for a longer search than the default run
PROPS = settings(
    max_examples=int(os.environ.get("ELECSOLVER_GEOMETRY_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# ---------------------------------------------------------------------------------------------
# oracle: reference signed distance and "near a corner" per shape, written without the library
# ---------------------------------------------------------------------------------------------
def _seg_dist(p, a, b):
    e = b - a
    t = np.clip(((p - a) @ e) / (e @ e), 0, 1)
    return np.linalg.norm(p - a - t[:, None] * e, axis=1)


def ref_sd(dom, p):
    """Reference signed distance (exact for primitives, min/max for CSG)."""
    if isinstance(dom, (Interval, Rectangle, Box)):
        inside = np.all((p >= dom.lo) & (p <= dom.hi), axis=1)
        d_in = np.min(np.minimum(p - dom.lo, dom.hi - p), axis=1)
        d_out = np.linalg.norm(np.maximum(0, np.maximum(dom.lo - p, p - dom.hi)), axis=1)
        return np.where(inside, -d_in, d_out)
    if isinstance(dom, (Disk, Sphere)):
        return np.sqrt(np.sum((p - dom.center) ** 2, axis=1)) - dom.radius
    if isinstance(dom, Cylinder):
        rho = np.hypot(p[:, 0] - dom.center[0], p[:, 1] - dom.center[1])
        inside = (rho <= dom.radius) & (p[:, 2] >= dom.z0) & (p[:, 2] <= dom.z1)
        d_in = np.minimum(dom.radius - rho, np.minimum(p[:, 2] - dom.z0, dom.z1 - p[:, 2]))
        dr = np.maximum(rho - dom.radius, 0)
        dz = np.maximum(np.maximum(dom.z0 - p[:, 2], p[:, 2] - dom.z1), 0)
        return np.where(inside, -d_in, np.hypot(dr, dz))
    if isinstance(dom, Polygon):
        v = dom.vertices
        dist = np.min([_seg_dist(p, v[i], v[(i + 1) % len(v)]) for i in range(len(v))], axis=0)
        inside = Path(v).contains_points(p)
        return np.where(inside, -dist, dist)
    if isinstance(dom, Union):
        return np.minimum(ref_sd(dom.a, p), ref_sd(dom.b, p))
    if isinstance(dom, Intersection):
        return np.maximum(ref_sd(dom.a, p), ref_sd(dom.b, p))
    if isinstance(dom, Difference):
        return np.maximum(ref_sd(dom.a, p), -ref_sd(dom.b, p))
    raise TypeError(dom)


def near_corner(dom, p, r):
    """Points within r of a corner, edge or rim (where the normal is not unique)."""
    if isinstance(dom, (Rectangle, Box)):
        close = (np.abs(p - dom.lo) < r) | (np.abs(p - dom.hi) < r)
        return close.sum(axis=1) >= 2
    if isinstance(dom, (Disk, Sphere, Interval)):
        return np.zeros(len(p), dtype=bool)
    if isinstance(dom, Cylinder):
        rho = np.hypot(p[:, 0] - dom.center[0], p[:, 1] - dom.center[1])
        cap = (np.abs(p[:, 2] - dom.z0) < r) | (np.abs(p[:, 2] - dom.z1) < r)
        return (np.abs(rho - dom.radius) < r) & cap
    if isinstance(dom, Polygon):  # within r / sin(angle / 2) of a vertex: sharp vertices reach further
        v = dom.vertices
        e1, e2 = np.roll(v, 1, axis=0) - v, np.roll(v, -1, axis=0) - v
        cos = np.einsum("ij,ij->i", e1, e2) / np.linalg.norm(e1, axis=1) / np.linalg.norm(e2, axis=1)
        half = np.sin(np.arccos(np.clip(cos, -1, 1)) / 2)
        return np.any(np.linalg.norm(p[:, None, :] - v[None], axis=2) < r / np.maximum(half, 1e-3), axis=1)
    both = (np.abs(ref_sd(dom.a, p)) < r) & (np.abs(ref_sd(dom.b, p)) < r)
    return both | near_corner(dom.a, p, r) | near_corner(dom.b, p, r)


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------
coord = st.floats(-2, 2)
length = st.floats(0.2, 3)


@st.composite
def rectangles(draw):
    lo = np.array([draw(coord), draw(coord)])
    return Rectangle(lo, lo + [draw(length), draw(length)])


@st.composite
def disks(draw):
    return Disk([draw(coord), draw(coord)], draw(st.floats(0.2, 2)))


@st.composite
def star_polygons(draw):
    """Star-shaped about a centre (so simple): sorted angles with gaps >= 0.15 rad, radii in [0.3, 1.5]."""
    k = draw(st.integers(3, 9))
    gaps = np.array(draw(st.lists(st.floats(0.2, 1.0), min_size=k, max_size=k)))
    ang = np.cumsum(gaps / gaps.sum() * 2 * math.pi) + draw(st.floats(0, 2 * math.pi))
    rad = np.array(draw(st.lists(st.floats(0.3, 1.5), min_size=k, max_size=k)))
    c = np.array([draw(coord), draw(coord)])
    v = c + rad[:, None] * np.column_stack([np.cos(ang), np.sin(ang)])
    if draw(st.booleans()):
        v = v[::-1]  # clockwise
    return Polygon(v)


@st.composite
def boxes(draw):
    lo = np.array([draw(coord), draw(coord), draw(coord)])
    return Box(lo, lo + [draw(length), draw(length), draw(length)])


@st.composite
def spheres(draw):
    return Sphere([draw(coord), draw(coord), draw(coord)], draw(st.floats(0.2, 2)))


@st.composite
def cylinders(draw):
    z0 = draw(coord)
    return Cylinder([draw(coord), draw(coord)], draw(st.floats(0.2, 2)), z0, z0 + draw(length))


shapes2 = st.one_of(rectangles(), disks(), star_polygons())
shapes3 = st.one_of(boxes(), spheres(), cylinders())
OPS = {"|": Union, "&": Intersection, "-": Difference}


@st.composite
def csgs(draw):
    a, b = draw(st.one_of(st.tuples(shapes2, shapes2), st.tuples(shapes3, shapes3)))
    return OPS[draw(st.sampled_from(sorted(OPS)))](a, b, mc_points=1 << 15)


def _oracle_measure(dom, m=1 << 15):
    lo, hi = dom.bbox()
    u = unit_samples(m, dom.dim, "sobol", 7)
    return float(np.prod(hi - lo)) * float(np.mean(ref_sd(dom, lo + u * (hi - lo)) <= 0))


# ---------------------------------------------------------------------------------------------
# property tests
# ---------------------------------------------------------------------------------------------
SEEDS = st.integers(0, 2**31)
METHODS = st.sampled_from(["uniform", "sobol", "halton", "lhs"])


@PROPS
@given(dom=st.one_of(shapes2, shapes3), seed=SEEDS, method=METHODS)
def test_primitives_inside_on_boundary_outward(dom, seed, method):
    check_samples(dom, seed, method)


@PROPS
@given(dom=csgs(), seed=SEEDS, method=METHODS)
def test_csg_inside_on_boundary_outward(dom, seed, method):
    check_samples(dom, seed, method)


def check_samples(dom, seed, method):
    """Interior points inside, boundary points on the boundary, unit outward normals, measure."""
    size = dom.size()
    lo, hi = dom.bbox()
    if np.any(hi <= lo):
        with pytest.raises(ValueError, match="empty"):
            dom.sample_interior(10, method, seed)
        return
    if dom.measure() < 1e-3 * float(np.prod(hi - lo)):
        return  # a sliver: too thin to check normals at a fixed eps
    n = 300
    interior = dom.sample_interior(n, method, seed)
    assert interior.points.shape == (n, dom.dim) and interior.points.dtype == np.float64
    assert np.all(ref_sd(dom, interior.points) <= 1e-12 * size)
    assert np.all(dom.contains(interior.points))
    np.testing.assert_allclose(interior.weights.sum(), dom.measure(), rtol=1e-12)

    exact = _oracle_measure(dom)
    box = float(np.prod(hi - lo))
    MEASURE_ERRORS.append((abs(dom.measure() - exact) / exact, abs(dom.measure() - exact) / box, exact / box))
    assert abs(dom.measure() - exact) <= 0.01 * float(np.prod(hi - lo))

    if dom.boundary_measure() < 1e-3 * size ** (dom.dim - 1):
        return
    bnd = dom.sample_boundary(n, method, seed)
    p, nrm = bnd.points, bnd.normals
    assert p.shape == (n, dom.dim) and nrm.shape == (n, dom.dim) and bnd.tags.shape == (n,)
    assert set(bnd.tags) <= set(dom.boundary_tags())
    assert np.all(np.abs(ref_sd(dom, p)) < 1e-9 * size)
    assert np.all(np.abs(np.linalg.norm(nrm, axis=1) - 1) <= 1e-12)
    eps = 1e-6 * size
    ok = ~near_corner(dom, p, 20 * eps)
    assert np.all(ref_sd(dom, p[ok] + eps * nrm[ok]) > 0), "normal does not point out"
    assert np.all(ref_sd(dom, p[ok] - eps * nrm[ok]) < 0), "normal does not point out"
    # determinism
    again = dom.sample_boundary(n, method, seed)
    assert np.array_equal(again.points, p) and np.array_equal(again.tags, bnd.tags)


@PROPS
@given(dom=st.one_of(shapes2, shapes3), n=st.integers(1, 400))
def test_grid_interior(dom, n):
    cloud = dom.sample_interior(n, "grid")
    assert np.all(ref_sd(dom, cloud.points) <= 0)
    assert len(cloud) >= 1
    if n >= 50:  # the spacing is tuned to about n points inside; small n only roughly
        assert 0.5 * n <= len(cloud) <= 2 * n


@settings(max_examples=15, deadline=None)
@given(dom=st.one_of(shapes2, shapes3), t0=st.floats(-1, 1), dt=st.floats(0.1, 5), seed=st.integers(0, 1000))
def test_time_domain(dom, t0, dt, seed):
    td = TimeDomain(dom, t0, t0 + dt)
    assert td.dim == dom.dim + 1
    inner = td.sample_interior(100, "sobol", seed)
    assert np.all(ref_sd(dom, inner.points[:, :-1]) <= 0)
    assert np.all((inner.points[:, -1] >= t0) & (inner.points[:, -1] <= t0 + dt))
    bnd = td.sample_boundary(100, "halton", seed)
    assert bnd.points.shape == (100, dom.dim + 1) and bnd.normals.shape == (100, dom.dim)
    assert np.all(np.abs(ref_sd(dom, bnd.points[:, :-1])) < 1e-9 * dom.size())
    assert np.all((bnd.points[:, -1] >= t0) & (bnd.points[:, -1] <= t0 + dt))
    init = td.sample_initial(50, "uniform", seed)
    assert np.all(init.points[:, -1] == t0) and np.all(ref_sd(dom, init.points[:, :-1]) <= 0)
    assert math.isclose(td.measure(), dom.measure() * dt, rel_tol=1e-12)
    assert np.all(td.contains(inner.points))


@pytest.mark.parametrize(
    "dom",
    [
        (Rectangle([0, 0], [2, 1]) - Disk([1, 0.5], 0.3)) | Disk([2, 1], 0.5),
        Polygon([[0, 0], [2, 0], [2, 2], [1, 0.5], [0, 2]]) & (Disk([1, 1], 1.2) - Rectangle([0.8, -1], [1.2, 0.2])),
        (Box([0, 0, 0], [2, 2, 1]) - Sphere([1, 1, 1], 0.6)) - Cylinder([0.5, 0.5], 0.2, -1, 2),
        (Sphere([0, 0, 0], 1) & Box([-2, -2, -0.5], [2, 2, 0.5])) | Cylinder([0, 0], 0.3, -1.5, 1.5),
    ],
    ids=["2d-diff-union", "2d-poly-and-diff", "3d-diff-diff", "3d-and-union"],
)
def test_nested_csg(dom):
    for seed, method in ((0, "sobol"), (1, "uniform"), (2, "lhs")):
        check_samples(dom, seed, method)


def test_time_domain_grid():
    td = TimeDomain(Rectangle([0, 0], [1, 1]), 0.0, 1.0)
    g = td.sample_interior(1000, "grid")
    assert 500 <= len(g) <= 2000 and np.all(td.contains(g.points))
    assert len(np.unique(g.points[:, 2])) >= 2


# ---------------------------------------------------------------------------------------------
# measures from Sobol hit fractions and boundary lengths against closed forms
# ---------------------------------------------------------------------------------------------
NONCONVEX = [[0, 0], [3, 0], [3, 2], [2, 2], [2, 1], [1, 1], [1, 3], [0, 3]]  # area 6 - 1 + 1 = 6


def _hit_measure(dom, m):
    lo, hi = dom.bbox()
    u = unit_samples(m, dom.dim, "sobol", 3)
    return float(np.prod(hi - lo)) * float(np.mean(dom.contains(lo + u * (hi - lo))))


@pytest.mark.parametrize(
    "dom, exact",
    [
        (Disk([0.3, -0.2], 0.7), math.pi * 0.49),
        (Disk([0, 0], 1.0) - Disk([0.2, 0.1], 0.4), math.pi * (1 - 0.16)),
        (Polygon(NONCONVEX), 6.0),
        (Sphere([0, 0, 0], 1.0) - Box([0, 0, 0], [2, 2, 2]), 7 / 8 * 4 / 3 * math.pi),
    ],
)
def test_measure_hit_fraction(dom, exact):
    if isinstance(dom, Polygon):
        assert math.isclose(dom.measure(), exact, rel_tol=1e-14)
    est = _hit_measure(dom, 1 << 18)
    assert abs(est - exact) / exact < 0.01
    assert abs(dom.measure() - exact) / exact < 0.01


@pytest.mark.parametrize(
    "dom, exact",
    [
        (Disk([0, 0], 1.0) - Disk([0.2, 0.1], 0.4), 2 * math.pi * (1.0 + 0.4)),
        (Rectangle([0, 0], [2, 1]) | Disk([0, 0], 1.0), 1.5 * math.pi + 4.0),
        (Sphere([0, 0, 0], 1.0) - Box([0, 0, 0], [2, 2, 2]), 3.5 * math.pi + 0.75 * math.pi),
        (Box([0, 0, 0], [1, 1, 1]) & Box([0.5, 0.5, 0.5], [2, 2, 2]), 6 * 0.25),
        (Rectangle([0, 0], [2, 1]) - Rectangle([1, 0], [3, 1]), 4.0),  # shared faces
        (Rectangle([0, 0], [1, 1]) | Rectangle([0, 0], [1, 2]), 6.0),  # coincident faces counted once
        (Rectangle([0, 0], [1, 1]) | Rectangle([1, 0], [2, 1]), 6.0),  # touching faces: internal, dropped
        (Box([0, 0, 0], [1, 1, 1]) | Box([0, 0, 1], [1, 1, 2]), 10.0),
    ],
)
def test_boundary_measure(dom, exact):
    assert abs(dom.boundary_measure() - exact) / exact < 0.01
    cloud = dom.sample_boundary(2000, "sobol", 5)
    np.testing.assert_allclose(cloud.weights.sum(), dom.boundary_measure(), rtol=1e-12)
    assert np.all(np.abs(dom.signed_distance(cloud.points)) < 1e-12 * dom.size())


def test_difference_hole_normals_point_into_hole():
    outer, hole = Disk([0, 0], 1.0), Disk([0.2, 0.1], 0.4)
    cloud = (outer - hole).sample_boundary(4000, "sobol", 1)
    on_hole = cloud.tags == "circle"
    r = np.linalg.norm(cloud.points - hole.center, axis=1)
    inner = np.abs(r - 0.4) < 1e-12
    assert inner.sum() > 0.2 * len(cloud)
    radial = (cloud.points[inner] - hole.center) / 0.4
    np.testing.assert_allclose(cloud.normals[inner], -radial, atol=1e-12)
    assert on_hole.all()
    # boundary points split in proportion to the lengths (0.4 : 1)
    assert abs(inner.mean() - 0.4 / 1.4) < 0.02


def test_boundary_uniform_in_length():
    rect = Rectangle([0, 0], [3, 1])
    cloud = rect.sample_boundary(8000, "sobol", 2)
    frac = {t: float(np.mean(cloud.tags == t)) for t in rect.boundary_tags()}
    for t, want in {"xmin": 1 / 8, "xmax": 1 / 8, "ymin": 3 / 8, "ymax": 3 / 8}.items():
        assert abs(frac[t] - want) < 0.01
    left = rect.sample_boundary(100, "sobol", 2, tags="xmin")
    assert np.all(left.points[:, 0] == 0) and np.all(left.normals == [-1, 0]) and set(left.tags) == {"xmin"}


def test_pentagon_normals_float32():
    ang = math.pi / 2 + 2 * math.pi * np.arange(5) / 5
    v = np.column_stack([np.cos(ang), np.sin(ang)])
    for verts in (v, v[::-1]):
        pent = Polygon(verts)
        cloud = pent.sample_boundary(2000, "halton", 3, dtype=np.float32)
        assert cloud.points.dtype == np.float32 and cloud.normals.dtype == np.float32
        length = np.linalg.norm(cloud.normals.astype(np.float64), axis=1)
        assert np.all(np.abs(length - 1) <= 1e-6)
        assert np.all(length > 0)
        # outward: the normal of each edge points away from the centre (the centroid is 0)
        mid = (cloud.points.astype(np.float64) * cloud.normals).sum(axis=1)
        assert np.all(mid > 0.5)
        slanted = np.abs(cloud.normals[:, 1]) < 0.999
        assert slanted.mean() > 0.5
        eps = 1e-4
        p64, n64 = cloud.points.astype(np.float64), cloud.normals.astype(np.float64)
        keep = ~near_corner(pent, p64, 10 * eps)
        assert np.all(ref_sd(pent, p64[keep] + eps * n64[keep]) > 0)
        assert np.all(ref_sd(pent, p64[keep] - eps * n64[keep]) < 0)


def test_polygon_corner_normal_is_average():
    sq = Polygon([[0, 0], [1, 0], [1, 1], [0, 1]])
    pts, nrm = sq.patches()[1].map(np.array([[0.0], [1.0]]))  # the two ends of edge 1 (x = 1)
    np.testing.assert_allclose(pts, [[1, 0], [1, 1]])
    s = 1 / math.sqrt(2)
    np.testing.assert_allclose(nrm, [[s, -s], [s, s]], atol=1e-15)


def test_box_and_cylinder_corner_normals():
    s2, s3 = 1 / math.sqrt(2), 1 / math.sqrt(3)
    box = Box([0, 0, 0], [1, 2, 3])
    xmax = next(p for p in box.patches() if p.tag == "xmax")
    pts, nrm = xmax.map(np.array([[0.0, 0.5], [1.0, 1.0], [0.5, 0.5]]))
    np.testing.assert_allclose(pts, [[1, 0, 1.5], [1, 2, 3], [1, 1, 1.5]])
    np.testing.assert_allclose(nrm, [[s2, -s2, 0], [s3, s3, s3], [1, 0, 0]], atol=1e-15)
    cyl = Cylinder([0, 0], 1.0, 0.0, 1.0)
    side, bottom, _ = cyl.patches()
    _, nrm = side.map(np.array([[0.0, 1.0]]))
    np.testing.assert_allclose(nrm, [[s2, 0, s2]], atol=1e-15)
    _, nrm = bottom.map(np.array([[1.0, 0.25]]))
    np.testing.assert_allclose(nrm, [[0, s2, -s2]], atol=1e-15)


def test_interval_and_cylinder_tags():
    iv = Interval(-1.0, 2.0)
    cloud = iv.sample_boundary(10, "uniform", 0)
    assert set(np.unique(cloud.points[:, 0])) <= {-1.0, 2.0}
    np.testing.assert_array_equal(np.sign(cloud.normals[:, 0]), np.where(cloud.points[:, 0] > 0, 1, -1))
    cyl = Cylinder([0, 0], 1.0, 0.0, 2.0, name="wire")
    assert cyl.boundary_tags() == ("wire:side", "wire:zmin", "wire:zmax")
    top = cyl.sample_boundary(50, "sobol", 0, tags=["wire:zmax"])
    assert np.all(top.points[:, 2] == 2.0) and np.all(top.normals == [0, 0, 1])


def test_deterministic_and_seed_dependent():
    dom = Disk([0, 0], 1) - Rectangle([0, 0], [2, 2])
    a = dom.sample_interior(500, "sobol", 11)
    b = dom.sample_interior(500, "sobol", 11)
    c = dom.sample_interior(500, "sobol", 12)
    assert np.array_equal(a.points, b.points) and not np.array_equal(a.points, c.points)
    assert isinstance(a, TaggedCloud) and isinstance(a, PointCloud)
    bnd = dom.sample_boundary(300, "halton", 4)
    sub = bnd.subset(np.arange(10))
    assert isinstance(sub, TaggedCloud) and np.array_equal(sub.tags, bnd.tags[:10])
    assert np.array_equal(sub.weights, bnd.weights[:10])


def test_float32_samples():
    dom = Sphere([0, 0, 0], 1.0) - Box([0, 0, 0], [2, 2, 2])
    cloud = dom.sample_boundary(1000, "sobol", 0, dtype=np.float32)
    assert cloud.normals.dtype == np.float32
    assert np.all(np.abs(np.linalg.norm(cloud.normals.astype(np.float64), axis=1) - 1) <= 1e-6)
    assert dom.sample_interior(10, "lhs", 0, dtype="float32").points.dtype == np.float32


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Rectangle([0, 0], [0, 1]), "lo < hi"),
        (lambda: Disk([0, 0], -1), "radius"),
        (lambda: Polygon([[0, 0], [1, 1], [1, 0], [0, 1]]), "simple polygon"),
        (lambda: Polygon([[0, 0], [1, 0]]), "M >= 3"),
        (lambda: Polygon([[0, 0], [1, 0], [1, 0], [0, 1]]), "duplicates"),
        (lambda: Polygon([[0, 0], [1, 0], [2, 0]]), "zero area"),
        (lambda: Disk([0, 0], 1) | Sphere([0, 0, 0], 1), "same dimension"),
        (lambda: Disk([0, 0], 1).sample_interior(5, "random"), "unknown interior sampling method"),
        (lambda: Disk([0, 0], 1).sample_boundary(5, "grid"), "unknown boundary sampling method"),
        (lambda: Disk([0, 0], 1).sample_interior(-1), ">= 0"),
        (lambda: Disk([0, 0], 1).sample_boundary(3, tags="nope"), "unknown boundary tag"),
        (lambda: Disk([0, 0], 1).contains(np.zeros((4, 3))), r"\[N, 2\]"),
        (lambda: TimeDomain(Disk([0, 0], 1), 1.0, 1.0), "t0 < t1"),
        (lambda: (Disk([0, 0], 1) & Disk([5, 5], 1)).sample_interior(5), "empty"),
        (lambda: Disk([0, 0], 1).sample_interior(5, dtype=np.int32), "float32 or float64"),
    ],
)
def test_bad_input_raises_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_largest_measure_error_over_the_property_tests(capsys):
    """Runs last in this file: the worst measure error over every property-test domain (hypothesis draws new
    domains each run) stays below 8e-3 of the bounding-box volume, tighter than the 1e-2 each single test
    allows (measured in default runs: 1.2e-3 and 2.5e-3), and below 2 % relative for domains filling >= 5 % of
    their box (measured 0.27 % and 0.52 %); it is also reported."""
    if not MEASURE_ERRORS:
        pytest.skip("the property tests of this file did not run (selected alone)")
    err = np.array(MEASURE_ERRORS)
    rel, box = err[:, 0].max(), err[:, 1].max()
    big = err[err[:, 2] >= 0.05, 0]
    with capsys.disabled():
        print(f"\n[geometry] largest measure error in property tests over {len(err)} domains: "
              f"{rel:.3e} relative ({big.max() if len(big) else float('nan'):.3e} for the {len(big)} filling "
              f">= 5 % of their bounding box), {box:.3e} of the bounding-box volume")
    assert box < 8e-3, box
    assert len(big) == 0 or big.max() < 0.02, big.max()


@pytest.mark.parametrize("space", [Rectangle([0, 0], [1, 1]), Disk([0.5, 0.5], 0.5)], ids=["box", "disk"])
@pytest.mark.parametrize("where", ["interior", "boundary"])
def test_space_time_points_fill_space_and_time_independently(space, where):
    """Regression: space and time were drawn by two low-discrepancy sequences paired index by index, which made
    t nearly a function of x (231 of 256 (x, t) cells empty); every cell of an 8 x 8 (x, t) histogram is hit."""
    dom = TimeDomain(space, 0.0, 1.0)
    cloud = dom.sample_interior(4096, "sobol", seed=3) if where == "interior" else dom.sample_boundary(4096, "sobol",
                                                                                                       seed=3)
    hist, _, _ = np.histogram2d(cloud.points[:, 0], cloud.points[:, 2], bins=8, range=[[0, 1], [0, 1]])
    assert (hist > 0).all(), hist
    # and t is spread evenly: each of 8 time bins holds 1/8 of the points within 10 %
    counts = np.histogram(cloud.points[:, 2], bins=8, range=(0, 1))[0]
    assert np.all(np.abs(counts - 512) < 52), counts
