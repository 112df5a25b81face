"""A least-squares solve of the network's output layer, where the loss is quadratic in it.

For a linear PDE with linear conditions the residual of every loss term is affine in the parameters of the
body's last layer with parameters (the output layer: a linear map of the last hidden features), because the
heads after it are affine in the body's output (a hard initial condition multiplies by (t - t0)/T and adds
u0, a near field adds, a hard Dirichlet factor multiplies) and the residual operators are linear.  The loss
sum_c lambda_c w_c sum_i w_ci |r_c(x_i; theta)|^2 / denom_c is then a linear least-squares problem in theta,
solved here in float64 with the hidden layers held fixed (the hybrid least-squares / gradient training of
Cyr, Gulian, Patel, Perego & Trask, MSML 2020, and of Dong & Li, Comput. Methods Appl. Mech. Engrg. 387 (2021)
114129, which solve the last layer by least squares and train the rest by gradient steps).

The rows are the weighted residuals of this rank's points; their Jacobian with respect to theta comes from
forward-mode AD through the jets (:func:`torch.func.jacfwd`).  Across data-parallel ranks the rows are
combined by a tall-skinny QR (each rank's R factor and Q^T b, gathered in rank order and factored again), so
the solve is as well conditioned as the problem itself, not squared as with normal equations.  A ridge
``ridge * ||A||_F^2 / P`` (P unknowns) adds the rows sqrt(that) I (Tikhonov), and the SVD-based solve drops
singular values below 1e-12 of the largest (a multiscale body's group biases are redundant): the solution is
then the same on every rank and run to ~1e-10, where an unregularised solve of the nearly singular layer would
amplify the round-off of the row order.  The residual is evaluated once
more at the solution: if it is not the affine prediction (a nonlinear PDE, condition or head), the solve is
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..config import ConfigError
from ..problem import Constraint
from .loss import constraint_residual

__all__ = ["output_layer", "solve_output_layer"]


def output_layer(model: nn.Module) -> list[str]:
    """Names (as in ``model.named_parameters()``) of the parameters of the body's last layer that has any.

    Raises
    ------
    ConfigError
        If the model has no ``body`` Sequential with a parametrised layer.
    """
    body = getattr(model, "body", None)
    if not isinstance(body, nn.Sequential):
        raise ConfigError("training.least_squares needs the package's Network (a body of layers and heads)")
    layers = [i for i, m in enumerate(body) if any(True for _ in m.parameters())]
    if not layers:
        raise ConfigError("training.least_squares: the network's body has no parameters")
    prefix = f"body.{layers[-1]}."
    return [n for n, p in model.named_parameters() if n.startswith(prefix) and p.requires_grad]


class _With(nn.Module):
    """``model`` with the named parameters replaced (functional call)."""

    def __init__(self, model: nn.Module, params: dict[str, torch.Tensor]):
        super().__init__()
        self.model, self.params = model, params

    def forward(self, x):
        return torch.func.functional_call(self.model, self.params, (x,))


def solve_output_layer(model: nn.Module, constraints: Sequence[Constraint], batches: Sequence[tuple],
                       weights: Sequence[float], inputs: Sequence[str], outputs: Sequence[str], method: str,
                       all_reduce_sum: Callable[[torch.Tensor], torch.Tensor], rank: int = 0, world: int = 1,
                       ridge: float = 1e-6, names: Sequence[str] | None = None) -> dict[str, float]:
    """Set the output layer of ``model`` to the minimiser of the loss with the hidden layers fixed; collective.

    Parameters
    ----------
    batches : sequence of (points [n, d], normals or None, weights [n] or None, denominator)
        This rank's batch of each constraint (as the loss sees it).
    weights : sequence of float
        Each term's total weight (its declared weight times any balancing weight).
    ridge : float
        Relative Tikhonov weight (see the module docstring).
    names : sequence of str, optional
        The parameters to solve for (as in ``model.named_parameters()``), in which the loss must be quadratic;
        default :func:`output_layer`.

    Returns
    -------
    dict
        ``{"loss_before": ..., "loss_after": ..., "unknowns": P}`` (global, float64).

    Raises
    ------
    ConfigError
        If the residuals are not affine in the output layer.
    """
    names = output_layer(model) if names is None else list(names)
    dtype = next(model.parameters()).dtype
    if dtype != torch.float64:
        model.to(torch.float64)  # the solve in float64; float32 -> float64 -> float32 is exact
    try:
        params = dict(model.named_parameters())
        theta0 = [params[n].detach().clone() for n in names]
        sizes = [t.numel() for t in theta0]
        p_total = sum(sizes)
        flat0 = torch.cat([t.reshape(-1) for t in theta0])
        rows_a, rows_b, checks = [], [], []
        for c, (pts, nrm, w, denom), lam in zip(constraints, batches, weights):
            if pts.shape[0] == 0 or lam == 0:
                continue
            pts64 = pts.to(torch.float64)
            nrm64 = None if nrm is None else nrm.to(torch.float64)
            row_w = (float(lam) / float(denom)) ** 0.5 * (
                w.to(torch.float64).sqrt() if w is not None else torch.ones(pts.shape[0], dtype=torch.float64,
                                                                            device=pts.device))

            def residual(*theta, c=c, pts64=pts64, nrm64=nrm64):
                net = _With(model, {**params, **dict(zip(names, theta))})
                return constraint_residual(net, c, pts64, nrm64, inputs, outputs, method)

            with torch.no_grad():
                r0 = residual(*theta0)  # [n, m]
            jac = torch.func.jacfwd(residual, argnums=tuple(range(len(names))))(*theta0)
            jac = torch.cat([j.reshape(r0.shape[0], r0.shape[1], -1) for j in jac], dim=2).detach()  # [n, m, P]
            a = (jac * row_w[:, None, None]).reshape(-1, p_total)
            b = ((r0 - jac @ flat0) * row_w[:, None]).reshape(-1)  # the weighted rows: a theta + b
            rows_a.append(a)
            rows_b.append(b)
            checks.append((residual, row_w, a, b))
        a = torch.cat(rows_a) if rows_a else torch.zeros(0, p_total, dtype=torch.float64, device=flat0.device)
        b = torch.cat(rows_b) if rows_b else torch.zeros(0, dtype=torch.float64, device=flat0.device)
        loss_before = all_reduce_sum(((a @ flat0 + b) ** 2).sum().reshape(1).clone())[0]
        # tall-skinny QR over the ranks: each rank's R of [A_r | b_r], stacked in rank order, factored again (the
        # small factors on the host, where the SVD-based solve below runs)
        local = torch.zeros(p_total + 1, p_total + 1, dtype=torch.float64)
        if a.shape[0]:
            r = torch.linalg.qr(torch.cat([a, b[:, None]], dim=1), mode="r")[1]
            local[: r.shape[0]] = r
        stack = torch.zeros(world, p_total + 1, p_total + 1, dtype=torch.float64)
        stack[rank] = local
        all_reduce_sum(stack)
        rb = torch.linalg.qr(stack.reshape(-1, p_total + 1), mode="r")[1]
        r_a, r_b = rb[:p_total, :p_total], rb[:p_total, p_total]
        tik = (ridge * float((r_a**2).sum()) / p_total) ** 0.5
        system = torch.cat([r_a, tik * torch.eye(p_total, dtype=torch.float64)])
        rhs = torch.cat([-r_b, torch.zeros(p_total, dtype=torch.float64)])
        # SVD-based, singular values below 1e-12 of the largest dropped: a rank-deficient layer (the redundant biases
        # of a multiscale body) gets the minimum-norm solution, the same on every run and rank
        theta = torch.linalg.lstsq(system, rhs[:, None], rcond=1e-12, driver="gelsd").solution[:, 0].to(flat0.device)
        new = [piece.reshape(t.shape) for piece, t in zip(torch.split(theta, sizes), theta0)]
        # the loss must be quadratic in theta: the residual at the solution is the affine prediction
        # [loss after per rank..., worst mismatch per rank...]
        stats = torch.zeros(2 * world, dtype=torch.float64, device=flat0.device)
        for residual, row_w, a_c, b_c in checks:
            with torch.no_grad():
                actual = (residual(*new) * row_w[:, None]).reshape(-1)
            predicted = a_c @ theta + b_c
            stats[rank] += (actual**2).sum()
            size = max(float(predicted.abs().max()), float(b_c.abs().max()), 1e-300)
            stats[world + rank] = max(float(stats[world + rank]), float((actual - predicted).abs().max()) / size)
        all_reduce_sum(stats)
        if float(stats[world:].max()) > 1e-6:
            raise ConfigError("training.least_squares: the loss is not quadratic in the output layer (a nonlinear "
                              "PDE, condition or head), so it cannot be solved for; set "
                              "training.least_squares.every=0 and before_finish=false, and a gradient optimizer "
                              "(training.optimizer='adam') if it is 'least_squares'")
        with torch.no_grad():
            for n, t in zip(names, new):
                params[n].copy_(t)
    finally:
        if dtype != torch.float64:
            model.to(dtype)
    return {"loss_before": float(loss_before), "loss_after": float(stats[:world].sum()), "unknowns": p_total}
