"""elecsolver.fields: the FieldSet model, relative_l2, and the hdf5/csv/png writers behind one registry."""

from __future__ import annotations

import json
import os
import pathlib
import stat

import h5py
import matplotlib.image
import numpy as np
import pytest

import elecsolver
from elecsolver.fields import (
    FieldSet,
    GridSites,
    MeshSites,
    read,
    register_writer,
    registered_writers,
    relative_l2,
    write,
    writers,
)
from elecsolver.fields.png import write_png
from elecsolver.fields.testing import PNG_SIGNATURE, assert_roundtrip

UNITS = {"x": "m", "y": "m", "z": "m", "t": "s", "Ex": "V/m", "Ey": "V/m", "Hz": "A/m", "Ez": "V/m"}
X, Y, Z = np.linspace(0.0, 0.3, 5), np.array([-0.1, 0.0, 0.05, 0.1]), np.array([0.0, 0.02, 0.05])
T = np.array([0.0, 1e-9, 2e-9])


def _grid2d() -> GridSites:
    return GridSites({"x": X, "y": Y})


def _series2d(**kw) -> FieldSet:
    """Ex float64 and Hz float32 on a 4 x 5 grid at 3 times."""
    tt, yy, xx = np.meshgrid(T, Y, X, indexing="ij")
    fields = {"Ex": np.sin(10 * xx) * np.cos(2e9 * tt) + yy, "Hz": (xx * yy - tt * 1e8).astype(np.float32)}
    return FieldSet(_grid2d(), fields, UNITS, times=T, **kw)


def _mesh() -> MeshSites:
    pts = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], float)
    return MeshSites(pts, {"triangle": np.array([[0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])})


# --- construction ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: GridSites({"x": [0.0, 0.2, 0.1]}), r"axes\['x'\] must be finite and strictly increasing"),
    (lambda: GridSites({"y": X}), "named"),
    (lambda: GridSites({"x": X, "z": Z}), "named"),
    (lambda: GridSites({"x": np.zeros((2, 2))}), "1-D"),
    (lambda: GridSites({"x": [0.0, np.nan]}), "finite"),
    (lambda: MeshSites([[0, 0], [1, 0]], {"line": [[0, 2]]}), r"node indices must lie in \[0, 2\)"),
    (lambda: MeshSites([[0, 0], [1, 0]], {"triangle": [[0, 1]]}), r"\[K, 3\]"),
    (lambda: MeshSites([[0, 0], [1, 0]], {"polygon": [[0, 1]]}), "unknown cell type"),
    (lambda: MeshSites(np.zeros((3, 4)), {"line": [[0, 1]]}), r"\[M, d\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((5, 4))}, UNITS), r"shape \[ny, nx\] = \[4, 5\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, UNITS, times=T), r"\[nt, ny, nx\] = \[3, 4, 5\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, {"x": "m", "y": "m"}), r"unit string.*\['Ex'\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((3, 4, 5))}, {"x": "m", "y": "m", "Ex": "V/m"}, times=T),
     r"\['t'\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, {**UNITS, "x": "mm"}),
     r"units\['x'\] must be 'm'"),
    (lambda: FieldSet(_grid2d(), {"E x": np.zeros((4, 5))}, UNITS), "'E x' must be an identifier"),
    (lambda: FieldSet(_grid2d(), {"1E": np.zeros((4, 5))}, UNITS), "identifier"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5), bool)}, UNITS), "real or complex"),
    (lambda: FieldSet(_grid2d(), {}, UNITS), "non-empty"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, UNITS, mask=np.ones((5, 4), bool)),
     r"mask must be a bool array of the site shape \[ny, nx\] = \[4, 5\]"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, UNITS, mask=np.ones((4, 5))),
     "mask must be a bool"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, UNITS, mask=np.zeros((4, 5), bool)),
     "True at one"),
    (lambda: FieldSet(_grid2d(), {"Ex": np.zeros((2, 4, 5))}, UNITS, times=[1.0, 1.0]),
     "times must be finite"),
    (lambda: FieldSet("grid", {"Ex": np.zeros(3)}, UNITS), "GridSites or MeshSites"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_construction_errors_name_the_problem(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_fieldset_copies_casts_and_is_read_only():
    ex = np.arange(20).reshape(4, 5)
    fs = FieldSet(_grid2d(), {"Ex": ex, "Ez": ex * 1j, "Hz": ex.astype(np.float32)}, UNITS)
    ex[0, 0] = 99
    assert fs.fields["Ex"].dtype == np.float64 and fs.fields["Ex"][0, 0] == 0
    assert fs.fields["Hz"].dtype == np.float32 and fs.fields["Ez"].dtype == np.complex128
    assert fs.is_complex("Ez") and not fs.is_complex("Ex") and fs.static and fs.names == ("Ex", "Ez", "Hz")
    assert dict(fs.units) == {"x": "m", "y": "m", "Ex": "V/m", "Ez": "V/m", "Hz": "A/m"}  # extra keys dropped
    with pytest.raises(ValueError):
        fs.fields["Ex"][0, 0] = 1.0
    with pytest.raises(TypeError):
        fs.fields["Ey"] = ex  # type: ignore[index]


def test_grid_shapes_and_coordinate_order():
    g1, g3 = GridSites({"x": X}), GridSites({"x": X, "y": Y, "z": Z})
    assert (g1.shape, _grid2d().shape, g3.shape) == ((5,), (4, 5), (3, 4, 5))
    assert g3.size == 60 and g3.dim == 3 and g3.names == ("x", "y", "z")
    c = _grid2d().coordinates()
    j, i = np.divmod(np.arange(20), 5)
    np.testing.assert_array_equal(c, np.stack([X[i], Y[j]], 1))
    c3 = g3.coordinates()
    assert c3.dtype == np.float64 and c3[(2 * 4 + 1) * 5 + 3].tolist() == [X[3], Y[1], Z[2]]
    assert _mesh().shape == (5,) and _mesh().coordinates().tolist()[4] == [0.5, 0.5]


def test_points_are_time_major_and_from_flat_inverts_them():
    fs = _series2d()
    pts = fs.points()
    assert pts.shape == (3 * 20, 3) and pts.dtype == np.float64
    k, s = np.divmod(np.arange(60), 20)
    j, i = np.divmod(s, 5)
    np.testing.assert_array_equal(pts, np.stack([X[i], Y[j], T[k]], 1))
    # a "network" evaluated on points(): values at row k*S + s belong to field[k].ravel()[s]
    x, y, t = pts.T
    values = np.stack([np.sin(10 * x) * np.cos(2e9 * t) + y, x - t], 1)
    back = FieldSet.from_flat(fs.sites, values, ["Ex", "Ey"], UNITS, times=T)
    np.testing.assert_array_equal(back.fields["Ex"], fs.fields["Ex"])
    assert back.fields["Ey"][2, 3, 4] == X[4] - T[2]
    np.testing.assert_array_equal(FieldSet.from_flat(fs.sites, fs.fields["Hz"].ravel(), ["Hz"], UNITS,
                                                     times=T).fields["Hz"], fs.fields["Hz"])
    static = FieldSet(_mesh(), {"Ex": np.arange(5.0)}, UNITS)
    np.testing.assert_array_equal(static.points(), _mesh().points)
    with pytest.raises(ValueError, match=r"\[nt\*S, len\(names\)\] = \[60, 2\]"):
        FieldSet.from_flat(fs.sites, values[:-1], ["Ex", "Ey"], UNITS, times=T)
    with pytest.raises(ValueError, match="distinct"):
        FieldSet.from_flat(fs.sites, values, ["Ex", "Ex"], UNITS, times=T)


def test_select_times_window_and_with_fields():
    fs = _series2d(mask=np.ones((4, 5), bool))
    sub = fs.select_times(slice(1, None))
    np.testing.assert_array_equal(sub.times, T[1:])
    np.testing.assert_array_equal(sub.fields["Ex"], fs.fields["Ex"][1:])
    assert sub.mask is not None and fs.select_times(2).times.tolist() == [T[2]]
    assert fs.select_times([0, 2]).shape == (2, 4, 5)
    assert fs.window(None) is fs and fs.window(1.5e-9).times.tolist() == T[:2].tolist()
    with pytest.raises(ValueError, match="no time is <= t_max"):
        fs.window(-1.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        fs.select_times([2, 0])
    with pytest.raises(ValueError, match="does not fit"):
        fs.select_times([5])
    static = FieldSet(_grid2d(), {"Ex": np.zeros((4, 5))}, UNITS)
    with pytest.raises(ValueError, match="static"):
        static.select_times(0)
    new = fs.with_fields({"Ez": fs.fields["Ex"] * 1j}, units={"Ez": "V/m"})
    assert new.names == ("Ez",) and new.is_complex("Ez") and np.array_equal(new.times, fs.times)
    assert fs.with_fields({"Hz": fs.fields["Hz"] * 2}).units["Hz"] == "A/m"


# --- relative_l2 ----------------------------------------------------------------------------------
def test_relative_l2_hand_computed_with_mask_window_and_complex():
    sites = GridSites({"x": [0.0, 1.0, 2.0]})
    ref = FieldSet(sites, {"Ex": [[3.0, 0.0, 4.0], [1.0, 1.0, 1.0]], "Ez": [[1j, 0, 0], [0, 0, 0]],
                           "Hz": np.zeros((2, 3))}, UNITS, times=[0.0, 1.0])
    pred = ref.with_fields({"Ex": [[3.0, 5.0, 4.0], [1.0, 1.0, 2.0]], "Ez": [[1 + 1j, 0, 0], [0, 0, 0]],
                            "Hz": np.zeros((2, 3))})
    # Ex: ||(0, 5, 0, 0, 0, 1)|| / ||(3, 0, 4, 1, 1, 1)|| = sqrt(26) / sqrt(28)
    # Ez: |1| / |1j| = 1; Hz: both zero -> 0
    assert relative_l2(pred, ref) == pytest.approx({"Ex": np.sqrt(26 / 28), "Ez": 1.0, "Hz": 0.0})
    assert relative_l2(pred, ref, names=["Ex"], t_max=0.5) == pytest.approx({"Ex": 1.0})  # 5 / 5
    masked = FieldSet(sites, dict(ref.fields), UNITS, times=[0.0, 1.0], mask=np.array([True, False, True]))
    # mask drops x = 1: Ex ||(0, 0, 0, 1)|| / ||(3, 4, 1, 1)|| = 1 / sqrt(27)
    assert relative_l2(pred, masked, names=["Ex"])["Ex"] == pytest.approx(1 / np.sqrt(27))
    zero_ref = ref.with_fields({"Ex": np.zeros((2, 3))})
    assert relative_l2(pred, zero_ref, names=["Ex"]) == {"Ex": float("inf")}


def test_relative_l2_rejects_mismatches():
    fs = _series2d()
    with pytest.raises(ValueError, match="same sites"):
        relative_l2(fs, FieldSet(GridSites({"x": X, "y": Y + 1}), dict(fs.fields), UNITS, times=T))
    with pytest.raises(ValueError, match="same times"):
        relative_l2(fs, FieldSet(fs.sites, dict(fs.fields), UNITS, times=T + 1))
    with pytest.raises(ValueError, match=r"\['Ey'\] are missing"):
        relative_l2(fs, fs, names=["Ey"])
    with pytest.raises(ValueError, match="different masks"):
        m = np.ones((4, 5), bool)
        relative_l2(_series2d(mask=m), _series2d(mask=~np.eye(4, 5, dtype=bool)))
    with pytest.raises(ValueError, match="static"):
        static = FieldSet(fs.sites, {"Ex": fs.fields["Ex"][0]}, UNITS)
        relative_l2(static, static, t_max=1.0)


# --- HDF5 -----------------------------------------------------------------------------------------
ATTRS = {"config": {"lr": 1e-3, "layers": [64, 64]}, "problem": "cavity", "seed": 7, "dt": 0.5, "ok": True}


def test_hdf5_roundtrip_2d_series_keeps_the_v1_layout(tmp_path):
    fs = _series2d()
    ref = fs.with_fields({n: a + 1e-3 for n, a in fs.fields.items()})
    assert_roundtrip(fs, tmp_path, reference=ref, attrs=ATTRS)
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        assert h5.attrs["schema_version"] == 2 and h5.attrs["package_version"] == elecsolver.__version__
        assert json.loads(h5.attrs["json_attrs"]) == ["config"] and h5.attrs["seed"] == 7
        assert json.loads(h5.attrs["config"])["layers"] == [64, 64]
        for name, unit in (("x", "m"), ("y", "m"), ("t", "s")):
            assert h5[f"coords/{name}"].attrs["units"] == unit
        for group in ("fields", "reference"):
            assert h5[f"{group}/Ex"].shape == (3, 4, 5) and h5[f"{group}/Hz"].attrs["units"] == "A/m"
        assert h5["fields/Hz"].dtype == np.float32
        assert "coords/z" not in h5 and "mask" not in h5 and "mesh" not in h5
    assert "fields.h5:/xdmf/Hz_ref/0002" in (tmp_path / "fields.xdmf").read_text()


def test_hdf5_roundtrip_2d_static_with_mask(tmp_path):
    mask = np.ones((4, 5), bool)
    mask[0, :2] = False
    fs = FieldSet(_grid2d(), {"Ex": np.arange(20.0).reshape(4, 5)}, UNITS, mask=mask)
    data = assert_roundtrip(fs, tmp_path, reference=fs.with_fields({"Ex": np.ones((4, 5))}))
    assert data["fieldset"].static and data["reference"].mask.tolist() == mask.tolist()
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        assert h5["mask"].dtype == np.uint8 and "coords/t" not in h5


def test_hdf5_roundtrip_1d_grid_series(tmp_path):
    fs = FieldSet(GridSites({"x": X}), {"Ez": np.outer(T, X) * 1e9}, UNITS, times=T)
    assert_roundtrip(fs, tmp_path)
    text = (tmp_path / "fields.xdmf").read_text()
    assert 'TopologyType="Polyline"' in text and 'NodesPerElement="2"' in text


def test_hdf5_roundtrip_3d_grid(tmp_path):
    sites = GridSites({"x": X, "y": Y, "z": Z})
    c = sites.coordinates()
    fs = FieldSet(sites, {"Ex": (c[:, 0] + 10 * c[:, 1] + 100 * c[:, 2]).reshape(3, 4, 5)}, UNITS,
                  times=None)
    assert_roundtrip(fs, tmp_path)
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        assert h5["coords/z"].attrs["units"] == "m" and h5["xdmf/cells"].shape == (2 * 3 * 4, 8)
        hexa = h5["xdmf/cells"][0]
    pts = sites.coordinates()[hexa]  # first hexahedron: bottom face counter-clockwise, then the top face
    assert pts[:4, 2].tolist() == [Z[0]] * 4 and pts[4:, 2].tolist() == [Z[1]] * 4
    np.testing.assert_array_equal(pts[:4, :2], [[X[0], Y[0]], [X[1], Y[0]], [X[1], Y[1]], [X[0], Y[1]]])
    # series too
    series = FieldSet(sites, {"Ex": np.stack([fs.fields["Ex"]] * 2)}, UNITS, times=T[:2])
    (tmp_path / "series").mkdir()
    assert_roundtrip(series, tmp_path / "series")


def test_hdf5_roundtrip_triangle_mesh_series(tmp_path):
    mesh = _mesh()
    rng = np.random.default_rng(0)
    fs = FieldSet(mesh, {"Ex": rng.random((3, 5)), "Hz": rng.random((3, 5)).astype(np.float32)}, UNITS,
                  times=T, mask=np.array([True, True, True, False, True]))
    assert_roundtrip(fs, tmp_path, reference=fs.with_fields({n: a * 2 for n, a in fs.fields.items()}))
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        assert h5["mesh/points"].shape == (5, 2) and h5["mesh/cells/triangle"].attrs["units"] == "1"
        assert "coords/x" not in h5 and h5["fields/Ex"].shape == (3, 5)


def test_hdf5_roundtrip_mixed_mesh_in_3d(tmp_path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], float)
    mesh = MeshSites(pts, {"tetra": [[0, 1, 2, 3]], "line": [[3, 4]], "triangle": [[1, 2, 4]]})
    fs = FieldSet(mesh, {"Ex": np.arange(5.0)}, UNITS, times=None)
    data = assert_roundtrip(fs, tmp_path)
    assert list(data["fieldset"].sites.cells) == ["tetra", "line", "triangle"]
    assert 'TopologyType="Mixed"' in (tmp_path / "fields.xdmf").read_text()


def test_hdf5_roundtrip_complex_2d_static(tmp_path):
    rng = np.random.default_rng(1)
    ez = rng.random((4, 5)) + 1j * rng.random((4, 5))
    fs = FieldSet(_grid2d(), {"Ez": ez, "Hz": ez.astype(np.complex64), "Ex": ez.real}, UNITS)
    ref = fs.with_fields({n: a * 0.5 for n, a in fs.fields.items()})
    data = assert_roundtrip(fs, tmp_path, reference=ref)
    assert data["fieldset"].fields["Hz"].dtype == np.complex64
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        ds = h5["fields/Ez"]
        assert ds.shape == (4, 5, 2) and ds.attrs["complex"] and ds.attrs["units"] == "V/m"
        np.testing.assert_array_equal(ds[..., 0] + 0, ez.real)
        np.testing.assert_array_equal(h5["xdmf/Ez_ref_abs/0000"][()], np.abs(ez * 0.5).ravel())


def test_hdf5_rejects_bad_input_and_writes_nothing(tmp_path):
    fs = _series2d()
    clashing = fs.with_fields({"Ex": fs.fields["Ex"], "Ex_ref": fs.fields["Ex"]}, {"Ex_ref": "V/m"})
    bad = [
        (lambda: write(fs, tmp_path / "f.h5", attrs={"schema_version": 3}), "set by the writer"),
        (lambda: write(fs, tmp_path / "f.h5", attrs={"model": object()}), "must be a str, int"),
        (lambda: write(fs, tmp_path / "a:b.h5"), "':'"),
        (lambda: write(fs, tmp_path / "f.h5", reference=fs.select_times(slice(0, 2))), "same times"),
        (lambda: write(fs, tmp_path / "f.h5", reference=fs.with_fields({"Ex": fs.fields["Ex"]})),
         "same field names"),
        (lambda: write(clashing, tmp_path / "f.h5", reference=clashing), "clash"),
        (lambda: write(FieldSet(GridSites({"x": [0.0]}), {"Ex": [1.0]}, UNITS), tmp_path / "f.h5"), ">= 2"),
        (lambda: write(fs, tmp_path / "f.h5", reference=_series2d(mask=np.ones((4, 5), bool))), "mask"),
    ]
    for make, match in bad:
        with pytest.raises(ValueError, match=match):
            make()
    assert list(tmp_path.iterdir()) == []


def test_hdf5_failure_keeps_the_previous_pair(tmp_path, monkeypatch):
    fs = _series2d()
    write(fs, tmp_path / "fields.h5")
    before = (tmp_path / "fields.h5").read_bytes(), (tmp_path / "fields.xdmf").read_bytes()
    monkeypatch.setattr("elecsolver.fields.hdf5._xdmf_tree", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write(fs.select_times(slice(0, 1)), tmp_path / "fields.h5")
    assert ((tmp_path / "fields.h5").read_bytes(), (tmp_path / "fields.xdmf").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fields.h5", "fields.xdmf"]


def test_read_rejects_other_files(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as h5:
        h5["a"] = [1, 2]
    with pytest.raises(ValueError, match="schema version 1 or 2"):
        read(tmp_path / "other.h5")
    with pytest.raises(ValueError, match="HDF5"):
        read(tmp_path / "fields.csv")
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "missing.h5")


# --- CSV and PNG ----------------------------------------------------------------------------------
def test_csv_roundtrip_and_read_with_numpy(tmp_path):
    mask = np.ones((4, 5), bool)
    mask[1, 1] = False
    fs = _series2d(mask=mask)
    fs = fs.with_fields({**fs.fields, "Ez": fs.fields["Ex"] * (1 + 2j)}, {"Ez": "V/m"})
    assert_roundtrip(fs, tmp_path, format="csv", reference=fs)
    path = tmp_path / "fields.csv"
    header = path.read_text().splitlines()[0].split(",")
    assert header[:6] == ["x [m]", "y [m]", "t [s]", "Ex [V/m]", "Hz [A/m]", "Ez_re [V/m]"]
    assert header[6] == "Ez_im [V/m]" and header[7] == "Ex_ref [V/m]" and header[-1] == "mask [1]"
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    row = 2 * 20 + 3 * 5 + 4  # k = 2, j = 3, i = 4
    assert table[row, :3].tolist() == [X[4], Y[3], T[2]]
    assert table[row, 3] == fs.fields["Ex"][2, 3, 4] and table[row, 6] == 2 * fs.fields["Ex"][2, 3, 4]
    assert table[:, -1].sum() == 3 * 19


def _png_ok(paths):
    for path in paths:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        assert matplotlib.image.imread(path).ndim == 3


def test_png_2d_series_and_static(tmp_path):
    fs = _series2d().select_times(slice(1, None))
    ref = fs.with_fields({n: a * 1.1 for n, a in fs.fields.items()})
    paths = assert_roundtrip(fs.with_fields({"Ex": fs.fields["Ex"]}), tmp_path,
                             format="png", reference=ref.with_fields({"Ex": ref.fields["Ex"]}))["paths"]
    assert [p.name for p in paths] == ["Ex_t1.00ns.png", "Ex_t2.00ns.png"]  # default_frames(2) = [0, 1]
    image = matplotlib.image.imread(paths[0])
    assert image.shape[1] > 2 * image.shape[0]  # PINN | reference | error
    static = FieldSet(_grid2d(), {"Hz": fs.fields["Hz"][0]}, UNITS)
    paths = write(static, tmp_path / "static", format="png")
    assert [p.name for p in paths] == ["Hz.png"]
    _png_ok(paths)


@pytest.mark.parametrize("kind", ["1d", "3d", "mesh", "complex"])
def test_png_other_sites(tmp_path, kind):
    if kind == "1d":
        fs = FieldSet(GridSites({"x": X}), {"Ez": np.sin(X)}, UNITS, mask=X < 0.25)
    elif kind == "3d":
        fs = FieldSet(GridSites({"x": X, "y": Y, "z": Z}), {"Ez": np.arange(60.0).reshape(3, 4, 5)}, UNITS)
    elif kind == "mesh":
        fs = FieldSet(_mesh(), {"Ez": np.arange(5.0)}, UNITS, mask=np.array([1, 1, 1, 0, 1], bool))
    else:
        fs = FieldSet(_grid2d(), {"Ez": np.exp(1j * np.arange(20.0)).reshape(4, 5)}, UNITS)
    ref = fs.with_fields({"Ez": fs.fields["Ez"] * 0.9})
    paths = assert_roundtrip(fs, tmp_path, format="png", reference=ref)
    assert [p.name for p in paths["paths"]] == ["Ez.png"]
    if kind == "complex":  # two rows: real part and magnitude
        image = matplotlib.image.imread(paths["paths"][0])
        assert image.shape[0] > 600


def test_png_rejects_meshes_it_cannot_draw(tmp_path):
    fs = FieldSet(MeshSites([[0.0], [1.0]], {"line": [[0, 1]]}), {"Ez": [0.0, 1.0]}, UNITS)
    with pytest.raises(ValueError, match="triangle or quad"):
        write(fs, tmp_path / "png", format="png")
    with pytest.raises(ValueError, match="out of range"):
        write_png(_series2d(), tmp_path / "png", frames=[3])
    assert list(tmp_path.iterdir()) == []


# --- registry and file modes ----------------------------------------------------------------------
def test_unknown_format_or_suffix_lists_the_registered_ones(tmp_path):
    fs = _series2d()
    with pytest.raises(ValueError, match=r"unknown format 'vtk'; registered: hdf5 \(.h5 .hdf5\), csv"):
        write(fs, tmp_path / "f.vtk", format="vtk")
    with pytest.raises(ValueError, match=r"suffix '.vtk'.*png \(format= only\)"):
        write(fs, tmp_path / "f.vtk")
    with pytest.raises(ValueError, match=r"suffix '\(none\)'"):
        write(fs, tmp_path / "png")
    with pytest.raises(ValueError, match="must be a FieldSet"):
        write({"Ex": 1}, tmp_path / "f.h5")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_register_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(writers, "_REGISTRY", dict(writers._REGISTRY))
    calls = []
    register_writer("npz", [".npz"], lambda fs, path, *, reference, attrs: calls.append(path) or [path])
    assert write(_series2d(), tmp_path / "f.NPZ") == [tmp_path / "f.NPZ"] and "npz" in registered_writers()
    with pytest.raises(ValueError, match="already registered"):
        register_writer("npz", [".npz"], print)
    with pytest.raises(ValueError, match="belongs to format 'hdf5'"):
        register_writer("other", [".h5"], print)


def test_files_get_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        fs = _series2d().select_times([0, 2])
        fs = fs.with_fields({"Ex": fs.fields["Ex"]})
        paths = write(fs, tmp_path / "fields.h5") + write(fs, tmp_path / "fields.csv")
        paths += write(fs, tmp_path / "png", format="png")
    finally:
        os.umask(old)
    assert len(paths) == 5
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_only_the_atomic_helper_makes_temporary_files():
    root = pathlib.Path(elecsolver.__file__).parent
    for folder in ("fields", "io"):
        for path in (root / folder).glob("*.py"):
            if path.name != "atomic.py":
                text = path.read_text()
                for name in ("mkstemp", "NamedTemporaryFile", "mkdtemp"):
                    assert name not in text, (path, name)


def test_read_accepts_a_version_1_file(tmp_path):
    """Version 1 (2-D grid, real fields) as the old io.hdf5 writer laid it out."""
    with h5py.File(tmp_path / "v1.h5", "w") as h5:
        h5.attrs.update({"schema_version": 1, "package_version": "0.1.0", "json_attrs": '["config"]',
                         "config": '{"a": 1}'})
        for name, values, unit in (("x", X, "m"), ("y", Y, "m"), ("t", T, "s")):
            h5[f"coords/{name}"] = values
            h5[f"coords/{name}"].attrs["units"] = unit
        h5["fields/Ex"] = np.ones((3, 4, 5), np.float32)
        h5["fields/Ex"].attrs["units"] = "V/m"
    data = read(tmp_path / "v1.h5")
    fs = data["fieldset"]
    assert fs.sites == _grid2d() and fs.times.tolist() == T.tolist() and fs.fields["Ex"].dtype == np.float32
    assert data["attrs"] == {"schema_version": 1, "package_version": "0.1.0", "config": {"a": 1}}
    assert data["reference"] is None and dict(fs.units) == {"x": "m", "y": "m", "t": "s", "Ex": "V/m"}


def test_hdf5_roundtrip_1d_mesh_series(tmp_path):
    mesh = MeshSites([[0.0], [0.1], [0.3]], {"line": [[0, 1], [1, 2]]})
    fs = FieldSet(mesh, {"Ez": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]}, UNITS, times=T[:2])
    assert_roundtrip(fs, tmp_path)
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        assert h5["mesh/points"].shape == (3, 1) and h5["xdmf/points"][2].tolist() == [0.3, 0.0, 0.0]
