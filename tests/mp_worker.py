"""One rank of the 2-rank loss-scale tests (run as a subprocess by test_mixed_precision.py), and the sin
network those tests share.

Usage: python mp_worker.py OUT_DIR
Rank and world come from torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); none: one
process.  Each rank saves OUT_DIR/rank{r}.pt with its parameters before and after each step, the loss
scales, the scaler's decisions and whether its own gradients were finite before the scaler's all-reduce.

Step 1: rank 1 adds a loss term whose scaled gradient overflows the float16 backward of the value matmul
(only there); the gradients are NOT summed before the check, so rank 0's gradients stay finite and only the
scaler's MAX all-reduce can tell rank 0 to skip.  Step 2: the ordinary loss on both ranks, gradients summed
(as the training step's sync does), a step is taken.  Then a scaler with max_overflows=2 meets the
overflowing term twice: every rank must raise LossScaleError at the same step (no rank left waiting).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from elecsolver.networks import Activation, JetLinear, Network
from elecsolver.operators import evaluate

FIRST_WEIGHT = 400.0  # |first-layer weights|: second derivatives ~ 400^2 = 1.6e5 > 65504 (float16 max)
HALF_WIDTH = 0.005    # points x in [-HALF_WIDTH, HALF_WIDTH]: first-layer pre-activations |a| <= ~3.2


def sin_network(width: int = 16, seed: int = 0, dtype=torch.float32) -> Network:
    """x -> u: JetLinear(1, w), sin, JetLinear(w, w), sin, JetLinear(w, 1); first-layer weights of magnitude
    400 to 440 with random signs, biases U(-1, 1), later weights N(0, 1/w)."""
    g = torch.Generator().manual_seed(seed)
    l1, l2, l3 = JetLinear(1, width), JetLinear(width, width), JetLinear(width, 1)
    with torch.no_grad():
        sign = torch.where(torch.rand(width, 1, generator=g) < 0.5, -1.0, 1.0)
        l1.weight.copy_(sign * FIRST_WEIGHT * (1 + 0.1 * torch.rand(width, 1, generator=g)))
        l1.bias.copy_(torch.rand(width, generator=g) * 2 - 1)
        l2.weight.copy_(torch.randn(width, width, generator=g) / width ** 0.5)
        l2.bias.copy_(torch.rand(width, generator=g) * 2 - 1)
        l3.weight.copy_(torch.randn(1, width, generator=g) / width ** 0.5)
        l3.bias.zero_()
    return Network(nn.Sequential(l1, Activation("sin"), l2, Activation("sin"), l3)).to(dtype)


def jet_channels(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """u, du/dx, d2u/dx2 of the 1-input network at x [N, 1]: [3, N, 1]."""
    return evaluate(model, x, ["x"], ["u"], second=[("x", "x")]).jet.channels


def loss_terms(model: nn.Module, x: torch.Tensor, overflow: bool = False) -> torch.Tensor:
    """An O(1) loss on u and its derivatives (nondimensionalised by 400 per derivative); ``overflow`` adds
    1e4 mean((u - 30)^2), whose gradient times a loss scale of 2^16 is far beyond float16's range."""
    ch = jet_channels(model, x)
    u, ux, uxx = ch[0], ch[1] / FIRST_WEIGHT, ch[2] / FIRST_WEIGHT ** 2
    loss = (u ** 2).mean() + (ux ** 2).mean() + ((uxx + u) ** 2).mean()
    if overflow:
        loss = loss + 1e4 * ((u - 30.0) ** 2).mean()
    return loss


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def _local_nonfinite(model: nn.Module) -> bool:
    return any(not bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None)


def main() -> None:
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
    from elecsolver.parallel.mixed_precision import (
        DynamicLossScaler,
        LossScaleError,
        apply_mixed_precision,
        autocast,
    )

    out = sys.argv[1]
    _, info, _ = init_data_parallel("cpu")
    rank, world = info.rank, info.world
    torch.set_num_threads(1)

    def all_reduce_max(t):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)

    def sum_grads(params):
        for p in params:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)

    model = apply_mixed_precision(sin_network(), "fp16")   # the same parameters on every rank (fixed seed)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    scaler = DynamicLossScaler(init_scale=2.0 ** 16, all_reduce_max=all_reduce_max if world > 1 else None)
    x = torch.linspace(-HALF_WIDTH, HALF_WIDTH, 16).unsqueeze(1) + 1e-4 * rank   # this rank's points

    record: dict = {"rank": rank, "world": world, "scales": [scaler.scale], "decisions": [], "local_nonfinite": []}
    record["p0"] = _flat(model)

    def step(overflow: bool, sync: bool) -> None:
        opt.zero_grad(set_to_none=False)
        with autocast("cpu", "fp16"):
            loss = loss_terms(model, x, overflow=overflow)
        (loss * scaler.scale).backward()
        if sync:
            sum_grads(params)
        record["local_nonfinite"].append(_local_nonfinite(model))
        ok = scaler.check(params)
        record["decisions"].append(ok)
        if ok:
            opt.step()
        record["scales"].append(scaler.scale)

    step(overflow=(rank == 1), sync=False)   # step 1: only rank 1 overflows; no gradient sum first
    record["p1"] = _flat(model)
    step(overflow=False, sync=True)          # step 2: a good step on both ranks
    record["p2"] = _flat(model)

    scaler = DynamicLossScaler(init_scale=2.0 ** 16, max_overflows=2,
                               all_reduce_max=all_reduce_max if world > 1 else None)
    raised_at, message = None, ""
    for k in range(4):
        opt.zero_grad(set_to_none=False)
        with autocast("cpu", "fp16"):
            loss = loss_terms(model, x, overflow=(rank == 1))
        (loss * scaler.scale).backward()
        try:
            scaler.check(params)
        except LossScaleError as err:
            raised_at, message = k, str(err)
            break
    record["raised_at"], record["message"] = raised_at, message
    torch.save(record, os.path.join(out, f"rank{rank}.pt"))
    shutdown()


if __name__ == "__main__":
    main()
