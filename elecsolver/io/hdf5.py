"""The package's output file: HDF5 (schema version 1) with an XDMF 3 sidecar.

Layout of ``fields.h5``::

    /                       root attrs: schema_version=1, package_version, user attrs
    /coords/x  [nx]         units "m"      (any real float dtype, stored as given)
    /coords/y  [ny]         units "m"
    /coords/t  [nt]         units "s"     (absent for a static or time-harmonic problem)
    /fields/<name>     [nt, ny, nx]   units of the field ([ny, nx] when there is no t)
    /reference/<name>  [nt, ny, nx]   (only when a reference was given)
    /xdmf/points       [ny*nx, 3] float64, (x, y, 0); point index = j*nx + i for (x[i], y[j])
    /xdmf/cells        [(ny-1)*(nx-1), 4] int64, quadrilaterals, counter-clockwise
    /xdmf/<name>/<k:04d>       [ny*nx] virtual dataset = /fields/<name>[k] flattened
    /xdmf/<name>_ref/<k:04d>   [ny*nx] virtual dataset = /reference/<name>[k] flattened

The ``/xdmf`` views are HDF5 virtual datasets whose source file is ``"."`` (the
same file), so they cost no storage and stay valid when the file is moved.  They
exist because ``meshio.xdmf.TimeSeriesReader`` (meshio 5.3.5) reads an HDF
DataItem as the *whole* dataset it names: it understands neither HyperSlab nor
Function DataItems, so every step needs a dataset of its own.

The sidecar ``fields.xdmf`` is a Temporal collection with one Uniform grid per
time step; each step grid carries its own Topology/Geometry DataItems (pointing
at the shared ``/xdmf/points`` and ``/xdmf/cells``), a ``Time`` in seconds and
one nodal ``Attribute`` per field.  HDF paths are written relative to the
``.xdmf`` (file name only), so the pair opens from any working directory.
Without a t coordinate (static or time-harmonic fields) the collection holds one
grid at Time 0, so the same readers open it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import re
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any
from xml.etree import ElementTree as ET

import h5py
import numpy as np

import elecsolver

__all__ = ["SCHEMA_VERSION", "read_fields", "write_fields"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_RESERVED_ATTRS = ("schema_version", "package_version", "json_attrs")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_XDMF_DTYPE = {"float32": ("Float", "4"), "float64": ("Float", "8"), "int64": ("Int", "8")}


@contextlib.contextmanager
def _atomic_file(final: pathlib.Path) -> Iterator[pathlib.Path]:
    """Yield a temporary path next to ``final``; move it to ``final`` on success.

    On an exception the temporary file is removed and ``final`` is left untouched.
    """
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp = pathlib.Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _check_coord(name: str, values: Any, min_len: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] < min_len:
        raise ValueError(f"coords[{name!r}] must be a 1-D array with at least {min_len} values, "
                         f"got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"coords[{name!r}] must be real numbers, got dtype {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(np.diff(arr) <= 0):
        raise ValueError(f"coords[{name!r}] must be finite and strictly increasing")
    return arr


def _check_fields(what: str, fields: Mapping[str, Any], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    dims = "[nt, ny, nx]" if len(shape) == 3 else "[ny, nx]"
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"{what} must be a non-empty dict {{name: array {dims}}}")
    out = {}
    for name, values in fields.items():
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"{what} name {name!r} must be an identifier (letters, digits, '_')")
        arr = np.asarray(values)
        if arr.shape != shape:
            raise ValueError(f"{what}[{name!r}] must have shape {dims} = {list(shape)}, "
                             f"got {list(arr.shape)}")
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"{what}[{name!r}] must be real numbers, got dtype {arr.dtype}")
        if arr.dtype.name not in ("float32", "float64"):
            arr = arr.astype(np.float64)
        out[name] = arr
    return out


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, pathlib.PurePath):
        return str(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable")


def _encode_attrs(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Return (attrs ready for h5py, names of the attrs stored as JSON)."""
    try:
        attrs = dict(attrs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attrs must be a dict, got {type(attrs).__name__}") from exc
    out: dict[str, Any] = {}
    json_keys = []
    for key, value in attrs.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"attrs keys must be non-empty strings, got {key!r}")
        if key in _RESERVED_ATTRS:
            raise ValueError(f"attrs[{key!r}] is set by write_fields itself; remove it from attrs")
        if isinstance(value, np.generic):
            value = value.item()
        as_json = isinstance(value, (dict, list, tuple))
        if not as_json and not isinstance(value, (str, bool, int, float)):
            raise ValueError(f"attrs[{key!r}] must be a str, int, float, bool, dict or list, "
                             f"got {type(value).__name__}")
        if as_json:
            try:
                value = json.dumps(value, default=_json_default, allow_nan=True)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"attrs[{key!r}] cannot be stored as JSON: {exc}") from exc
            json_keys.append(key)
        out[key] = value
    return out, json_keys


def _grid(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points [ny*nx, 3] (index j*nx + i) and counter-clockwise quads [(ny-1)*(nx-1), 4]."""
    nx, ny = x.size, y.size
    xx, yy = np.meshgrid(x.astype(np.float64), y.astype(np.float64))
    points = np.stack([xx.ravel(), yy.ravel(), np.zeros(nx * ny)], axis=1)
    idx = np.arange(nx * ny, dtype=np.int64).reshape(ny, nx)
    cells = np.stack([idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]], axis=-1).reshape(-1, 4)
    return points, cells


def _add_view(h5: h5py.File, view: str, source: str, shape: tuple[int, ...], dtype: np.dtype,
              units: str) -> None:
    """Create one virtual dataset per step: ``view/<k:04d>`` = ``source[k]`` flattened
    (``source`` itself for a static [ny, nx] field, step 0000)."""
    ny, nx = shape[-2:]
    src = h5py.VirtualSource(".", source, shape=shape, dtype=dtype)
    for k in range(shape[0] if len(shape) == 3 else 1):
        layout = h5py.VirtualLayout(shape=(ny * nx,), dtype=dtype)
        layout[:] = src[k] if len(shape) == 3 else src
        h5.create_virtual_dataset(f"{view}/{k:04d}", layout).attrs["units"] = units


def _data_item(parent: ET.Element, h5_name: str, dataset: str, shape: tuple[int, ...], dtype: str) -> None:
    data_type, precision = _XDMF_DTYPE[dtype]
    item = ET.SubElement(parent, "DataItem", DataType=data_type, Dimensions=" ".join(map(str, shape)),
                         Format="HDF", Precision=precision)
    item.text = f"{h5_name}:{dataset}"


def _xdmf_tree(h5_name: str, t: np.ndarray, npts: int, ncells: int,
               views: Mapping[str, tuple[str, str]]) -> ET.ElementTree:
    """Build the XDMF 3 document; ``views`` maps attribute name -> (/xdmf group, dtype name)."""
    root = ET.Element("Xdmf", Version="3.0")
    domain = ET.SubElement(root, "Domain")
    series = ET.SubElement(domain, "Grid", Name="TimeSeries", GridType="Collection",
                           CollectionType="Temporal")
    for k, tk in enumerate(t):
        grid = ET.SubElement(series, "Grid", Name=f"step_{k:04d}", GridType="Uniform")
        topo = ET.SubElement(grid, "Topology", TopologyType="Quadrilateral", NumberOfElements=str(ncells))
        _data_item(topo, h5_name, "/xdmf/cells", (ncells, 4), "int64")
        geo = ET.SubElement(grid, "Geometry", GeometryType="XYZ")
        _data_item(geo, h5_name, "/xdmf/points", (npts, 3), "float64")
        ET.SubElement(grid, "Time", Value=repr(float(tk)))
        for name, (group, dtype) in views.items():
            att = ET.SubElement(grid, "Attribute", Name=name, AttributeType="Scalar", Center="Node")
            _data_item(att, h5_name, f"{group}/{k:04d}", (npts,), dtype)
    ET.indent(root)
    return ET.ElementTree(root)


def write_fields(path: str | os.PathLike, *, coords: Mapping[str, Any], fields: Mapping[str, Any],
                 reference: Mapping[str, Any] | None = None, units: Mapping[str, str],
                 attrs: Mapping[str, Any]) -> pathlib.Path:
    """Write fields on a structured (x, y, t) or (x, y) grid to HDF5 plus an XDMF sidecar.

    Both files are written to temporary names in the destination folder and moved
    into place with :func:`os.replace` once complete, so a reader never sees a
    half-written file and an existing file is replaced only by a complete one.

    Parameters
    ----------
    path : str or os.PathLike
        Destination ``.h5``/``.hdf5`` file, e.g. ``out/fields.h5``.  The folder is
        created if missing.  The sidecar is written to ``path.with_suffix(".xdmf")``.
    coords : dict
        ``{"x": [nx], "y": [ny], "t": [nt]}`` 1-D real arrays in m, m, s; finite and
        strictly increasing; ``nx, ny >= 2``, ``nt >= 1``.  Float dtypes are stored
        as given, integers as float64.  Without ``"t"`` (static or time-harmonic
        fields) the fields are [ny, nx].
    fields : dict of str to array_like
        ``{name: [nt, ny, nx]}`` (or ``[ny, nx]`` without t), real values; float32/float64 stored as given,
        other real dtypes as float64.  Names must be identifiers (``Ex``, ``Hz``).
    reference : dict of str to array_like, optional
        Reference solution with exactly the same names and shapes as ``fields``.
    units : dict of str to str
        Unit string for ``"x"``, ``"y"``, ``"t"`` and every field name, e.g.
        ``{"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Hz": "A/m"}``.  Stored as
        the ``units`` attribute of each dataset.
    attrs : dict
        Root attributes.  dict/list/tuple values are stored as JSON strings (numpy
        scalars and arrays inside them are converted); str, int, float and bool
        values as they are.  ``schema_version`` (1) and ``package_version`` are
        added automatically and must not be given.

    Returns
    -------
    pathlib.Path
        The path of the written ``.h5`` file.

    Raises
    ------
    ValueError
        For a wrong suffix or a ``:`` in the file name (XDMF uses ``file:dataset``),
        missing/ill-shaped coords, fields of the wrong shape or dtype, reference
        names differing from the field names, missing units, or attrs that cannot
        be stored.  Nothing is written in that case.
    OSError
        If the files cannot be written; no partial or temporary files remain.
    """
    path = pathlib.Path(path)
    if path.suffix not in (".h5", ".hdf5"):
        raise ValueError(f"path must end with .h5 or .hdf5, got {str(path)!r}")
    if ":" in path.name:
        raise ValueError(f"the file name must not contain ':' (XDMF uses 'file:dataset'), got {path.name!r}")
    if not isinstance(coords, Mapping) or set(coords) not in ({"x", "y", "t"}, {"x", "y"}):
        raise ValueError("coords must be a dict with exactly the keys 'x', 'y' and 't' (or 'x' and 'y' for "
                         "static fields)")
    x = _check_coord("x", coords["x"], 2)
    y = _check_coord("y", coords["y"], 2)
    static = "t" not in coords
    t = np.zeros(1) if static else _check_coord("t", coords["t"], 1)
    shape = (y.size, x.size) if static else (t.size, y.size, x.size)
    fields_ = _check_fields("fields", fields, shape)
    reference_ = None
    if reference is not None:
        reference_ = _check_fields("reference", reference, shape)
        if set(reference_) != set(fields_):
            raise ValueError(f"reference must have the same names as fields: {sorted(fields_)}, "
                             f"got {sorted(reference_)}")
        clash = sorted(set(fields_) & {f"{n}_ref" for n in fields_})
        if clash:
            raise ValueError(f"field names {clash} clash with the '<name>_ref' reference views; rename them")
    needed = ("x", "y", *(() if static else ("t",)), *fields_)
    missing = [k for k in needed if not isinstance(units, Mapping) or not isinstance(units.get(k), str)]
    if missing:
        raise ValueError(f"units must be a dict with a unit string for each of {missing}")
    root_attrs, json_keys = _encode_attrs(attrs)

    path.parent.mkdir(parents=True, exist_ok=True)
    xdmf_path = path.with_suffix(".xdmf")
    points, cells = _grid(x, y)
    views = {name: (f"/xdmf/{name}", arr.dtype.name) for name, arr in fields_.items()}
    if reference_ is not None:
        views.update({f"{n}_ref": (f"/xdmf/{n}_ref", a.dtype.name) for n, a in reference_.items()})

    # The .h5 context is the inner one, so it is moved into place first, then the .xdmf.
    with _atomic_file(xdmf_path) as xdmf_tmp, _atomic_file(path) as h5_tmp:
        with h5py.File(h5_tmp, "w") as h5:
            h5.attrs["schema_version"] = SCHEMA_VERSION
            h5.attrs["package_version"] = elecsolver.__version__
            h5.attrs["json_attrs"] = json.dumps(json_keys)
            for key, value in root_attrs.items():
                h5.attrs[key] = value
            for name, arr in (("x", x), ("y", y), ("t", t))[: 2 if static else 3]:
                h5.create_dataset(f"coords/{name}", data=arr).attrs["units"] = units[name]
            groups = [("fields", "", fields_)] + ([("reference", "_ref", reference_)] if reference_ else [])
            for group, suffix, data in groups:
                for name, arr in data.items():
                    h5.create_dataset(f"{group}/{name}", data=arr).attrs["units"] = units[name]
                    _add_view(h5, f"xdmf/{name}{suffix}", f"/{group}/{name}", shape, arr.dtype, units[name])
            h5.create_dataset("xdmf/points", data=points).attrs["units"] = units["x"]
            h5.create_dataset("xdmf/cells", data=cells).attrs["units"] = "1"
        _xdmf_tree(path.name, t, len(points), len(cells), views).write(
            xdmf_tmp, encoding="utf-8", xml_declaration=True)
    logger.info("wrote %s and %s (%d steps, fields %s)", path, xdmf_path, t.size, sorted(fields_))
    return path


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def read_fields(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by :func:`write_fields`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.h5`` file.

    Returns
    -------
    dict
        ``{"coords": {"x", "y", "t"}, "fields": {name: [nt, ny, nx]},
        "reference": {name: [nt, ny, nx]} or None, "units": {name: str},
        "attrs": {...}}`` (no "t" and fields [ny, nx] for static fields).  Arrays keep their stored dtype.  Attributes written as
        JSON (e.g. ``config``, ``scales``, ``metrics``) are decoded; numpy scalars
        are returned as Python scalars; ``attrs["schema_version"] == 1``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not an elecsolver output file of schema version 1.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    with h5py.File(path, "r") as h5:
        version = _plain(h5.attrs.get("schema_version"))
        if version != SCHEMA_VERSION or "coords" not in h5 or "fields" not in h5:
            raise ValueError(f"{str(path)!r} is not an elecsolver output file of schema version "
                             f"{SCHEMA_VERSION} (schema_version={version!r})")
        json_keys = set(json.loads(h5.attrs.get("json_attrs", "[]")))
        attrs = {}
        for key, value in h5.attrs.items():
            if key == "json_attrs":
                continue
            attrs[key] = json.loads(value) if key in json_keys else _plain(value)
        units = {}
        coords = {}
        for name, ds in h5["coords"].items():
            coords[name] = ds[()]
            units[name] = ds.attrs["units"]
        fields = {}
        for name, ds in h5["fields"].items():
            fields[name] = ds[()]
            units[name] = ds.attrs["units"]
        reference = {name: ds[()] for name, ds in h5["reference"].items()} if "reference" in h5 else None
    return {"coords": coords, "fields": fields, "reference": reference, "units": units, "attrs": attrs}
