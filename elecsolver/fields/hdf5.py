"""HDF5 writer and reader of a :class:`~elecsolver.fields.FieldSet` plus an XDMF 3 sidecar (schema version 2).

Layout of ``fields.h5`` (every dataset has a string ``units`` attribute; ``"1"`` = dimensionless)::

    /                         root attrs: schema_version=2, package_version, json_attrs (JSON list of
                              the attrs stored as JSON strings), user attrs (str/int/float/bool as
                              they are, dict/list/tuple as JSON strings)
    /coords/x, /coords/y, /coords/z  [n] float64, "m"   grid sites: the axes present (1, 2 or 3)
    /coords/t                 [nt] float64, "s"          time series only (absent: static fields)
    /mesh/points              [M, d] float64, "m"        mesh sites (instead of /coords/x..z)
    /mesh/cells/<type>        [K, nodes] int64, "1"      one per meshio cell type, in the given order
    /mask                     [*site shape] uint8, "1"   1 inside the domain, 0 outside (if a mask is given)
    /fields/<name>            [nt, *site shape]          real field, float32 or float64 as given;
                                                         site shape (nx,), (ny, nx), (nz, ny, nx) or (M,);
                                                         no nt axis for static fields
    /fields/<name>            [nt, *site shape, 2]       complex field: real and imaginary parts on a last
                                                         axis (float32 for complex64, float64 for
                                                         complex128), attribute complex=1 (int8)
    /reference/<name>         same as /fields            only when a reference is given
    /xdmf/points              [S, 3] float64, "m"        grid sites (and 1-D meshes) as (x, y, z) padded
                                                         with 0; point index = C order of the site shape
    /xdmf/cells               int64, "1"                 grid cells ([C, 2] lines in 1-D, [C, 4] counter-
                                                         clockwise quads in 2-D, [C, 8] hexahedra in 3-D),
                                                         or the 1-D XDMF "Mixed" array of a mesh with
                                                         several cell types
    /xdmf/<attr>/<k:04d>      [S]                        what ParaView and meshio read, one per time step
                                                         (0000 only for static fields)
    /xdmf/mask                [S] uint8                  view of /mask (if a mask is given)
    /parameters/<name>        [1] float64, its unit      the configuration of a family the fields belong to
                                                         (FieldSet.parameters), one dataset per parameter

The ``/xdmf/<attr>`` datasets are HDF5 virtual datasets over ``/fields`` and ``/reference`` whose
source file is ``"."`` (the same file), so they cost no storage and stay valid when the file is
moved; the only stored ones are ``<name>_abs`` (``|value|`` of a complex field).  They exist
because ``meshio.xdmf.TimeSeriesReader`` (meshio 5.3.5) reads an HDF DataItem as the *whole*
dataset it names: it understands neither HyperSlab nor Function DataItems
(https://github.com/nschloe/meshio/blob/main/src/meshio/xdmf/time_series.py), so every step needs
a 1-D dataset of its own.  Attribute names: ``<name>`` for a real field, ``<name>_re``,
``<name>_im``, ``<name>_abs`` for a complex one, the same with ``_ref`` after the name for the
reference (``Ex_ref``, ``Ez_ref_abs``), and ``mask``.

The sidecar ``fields.xdmf`` (XDMF 3, https://www.xdmf.org/index.php/XDMF_Model_and_Format) is a
Temporal collection with one Uniform grid per time step (one grid at Time 0 for static fields);
each grid has its own Topology (Polyline with NodesPerElement 2, Quadrilateral, Hexahedron, the
mesh's cell type, or Mixed) and Geometry (XYZ; XY for 2-D mesh points, read from /mesh/points),
a ``Time`` in seconds and one nodal ``Attribute`` per view, and for a family one ``Information`` element per
parameter of the configuration (``Name="x0" Value="0.42 m"``; one file is one configuration).  HDF paths in it are the ``.h5`` file
name only (relative to the ``.xdmf``), so the pair opens from any working directory.  The masked-
out sites keep their values (the file round-trips exactly); threshold on ``mask`` in ParaView.

Changes from schema version 1 (2-D grids with real fields only, written by
``elecsolver.io.hdf5.write_fields``; meshes by ``elecsolver.io.mesh_output`` with meshio's
``/data<i>`` datasets, ``/coords/points`` and ``/cells/<type>``):

* 1-D grids (Polyline cells, points (x, 0, 0)) and 3-D grids (``/coords/z``, hexahedra);
* mesh sites as ``/mesh/points`` and ``/mesh/cells/<type>`` (any number of cell types);
* complex fields (last axis of 2, attribute ``complex`` = 1; ``_re``/``_im``/``_abs`` views);
* ``/mask`` and its ``mask`` view;
* static fields on any sites (one grid at Time 0), as version 1 did for 2-D grids.

For a real time series on a 2-D grid the layout is that of version 1 (same datasets, shapes and
attributes); only ``schema_version`` is 2, and coordinates are always float64.  :func:`read_hdf5`
reads versions 1 and 2.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

import h5py
import numpy as np

from elecsolver._version import __version__
from elecsolver.io.atomic import atomic_path

from .fieldset import FieldSet, check_matching
from .sites import AXIS_NAMES, GridSites, MeshSites, Sites

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION", "decode_attrs", "encode_attrs", "read_hdf5", "write_hdf5"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
RESERVED_ATTRS = ("schema_version", "package_version", "json_attrs")
SUFFIXES = (".h5", ".hdf5")
_XDMF_DTYPE = {"float32": ("Float", "4"), "float64": ("Float", "8"), "int64": ("Int", "8"),
               "uint8": ("UChar", "1")}
# XDMF 3 topology name and the type number that precedes each cell in a "Mixed" topology
# (XDMF model, section Topology; numbers as in XdmfTopologyType.cpp and meshio/xdmf/common.py)
_XDMF_TOPOLOGY = {"vertex": ("Polyvertex", 1), "line": ("Polyline", 2), "triangle": ("Triangle", 4),
                  "quad": ("Quadrilateral", 5), "tetra": ("Tetrahedron", 6), "pyramid": ("Pyramid", 7),
                  "wedge": ("Wedge", 8), "hexahedron": ("Hexahedron", 9)}


# --- root attributes ------------------------------------------------------------------------------
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, pathlib.PurePath):
        return str(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable")


def encode_attrs(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Check user attrs and return (attrs ready for h5py, names of those stored as JSON strings).

    Raises
    ------
    ValueError
        If ``attrs`` is not a dict, a key is empty, reserved (``schema_version``,
        ``package_version``, ``json_attrs``) or not a str, or a value is not str/int/float/bool or
        a JSON-serialisable dict/list/tuple (numpy scalars and arrays inside are converted).
    """
    try:
        attrs = dict(attrs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attrs must be a dict, got {type(attrs).__name__}") from exc
    out: dict[str, Any] = {}
    json_keys = []
    for key, value in attrs.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"attrs keys must be non-empty strings, got {key!r}")
        if key in RESERVED_ATTRS:
            raise ValueError(f"attrs[{key!r}] is set by the writer itself; remove it from attrs")
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


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def decode_attrs(h5: h5py.File) -> dict[str, Any]:
    """Root attributes as Python values (JSON ones decoded), including schema_version and package_version."""
    json_keys = set(json.loads(h5.attrs.get("json_attrs", "[]")))
    return {key: json.loads(value) if key in json_keys else _plain(value)
            for key, value in h5.attrs.items() if key != "json_attrs"}


# --- geometry and topology ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Item:
    """An HDF DataItem of the XDMF file: dataset path, XDMF dimensions and numpy dtype name."""

    path: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class _Topology:
    topology_type: str
    n_cells: int
    cells: _Item
    geometry_type: str
    points: _Item
    nodes_per_element: int | None = None


def grid_cells(shape: tuple[int, ...]) -> tuple[str, np.ndarray]:
    """meshio cell type and int64 connectivity of a grid of site shape (nx,), (ny, nx) or (nz, ny, nx).

    Lines ``[nx-1, 2]``; counter-clockwise quads ``[(ny-1)*(nx-1), 4]``; hexahedra
    ``[(nz-1)*(ny-1)*(nx-1), 8]`` in VTK/XDMF node order (bottom face counter-clockwise, then top).
    Node indices are the C order of ``shape``.
    """
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)

    def corner(*offsets: int) -> np.ndarray:  # offsets per axis of idx, i.e. (.., dj, di)
        return idx[tuple(slice(o, n - 1 + o) for o, n in zip(offsets, shape))]

    if len(shape) == 1:
        corners, ctype = [corner(0), corner(1)], "line"
    elif len(shape) == 2:
        corners, ctype = [corner(0, 0), corner(0, 1), corner(1, 1), corner(1, 0)], "quad"
    else:
        bottom = [(0, 0), (0, 1), (1, 1), (1, 0)]
        corners = [corner(k, j, i) for k in (0, 1) for j, i in bottom]
        ctype = "hexahedron"
    return ctype, np.stack(corners, axis=-1).reshape(-1, len(corners))


def _mixed(cells: Mapping[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """The XDMF Mixed topology array: per cell its type number (lines and vertices also their node
    count), then its nodes."""
    parts = []
    for ctype, block in cells.items():
        number = _XDMF_TOPOLOGY[ctype][1]
        head = [number, block.shape[1]] if ctype in ("line", "vertex") else [number]
        parts.append(np.column_stack([np.tile(np.asarray(head, np.int64), (len(block), 1)), block]).ravel())
    return np.concatenate(parts), sum(len(b) for b in cells.values())


def _padded(coords: np.ndarray) -> np.ndarray:
    return np.column_stack([coords, np.zeros((len(coords), 3 - coords.shape[1]))])


def _dataset(h5: h5py.File, path: str, data: np.ndarray, units: str) -> _Item:
    h5.create_dataset(path, data=data).attrs["units"] = units
    return _Item(f"/{path}", data.shape, data.dtype.name)


def _single(ctype: str, cells: np.ndarray, cell_item: _Item, points: _Item, geometry: str) -> _Topology:
    """The topology of one cell block (Polyline/Polyvertex also need NodesPerElement)."""
    per_element = cells.shape[1] if ctype in ("line", "vertex") else None
    return _Topology(_XDMF_TOPOLOGY[ctype][0], len(cells), cell_item, geometry, points, per_element)


def _write_sites(h5: h5py.File, sites: Sites) -> _Topology:
    """Write the site datasets and the /xdmf points and cells; return what the XDMF Topology/Geometry read."""
    if isinstance(sites, GridSites):
        for name, axis in sites.axes.items():
            _dataset(h5, f"coords/{name}", axis, "m")
        ctype, cells = grid_cells(sites.shape)
        points = _dataset(h5, "xdmf/points", _padded(sites.coordinates()), "m")
        return _single(ctype, cells, _dataset(h5, "xdmf/cells", cells, "1"), points, "XYZ")
    points, geometry = _dataset(h5, "mesh/points", sites.points, "m"), ("XYZ", "XY", "XYZ")[sites.dim - 1]
    if sites.dim == 1:  # XDMF has no 1-D geometry: pad to (x, 0, 0)
        points = _dataset(h5, "xdmf/points", _padded(sites.points), "m")
    h5.create_group("mesh/cells", track_order=True)
    items = {ctype: _dataset(h5, f"mesh/cells/{ctype}", block, "1") for ctype, block in sites.cells.items()}
    if len(items) == 1:
        (ctype, cells), = sites.cells.items()
        return _single(ctype, cells, items[ctype], points, geometry)
    flat, count = _mixed(sites.cells)
    return _Topology("Mixed", count, _dataset(h5, "xdmf/cells", flat, "1"), geometry, points)


# --- fields and their views -----------------------------------------------------------------------
@dataclass(frozen=True)
class _View:
    """One nodal XDMF Attribute: its name and the dataset it reads at each step."""

    name: str
    group: str
    dtype: str
    per_step: bool = True

    def item(self, k: int, size: int) -> _Item:
        return _Item(f"/{self.group}/{k:04d}" if self.per_step else f"/{self.group}", (size,), self.dtype)


def _view_names(fs: FieldSet, reference: FieldSet | None) -> list[str]:
    names = []
    for suffix, fset in (("", fs), ("_ref", reference)):
        for name in (fset.names if fset is not None else ()):
            base = name + suffix
            names += [f"{base}_re", f"{base}_im", f"{base}_abs"] if fset.is_complex(name) else [base]
    return names + (["mask"] if fs.mask is not None else [])


def _check_view_names(fs: FieldSet, reference: FieldSet | None) -> None:
    names = _view_names(fs, reference)
    seen, clash = set(), []
    for name in names:
        if name in seen or name in ("points", "cells"):
            clash.append(name)
        seen.add(name)
    if clash:
        raise ValueError(f"the XDMF attribute names {sorted(set(clash))} clash (with each other, with "
                         f"'<name>_ref', '_re', '_im', '_abs', 'mask', or with 'points'/'cells'); "
                         f"rename the fields")


def _add_views(h5: h5py.File, view: str, source: str, shape: tuple[int, ...], dtype: np.dtype, units: str,
               static: bool, size: int, part: int | None = None) -> None:
    """Virtual datasets ``view/<k:04d>`` [size] = ``source[k]`` flattened (``source`` itself for static
    fields); ``part`` selects on the last axis (0: real, 1: imaginary part of a complex field)."""
    src = h5py.VirtualSource(".", source, shape=shape, dtype=dtype)
    site_dims = len(shape) - (0 if static else 1) - (0 if part is None else 1)
    for k in range(1 if static else shape[0]):
        sel = (() if static else (k,)) + (slice(None),) * site_dims + (() if part is None else (part,))
        layout = h5py.VirtualLayout(shape=(size,), dtype=dtype)
        layout[:] = src[sel] if sel else src
        h5.create_virtual_dataset(f"{view}/{k:04d}", layout).attrs["units"] = units


def _write_field(h5: h5py.File, group: str, name: str, view: str, arr: np.ndarray, units: str,
                 static: bool) -> list[_View]:
    """Write ``/group/name`` and its /xdmf views; return the views."""
    size = int(np.prod(arr.shape[0 if static else 1:]))
    if arr.dtype.kind != "c":
        h5.create_dataset(f"{group}/{name}", data=arr).attrs["units"] = units
        _add_views(h5, f"xdmf/{view}", f"/{group}/{name}", arr.shape, arr.dtype, units, static, size)
        return [_View(view, f"xdmf/{view}", arr.dtype.name)]
    real = np.dtype(arr.real.dtype)
    parts = arr.view(real).reshape(*arr.shape, 2)
    ds = h5.create_dataset(f"{group}/{name}", data=parts)
    ds.attrs.update({"units": units, "complex": np.int8(1)})
    views = []
    for part, suffix in ((0, "_re"), (1, "_im")):
        _add_views(h5, f"xdmf/{view}{suffix}", f"/{group}/{name}", parts.shape, real, units, static, size,
                   part)
        views.append(_View(view + suffix, f"xdmf/{view}{suffix}", real.name))
    magnitude = np.abs(arr) if not static else np.abs(arr)[None]
    for k, values in enumerate(magnitude):
        h5.create_dataset(f"xdmf/{view}_abs/{k:04d}", data=values.ravel()).attrs["units"] = units
    return views + [_View(view + "_abs", f"xdmf/{view}_abs", real.name)]


def _write_mask(h5: h5py.File, mask: np.ndarray) -> _View:
    h5.create_dataset("mask", data=mask.astype(np.uint8)).attrs["units"] = "1"
    src = h5py.VirtualSource(".", "/mask", shape=mask.shape, dtype=np.uint8)
    layout = h5py.VirtualLayout(shape=(mask.size,), dtype=np.uint8)
    layout[:] = src
    h5.create_virtual_dataset("xdmf/mask", layout).attrs["units"] = "1"
    return _View("mask", "xdmf/mask", "uint8", per_step=False)


# --- the XDMF document ----------------------------------------------------------------------------
def _data_item(parent: ET.Element, h5_name: str, item: _Item) -> None:
    data_type, precision = _XDMF_DTYPE[item.dtype]
    el = ET.SubElement(parent, "DataItem", DataType=data_type, Dimensions=" ".join(map(str, item.shape)),
                       Format="HDF", Precision=precision)
    el.text = f"{h5_name}:{item.path}"


def _xdmf_tree(h5_name: str, times: np.ndarray, size: int, topology: _Topology,
               views: list[_View], parameters: Mapping[str, tuple[float, str]] | None = None) -> ET.ElementTree:
    """Build the XDMF 3 document: a Temporal collection, one Uniform grid per time."""
    root = ET.Element("Xdmf", Version="3.0")
    series = ET.SubElement(ET.SubElement(root, "Domain"), "Grid", Name="TimeSeries", GridType="Collection",
                           CollectionType="Temporal")
    for k, tk in enumerate(times):
        grid = ET.SubElement(series, "Grid", Name=f"step_{k:04d}", GridType="Uniform")
        topo = ET.SubElement(grid, "Topology", TopologyType=topology.topology_type,
                             NumberOfElements=str(topology.n_cells))
        if topology.nodes_per_element is not None:
            topo.set("NodesPerElement", str(topology.nodes_per_element))
        _data_item(topo, h5_name, topology.cells)
        _data_item(ET.SubElement(grid, "Geometry", GeometryType=topology.geometry_type), h5_name,
                   topology.points)
        ET.SubElement(grid, "Time", Value=repr(float(tk)))
        for view in views:
            att = ET.SubElement(grid, "Attribute", Name=view.name, AttributeType="Scalar", Center="Node")
            _data_item(att, h5_name, view.item(k, size))
        for name, (value, unit) in (parameters or {}).items():  # the configuration (meshio skips Information elements)
            ET.SubElement(grid, "Information", Name=name, Value=f"{value!r} {unit}")
    ET.indent(root)
    return ET.ElementTree(root)


# --- write and read -------------------------------------------------------------------------------
def check_path(path: pathlib.Path) -> None:
    """Raise ValueError unless ``path`` ends with .h5/.hdf5 and has no ':' in its name (XDMF: file:path)."""
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"path must end with .h5 or .hdf5, got {str(path)!r}")
    if ":" in path.name:
        raise ValueError(f"the file name must not contain ':' (XDMF uses 'file:dataset'), got {path.name!r}")


def write_hdf5(fieldset: FieldSet, path: str | os.PathLike, *, reference: FieldSet | None = None,
               attrs: Mapping[str, Any] | None = None) -> list[pathlib.Path]:
    """Write ``fieldset`` (and ``reference``) to ``path`` (HDF5) and ``path.with_suffix(".xdmf")`` (XDMF 3).

    The layout is described in this module's docstring.  Both files are written under temporary
    names in the destination folder (:func:`elecsolver.io.atomic.atomic_path`, which also gives
    them the umask's mode) and moved into place when complete, the ``.h5`` first: on any error
    nothing new remains at the final names and existing files are left as they were.

    Parameters
    ----------
    fieldset : FieldSet
        The fields; grid axes need >= 2 values each (the XDMF cells).
    path : str or os.PathLike
        Destination ``.h5``/``.hdf5``; its folder is created if missing.
    reference : FieldSet, optional
        Reference solution: same sites, times, field names and units; its mask None or the same.
    attrs : dict, optional
        Root attributes: str, int, float, bool as they are, dict/list/tuple as JSON strings (listed
        in the root attribute ``json_attrs``).  ``schema_version`` and ``package_version`` are added.

    Returns
    -------
    list of pathlib.Path
        ``[path, path.with_suffix(".xdmf")]``.

    Raises
    ------
    ValueError
        For a bad suffix or a ``:`` in the name, a grid axis with 1 value, a reference that does not
        match, XDMF attribute names that clash, or attrs that cannot be stored.  Nothing is written.
    OSError
        If the files cannot be written; no partial or temporary files remain.
    """
    path = pathlib.Path(path)
    check_path(path)
    if isinstance(fieldset.sites, GridSites) and min(fieldset.sites.shape) < 2:
        raise ValueError(f"the HDF5/XDMF writer needs >= 2 values on every grid axis (to form cells), "
                         f"got site shape {list(fieldset.sites.shape)}")
    if reference is not None:
        check_matching(fieldset, reference, "reference")
    if reference is not None and reference.mask is not None and not (
            fieldset.mask is not None and np.array_equal(reference.mask, fieldset.mask)):
        raise ValueError("reference.mask must be None or the same as fieldset.mask (one /mask is stored)")
    _check_view_names(fieldset, reference)
    root_attrs, json_keys = encode_attrs(attrs or {})

    path.parent.mkdir(parents=True, exist_ok=True)
    xdmf_path = path.with_suffix(".xdmf")
    times = np.zeros(1) if fieldset.static else fieldset.times
    # the .h5 context is the inner one, so it is moved into place first, then the .xdmf
    with atomic_path(xdmf_path) as xdmf_tmp, atomic_path(path) as h5_tmp:
        with h5py.File(h5_tmp, "w", track_order=True) as h5:
            h5.attrs["schema_version"] = SCHEMA_VERSION
            h5.attrs["package_version"] = __version__
            h5.attrs["json_attrs"] = json.dumps(json_keys)
            for key, value in root_attrs.items():
                h5.attrs[key] = value
            topology = _write_sites(h5, fieldset.sites)
            if not fieldset.static:
                h5.create_dataset("coords/t", data=fieldset.times).attrs["units"] = "s"
            views = []
            for group, suffix, fs in (("fields", "", fieldset), ("reference", "_ref", reference)):
                if fs is None:
                    continue
                h5.create_group(group, track_order=True)
                for name, arr in fs.fields.items():
                    views += _write_field(h5, group, name, name + suffix, arr, fs.units[name], fs.static)
            if fieldset.mask is not None:
                views.append(_write_mask(h5, fieldset.mask))
            for name, value in fieldset.parameters.items():
                h5.create_dataset(f"parameters/{name}", data=np.array([value])).attrs["units"] = \
                    fieldset.units[name]
        _xdmf_tree(path.name, times, fieldset.sites.size, topology, views,
                   {k: (v, fieldset.units[k]) for k, v in fieldset.parameters.items()}).write(
            xdmf_tmp, encoding="utf-8", xml_declaration=True)
    logger.info("wrote %s and %s (%s, fields %s)", path, xdmf_path, fieldset.sites, list(fieldset.names))
    return [path, xdmf_path]


def _read_sites(h5: h5py.File) -> tuple[Sites, dict[str, str]]:
    if "mesh" in h5 or "coords/points" in h5:  # version 2, or version 1 as written by io.mesh_output
        points = h5["mesh/points"] if "mesh" in h5 else h5["coords/points"]
        group = h5["mesh/cells"] if "mesh" in h5 else h5.get("cells")
        if group is None:
            raise ValueError("this version-1 mesh file has several cell types and no /cells group; "
                             "read it with meshio.xdmf.TimeSeriesReader")
        sites: Sites = MeshSites(points[()], {ctype: ds[()] for ctype, ds in group.items()})
        unit = str(points.attrs.get("units", "m"))
        return sites, {name: unit for name in sites.names}
    axes = {name: h5[f"coords/{name}"] for name in AXIS_NAMES if f"coords/{name}" in h5}
    units = {n: str(ds.attrs["units"]) for n, ds in axes.items()}
    return GridSites({n: ds[()] for n, ds in axes.items()}), units


def _read_fields(group: h5py.Group) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    fields, units = {}, {}
    for name, ds in group.items():
        values = ds[()]
        if int(ds.attrs.get("complex", 0)):
            complex_dtype = np.result_type(values.dtype, np.complex64)
            values = np.ascontiguousarray(values).view(complex_dtype)[..., 0]
        fields[name], units[name] = values, str(ds.attrs["units"])
    return fields, units


def read_hdf5(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by :func:`write_hdf5` (schema version 2) or by the version-1 writers.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.h5`` file.

    Returns
    -------
    dict
        ``{"fieldset": FieldSet, "reference": FieldSet or None, "attrs": dict}``.  Field dtypes are
        the stored ones (complex fields come back complex64/complex128); coordinates are float64;
        the reference has the fieldset's mask.  ``attrs`` holds the root attributes with JSON ones
        decoded, including ``schema_version`` and ``package_version``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not an elecsolver output file of schema version 1 or 2.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    with h5py.File(path, "r") as h5:
        version = _plain(h5.attrs.get("schema_version"))
        if version not in READABLE_VERSIONS or "fields" not in h5:
            raise ValueError(f"{str(path)!r} is not an elecsolver output file of schema version "
                             f"{' or '.join(map(str, READABLE_VERSIONS))} (schema_version={version!r})")
        attrs = decode_attrs(h5)
        sites, units = _read_sites(h5)
        times = h5["coords/t"][()] if "coords/t" in h5 else None
        if times is not None:
            units["t"] = str(h5["coords/t"].attrs["units"])
        mask = h5["mask"][()].astype(bool) if "mask" in h5 else None
        fields, field_units = _read_fields(h5["fields"])
        reference = _read_fields(h5["reference"]) if "reference" in h5 else None
        parameters = {name: float(ds[0]) for name, ds in h5["parameters"].items()} if "parameters" in h5 else {}
        units.update({name: str(ds.attrs["units"]) for name, ds in h5["parameters"].items()} if parameters else {})
    fieldset = FieldSet(sites, fields, {**units, **field_units}, times=times, mask=mask, parameters=parameters)
    if reference is not None:
        reference = FieldSet(sites, reference[0], {**units, **reference[1]}, times=times, mask=mask,
                             parameters=parameters)
    return {"fieldset": fieldset, "reference": reference, "attrs": attrs}
