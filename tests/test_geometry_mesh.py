"""Mesh domains (elecsolver.geometry.mesh): reading with meshio, physical groups, sampling, errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from elecsolver.geometry import MeshDomain, TimeDomain

# a unit square of two triangles; physical surface "domain" (2), physical line "pec" (1) on y = 0
GMSH41 = """$MeshFormat
4.1 0 8
$EndMeshFormat
$PhysicalNames
2
1 1 "pec"
2 2 "domain"
$EndPhysicalNames
$Entities
0 1 1 0
1 0 0 0 1 0 0 1 1 0
1 0 0 0 1 1 0 1 2 0
$EndEntities
$Nodes
1 4 1 4
2 1 0 4
1
2
3
4
0 0 0
1 0 0
1 1 0
0 1 0
$EndNodes
$Elements
2 3 1 3
1 1 1 1
1 1 2
2 1 2 2
2 1 2 3
3 1 3 4
$EndElements
"""

# the same plus a line on x = 1 in a curve that belongs to no physical group (gmsh's SaveAll)
GMSH41_UNGROUPED = """$MeshFormat
4.1 0 8
$EndMeshFormat
$PhysicalNames
2
1 1 "pec"
2 2 "domain"
$EndPhysicalNames
$Entities
0 2 1 0
1 0 0 0 1 0 0 1 1 0
2 1 0 0 1 1 0 0 0
1 0 0 0 1 1 0 1 2 0
$EndEntities
$Nodes
1 4 1 4
2 1 0 4
1
2
3
4
0 0 0
1 0 0
1 1 0
0 1 0
$EndNodes
$Elements
3 4 1 4
1 1 1 1
1 1 2
1 2 1 1
4 2 3
2 1 2 2
2 1 2 3
3 1 3 4
$EndElements
"""

# gmsh 2.2: the same square, the line x = 1 with physical tag 0 (no group)
GMSH22 = """$MeshFormat
2.2 0 8
$EndMeshFormat
$PhysicalNames
2
1 1 "pec"
2 2 "domain"
$EndPhysicalNames
$Nodes
4
1 0 0 0
2 1 0 0
3 1 1 0
4 0 1 0
$EndNodes
$Elements
4
1 1 2 1 1 1 2
2 1 2 0 2 2 3
3 2 2 2 1 1 2 3
4 2 2 2 1 1 3 4
$EndElements
"""


def _gmsh41_binary() -> bytes:
    """The GMSH41 square in gmsh 4.1 binary (little-endian, size_t = 8 bytes)."""
    i4 = lambda *v: struct.pack(f"<{len(v)}i", *v)
    u8 = lambda *v: struct.pack(f"<{len(v)}Q", *v)
    f8 = lambda *v: struct.pack(f"<{len(v)}d", *v)
    out = [b"$MeshFormat\n4.1 1 8\n", i4(1), b"\n$EndMeshFormat\n",
           b'$PhysicalNames\n2\n1 1 "pec"\n2 2 "domain"\n$EndPhysicalNames\n$Entities\n',
           u8(0, 1, 1, 0),
           i4(1), f8(0, 0, 0, 1, 0, 0), u8(1), i4(1), u8(0),  # curve 1, physical 1, no bounding points
           i4(1), f8(0, 0, 0, 1, 1, 0), u8(1), i4(2), u8(0),  # surface 1, physical 2
           b"\n$EndEntities\n$Nodes\n", u8(1, 4, 1, 4), i4(2, 1, 0), u8(4), u8(1, 2, 3, 4),
           f8(0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0), b"\n$EndNodes\n$Elements\n", u8(2, 3, 1, 3),
           i4(1, 1, 1), u8(1), u8(1, 1, 2),
           i4(2, 1, 2), u8(2), u8(2, 1, 2, 3, 3, 1, 3, 4), b"\n$EndElements\n"]
    return b"".join(out)


def test_gmsh41_binary(tmp_path):
    path = tmp_path / "square_bin.msh"
    path.write_bytes(_gmsh41_binary())
    _check_square(MeshDomain.from_file(path, domain_group="domain"))
    path.write_bytes(_gmsh41_binary()[:200])
    with pytest.raises(ValueError, match="square_bin.msh"):
        MeshDomain.from_file(path)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _check_square(dom):
    assert dom.dim == 2 and dom.boundary_tags() == ("pec",)
    assert dom.measure() == pytest.approx(1.0, abs=1e-15)
    assert dom.boundary_measure() == pytest.approx(1.0, abs=1e-15)
    pec = dom.sample_boundary(500, "sobol", 3, tags="pec")
    assert np.all(pec.points[:, 1] == 0.0)
    assert np.all((pec.points[:, 0] >= 0) & (pec.points[:, 0] <= 1))
    assert np.array_equal(pec.normals, np.tile([0.0, -1.0], (500, 1)))
    assert set(pec.tags) == {"pec"}
    inner = dom.sample_interior(2000, "halton", 1)
    assert np.all(dom.contains(inner.points))
    assert np.all((inner.points >= 0) & (inner.points <= 1))
    np.testing.assert_allclose(inner.points.mean(axis=0), [0.5, 0.5], atol=0.02)


def test_gmsh41_ascii_named_groups(tmp_path):
    path = _write(tmp_path, "square.msh", GMSH41)
    _check_square(MeshDomain.from_file(path))
    _check_square(MeshDomain.from_file(path, domain_group="domain", boundary_groups=["pec"]))
    dom = MeshDomain.from_file(str(path), domain_group="domain", boundary_groups={"bottom": 1})
    assert dom.boundary_tags() == ("bottom",)


@pytest.mark.parametrize("text", [GMSH41_UNGROUPED, GMSH22], ids=["gmsh41", "gmsh22"])
def test_elements_in_no_group_are_ignored(tmp_path, text):
    dom = MeshDomain.from_file(_write(tmp_path, "square.msh", text))
    _check_square(dom)


def test_unknown_group_names_the_groups(tmp_path):
    path = _write(tmp_path, "square.msh", GMSH41)
    with pytest.raises(ValueError, match=r"no physical group named 'pec2'.*\['pec'\]"):
        MeshDomain.from_file(path, boundary_groups=["pec2"])
    with pytest.raises(ValueError, match="is 1D, need 2D"):
        MeshDomain.from_file(path, domain_group="pec")


@pytest.mark.parametrize(
    "content",
    [GMSH41[: len(GMSH41) // 2], "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\ngarbage\n", "\x00\x01binary junk\xff"],
    ids=["truncated", "garbage", "junk"],
)
def test_malformed_file_is_one_value_error(tmp_path, content):
    path = tmp_path / "bad.msh"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(ValueError, match="bad.msh"):
        MeshDomain.from_file(path)


def test_missing_and_bad_xdmf_files(tmp_path):
    with pytest.raises(ValueError, match="nothere.msh"):
        MeshDomain.from_file(tmp_path / "nothere.msh")
    bad = tmp_path / "bad.xdmf"
    bad.write_text('<?xml version="1.0"?>\n<Xdmf Version="3.0"><Domain><Grid Name="g"><Topology '
                   'TopologyType="Triangle" NumberOfElements="2"><DataItem Format="HDF" Dimensions="2 3">'
                   'missing.h5:/cells</DataItem></Topology></Grid></Domain></Xdmf>\n')
    with pytest.raises(ValueError, match="bad.xdmf"):
        MeshDomain.from_file(bad)
    junk = tmp_path / "junk.vtu"  # meshio's VTU reader calls sys.exit on this
    junk.write_text("hello")
    with pytest.raises(ValueError, match="junk.vtu"):
        MeshDomain.from_file(junk)
    text = tmp_path / "bad2.xdmf"
    text.write_text("<Xdmf><Domain>")
    with pytest.raises(ValueError, match="bad2.xdmf"):
        MeshDomain.from_file(text)


def _cube():
    """The unit cube as 6 tetrahedra (Kuhn), its z = 0 face as 2 triangles (group 5), others group 6."""
    pts = np.array([[i & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], dtype=float)
    tets = []
    for perm in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]):
        path = [0]
        for axis in perm:
            path.append(path[-1] + (1 << axis))
        tets.append(path)
    tets = np.array(tets)
    faces = {
        5: [[0, 1, 3], [0, 3, 2]],  # z = 0
        6: [[4, 5, 7], [4, 7, 6], [0, 1, 5], [0, 5, 4], [2, 3, 7], [2, 7, 6],
            [0, 2, 6], [0, 6, 4], [1, 3, 7], [1, 7, 5]],
    }
    tris = np.array(faces[5] + faces[6])
    ids = np.array([5, 5] + [6] * 10)
    return pts, tets, tris, ids


@pytest.mark.parametrize(
    "fmt, binary",
    [("gmsh22", False), ("gmsh22", True), ("vtu", False), ("vtu", True), ("xdmf", False)],
    ids=["gmsh22-ascii", "gmsh22-binary", "vtu-ascii", "vtu-binary", "xdmf"],
)
def test_3d_round_trip_formats(tmp_path, fmt, binary):
    meshio = pytest.importorskip("meshio")
    pts, tets, tris, ids = _cube()
    ext = {"gmsh22": ".msh", "vtu": ".vtu", "xdmf": ".xdmf"}[fmt]
    path = tmp_path / f"cube{ext}"
    if fmt == "gmsh22":  # (meshio 5.3 writes gmsh 4.1 entities it cannot read back; see the test below)
        cell_data = {"gmsh:physical": [np.full(len(tets), 1), ids], "gmsh:geometrical": [np.full(len(tets), 1), ids]}
        mesh = meshio.Mesh(pts, [("tetra", tets), ("triangle", tris)], cell_data=cell_data,
                           field_data={"vol": np.array([1, 3]), "bottom": np.array([5, 2]),
                                       "rest": np.array([6, 2])})
        meshio.write(path, mesh, file_format=fmt, binary=binary)
        dom = MeshDomain.from_file(path, domain_group="vol", boundary_groups=["bottom", "rest"])
        bottom = "bottom"
    else:
        mesh = meshio.Mesh(pts, [("tetra", tets), ("triangle", tris)],
                           cell_data={"region": [np.full(len(tets), 1), ids]})
        kwargs = {"binary": binary} if fmt == "vtu" else {}
        meshio.write(path, mesh, **kwargs)
        dom = MeshDomain.from_file(path, domain_group=1, boundary_groups={"bottom": 5, "rest": 6},
                                   cell_data_key="region")
        bottom = "bottom"
    assert dom.dim == 3
    assert dom.measure() == pytest.approx(1.0, abs=1e-14)
    assert dom.boundary_measure() == pytest.approx(6.0, abs=1e-14)
    assert dom.boundary_measure(bottom) == pytest.approx(1.0, abs=1e-14)
    b = dom.sample_boundary(600, "sobol", 0)
    np.testing.assert_allclose(np.linalg.norm(b.normals, axis=1), 1.0, atol=1e-12)
    # outward: for the unit cube the normal is +-e_k on the face x_k in {0, 1}
    k = np.argmax(np.abs(b.normals), axis=1)
    on = b.points[np.arange(600), k]
    np.testing.assert_allclose(np.abs(b.normals[np.arange(600), k]), 1.0, atol=1e-12)
    np.testing.assert_array_equal(np.sign(b.normals[np.arange(600), k]), np.where(on > 0.5, 1.0, -1.0))
    assert np.all(np.isclose(on, 0, atol=1e-14) | np.isclose(on, 1, atol=1e-14))
    z0 = dom.sample_boundary(100, "halton", 1, tags=bottom)
    assert np.all(z0.points[:, 2] == 0) and np.array_equal(z0.normals, np.tile([0.0, 0, -1], (100, 1)))


def test_interior_sampling_uniform_in_volume():
    pts, tets, tris, _ = _cube()
    dom = MeshDomain(pts, tets, {"all": tris})
    p = dom.sample_interior(40000, "uniform", 0).points
    assert np.all(dom.contains(p))
    # the corner octant holds 1/8 of the volume; each tetrahedron 1/6
    assert abs(np.mean(np.all(p < 0.5, axis=1)) - 1 / 8) < 0.006
    owner = dom.locate(p)
    np.testing.assert_allclose(np.bincount(owner, minlength=6) / len(p), 1 / 6, atol=0.008)
    # one triangle: the sub-triangle at a corner scaled by 1/2 holds 1/4 of the area
    tri = MeshDomain(np.array([[0.0, 0], [2, 0], [0, 1]]), np.array([[0, 1, 2]]), {"hyp": np.array([[1, 2]])})
    q = tri.sample_interior(40000, "sobol", 0).points
    assert abs(np.mean(q[:, 0] / 2 + q[:, 1] < 0.5) - 0.25) < 0.006
    nrm = tri.sample_boundary(10, "uniform", 0).normals
    np.testing.assert_allclose(nrm, np.tile([1, 2] / np.sqrt(5), (10, 1)), atol=1e-15)


def test_contains_nonconvex_mesh_and_time_domain():
    # an L shape from three unit squares, two triangles each, facet node order reversed on purpose
    pts = np.array([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [1, 2]], dtype=float)
    cells = np.array([[0, 1, 4], [0, 4, 3], [1, 2, 5], [1, 5, 4], [3, 4, 7], [3, 7, 6]])
    facets = {"outer": np.array([[1, 0], [2, 1], [5, 2], [4, 5], [7, 4], [6, 7], [3, 6], [0, 3]])}
    dom = MeshDomain(pts, cells, facets)
    assert dom.measure() == pytest.approx(3.0)
    assert dom.boundary_measure() == pytest.approx(8.0)
    q = np.array([[0.5, 0.5], [1.5, 0.5], [0.5, 1.5], [1.5, 1.5], [-0.1, 0.5], [1.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(dom.contains(q), [True, True, True, False, False, True, True])
    b = dom.sample_boundary(400, "sobol", 2)
    eps = 1e-6
    corner = np.min(np.linalg.norm(b.points[:, None] - pts[None], axis=2), axis=1) < 10 * eps
    assert np.all(~dom.contains(b.points[~corner] + eps * b.normals[~corner], tol=0))
    assert np.all(dom.contains(b.points[~corner] - eps * b.normals[~corner], tol=0))
    grid = dom.sample_interior(300, "grid")
    assert np.all(dom.contains(grid.points)) and 150 <= len(grid) <= 600
    td = TimeDomain(dom, 0.0, 1e-9)
    s = td.sample_boundary(50, "sobol", 0)
    assert s.points.shape == (50, 3) and s.normals.shape == (50, 2)


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.zeros((3, 2)), np.array([[0, 1, 2]])), "zero measure"),
        ((np.eye(3)[:, :2], np.array([[0, 1, 3]])), r"lie in \[0, 3\)"),
        ((np.eye(3)[:, :2], np.array([[0, 1]])), "int array"),
        ((np.array([[0.0, 0], [1, 0], [0, 1], [5, 5]]), np.array([[0, 1, 2]]), {"x": np.array([[2, 3]])}),
         "not faces of any domain cell"),
    ],
)
def test_bad_mesh_arrays(args, match):
    with pytest.raises(ValueError, match=match):
        MeshDomain(*args)
