"""The loss: a pure function of the network's parameters and this rank's batches.

For constraint c on rank r,

    L_c^r = lambda_c * sum_{i in shard r} w_i |res_c(x_i)|^2 / sum_{i in all shards} w_i,

with w_i the measure point i stands for (w_i = 1 for a cloud without weights: the local sum over the
global count), so that summing over ranks gives the single-process loss exactly (shared/DESIGN.md,
"The data path").  A rank holding no point of a constraint contributes a zero that still depends on every
parameter, so every rank's backward touches the same parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..operators import evaluate
from ..problem import Constraint

__all__ = ["constraint_residual", "loss_terms"]


def constraint_residual(model: nn.Module, c: Constraint, points: torch.Tensor, normals: torch.Tensor | None,
                        inputs: Sequence[str], outputs: Sequence[str], method: str = "jet") -> torch.Tensor:
    """The residual [n, m] of constraint ``c`` at ``points`` [n, d] (training units); a complex residual
    [n, m] comes back as its real and imaginary parts [n, 2m], so that its squared sum is |r|^2.

    Raises
    ------
    ValueError
        If the residual is not a 2-D tensor with one row per point (the message names the constraint), or
        it reads a derivative the constraint does not declare.
    """
    f = evaluate(model, points, inputs, outputs, c.wrt, method=method, second=c.second or None,
                 laplacian=c.laplacian)
    try:
        r = c.residual(f, points, normals)
    except KeyError as exc:
        raise ValueError(f"loss term {c.name!r}: {exc.args[0]}") from None
    if not isinstance(r, torch.Tensor) or r.dim() != 2 or r.shape[0] != points.shape[0]:
        shape = list(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
        raise ValueError(f"loss term {c.name!r}: the residual must have shape [N, m] = [{points.shape[0]}, m], got "
                         f"{shape}; return torch.stack([...], dim=1) or r.unsqueeze(1)")
    if r.is_complex():
        r = torch.view_as_real(r).reshape(r.shape[0], -1)
    return r


def loss_terms(model: nn.Module, params: Sequence[torch.Tensor], constraints: Sequence[Constraint],
               batches: Sequence[tuple], inputs: Sequence[str], outputs: Sequence[str],
               method: str = "jet") -> torch.Tensor:
    """This rank's share of every weighted loss term, [n_constraints] (they sum to the loss over ranks).

    Parameters
    ----------
    batches : sequence of (points [n, d], normals [n, s] or None, weights [n] or None, denominator)
        One per constraint; the denominator is the global sum of weights (a float or a 0-d tensor).
    """
    terms = []
    for c, (pts, nrm, w, denom) in zip(constraints, batches):
        if pts.shape[0] == 0:
            terms.append(sum(p.sum() for p in params) * 0.0)
            continue
        sq = constraint_residual(model, c, pts, nrm, inputs, outputs, method).pow(2).sum(1)
        if w is not None:
            sq = sq * w
        terms.append(c.weight * sq.sum() / denom)
    return torch.stack(terms)
