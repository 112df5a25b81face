"""Material coefficients as functions of the SI position, for ``eps_r``, ``mu_r``, ``sigma`` of the PDEs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["Piecewise", "piecewise"]


class Piecewise:
    """A coefficient constant on regions: the value of the first region holding each point, else ``default``.

    Called like every coefficient, ``fn(x, y[, z][, t])`` with SI coordinates (torch tensors or numpy
    arrays, spatial first); it reads the first ``dim`` of them (the regions' dimension, so a trailing
    time is ignored) and returns the values with the shape, dtype and device of ``x``.  Membership is
    ``Domain.contains`` (closed regions: a point on a shared boundary takes the first region's value).
    The result carries no gradient with respect to the coordinates (it is constant on each region).

    Parameters
    ----------
    regions : sequence of (Domain, float)
        Regions (:class:`~elecsolver.geometry.Domain`, all of one dimension) and their values, in
        order of precedence.
    default : float
        Value outside every region.

    Raises
    ------
    ValueError
        For no regions, regions of different dimensions, or a value that is not a finite number.
    """

    def __init__(self, regions: Sequence[tuple], default: float):
        regions = [tuple(r) for r in regions]
        if not regions or any(len(r) != 2 or not hasattr(r[0], "contains") for r in regions):
            raise ValueError("piecewise needs a non-empty sequence of (Domain, value) pairs")
        dims = {int(r[0].dim) for r in regions}
        if len(dims) != 1:
            raise ValueError(f"piecewise: the regions have different dimensions {sorted(dims)}")
        for v in [r[1] for r in regions] + [default]:
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise ValueError(f"piecewise: values must be finite numbers, got {v!r}")
        self.regions = [(d, float(v)) for d, v in regions]
        self.default, self.dim = float(default), dims.pop()

    def __call__(self, *coords):
        if len(coords) < self.dim:
            raise ValueError(f"piecewise: {self.dim}D regions need {self.dim} coordinates, got {len(coords)}")
        first = coords[0]
        cols = [c.detach().cpu().numpy() if isinstance(c, torch.Tensor) else np.asarray(c)
                for c in coords[:self.dim]]
        shape = np.broadcast(*cols).shape
        pts = np.stack([np.broadcast_to(c, shape).reshape(-1) for c in cols], axis=1).astype(np.float64)
        out = np.full(pts.shape[0], self.default)
        todo = np.arange(pts.shape[0])
        for domain, value in self.regions:
            if todo.size == 0:
                break
            hit = np.asarray(domain.contains(pts[todo]), dtype=bool)
            out[todo[hit]] = value
            todo = todo[~hit]
        out = out.reshape(shape)
        if isinstance(first, torch.Tensor):
            return torch.as_tensor(out, dtype=first.dtype, device=first.device)
        return out

    def __repr__(self) -> str:
        inner = ", ".join(f"({d!r}, {v:g})" for d, v in self.regions)
        return f"piecewise([{inner}], default={self.default:g})"


def piecewise(regions: Sequence[tuple], default: float) -> Piecewise:
    """A coefficient function: the value of the first region holding each point (see :class:`Piecewise`).

    Example: ``Maxwell(..., eps_r=piecewise([(Disk([0, 0], 0.1), 4.0)], default=1.0))`` for a dielectric rod.
    """
    return Piecewise(regions, default)
