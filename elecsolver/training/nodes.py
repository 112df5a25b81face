"""A family solved by least squares at nodes of its parameter box and interpolated between them
(``sampling.parameters = "nodes"``).

For a linear problem whose hidden features are held fixed (random features, ``training.optimizer =
"least_squares"``), the output layer that minimises the loss at one configuration of a family is a linear
least-squares solve (:mod:`elecsolver.training.least_squares`).  This module builds the whole family from such
solves, a reduced-basis method with its offline stage on the collocation points (Hesthaven, Rozza & Stamm,
*Certified Reduced Basis Methods for Parametrized Partial Differential Equations*, Springer, 2016, ch. 2-3: the
snapshots, the reduced space and the residual minimised in it; here the discrete residual is the PINN loss):

1. **snapshots** -- the full output layer (P unknowns) solved at the tensor grid of ``sampling.snapshots``
   Chebyshev-Lobatto nodes per parameter, each on the run's collocation points with the parameter columns set to
   the node (the points are drawn once and shared by every node);
2. **the reduced space** -- an orthonormal basis V [P, M] of the span of those output layers, from their SVD
   (singular values below 1e-12 of the largest dropped).  For a complex field carried as "u.re" and "u.im" the
   span is made closed under multiplication by i, each solution's channels (re, im) rotated to (-im, re) joining
   it, so that real coefficients act as complex ones;
3. **the online solves** -- at the tensor grid of ``sampling.nodes`` nodes per parameter, the output layer V alpha
   whose M coefficients minimise the same loss there (a least-squares solve with M unknowns);
4. the network's output layer interpolates these layers between the nodes
   (:class:`~elecsolver.networks.NodeInterpolation`), so that a query or an inversion evaluates the network at any
   configuration of the box without a solve.

The loss of each solve is the loss of the run at that node; the worst of them over the online nodes is logged.
"""

from __future__ import annotations

import itertools
import logging
import time

import torch
from torch import nn

from ..jets import Jet
from ..networks import JetLinear, Network, NodeInterpolation, chebyshev_lobatto
from .least_squares import solve_output_layer

__all__ = ["complex_pairs", "node_head", "placed", "solve_nodes"]

log = logging.getLogger(__name__)

RANK_TOLERANCE = 1e-12  # relative singular value below which a snapshot direction is dropped


class _LinearHead(nn.Module):
    """One output layer as a head (the snapshots' unknowns)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = JetLinear(in_features, out_features)

    def forward(self, y, x):
        return self.linear(y)


class _ReducedHead(nn.Module):
    """The output layer V alpha: weight and bias read from ``basis @ alpha`` (weight rows first, then the bias)."""

    def __init__(self, basis: torch.Tensor, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("basis", basis)
        self.alpha = nn.Parameter(torch.zeros(basis.shape[1], dtype=basis.dtype, device=basis.device))
        self.in_features, self.out_features = in_features, out_features

    def layer(self) -> tuple[torch.Tensor, torch.Tensor]:
        theta = self.basis @ self.alpha
        n = self.in_features * self.out_features
        return theta[:n].reshape(self.out_features, self.in_features), theta[n:]

    def forward(self, y, x):
        w, b = self.layer()
        if isinstance(y, Jet):
            out = torch.matmul(y.channels, w.t())
            return y.like(torch.cat([out[:1] + b, out[1:]], 0))
        return y @ w.t() + b


class _CachedBody(nn.Module):
    """The body, evaluated once per input: the features are fixed, and the solves at a node evaluate the same
    points several times (the rows, their Jacobian, the check).  Outputs made inside a functorch transform are not
    kept."""

    def __init__(self, body: nn.Module, size: int = 8):
        super().__init__()
        self.body, self.size = body, size
        self._kept: list[tuple] = []  # (input, spec key, output), the newest last

    @staticmethod
    def _parts(x):
        if isinstance(x, Jet):
            return x.channels, (x.spec.wrt, x.spec.pairs, repr(x.spec.laplacian))
        return x, None

    def forward(self, x):
        data, spec = self._parts(x)
        if not _wrapped(data):
            for old, old_spec, out in self._kept:
                if old_spec == spec and old.shape == data.shape and old.dtype == data.dtype and torch.equal(old, data):
                    return out
        out = self.body(x)
        value = out.channels if isinstance(out, Jet) else out
        if not (_wrapped(data) or _wrapped(value)):
            self._kept = [*self._kept[-(self.size - 1):], (data.detach().clone(), spec, out)]
        return out


def _wrapped(t: torch.Tensor) -> bool:
    """Whether ``t`` lives inside a torch.func transform (not a plain tensor to keep)."""
    check = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    return bool(check(t)) if check is not None else True


def complex_pairs(outputs) -> list[tuple[int, int]]:
    """(re, im) channel indices of each complex field among the output channels ``"u.re"``, ``"u.im"``."""
    outputs = list(outputs)
    return [(i, outputs.index(name[:-3] + ".im")) for i, name in enumerate(outputs)
            if name.endswith(".re") and name[:-3] + ".im" in outputs]


def _times_i(theta: torch.Tensor, pairs, in_features: int, out_features: int) -> torch.Tensor:
    """Output layers [P, S] (weight rows, then bias) multiplied by i: (re, im) -> (-im, re); real channels 0."""
    n = in_features * out_features
    w, b = theta[:n].reshape(out_features, in_features, -1), theta[n:]
    w2, b2 = torch.zeros_like(w), torch.zeros_like(b)
    for re, im in pairs:
        w2[re], w2[im] = -w[im], w[re]
        b2[re], b2[im] = -b[im], b[re]
    return torch.cat([w2.reshape(n, -1), b2])


def placed(problem, batches: list[tuple]) -> list[tuple]:
    """The batches with their points moved by the problem's ``place_points`` hook, if it has one.

    ``problem.place_points(points) -> (points, weights)`` takes points [n, d] in training units, whose space
    columns are read as coordinates of a reference configuration and whose parameter columns hold the configuration,
    and returns the points of that configuration and a weight per point [n] (the Jacobian determinant of the
    placement, so that a loss term keeps its measure).  Used where a problem maps its geometry onto a reference
    one (the dielectric cylinder's radius): every configuration is then solved on points that resolve it alike.
    """
    place = getattr(problem, "place_points", None)
    if place is None:
        return batches
    out = []
    for pts, nrm, w, denom in batches:
        q, jac = place(pts)
        out.append((q, nrm, jac if w is None else w * jac, denom))
    return out


def node_head(model: nn.Module) -> NodeInterpolation | None:
    """The model's :class:`~elecsolver.networks.NodeInterpolation` head (its first), or None."""
    heads = getattr(model, "heads", None)
    if heads is not None and len(heads) and isinstance(heads[0], NodeInterpolation):
        return heads[0]
    return None


def solve_nodes(trainer) -> dict[str, float]:
    """Build the family's interpolated output layer by the two stages of the module docstring; collective.

    Parameters
    ----------
    trainer : elecsolver.training.trainer.Trainer
        A trainer whose model's first head is a :class:`~elecsolver.networks.NodeInterpolation` (the problem's
        ``sampling.parameters = "nodes"``); its current points are used at every node.

    Returns
    -------
    dict
        ``{"loss_before": ..., "loss_after": ..., "unknowns": M, "snapshots": S1, "nodes": S2}``: the loss before
        (zero layer) and after the worst online solve, and the size of the reduced space.
    """
    problem, model, ctx = trainer.problem, trainer.model, trainer.ctx
    head = node_head(model)
    rest = list(model.heads[1:])
    n_in, n_out = head.in_features, head.out_features
    weights = [c.weight * float(lam) for c, lam in zip(trainer.constraints, trainer.balance_weights)]
    batches = trainer._batches_now()
    ridge = trainer.options.least_squares["ridge"]
    cols = head.columns

    def at(node) -> list[tuple]:
        out = []
        for pts, nrm, w, denom in batches:
            q = pts.clone()
            q[:, cols] = torch.tensor(node, dtype=q.dtype, device=q.device)
            out.append((q, nrm, w, denom))
        return placed(problem, out)

    def solve(net, names, node) -> dict:
        return solve_output_layer(net, trainer.constraints, at(node), weights, problem.inputs, problem.outputs,
                                  trainer.options.derivatives, ctx.all_reduce_sum, ctx.rank, ctx.world, ridge,
                                  names=names)

    device = head.weight.device
    ends = [(n[0], n[-1]) for n in head.nodes]  # Chebyshev-Lobatto nodes include the box's ends
    grid = list(itertools.product(*[chebyshev_lobatto(int(problem.sampling.snapshots), lo, hi) for lo, hi in ends]))
    lin = _LinearHead(n_in, n_out).to(device=device, dtype=torch.float64)
    body = _CachedBody(model.body)
    net = Network(body, [lin, *rest])
    t0, snaps, before = time.perf_counter(), [], 0.0
    for k, node in enumerate(grid):
        with torch.no_grad():
            lin.linear.weight.zero_()
            lin.linear.bias.zero_()
        out = solve(net, ["heads.0.linear.weight", "heads.0.linear.bias"], node)
        before = max(before, out["loss_before"])
        snaps.append(torch.cat([lin.linear.weight.detach().reshape(-1), lin.linear.bias.detach()]).double())
        log.info("snapshot %d/%d at %s: loss %.4g (%.1f s)", k + 1, len(grid), _node_text(problem, node),
                 out["loss_after"], time.perf_counter() - t0)
    theta = torch.stack(snaps, 1)
    pairs = complex_pairs(problem.outputs)
    if pairs:
        theta = torch.cat([theta, _times_i(theta, pairs, n_in, n_out)], 1)
    u, s, _ = torch.linalg.svd(theta, full_matrices=False)
    basis = u[:, s > RANK_TOLERANCE * s[0]].contiguous()
    red = _ReducedHead(basis, n_in, n_out)
    net = Network(body, [red, *rest])
    layers_w, layers_b, worst = [], [], 0.0
    t1 = time.perf_counter()
    nodes = head.node_values()
    for k, node in enumerate(nodes):
        with torch.no_grad():
            red.alpha.zero_()
        out = solve(net, ["heads.0.alpha"], node)
        worst = max(worst, out["loss_after"])
        if (k + 1) % max(1, len(nodes) // 8) == 0 or k + 1 == len(nodes):
            log.info("online solves in a reduced space of %d: %d/%d, worst loss %.4g (%.1f s)", basis.shape[1],
                     k + 1, len(nodes), worst, time.perf_counter() - t1)
        with torch.no_grad():
            w, b = red.layer()
        layers_w.append(w.detach())
        layers_b.append(b.detach())
    with torch.no_grad():
        head.weight.copy_(torch.stack(layers_w).to(head.weight))
        head.bias.copy_(torch.stack(layers_b).to(head.bias))
    log.info("reduced space of %d (the %d snapshots%s); %d online solves in %.1f s, worst loss %.4g",
             basis.shape[1], len(grid), ", each also times i" if pairs else "", len(layers_w),
             time.perf_counter() - t1, worst)
    return {"loss_before": before, "loss_after": worst, "unknowns": int(basis.shape[1]), "snapshots": len(grid),
            "nodes": len(layers_w)}


def _node_text(problem, node) -> str:
    """A node (training units) as "name=value unit, ..." in SI."""
    import numpy as np

    k = len(problem.inputs) - len(problem.parameters)
    si = np.asarray(node, dtype=np.float64) * problem._axis_scales()[k:]
    return ", ".join(f"{p.name} = {p.quantity(v)}" for p, v in zip(problem.parameters, si))
