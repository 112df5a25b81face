"""Fields on the nodes of an unstructured mesh: HDF5 plus an XDMF 3 time-series sidecar.

The pair is written by meshio's own :class:`meshio.xdmf.TimeSeriesWriter` (so
``meshio.xdmf.TimeSeriesReader`` reads it back and ParaView opens the ``.xdmf`` with its XDMF 3
reader), into a temporary folder next to the destination, and then moved into place.  Afterwards
the ``.h5`` is annotated with h5py.  Layout of ``fields.h5``::

    /                       root attrs: schema_version=1, package_version, json_attrs, user attrs
    /data0, /data1, ...     meshio's datasets (points, cells, then one per field and step), each
                            with a ``units`` attribute (fields also ``field``, ``step``, ``time_s``)
    /coords/points  [M, d]  hard link to meshio's points, units "m"
    /coords/t       [nt]    units "s"
    /cells/<type>   [C, k]  hard link to meshio's connectivity (single cell block only)
    /fields/<name>  [nt, M] virtual dataset over that field's per-step datasets, units of the field

The HDF5 references in the ``.xdmf`` are the ``.h5`` file name only (relative to the ``.xdmf``),
so the pair opens from any working directory and stays valid when the folder is moved.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree as ET

import h5py
import numpy as np

import elecsolver

from .hdf5 import SCHEMA_VERSION, _encode_attrs

__all__ = ["write_mesh_fields"]

logger = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# linear cell types meshio's XDMF writer knows, with their node counts
_NODES_PER_CELL = {"vertex": 1, "line": 2, "triangle": 3, "quad": 4, "tetra": 4, "pyramid": 5, "wedge": 6,
                   "hexahedron": 8, "line3": 3, "triangle6": 6, "quad8": 8, "quad9": 9, "tetra10": 10}


def _check_inputs(points, cells, times, fields, units):
    pts = np.asarray(points)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3) or pts.shape[0] < 1:
        raise ValueError(f"points must be an array [M, 2] or [M, 3] (m) with M >= 1, got shape {list(pts.shape)}")
    if pts.dtype.kind not in "fiu" or not np.all(np.isfinite(pts)):
        raise ValueError("points must be finite real numbers (m)")
    pts = np.ascontiguousarray(pts, dtype=np.float64)
    m = len(pts)

    if not isinstance(cells, Mapping) or not cells:
        raise ValueError('cells must be a non-empty dict {cell type: int array [C, k]}, e.g. {"triangle": tris}')
    blocks = []
    for ctype, data in cells.items():
        if ctype not in _NODES_PER_CELL:
            raise ValueError(f"unknown cell type {ctype!r}; use one of {sorted(_NODES_PER_CELL)}")
        arr = np.asarray(data)
        k = _NODES_PER_CELL[ctype]
        if arr.ndim != 2 or arr.shape[1] != k or len(arr) == 0 or arr.dtype.kind not in "iu":
            raise ValueError(f"cells[{ctype!r}] must be a non-empty int array [C, {k}], "
                             f"got {arr.dtype} {list(arr.shape)}")
        if arr.min() < 0 or arr.max() >= m:
            raise ValueError(f"cells[{ctype!r}] node indices must lie in [0, {m}) (0-based rows of points)")
        blocks.append((ctype, np.ascontiguousarray(arr, dtype=np.int64)))
    if len(blocks) > 1 and any(ct == "line" for ct, _ in blocks):
        raise ValueError("meshio's XDMF writer cannot mix 'line' cells with other cell types; "
                         "pass the line block alone or leave it out")

    t = np.asarray(times)
    if t.ndim != 1 or t.size < 1 or t.dtype.kind not in "fiu":
        raise ValueError(f"times must be a 1-D real array [nt] (s) with nt >= 1, got shape {list(t.shape)}")
    t = t.astype(np.float64)
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise ValueError("times must be finite and strictly increasing (s)")

    if not isinstance(fields, Mapping) or not fields:
        raise ValueError("fields must be a non-empty dict {name: array [nt, M]}")
    out = {}
    for name, values in fields.items():
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"field name {name!r} must be an identifier (letters, digits, '_')")
        arr = np.asarray(values)
        if arr.shape != (t.size, m):
            raise ValueError(f"fields[{name!r}] must have shape [nt, M] = {[t.size, m]} (one row per time, one "
                             f"column per mesh node), got {list(arr.shape)}")
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"fields[{name!r}] must be real numbers, got dtype {arr.dtype}")
        if arr.dtype.name not in ("float32", "float64"):
            arr = arr.astype(np.float64)
        out[name] = np.ascontiguousarray(arr)
    missing = [k for k in out if not isinstance(units, Mapping) or not isinstance(units.get(k), str)]
    if missing:
        raise ValueError(f"units must be a dict with a unit string for each field; missing {missing}")
    return pts, blocks, t, out


def _h5_refs(xdmf: pathlib.Path) -> list[ET.Element]:
    return [el for el in ET.parse(xdmf).getroot().iter("DataItem") if el.get("Format") == "HDF"]


def _relative_refs(xdmf: pathlib.Path, h5_name: str) -> None:
    """Make every HDF DataItem of ``xdmf`` read ``h5_name:/dataset`` (rewrite the file if needed)."""
    tree = ET.parse(xdmf)
    changed = False
    for el in tree.getroot().iter("DataItem"):
        if el.get("Format") != "HDF":
            continue
        file_part, _, dataset = el.text.strip().rpartition(":")
        if file_part != h5_name:
            el.text = f"{h5_name}:{dataset}"
            changed = True
    if changed:
        ET.register_namespace("xi", "http://www.w3.org/2003/XInclude")
        tree.write(xdmf, encoding="utf-8", xml_declaration=True)


def write_mesh_fields(path_h5: str | os.PathLike, *, points, cells: Mapping[str, Any], times,
                      fields: Mapping[str, Any], units: Mapping[str, str],
                      attrs: Mapping[str, Any] | None = None) -> pathlib.Path:
    """Write time-dependent fields on mesh nodes to ``path_h5`` plus the sidecar ``path_h5.with_suffix(".xdmf")``.

    One XDMF grid per time step (a Temporal collection, as meshio's ``TimeSeriesWriter`` writes it),
    one nodal attribute per field.  Both files are first written in a temporary folder inside the
    destination folder and moved into place only when complete (the ``.h5`` first, then the
    ``.xdmf``), so on any error nothing new remains at the final names.

    Parameters
    ----------
    path_h5 : str or os.PathLike
        Destination ``.h5``/``.hdf5`` file, e.g. ``out/fields.h5``; its folder is created if missing.
    points : array_like [M, 2] or [M, 3]
        Node coordinates (m), stored as float64.
    cells : dict of str to int array_like
        Connectivity per meshio cell type, e.g. ``{"triangle": [C, 3]}`` (0-based rows of
        ``points``).  Several types are allowed (an XDMF ``Mixed`` topology), except ``"line"``
        mixed with others.
    times : array_like [nt]
        Time of each step (s), finite and strictly increasing.
    fields : dict of str to array_like [nt, M]
        Nodal values per step; names must be identifiers (``Ex``, ``Hz``).  float32/float64 are
        stored as given, other real dtypes as float64.
    units : dict of str to str
        Unit string of every field name, e.g. ``{"Ex": "V/m", "Hz": "A/m"}``; stored as the
        ``units`` attribute of each field dataset.  Coordinates are in "m", times in "s".
    attrs : dict, optional
        Root attributes: str, int, float, bool as they are, dict/list/tuple as JSON strings (names
        listed in the root attribute ``json_attrs``).  ``schema_version`` (1) and
        ``package_version`` are added and must not be given.

    Returns
    -------
    pathlib.Path
        The written ``.h5`` path.

    Raises
    ------
    ValueError
        For a wrong suffix or a ``:`` in the file name, points, cells, times or fields of the wrong
        shape or dtype, cell indices out of range, a missing unit, or attrs that cannot be stored.
        Nothing is written then.
    OSError
        If the files cannot be written; no partial or temporary files remain.
    """
    import meshio

    path = pathlib.Path(path_h5)
    if path.suffix not in (".h5", ".hdf5"):
        raise ValueError(f"path_h5 must end with .h5 or .hdf5, got {str(path)!r}")
    if ":" in path.name:
        raise ValueError(f"the file name must not contain ':' (XDMF uses 'file:dataset'), got {path.name!r}")
    pts, blocks, t, data = _check_inputs(points, cells, times, fields, units)
    root_attrs, json_keys = _encode_attrs(attrs or {})

    path.parent.mkdir(parents=True, exist_ok=True)
    xdmf_final = path.with_suffix(".xdmf")
    tmpdir = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp"))
    try:
        h5_tmp, xdmf_tmp = tmpdir / path.name, tmpdir / xdmf_final.name
        writer = meshio.xdmf.TimeSeriesWriter(xdmf_tmp)
        # meshio's __enter__ opens "<stem>.h5" in the *current working directory*; open the file in the
        # temporary folder instead (the XDMF text uses only its base name).  __exit__ writes the
        # .xdmf (to its absolute temporary path) and closes the .h5.
        writer.h5_filename = str(h5_tmp)
        writer.h5_file = h5py.File(h5_tmp, "w")
        try:
            writer.write_points_cells(pts, blocks)
            for k, tk in enumerate(t):
                writer.write_data(float(tk), point_data={name: arr[k] for name, arr in data.items()})
        except BaseException:
            writer.h5_file.close()
            raise
        try:
            writer.__exit__(None, None, None)
        finally:
            if writer.h5_file.id.valid:
                writer.h5_file.close()
        _relative_refs(xdmf_tmp, path.name)

        # meshio numbers its datasets in write order: points, cells, then the fields step by step
        nb = len(blocks)
        with h5py.File(h5_tmp, "a") as h5:
            h5.attrs["schema_version"] = SCHEMA_VERSION
            h5.attrs["package_version"] = elecsolver.__version__
            h5.attrs["json_attrs"] = json.dumps(json_keys)
            for key, value in root_attrs.items():
                h5.attrs[key] = value
            h5["data0"].attrs["units"] = "m"
            h5["coords/points"] = h5["data0"]
            h5.create_dataset("coords/t", data=t).attrs["units"] = "s"
            for i, (ctype, _) in enumerate(blocks if nb == 1 else []):
                h5[f"cells/{ctype}"] = h5[f"data{1 + i}"]
            h5["data1"].attrs["units"] = "1"
            nf, m = len(data), len(pts)
            for j, (name, arr) in enumerate(data.items()):
                layout = h5py.VirtualLayout(shape=(t.size, m), dtype=arr.dtype)
                for k in range(t.size):
                    ds_name = f"data{2 + k * nf + j}"
                    ds = h5[ds_name]
                    if ds.shape != (m,):  # a meshio change in numbering would show here
                        raise RuntimeError(f"unexpected meshio layout: {ds_name} has shape {ds.shape}")
                    ds.attrs.update({"units": units[name], "field": name, "step": k, "time_s": float(t[k])})
                    layout[k] = h5py.VirtualSource(".", f"/{ds_name}", shape=(m,), dtype=arr.dtype)
                h5.create_virtual_dataset(f"fields/{name}", layout).attrs["units"] = units[name]
        os.replace(h5_tmp, path)
        os.replace(xdmf_tmp, xdmf_final)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    logger.info("wrote %s and %s (%d steps, %d nodes, fields %s)", path, xdmf_final, t.size, len(pts), sorted(data))
    return path
