"""The package's output file for 2-D grids: thin wrappers over :mod:`elecsolver.fields.hdf5`.

:func:`write_fields` keeps its signature and behaviour and writes through the FieldSet writer,
so files are schema version 2, whose layout for a 2-D grid with real fields is that of version 1
(``/coords/x``, ``/coords/y``, ``/coords/t``, ``/fields/<name>`` [nt, ny, nx],
``/reference/<name>``, the ``/xdmf`` views, ``units`` attributes, root attributes
``schema_version``, ``package_version``, ``json_attrs`` and the user attrs); only
``schema_version`` changed.  :func:`read_fields` reads versions 1 and 2.  The full layout, and
what changed from version 1, is in :mod:`elecsolver.fields.hdf5` and ``docs/output-format.md``.
New code should build a :class:`~elecsolver.fields.FieldSet` and call :func:`elecsolver.fields.write`.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from elecsolver.fields import FieldSet, GridSites
from elecsolver.fields.hdf5 import SCHEMA_VERSION, check_path, encode_attrs, read_hdf5, write_hdf5

__all__ = ["SCHEMA_VERSION", "read_fields", "write_fields"]

logger = logging.getLogger(__name__)

# kept for callers of the version-1 module
_encode_attrs = encode_attrs


def write_fields(path: str | os.PathLike, *, coords: Mapping[str, Any], fields: Mapping[str, Any],
                 reference: Mapping[str, Any] | None = None, units: Mapping[str, str],
                 attrs: Mapping[str, Any]) -> pathlib.Path:
    """Write fields on a structured (x, y, t) or (x, y) grid to HDF5 plus an XDMF sidecar.

    Both files are written to temporary names in the destination folder and moved
    into place with :func:`os.replace` once complete (through
    :func:`elecsolver.io.atomic.atomic_path`, which gives them the umask's mode), so a
    reader never sees a half-written file and an existing file is replaced only by a
    complete one.  Equivalent to ``elecsolver.fields.write(FieldSet(GridSites({"x": x,
    "y": y}), fields, units, times=t), path, reference=..., attrs=attrs)``.

    Parameters
    ----------
    path : str or os.PathLike
        Destination ``.h5``/``.hdf5`` file, e.g. ``out/fields.h5``.  The folder is
        created if missing.  The sidecar is written to ``path.with_suffix(".xdmf")``.
    coords : dict
        ``{"x": [nx], "y": [ny], "t": [nt]}`` 1-D real arrays in m, m, s; finite and
        strictly increasing; ``nx, ny >= 2``, ``nt >= 1``; stored as float64.
        Without ``"t"`` (static or time-harmonic fields) the fields are [ny, nx].
    fields : dict of str to array_like
        ``{name: [nt, ny, nx]}`` (or ``[ny, nx]`` without t), real values; float32/float64 stored as given,
        other real dtypes as float64.  Names must be identifiers (``Ex``, ``Hz``).
    reference : dict of str to array_like, optional
        Reference solution with exactly the same names and shapes as ``fields``.
    units : dict of str to str
        Unit string for ``"x"``, ``"y"``, ``"t"`` and every field name, e.g.
        ``{"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Hz": "A/m"}``.  Stored as
        the ``units`` attribute of each dataset.  Coordinates must be in "m" and
        "s"; keys for other names are ignored.
    attrs : dict
        Root attributes.  dict/list/tuple values are stored as JSON strings (numpy
        scalars and arrays inside them are converted); str, int, float and bool
        values as they are.  ``schema_version`` (2) and ``package_version`` are
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
    check_path(path)
    if not isinstance(coords, Mapping) or set(coords) not in ({"x", "y", "t"}, {"x", "y"}):
        raise ValueError("coords must be a dict with exactly the keys 'x', 'y' and 't' (or 'x' and 'y' for "
                         "static fields)")
    sites = GridSites({"x": coords["x"], "y": coords["y"]})
    times = coords.get("t")
    fieldset = FieldSet(sites, fields, units, times=times)
    ref = None if reference is None else FieldSet(sites, reference, units, times=times)
    if ref is not None and set(ref.names) != set(fieldset.names):
        raise ValueError(f"reference must have the same names as fields: {sorted(fieldset.names)}, "
                         f"got {sorted(ref.names)}")
    write_hdf5(fieldset, path, reference=ref, attrs=attrs)
    return path


def read_fields(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by :func:`write_fields` (schema version 1 or 2).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.h5`` file.

    Returns
    -------
    dict
        ``{"coords": {"x", "y", "t"}, "fields": {name: [nt, ny, nx]},
        "reference": {name: [nt, ny, nx]} or None, "units": {name: str},
        "attrs": {...}, "mask": bool array or None}`` (no "t" and fields [ny, nx] for static
        fields; for other sites the coords are the grid axes, or ``"points"`` of a mesh).
        Field arrays keep their stored dtype, coordinates are float64.  Attributes written as
        JSON (e.g. ``config``, ``scales``, ``metrics``) are decoded; numpy scalars are returned
        as Python scalars; ``attrs["schema_version"]`` is the file's version.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not an elecsolver output file of schema version 1 or 2.
    """
    data = read_hdf5(path)
    fs, ref = data["fieldset"], data["reference"]
    sites = fs.sites
    coords = {n: np.array(a) for n, a in sites.axes.items()} if isinstance(sites, GridSites) else \
        {"points": sites.coordinates()}
    if not fs.static:
        coords["t"] = np.array(fs.times)
    return {"coords": coords, "fields": {n: np.array(a) for n, a in fs.fields.items()},
            "reference": None if ref is None else {n: np.array(a) for n, a in ref.fields.items()},
            "units": dict(fs.units), "attrs": data["attrs"],
            "mask": None if fs.mask is None else np.array(fs.mask)}
