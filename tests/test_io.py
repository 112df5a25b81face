"""Output files: HDF5 + XDMF sidecar (read back with h5py and meshio) and PNG snapshots."""

import json

import h5py
import matplotlib.image
import meshio
import numpy as np
import pytest

import elecsolver
from elecsolver.io.hdf5 import read_fields, write_fields
from elecsolver.io.snapshots import default_frames, write_snapshots

NX, NY, NT = 7, 5, 4
UNITS = {"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Ey": "V/m", "Hz": "A/m"}


def _example():
    """A small analytic TE wave on a non-square grid, float64 fields and a float32 one."""
    x = np.linspace(0.0, 0.3, NX)
    y = np.linspace(-0.1, 0.1, NY)
    t = np.array([0.0, 0.8e-9, 1.6e-9, 2.4e-9])
    tt, yy, xx = np.meshgrid(t, y, x, indexing="ij")
    phase = 2 * np.pi * (xx / 0.3 - 1e9 * tt)
    fields = {
        "Ex": np.sin(np.pi * yy / 0.2) * np.cos(phase),
        "Ey": (np.cos(phase) * xx).astype(np.float32),
        "Hz": np.sin(phase) / 376.73 + yy,
    }
    reference = {name: value + np.asarray(1e-3, value.dtype) * np.cos(xx + yy).astype(value.dtype)
                 for name, value in fields.items()}
    return {"x": x, "y": y, "t": t}, fields, reference


def _write(path, **overrides):
    coords, fields, reference = _example()
    attrs = {"config": {"lr": 1e-3, "layers": [64, 64]}, "scales": {"E0": 1.0},
             "metrics": {"rel_l2": np.float32(0.25)}, "problem": "waveguide", "seed": 7,
             "dt": 0.5, "converged": True}
    kwargs = {"coords": coords, "fields": fields, "reference": reference, "units": UNITS, "attrs": attrs}
    kwargs.update(overrides)
    return write_fields(path, **kwargs)


def test_roundtrip_h5(tmp_path):
    coords, fields, reference = _example()
    out = _write(tmp_path / "out" / "fields.h5")
    assert out == tmp_path / "out" / "fields.h5"
    assert sorted(p.name for p in out.parent.iterdir()) == ["fields.h5", "fields.xdmf"]

    data = read_fields(out)
    for name in "xyt":
        assert data["coords"][name].tobytes() == coords[name].tobytes()
    for name in fields:
        assert data["fields"][name].dtype == fields[name].dtype
        assert data["fields"][name].tobytes() == fields[name].tobytes()
        assert data["reference"][name].tobytes() == reference[name].tobytes()
    assert data["units"] == UNITS
    attrs = data["attrs"]
    assert attrs["schema_version"] == 2
    assert attrs["package_version"] == elecsolver.__version__
    assert attrs["config"] == {"lr": 1e-3, "layers": [64, 64]}
    assert attrs["scales"] == {"E0": 1.0}
    assert attrs["metrics"] == {"rel_l2": 0.25}
    assert (attrs["problem"], attrs["seed"], attrs["dt"], attrs["converged"]) == ("waveguide", 7, 0.5, True)

    with h5py.File(out, "r") as h5:
        assert h5.attrs["schema_version"] == 2
        assert json.loads(h5.attrs["config"])["layers"] == [64, 64]
        names = []
        h5.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        assert "fields/Hz" in names and "reference/Hz" in names and "coords/t" in names
        for name in names:
            assert isinstance(h5[name].attrs["units"], str), name
        assert h5["fields/Hz"].attrs["units"] == "A/m"


def test_without_reference(tmp_path):
    coords, fields, _ = _example()
    out = write_fields(tmp_path / "f.h5", coords=coords, fields=fields, units=UNITS, attrs={})
    data = read_fields(out)
    assert data["reference"] is None
    assert data["attrs"] == {"schema_version": 2, "package_version": elecsolver.__version__}


def test_xdmf_meshio_from_other_directory(tmp_path, monkeypatch):
    coords, fields, reference = _example()
    _write(tmp_path / "run" / "fields.h5")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    with meshio.xdmf.TimeSeriesReader(tmp_path / "run" / "fields.xdmf") as reader:
        points, cells = reader.read_points_cells()
        assert points.shape == (NY * NX, 3)
        j, i = np.divmod(np.arange(NY * NX), NX)
        np.testing.assert_array_equal(points[:, 0], coords["x"][i])
        np.testing.assert_array_equal(points[:, 1], coords["y"][j])
        np.testing.assert_array_equal(points[:, 2], 0.0)
        assert len(cells) == 1 and cells[0].type == "quad"
        assert cells[0].data.shape == ((NY - 1) * (NX - 1), 4)
        assert cells[0].data[0].tolist() == [0, 1, NX + 1, NX]

        assert reader.num_steps == NT
        for k in range(reader.num_steps):
            t, point_data, _ = reader.read_data(k)
            assert t == coords["t"][k]
            assert set(point_data) == {*fields, *(f"{n}_ref" for n in fields)}
            for name in fields:
                assert point_data[name].shape == (NY * NX,)
                np.testing.assert_array_equal(point_data[name], fields[name][k].ravel())
                np.testing.assert_array_equal(point_data[f"{name}_ref"], reference[name][k].ravel())


def test_xdmf_references_h5_by_relative_name(tmp_path):
    _write(tmp_path / "fields.h5")
    text = (tmp_path / "fields.xdmf").read_text()
    assert str(tmp_path) not in text
    assert "fields.h5:/xdmf/Hz/0003" in text


@pytest.mark.parametrize("bad", [
    {"fields": {"Ex": np.zeros((NT, NY, NX + 1))}},
    {"reference": {"Ex": np.zeros((NT, NY, NX))}},
    {"units": {"x": "m", "y": "m", "t": "s"}},
    {"coords": {"x": np.zeros(NX), "y": np.zeros(NY), "t": np.zeros(NT)}},
    {"attrs": {"schema_version": 2}},
    {"attrs": {"model": object()}},
])
def test_bad_arguments_leave_nothing(tmp_path, bad):
    with pytest.raises(ValueError):
        _write(tmp_path / "fields.h5", **bad)
    assert list(tmp_path.iterdir()) == []


def test_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("elecsolver.fields.hdf5._xdmf_tree", boom)
    with pytest.raises(OSError, match="disk full"):
        _write(tmp_path / "fields.h5")
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_previous_file(tmp_path, monkeypatch):
    _write(tmp_path / "fields.h5")
    before = (tmp_path / "fields.h5").read_bytes()
    monkeypatch.setattr("elecsolver.fields.hdf5._xdmf_tree", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _write(tmp_path / "fields.h5")
    assert (tmp_path / "fields.h5").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fields.h5", "fields.xdmf"]


def test_overwrite(tmp_path):
    coords, fields, _ = _example()
    _write(tmp_path / "fields.h5")
    coords2 = dict(coords, t=coords["t"][:2])
    fields2 = {"Hz": fields["Hz"][:2] * 2}
    write_fields(tmp_path / "fields.h5", coords=coords2, fields=fields2, units=UNITS, attrs={"run": 2})
    data = read_fields(tmp_path / "fields.h5")
    assert list(data["fields"]) == ["Hz"] and data["reference"] is None
    assert data["fields"]["Hz"].tobytes() == fields2["Hz"].tobytes()
    assert data["attrs"]["run"] == 2
    with meshio.xdmf.TimeSeriesReader(tmp_path / "fields.xdmf") as reader:
        reader.read_points_cells()
        assert reader.num_steps == 2
        np.testing.assert_array_equal(reader.read_data(1)[1]["Hz"], fields2["Hz"][1].ravel())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fields.h5", "fields.xdmf"]


def test_read_rejects_other_files(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as h5:
        h5["a"] = [1, 2]
    with pytest.raises(ValueError, match="schema version"):
        read_fields(tmp_path / "other.h5")
    with pytest.raises(FileNotFoundError):
        read_fields(tmp_path / "missing.h5")


def test_default_frames():
    assert default_frames(101) == [25, 50, 75, 100]
    assert default_frames(4) == [1, 2, 3]
    assert default_frames(1) == [0]


def test_snapshots(tmp_path):
    coords, fields, reference = _example()
    paths = write_snapshots(tmp_path / "png", **coords, fields=fields, reference=reference, units=UNITS)
    assert len(paths) == 3 * len(default_frames(NT))
    assert tmp_path / "png" / "Hz_t2.40ns.png" in paths
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 2 * image.shape[0]


def test_snapshots_without_reference_and_bad_frames(tmp_path):
    coords, fields, _ = _example()
    paths = write_snapshots(tmp_path, **coords, fields={"Ex": fields["Ex"]}, frames=[0], units=UNITS)
    assert [p.name for p in paths] == ["Ex_t0.00ns.png"]
    assert matplotlib.image.imread(paths[0]).ndim == 3
    with pytest.raises(ValueError, match="out of range"):
        write_snapshots(tmp_path, **coords, fields=fields, frames=[NT], units=UNITS)
    with pytest.raises(ValueError, match="shape"):
        write_snapshots(tmp_path, **coords, fields={"Ex": fields["Ex"][:, :, :-1]}, units=UNITS)
