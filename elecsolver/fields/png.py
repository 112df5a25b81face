"""The PNG writer: snapshots of each field, PINN | reference | absolute error, at a few times.

``path`` is an output *folder* (created if missing); the files in it are named

* ``<name>_t<time in ns, 2 decimals>ns.png`` for a time series, e.g. ``Ex_t2.00ns.png``, at
  :func:`default_frames` (4 frames spread over the run; ``_k<step>`` is appended when two frames
  would round to the same name);
* ``<name>.png`` for static fields.

What is drawn depends on the sites: a 2-D grid as a colour map (``pcolormesh``), a 3-D grid as
its mid-z slice (index ``nz // 2``), a 1-D grid as line plots (PINN and reference in one panel,
the absolute error in a second), a 2-D mesh with triangles/quads as ``tripcolor``.  A complex
field gets two rows: its real part and its magnitude.  Masked-out sites are left blank.  PINN and
reference share one colour scale (symmetric about 0 for signed values).  Drawn with matplotlib's
Agg canvas (no pyplot, no display); each file is written atomically
(:func:`elecsolver.io.atomic.atomic_path`).
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from elecsolver.io.atomic import atomic_path

from .fieldset import FieldSet, check_matching
from .sites import GridSites, MeshSites

__all__ = ["default_frames", "frame_names", "write_png"]

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
        Sorted, distinct indices in ``[0, nt)``; the first step is skipped unless ``nt == 1``.

    Raises
    ------
    ValueError
        If ``nt < 1`` or ``count < 1``.
    """
    if nt < 1 or count < 1:
        raise ValueError(f"nt and count must be >= 1, got nt={nt}, count={count}")
    return sorted({int(k) for k in np.round(np.linspace(0, nt - 1, count + 1))[1:]})


def frame_names(name: str, times: np.ndarray, frames: Sequence[int]) -> list[str]:
    """File names ``<name>_t<ns>ns.png`` of ``frames``; ``_k<step>`` is appended if two would be equal."""
    names = [f"{name}_t{times[k] * 1e9:.2f}ns.png" for k in frames]
    if len(set(names)) < len(names):  # frames closer than 0.005 ns
        names = [f"{name}_t{times[k] * 1e9:.2f}ns_k{k:04d}.png" for k in frames]
    return names


class _Plane:
    """How to draw one site array of a 2-D/3-D grid or a 2-D mesh on matplotlib Axes."""

    def __init__(self, fieldset: FieldSet) -> None:
        sites = self.sites = fieldset.sites
        self.mask, self.note, self.mid = fieldset.mask, "", None
        if isinstance(sites, GridSites) and sites.dim == 3:
            self.mid = sites.shape[0] // 2
            self.note = f", z = {sites.axes['z'][self.mid]:.3g} m"
        if isinstance(sites, MeshSites):
            from matplotlib.tri import Triangulation

            tris = [sites.cells[t] for t in ("triangle",) if t in sites.cells]
            if "quad" in sites.cells:
                quads = sites.cells["quad"]
                tris += [quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]]
            tris = np.concatenate(tris)
            self.triangulation = Triangulation(sites.points[:, 0], sites.points[:, 1], tris)
            if self.mask is not None:
                self.triangulation.set_mask(~self.mask[tris].all(axis=1))

    def prepare(self, values: np.ndarray) -> np.ndarray:
        """Real values of the site shape -> what is drawn (float64, NaN outside the mask, mid-z slice)."""
        data = np.array(values, dtype=np.float64)
        if self.mask is not None and isinstance(self.sites, GridSites):
            data[~self.mask] = np.nan
        return data if self.mid is None else data[self.mid]

    def draw(self, ax: Any, data: np.ndarray, cmap: str, vmin: float | None, vmax: float | None) -> Any:
        if isinstance(self.sites, MeshSites):
            return ax.tripcolor(self.triangulation, data, shading="gouraud", cmap=cmap, vmin=vmin, vmax=vmax)
        x, y = self.sites.axes["x"], self.sites.axes["y"]
        return ax.pcolormesh(x, y, data, shading="nearest", cmap=cmap, vmin=vmin, vmax=vmax)


def _check_sites(fieldset: FieldSet) -> None:
    sites = fieldset.sites
    if isinstance(sites, MeshSites) and (sites.dim != 2 or not {"triangle", "quad"} & set(sites.cells)):
        raise ValueError(f"the PNG writer draws meshes with 2-D points and triangle or quad cells, "
                         f"got {sites!r}")


def _rows(name: str, values: np.ndarray, ref: np.ndarray | None
          ) -> list[tuple[str, str, np.ndarray, np.ndarray | None, np.ndarray | None, bool]]:
    """(label, error label, PINN, reference, |error|, signed) per row: the values, or for a complex
    field its real part and its magnitude (with the modulus of the complex error)."""
    err = None if ref is None else np.abs(values - ref)
    if values.dtype.kind != "c" and (ref is None or ref.dtype.kind != "c"):
        return [(name, f"|{name} error|", values, ref, err, True)]
    return [(f"Re {name}", f"|Re {name} error|", values.real, None if ref is None else ref.real,
             None if ref is None else np.abs(values.real - ref.real), True),
            (f"|{name}|", f"|{name} error|", np.abs(values), None if ref is None else np.abs(ref), err,
             False)]


def _limits(arrays: list[np.ndarray], signed: bool) -> tuple[float | None, float | None]:
    finite = np.concatenate([np.abs(a[np.isfinite(a)]).ravel() for a in arrays])
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else None
    if vmax is None:
        return None, None
    return (-vmax, vmax) if signed else (0.0, vmax)


def _figure(fieldset: FieldSet, name: str, values: np.ndarray, ref: np.ndarray | None, when: str) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows, unit = _rows(name, values, ref), fieldset.units[name]
    line = isinstance(fieldset.sites, GridSites) and fieldset.sites.dim == 1
    cols = (2 if line else 3) if ref is not None else 1
    fig = Figure(figsize=(4.2 * cols, 3.6 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    plane = None if line else _Plane(fieldset)
    for r, (label, err_label, pinn, reference, err, signed) in enumerate(rows):
        axes = [fig.add_subplot(len(rows), cols, r * cols + c + 1) for c in range(cols)]
        if line:
            _draw_lines(fieldset, axes, (label, err_label), unit, when, pinn, reference, err)
            continue
        pinn, reference, err = (None if a is None else plane.prepare(a) for a in (pinn, reference, err))
        vmin, vmax = _limits([a for a in (pinn, reference) if a is not None], signed)
        panels = [(f"{label} PINN", pinn, "RdBu_r" if signed else "viridis", vmin, vmax)]
        if reference is not None:
            panels += [(f"{label} reference", reference, panels[0][2], vmin, vmax),
                       (err_label, err, "magma", *_limits([err], signed=False))]
        for ax, (title, data, cmap, lo, hi) in zip(axes, panels):
            fig.colorbar(plane.draw(ax, data, cmap, lo, hi), ax=ax, label=f"[{unit}]")
            ax.set(title=f"{title} [{unit}]{when}{plane.note}", xlabel="x [m]", ylabel="y [m]",
                   aspect="equal")
    return fig


def _draw_lines(fieldset: FieldSet, axes: list[Any], labels: tuple[str, str], unit: str, when: str,
                pinn: np.ndarray, reference: np.ndarray | None, err: np.ndarray | None) -> None:
    label, err_label = labels
    x = fieldset.sites.axes["x"]
    keep = np.ones(x.size, bool) if fieldset.mask is None else fieldset.mask
    axes[0].plot(x[keep], pinn[keep], label="PINN")
    if reference is not None:
        axes[0].plot(x[keep], reference[keep], "--", label="reference")
        axes[1].plot(x[keep], err[keep], color="C3")
        axes[1].set(title=f"{err_label} [{unit}]{when}", xlabel="x [m]", ylabel=f"[{unit}]")
    axes[0].legend()
    axes[0].set(title=f"{label} [{unit}]{when}", xlabel="x [m]", ylabel=f"[{unit}]")


def write_png(fieldset: FieldSet, path: str | os.PathLike, *, reference: FieldSet | None = None,
              attrs: Mapping[str, Any] | None = None,
              frames: Sequence[int] | None = None) -> list[pathlib.Path]:
    """Write PNG snapshots of every field into the folder ``path`` (names and content: module docstring).

    Parameters
    ----------
    fieldset : FieldSet
        The (PINN) fields; meshes need 2-D points and triangle or quad cells.
    path : str or os.PathLike
        Output folder, created if missing.
    reference : FieldSet, optional
        Reference on the same sites and times; adds the reference and |error| panels.
    attrs : dict, optional
        Ignored.
    frames : sequence of int, optional
        Time-step indices to draw (time series only); default :func:`default_frames`.

    Returns
    -------
    list of pathlib.Path
        The written files, field by field, frame by frame.

    Raises
    ------
    ValueError
        For a mesh that cannot be drawn, a reference that does not match, or a frame index out of
        range.  Nothing is written then.
    """
    _check_sites(fieldset)
    if reference is not None:
        check_matching(fieldset, reference, "reference")
    if fieldset.static:
        frames, names = [None], {name: [f"{name}.png"] for name in fieldset.names}
    else:
        nt = fieldset.times.size
        frames = default_frames(nt) if frames is None else [int(k) for k in frames]
        bad = [k for k in frames if not 0 <= k < nt]
        if bad:
            raise ValueError(f"frames {bad} are out of range for nt={nt}")
        names = {name: frame_names(name, fieldset.times, frames) for name in fieldset.names}
    folder = pathlib.Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, values in fieldset.fields.items():
        ref = None if reference is None else reference.fields[name]
        for k, file_name in zip(frames, names[name]):
            when = "" if k is None else f", t = {fieldset.times[k] * 1e9:.2f} ns"
            pick = (lambda a: a) if k is None else (lambda a, k=k: a[k])
            fig = _figure(fieldset, name, pick(values), None if ref is None else pick(ref), when)
            target = folder / file_name
            with atomic_path(target) as tmp:
                fig.savefig(tmp, format="png", dpi=100)
            fig.clear()
            written.append(target)
    logger.info("wrote %d snapshots to %s", len(written), folder)
    return written
