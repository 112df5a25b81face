"""Fields on the nodes of an unstructured mesh: a thin wrapper over the ``hdf5`` writer of elecsolver.fields.

:func:`write_mesh_fields` keeps its signature; it builds a :class:`~elecsolver.fields.MeshSites`
and :class:`~elecsolver.fields.FieldSet` and writes them with
:func:`elecsolver.fields.hdf5.write_hdf5` (schema version 2: ``/mesh/points``,
``/mesh/cells/<type>``, ``/coords/t``, ``/fields/<name>`` [nt, M], the ``/xdmf`` views and an
XDMF 3 sidecar written by the package itself, not by meshio's ``TimeSeriesWriter``; see
``docs/output-format.md``).  New code should call :func:`elecsolver.fields.write` directly.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from elecsolver.fields import FieldSet, MeshSites
from elecsolver.fields.hdf5 import check_path, write_hdf5

__all__ = ["write_mesh_fields"]


def write_mesh_fields(path_h5: str | os.PathLike, *, points, cells: Mapping[str, Any], times,
                      fields: Mapping[str, Any], units: Mapping[str, str],
                      attrs: Mapping[str, Any] | None = None) -> pathlib.Path:
    """Write time-dependent fields on mesh nodes to ``path_h5`` and the sidecar ``.with_suffix(".xdmf")``.

    One XDMF grid per time step (a Temporal collection), one nodal attribute per field.  Both
    files are written under temporary names in the destination folder and moved into place when
    complete (the ``.h5`` first), so on any error nothing new remains at the final names.

    Parameters
    ----------
    path_h5 : str or os.PathLike
        Destination ``.h5``/``.hdf5`` file, e.g. ``out/fields.h5``; its folder is created if missing.
    points : array_like [M, d]
        Node coordinates (m), d = 1, 2 or 3; stored as float64.
    cells : dict of str to int array_like
        Connectivity per meshio cell type, e.g. ``{"triangle": [C, 3]}`` (0-based rows of
        ``points``); several types give an XDMF ``Mixed`` topology.
    times : array_like [nt]
        Time of each step (s), finite and strictly increasing.
    fields : dict of str to array_like [nt, M]
        Nodal values per step; names must be identifiers (``Ex``, ``Hz``).  float32/float64 are
        stored as given, other real dtypes as float64; complex fields as in
        :mod:`elecsolver.fields.hdf5`.
    units : dict of str to str
        Unit string of every field name, e.g. ``{"Ex": "V/m", "Hz": "A/m"}``.  Coordinates are
        in "m", times in "s".
    attrs : dict, optional
        Root attributes: str, int, float, bool as they are, dict/list/tuple as JSON strings (names
        listed in the root attribute ``json_attrs``).  ``schema_version`` (2) and
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
    path = pathlib.Path(path_h5)
    check_path(path)
    sites = MeshSites(points, cells)
    si = {**{name: "m" for name in sites.names}, "t": "s"}
    full_units = {**units, **si} if isinstance(units, Mapping) else units
    fieldset = FieldSet(sites, fields, full_units, times=np.asarray(times))
    write_hdf5(fieldset, path, attrs=attrs)
    return path
