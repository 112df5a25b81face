"""PNG snapshots of fields on a 2-D grid: a thin wrapper over the png writer (:mod:`elecsolver.fields.png`).

New code should build a :class:`~elecsolver.fields.FieldSet` and call
``elecsolver.fields.write(fieldset, folder, reference=..., format="png")``.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from elecsolver.fields import FieldSet, GridSites
from elecsolver.fields.png import default_frames, write_png

__all__ = ["default_frames", "write_snapshots"]


def write_snapshots(out_dir: str | os.PathLike, *, x: Any, y: Any, t: Any, fields: Mapping[str, Any],
                    reference: Mapping[str, Any] | None = None, frames: Sequence[int] | None = None,
                    units: Mapping[str, str]) -> list[pathlib.Path]:
    """Write one PNG per field and time frame: PINN | reference | absolute error.

    Uses matplotlib's Agg canvas directly (no pyplot, no display).  Each PNG is
    written to a temporary name and moved into place when complete
    (:func:`elecsolver.io.atomic.atomic_path`).

    Parameters
    ----------
    out_dir : str or os.PathLike
        Folder for the images; created if missing.
    x, y : array_like
        Grid coordinates [nx], [ny] in m, strictly increasing.
    t : array_like or None
        Times [nt] in s (shown in ns in titles and file names); None for static fields
        [ny, nx], drawn once each as ``<name>.png``.
    fields : dict of str to array_like
        PINN fields ``{name: [nt, ny, nx]}`` (``[ny, nx]`` if ``t`` is None).
    reference : dict of str to array_like, optional
        Reference fields with the same names and shapes.  Without it only the PINN
        panel is drawn.
    frames : sequence of int, optional
        Time-step indices to draw; default :func:`default_frames` (4 frames spread
        over the run, skipping t[0]).
    units : dict of str to str
        Unit string for every field name, e.g. ``{"Hz": "A/m"}`` (coordinates are m and s).

    Returns
    -------
    list of pathlib.Path
        The written files, named like ``Hz_t2.40ns.png`` (``_k<step>`` is appended
        when two frames would round to the same name).

    Raises
    ------
    ValueError
        If coordinates are not 1-D and increasing, a field or reference array is not
        [nt, ny, nx], reference names differ from field names, a unit is missing, or a
        frame index is out of range.
    """
    sites = GridSites({"x": x, "y": y})
    si = {"x": "m", "y": "m", **({} if t is None else {"t": "s"})}
    full_units = {**units, **si} if isinstance(units, Mapping) else units
    fieldset = FieldSet(sites, fields, full_units, times=t)
    ref = None if reference is None else FieldSet(sites, reference, full_units, times=t)
    return write_png(fieldset, out_dir, reference=ref, frames=frames)
