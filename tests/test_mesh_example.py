"""examples/mesh_domain.py (training on a gmsh mesh domain) and elecsolver.io.mesh_output."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import h5py
import meshio
import numpy as np
import pytest

from elecsolver.cli import run_problem
from elecsolver.fields import read
from elecsolver.geometry import MeshDomain
from elecsolver.io.mesh_output import write_mesh_fields

ROOT = Path(__file__).resolve().parents[1]


def _example():
    name = "elecsolver_example_mesh_domain"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "mesh_domain.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


MESH = ROOT / "examples" / "data" / "unit_square.msh"


def test_mesh_wall_samples_lie_on_the_square_edges_with_outward_normals():
    ex = _example()
    mesh = MeshDomain.from_file(MESH, domain_group="cavity", boundary_groups=["pec"])
    assert len(mesh.cells) == 128 and mesh.measure() == pytest.approx(1.0)
    problem = ex.MeshCavityTE()
    cloud = problem.sample("pec", seed=3)  # training units: L = 1 m, T = L / c0
    x, y, t = cloud.points.T
    assert len(cloud.points) == problem.config["sampling"]["boundary"]
    assert np.all((t >= 0) & (t <= problem.config["window"]["t_end"] * (1 + 1e-12)))
    side = np.stack([np.abs(y), np.abs(x - 1), np.abs(y - 1), np.abs(x)], 1)  # y=0, x=1, y=1, x=0
    on = side.min(axis=1)
    assert np.all(on < 1e-12), on.max()
    expected = np.array([[0, -1], [1, 0], [0, 1], [-1, 0]], float)[side.argmin(axis=1)]
    np.testing.assert_allclose(cloud.normals, expected, atol=1e-12)
    assert len(np.unique(side.argmin(axis=1))) == 4  # every side is sampled
    inner = problem.sample("pde", seed=3).points
    assert np.all((inner[:, :2] >= 0) & (inner[:, :2] <= 1))
    init = problem.sample("initial", seed=3).points
    assert np.all(init[:, 2] == 0)


def _check_export(out: Path, mesh: MeshDomain, tmp_path: Path, monkeypatch) -> None:
    h5_path, xdmf_path = out / "fields.h5", out / "fields.xdmf"
    with h5py.File(h5_path, "r") as h5:
        assert h5.attrs["schema_version"] == 2
        assert h5["mesh/points"].attrs["units"] == "m"
        assert h5["coords/t"].attrs["units"] == "s"
        np.testing.assert_array_equal(h5["mesh/points"][()], mesh.points)
        np.testing.assert_array_equal(h5["mesh/cells/triangle"][()], mesh.cells)
        times = h5["coords/t"][()]
        written = {}
        for name, unit in (("Ex", "V/m"), ("Ey", "V/m"), ("Hz", "A/m")):
            ds = h5[f"fields/{name}"]
            assert ds.attrs["units"] == unit
            assert ds.shape == (len(times), len(mesh.points))
            written[name] = ds[()]
            assert np.all(np.isfinite(written[name]))
    assert times[0] == 0.0 and times[-1] > 0

    monkeypatch.chdir(tmp_path / "..")
    with meshio.xdmf.TimeSeriesReader(str(xdmf_path)) as reader:
        points, cells = reader.read_points_cells()
        np.testing.assert_array_equal(points, mesh.points)
        assert cells[0].type == "triangle"
        assert reader.num_steps == len(times)
        for k in range(reader.num_steps):
            tk, point_data, _ = reader.read_data(k)
            assert tk == times[k]
            for name, values in written.items():
                np.testing.assert_array_equal(point_data[name], values[k])


def test_mesh_example_exports_readable_fields(tmp_path, monkeypatch):
    """A tiny run (a few seconds): the export on the mesh nodes reads back through h5py and meshio."""
    ex = _example()
    out = tmp_path / "mesh"
    metrics = run_problem(ex.MeshCavityTE, ["--steps", "20", "--set", "sampling.interior=200", "--set",
                                            "sampling.boundary=100", "--set", "sampling.initial=100", "--out",
                                            str(out), "--quiet"])
    assert set(metrics["rel_l2"]["full"]) == {"Ex", "Ey", "Hz"}
    assert all(np.isfinite(v) for v in metrics["rel_l2"]["full"].values())
    mesh = MeshDomain.from_file(MESH, domain_group="cavity", boundary_groups=["pec"])
    _check_export(out, mesh, tmp_path, monkeypatch)


@pytest.mark.slow
def test_mesh_example_trains_to_the_closed_form(tmp_path, monkeypatch):
    """800 steps with the default point counts reach a clearly nonzero accuracy on the mesh nodes."""
    ex = _example()
    out = tmp_path / "mesh"
    metrics = run_problem(ex.MeshCavityTE, ["--steps", "800", "--out", str(out), "--quiet"])
    rel = metrics["rel_l2"]["full"]
    for field in ("Ex", "Ey", "Hz"):
        assert rel[field] < 0.75, rel
    # all components together, each in its own scale (E / E0, H / H0): the old "all" metric
    data = read(out / "fields.h5")
    scale = {"Ex": 1.0, "Ey": 1.0, "Hz": 1 / 376.730313668}
    a = np.stack([data["fieldset"].fields[k] / scale[k] for k in scale])
    b = np.stack([data["reference"].fields[k] / scale[k] for k in scale])
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 0.6
    mesh = MeshDomain.from_file(MESH, domain_group="cavity", boundary_groups=["pec"])
    _check_export(out, mesh, tmp_path, monkeypatch)


def test_write_mesh_fields_bad_shape_raises_and_writes_nothing(tmp_path):
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], float)
    cells = {"triangle": np.array([[0, 1, 2], [1, 3, 2]])}
    with pytest.raises(ValueError, match=r"\[nt, M\]"):
        write_mesh_fields(tmp_path / "f.h5", points=pts, cells=cells, times=[0.0, 1.0],
                          fields={"Ex": np.zeros((2, 5))}, units={"Ex": "V/m"})
    with pytest.raises(ValueError, match="units"):
        write_mesh_fields(tmp_path / "f.h5", points=pts, cells=cells, times=[0.0, 1.0],
                          fields={"Ex": np.zeros((2, 4))}, units={})
    with pytest.raises(ValueError, match="node indices"):
        write_mesh_fields(tmp_path / "f.h5", points=pts, cells={"triangle": np.array([[0, 1, 4]])}, times=[0.0],
                          fields={"Ex": np.zeros((1, 4))}, units={"Ex": "V/m"})
    assert list(tmp_path.iterdir()) == []


def test_write_mesh_fields_round_trip_and_no_leftovers_on_error(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    pts = rng.random((6, 3))
    cells = {"tetra": np.array([[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]])}
    fields = {"Ex": rng.random((3, 6)), "Hz": rng.random((3, 6)).astype(np.float32)}
    path = write_mesh_fields(tmp_path / "sub" / "out.h5", points=pts, cells=cells, times=[0.0, 1e-9, 2e-9],
                             fields=fields, units={"Ex": "V/m", "Hz": "A/m"}, attrs={"config": {"a": [1, 2]}})
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.h5", "out.xdmf"]
    with h5py.File(path, "r") as h5:
        assert h5.attrs["config"] == '{"a": [1, 2]}'
        assert h5.attrs["package_version"]
        np.testing.assert_array_equal(h5["fields/Hz"][()], fields["Hz"])
    monkeypatch.chdir(tmp_path)
    with meshio.xdmf.TimeSeriesReader("sub/out.xdmf") as reader:
        reader.read_points_cells()
        for k in range(3):
            _, pd, _ = reader.read_data(k)
            np.testing.assert_array_equal(pd["Ex"], fields["Ex"][k])

    # an error while writing leaves the existing pair untouched and no temporary folder
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("elecsolver.fields.hdf5._xdmf_tree", boom)
    with pytest.raises(OSError, match="disk full"):
        write_mesh_fields(path, points=pts, cells=cells, times=[0.0], fields={"Ex": np.ones((1, 6))},
                          units={"Ex": "V/m"})
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.h5", "out.xdmf"]
    assert path.read_bytes() == before
