"""Test helpers for writers: :func:`assert_roundtrip` writes a FieldSet, reads it back and compares exactly.

Every format test uses it, so each format is held to the same checks.  Failures raise
:class:`AssertionError` with a message naming what differs (explicit raises, not ``assert``, so
the checks also run under ``python -O``).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator, Mapping
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np

from .fieldset import FieldSet
from .hdf5 import SCHEMA_VERSION
from .table import csv_columns
from .writers import read, write

__all__ = ["PNG_SIGNATURE", "assert_roundtrip", "assert_same_fieldset", "expected_xdmf_attributes"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _expect(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _same_array(got: np.ndarray | None, want: np.ndarray | None, what: str) -> None:
    """Same presence, dtype, shape and bytes (so NaN payloads and -0.0 count too)."""
    _expect((got is None) == (want is None), f"{what}: got {got!r}, expected {want!r}")
    if want is not None:
        _expect(got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}")
        _expect(got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}")
        _expect(np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(),
                f"{what}: values differ")


def _snapshot(fs: FieldSet | None) -> dict[str, Any] | None:
    if fs is None:
        return None
    return {"coords": fs.sites.coordinates(), "units": dict(fs.units), "names": fs.names,
            "times": None if fs.times is None else fs.times.copy(),
            "mask": None if fs.mask is None else fs.mask.copy(),
            "fields": {n: a.copy() for n, a in fs.fields.items()}}


def _assert_unchanged(fs: FieldSet | None, before: dict[str, Any] | None, what: str) -> None:
    after = _snapshot(fs)
    if before is None:
        return
    _expect(after["units"] == before["units"] and after["names"] == before["names"], f"{what} was changed")
    for key in ("coords", "times", "mask"):
        _same_array(after[key], before[key], f"{what}.{key} after writing")
    for name, values in before["fields"].items():
        _same_array(after["fields"][name], values, f"{what}.fields[{name!r}] after writing")


def assert_same_fieldset(got: FieldSet, want: FieldSet, what: str = "fieldset") -> None:
    """Raise AssertionError unless ``got`` equals ``want`` exactly.

    Compared: sites, names (in order), units, times, mask, and every field's dtype, shape and bytes.
    """
    _expect(isinstance(got, FieldSet), f"{what}: got {type(got).__name__}, expected a FieldSet")
    _expect(type(got.sites) is type(want.sites) and got.sites == want.sites,
            f"{what}.sites: got {got.sites!r}, expected {want.sites!r}")
    _expect(got.names == want.names, f"{what}.names: got {got.names}, expected {want.names}")
    _expect(dict(got.units) == dict(want.units),
            f"{what}.units: got {dict(got.units)}, expected {dict(want.units)}")
    _same_array(got.times, want.times, f"{what}.times")
    _same_array(got.mask, want.mask, f"{what}.mask")
    for name in want.names:
        _same_array(got.fields[name], want.fields[name], f"{what}.fields[{name!r}]")


@contextlib.contextmanager
def _chdir(path: pathlib.Path) -> Iterator[None]:
    """``contextlib.chdir`` (Python >= 3.11), written out for 3.10."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def expected_xdmf_attributes(fieldset: FieldSet, reference: FieldSet | None, k: int) -> dict[str, np.ndarray]:
    """The nodal attributes ``meshio.xdmf.TimeSeriesReader.read_data(k)`` must return, each [S]."""
    out = {}
    for suffix, fs in (("", fieldset), ("_ref", reference)):
        for name, values in (fs.fields.items() if fs is not None else ()):
            step = (values if fs.static else values[k]).ravel()
            if step.dtype.kind == "c":
                out.update({f"{name}{suffix}_re": step.real, f"{name}{suffix}_im": step.imag,
                            f"{name}{suffix}_abs": np.abs(step)})
            else:
                out[name + suffix] = step
    if fieldset.mask is not None:
        out["mask"] = fieldset.mask.ravel().astype(np.uint8)
    return out


def _check_xdmf(h5: pathlib.Path, xdmf: pathlib.Path, fieldset: FieldSet, reference: FieldSet | None) -> None:
    import meshio

    refs = [el.text.strip() for el in ET.parse(xdmf).getroot().iter("DataItem") if el.get("Format") == "HDF"]
    _expect(refs and all(r.startswith(f"{h5.name}:/") for r in refs),
            f"{xdmf.name}: HDF DataItems must name {h5.name!r} only, got e.g. {refs[:1]}")
    elsewhere = xdmf.parent / "_elsewhere"
    elsewhere.mkdir(exist_ok=True)
    nt = 1 if fieldset.static else fieldset.times.size
    coords = fieldset.sites.coordinates()
    with _chdir(elsewhere), meshio.xdmf.TimeSeriesReader(xdmf.resolve()) as reader:
        points, _cells = reader.read_points_cells()
        _expect(points.shape[0] == fieldset.sites.size,
                f"XDMF: {points.shape[0]} points, expected {fieldset.sites.size}")
        _expect(np.array_equal(points[:, :coords.shape[1]], coords), "XDMF: point coordinates differ")
        _expect(reader.num_steps == nt, f"XDMF: {reader.num_steps} steps, expected {nt}")
        for k in range(nt):
            t, point_data, _ = reader.read_data(k)
            want_t = 0.0 if fieldset.static else float(fieldset.times[k])
            _expect(t == want_t, f"XDMF step {k}: Time {t!r}, expected {want_t!r}")
            expected = expected_xdmf_attributes(fieldset, reference, k)
            _expect(set(point_data) == set(expected),
                    f"XDMF step {k}: attributes {sorted(point_data)}, expected {sorted(expected)}")
            for name, values in expected.items():
                _same_array(point_data[name], values, f"XDMF step {k} attribute {name!r}")
    elsewhere.rmdir()


def _roundtrip_hdf5(fieldset: FieldSet, directory: pathlib.Path, reference: FieldSet | None,
                    attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    h5 = directory / "fields.h5"
    paths = write(fieldset, h5, reference=reference, attrs=attrs)
    _expect(paths == [h5, h5.with_suffix(".xdmf")], f"hdf5 writer returned {paths}")
    data = read(h5)
    assert_same_fieldset(data["fieldset"], fieldset)
    _expect((data["reference"] is None) == (reference is None), "reference presence differs")
    if reference is not None:  # stored once: the reference comes back with the fieldset's mask
        got = data["reference"]
        _same_array(got.mask, fieldset.mask, "reference.mask (the fieldset's)")
        got = FieldSet(got.sites, got.fields, got.units, times=got.times, mask=reference.mask)
        assert_same_fieldset(got, reference, "reference")
    _expect(data["attrs"].get("schema_version") == SCHEMA_VERSION, f"schema_version {data['attrs']}")
    for key, value in (attrs or {}).items():
        _expect(data["attrs"].get(key) == value,
                f"attrs[{key!r}]: got {data['attrs'].get(key)!r}, expected {value!r}")
    _check_xdmf(h5, h5.with_suffix(".xdmf"), fieldset, reference)
    return data


def _roundtrip_csv(fieldset: FieldSet, directory: pathlib.Path, reference: FieldSet | None) -> dict[str, Any]:
    path = directory / "fields.csv"
    _expect(write(fieldset, path, reference=reference) == [path], "csv writer must return [path]")
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    columns = csv_columns(fieldset, reference)
    _expect(header == [head for head, _, _ in columns], f"CSV header {header}")
    _expect(table.shape == (len(fieldset.points()), len(columns)), f"CSV table shape {table.shape}")
    for j, (head, values, _) in enumerate(columns):
        _same_array(table[:, j].astype(values.dtype), values, f"CSV column {head!r}")
    return {"header": header, "table": table}


def _roundtrip_png(fieldset: FieldSet, directory: pathlib.Path, reference: FieldSet | None) -> dict[str, Any]:
    import matplotlib.image

    folder = directory / "png"
    paths = write(fieldset, folder, reference=reference, format="png")
    _expect(paths and sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in paths),
            f"PNG folder holds {sorted(p.name for p in folder.iterdir())}, writer returned {paths}")
    for path in paths:
        _expect(path.read_bytes()[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG file")
        image = matplotlib.image.imread(path)
        _expect(image.ndim == 3 and min(image.shape[:2]) > 100, f"{path.name}: image shape {image.shape}")
    return {"paths": paths}


def assert_roundtrip(fieldset: FieldSet, directory: str | os.PathLike, format: str = "hdf5",
                     reference: FieldSet | None = None,
                     attrs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``fieldset`` in ``format`` into ``directory`` and read it back; AssertionError on any difference.

    * ``"hdf5"``: ``fields.h5`` + ``fields.xdmf``; :func:`~elecsolver.fields.read` must give back
      the fieldset and reference exactly (sites, names, dtypes, values bytewise, units, times,
      mask; the reference gets the fieldset's mask) and ``attrs``; ``meshio.xdmf.TimeSeriesReader``
      must open the ``.xdmf`` from another working directory and read every step with the right
      points, time and attribute values (:func:`expected_xdmf_attributes`).
    * ``"csv"``: ``fields.csv`` read with ``numpy.loadtxt`` must hold the :meth:`FieldSet.points`
      coordinates and every field column exactly (float32 after casting back).
    * ``"png"``: ``png/`` must hold exactly the returned files, each a valid PNG matplotlib reads.

    In every case the input FieldSets must be unchanged afterwards.

    Parameters
    ----------
    fieldset : FieldSet
        What to write.
    directory : str or os.PathLike
        An existing folder (e.g. pytest's ``tmp_path``).
    format : {"hdf5", "csv", "png"}, optional
        The writer.
    reference : FieldSet, optional
        Written alongside.
    attrs : dict, optional
        Root attributes (hdf5), compared after JSON decoding.

    Returns
    -------
    dict
        hdf5: the :func:`~elecsolver.fields.read` result; csv: ``{"header", "table"}``; png:
        ``{"paths"}``.

    Raises
    ------
    AssertionError
        On any difference.
    ValueError
        For an unknown ``format``.
    """
    directory = pathlib.Path(directory)
    before = _snapshot(fieldset), _snapshot(reference)
    if format == "hdf5":
        result = _roundtrip_hdf5(fieldset, directory, reference, attrs)
    elif format == "csv":
        result = _roundtrip_csv(fieldset, directory, reference)
    elif format == "png":
        result = _roundtrip_png(fieldset, directory, reference)
    else:
        raise ValueError(f"assert_roundtrip knows the formats 'hdf5', 'csv' and 'png', got {format!r}")
    _assert_unchanged(fieldset, before[0], "fieldset")
    _assert_unchanged(reference, before[1], "reference")
    return result
