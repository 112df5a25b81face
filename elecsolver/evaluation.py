"""Evaluation: a model and a problem -> a FieldSet of the fields on the problem's output sites, SI."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["evaluate_fieldset"]


@torch.no_grad()
def evaluate_fieldset(model: nn.Module, problem, times: np.ndarray | None = None, device="cpu",
                      dtype: torch.dtype = torch.float32, chunk: int = 65536):
    """The network's fields at every output site and time (``times``, default the problem's), SI units.

    Parameters
    ----------
    model : nn.Module
        Training-unit inputs [N, d] -> training-unit fields [N, c].
    problem : Problem
    times : array, optional
        Output times in s (a subset of the problem's, e.g. for progress metrics).
    chunk : int
        Points per forward pass.

    Returns
    -------
    FieldSet
        On ``problem.output`` with the problem's field names and units.
    """
    pts = problem.output_points(times)
    outs = []
    for i in range(0, pts.shape[0], chunk):
        x = torch.as_tensor(pts[i : i + chunk], dtype=dtype, device=device)
        outs.append(model(x).double().cpu().numpy())
    values = np.concatenate(outs, axis=0) if outs else np.zeros((0, len(problem.outputs)))
    return problem.output_fieldset(values, times)
