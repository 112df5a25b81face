"""The CSV writer: one row per (time, site), in :meth:`FieldSet.points` order.

Columns: ``x [m]``[, ``y [m]``, ``z [m]``][, ``t [s]``], then per field ``<name> [unit]`` (complex:
``<name>_re [unit]``, ``<name>_im [unit]``), then the reference as ``<name>_ref [unit]`` (complex:
``<name>_ref_re``, ``<name>_ref_im``), then ``mask [1]`` (1 inside, 0 outside) when a mask is given.
One header line, comma-separated, no index column.  float64 values are written with 17 significant
digits, float32 ones with 9, so ``numpy.loadtxt(path, delimiter=",", skiprows=1)`` gives the values
back exactly (float32 after casting back).  Read it with pandas as ``pd.read_csv(path)``.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from elecsolver.io.atomic import atomic_path

from .fieldset import FieldSet, check_matching

__all__ = ["csv_columns", "write_csv"]

_FORMAT = {"float32": "%.9g", "float64": "%.17g"}


def csv_columns(fieldset: FieldSet, reference: FieldSet | None = None) -> list[tuple[str, np.ndarray, str]]:
    """The CSV columns: (header ``"name [unit]"``, values [nt*S], printf format), in file order.

    Raises
    ------
    ValueError
        If two columns would get the same name (e.g. a field ``Ez_re`` next to a complex ``Ez``).
    """
    points = fieldset.points()
    units = {**fieldset.units, "mask": "1"}
    columns = [(f"{name} [{units[name]}]", points[:, j], "%.17g")
               for j, name in enumerate(fieldset.coordinate_names)]
    for suffix, fs in (("", fieldset), ("_ref", reference)):
        for name, values in (fs.fields.items() if fs is not None else ()):
            flat, label = values.ravel(), f"{name}{suffix}"
            fmt = _FORMAT[flat.real.dtype.name]
            parts = [("_re", flat.real), ("_im", flat.imag)] if flat.dtype.kind == "c" else [("", flat)]
            columns += [(f"{label}{part} [{fs.units[name]}]", data, fmt) for part, data in parts]
    if fieldset.mask is not None:
        nt = 1 if fieldset.static else fieldset.times.size
        columns.append(("mask [1]", np.tile(fieldset.mask.ravel(), nt).astype(np.float64), "%d"))
    heads = [head for head, _, _ in columns]
    clash = sorted({h for h in heads if heads.count(h) > 1})
    if clash:
        raise ValueError(f"CSV columns {clash} appear twice (complex fields add '_re'/'_im', the reference "
                         f"'_ref'); rename the fields")
    return columns


def write_csv(fieldset: FieldSet, path: str | os.PathLike, *, reference: FieldSet | None = None,
              attrs: Mapping[str, Any] | None = None) -> list[pathlib.Path]:
    """Write ``fieldset`` (and ``reference``) as one CSV table to ``path`` (layout in the module docstring).

    Parameters
    ----------
    fieldset : FieldSet
        The fields.
    path : str or os.PathLike
        Destination ``.csv``; its folder is created if missing.  Written atomically
        (:func:`elecsolver.io.atomic.atomic_path`).
    reference : FieldSet, optional
        Reference on the same sites and times, with the same field names and units.
    attrs : dict, optional
        Ignored (CSV has no place for metadata).

    Returns
    -------
    list of pathlib.Path
        ``[path]``.

    Raises
    ------
    ValueError
        If column names clash or the reference does not match.  Nothing is written then.
    """
    path = pathlib.Path(path)
    if reference is not None:
        check_matching(fieldset, reference, "reference")
    columns = csv_columns(fieldset, reference)
    table = np.column_stack([np.asarray(data, dtype=np.float64) for _, data, _ in columns])
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        np.savetxt(tmp, table, fmt=[fmt for _, _, fmt in columns], delimiter=",",
                   header=",".join(head for head, _, _ in columns), comments="")
    return [path]
