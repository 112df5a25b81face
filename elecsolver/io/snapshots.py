"""PNG snapshots of fields: PINN | reference | absolute error, a few time frames."""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from elecsolver.io.hdf5 import _atomic_file

__all__ = ["default_frames", "write_snapshots"]

logger = logging.getLogger(__name__)


def default_frames(nt: int, count: int = 4) -> list[int]:
    """Frame indices spread over a run: ``round(linspace(0, nt-1, count+1))[1:]``, deduplicated.

    Parameters
    ----------
    nt : int
        Number of time steps, ``>= 1``.
    count : int, optional
        Number of frames wanted (fewer are returned when ``nt`` is small).

    Returns
    -------
    list of int
        Sorted, distinct indices in ``[0, nt)``; the first step is skipped unless
        ``nt == 1``.

    Raises
    ------
    ValueError
        If ``nt < 1`` or ``count < 1``.
    """
    if nt < 1 or count < 1:
        raise ValueError(f"nt and count must be >= 1, got nt={nt}, count={count}")
    return sorted({int(k) for k in np.round(np.linspace(0, nt - 1, count + 1))[1:]})


def _frame_names(name: str, t: np.ndarray, frames: Sequence[int]) -> list[str]:
    names = [f"{name}_t{t[k] * 1e9:.2f}ns.png" for k in frames]
    if len(set(names)) < len(names):  # frames closer than 0.005 ns: add the step index
        names = [f"{name}_t{t[k] * 1e9:.2f}ns_k{k:04d}.png" for k in frames]
    return names


def _plot(path: pathlib.Path, x: np.ndarray, y: np.ndarray, panels: list[tuple[str, np.ndarray, str]],
          shared: bool) -> None:
    """Draw ``panels`` (title, [ny, nx] data, colorbar label) side by side; save as PNG atomically."""
    fig = Figure(figsize=(4.2 * len(panels), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    # PINN and reference share one colour scale, symmetric about 0 (fields oscillate in sign).
    values = np.concatenate([data.ravel() for _, data, _ in panels[:2 if shared else 1]])
    values = np.abs(values[np.isfinite(values)])
    vmax = values.max() if values.size and values.max() > 0 else None
    for n, (title, data, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), n + 1)
        vmin, vmax_n = (-vmax, vmax) if (vmax is not None and n < 2) else (None, None)
        mesh = ax.pcolormesh(x, y, data, shading="nearest", cmap="magma" if n == 2 else "RdBu_r",
                             vmin=vmin, vmax=vmax_n)
        fig.colorbar(mesh, ax=ax, label=label)
        ax.set(title=title, xlabel="x [m]", ylabel="y [m]", aspect="equal")
    with _atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    fig.clear()


def write_snapshots(out_dir: str | os.PathLike, *, x: Any, y: Any, t: Any, fields: Mapping[str, Any],
                    reference: Mapping[str, Any] | None = None, frames: Sequence[int] | None = None,
                    units: Mapping[str, str]) -> list[pathlib.Path]:
    """Write one PNG per field and time frame: PINN | reference | absolute error.

    Uses matplotlib's Agg canvas directly (no pyplot, no display).  Each PNG is
    written to a temporary name and moved into place when complete.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Folder for the images; created if missing.
    x, y : array_like
        Grid coordinates [nx], [ny] in m.
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
        Unit string for every field name, e.g. ``{"Hz": "A/m"}``.

    Returns
    -------
    list of pathlib.Path
        The written files, named like ``Hz_t2.40ns.png`` (``_k<step>`` is appended
        when two frames would round to the same name).

    Raises
    ------
    ValueError
        If coordinates are not 1-D, a field or reference array is not [nt, ny, nx],
        reference names differ from field names, a unit is missing, or a frame
        index is out of range.
    """
    static = t is None
    if static:  # one frame; drawn without a time in its title or name
        fields = {k: np.asarray(v)[None] for k, v in fields.items()} if isinstance(fields, Mapping) else fields
        if isinstance(reference, Mapping):
            reference = {k: np.asarray(v)[None] for k, v in reference.items()}
        t, frames = np.zeros(1), [0]
    x, y, t = (np.asarray(v, dtype=np.float64) for v in (x, y, t))
    if x.ndim != 1 or y.ndim != 1 or t.ndim != 1 or min(x.size, y.size, t.size) < 1:
        raise ValueError(f"x, y and t must be non-empty 1-D arrays, got shapes {x.shape}, {y.shape}, {t.shape}")
    shape = (t.size, y.size, x.size)
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError("fields must be a non-empty dict {name: array [nt, ny, nx]}")
    if reference is not None and set(reference) != set(fields):
        raise ValueError(f"reference must have the same names as fields: {sorted(fields)}, got {sorted(reference)}")
    for what, group in (("fields", fields), ("reference", reference or {})):
        for name, arr in group.items():
            if np.shape(arr) != shape:
                raise ValueError(f"{what}[{name!r}] must have shape [nt, ny, nx] = {list(shape)}, "
                                 f"got {list(np.shape(arr))}")
    missing = [k for k in fields if not isinstance(units, Mapping) or not isinstance(units.get(k), str)]
    if missing:
        raise ValueError(f"units must be a dict with a unit string for each of {missing}")
    frames = default_frames(t.size) if frames is None else [int(k) for k in frames]
    bad = [k for k in frames if not 0 <= k < t.size]
    if bad:
        raise ValueError(f"frames {bad} are out of range for nt={t.size}")

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, values in fields.items():
        pinn = np.asarray(values, dtype=np.float64)
        ref = None if reference is None else np.asarray(reference[name], dtype=np.float64)
        unit = units[name]
        names = [f"{name}.png"] if static else _frame_names(name, t, frames)
        for k, file_name in zip(frames, names):
            when = "" if static else f", t = {t[k] * 1e9:.2f} ns"
            panels = [(f"{name} PINN [{unit}]{when}", pinn[k], f"{name} [{unit}]")]
            if ref is not None:
                panels += [(f"{name} reference [{unit}]{when}", ref[k], f"{name} [{unit}]"),
                           (f"|{name} error| [{unit}]{when}", np.abs(pinn[k] - ref[k]), f"|error| [{unit}]")]
            path = out_dir / file_name
            _plot(path, x, y, panels, shared=ref is not None)
            written.append(path)
    logger.info("wrote %d snapshots to %s", len(written), out_dir)
    return written
