"""One rank of the tensor-parallel equality tests (run as 2 subprocesses by test_tensor_parallel.py).

Usage: python tp_worker.py OUT_PREFIX
Rank and world come from torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); the mesh is
dp=1 x tp=WORLD_SIZE.  Each rank saves OUT_PREFIX.rank{r}.pt with, per network case, the losses of 5 Adam
steps, the gathered (full-shape) gradients of the first step, the gathered parameters after the steps, and
the results of the parameter-count, collective-count and state-dict round-trip checks.

The helpers (``build``, ``batch``, ``loss_fn``, ``train``) are imported by the test for the one-process
reference, so that both sides build the same seeded network on the same points.
"""

from __future__ import annotations

import sys

import torch

from elecsolver.config import merge
from elecsolver.networks import HardInitialCondition, Network, build_body
from elecsolver.operators import evaluate
from elecsolver.training.options import BASE_CONFIG, NetworkOptions

INPUTS, OUTPUTS = ("x", "y", "t"), ("Ez", "Hx", "Hy")
LOWER, UPPER = [-1.0, -0.5, 0.0], [1.0, 1.5, 2.0]
CASES = {
    "mlp3": {"kind": "mlp", "activation": "tanh", "width": 16, "depth": 3},
    "mlp4": {"kind": "mlp", "activation": "tanh", "width": 16, "depth": 4},
    "multiscale": {"kind": "multiscale", "activation": "sin", "width": 8, "depth": 2, "scales": [1.0, 4.0]},
}
STEPS, LR = 5, 1e-2


def build(network: dict, seed: int = 0) -> Network:
    """The float64 network of the ``network`` block (on top of the base defaults), seeded, with a head."""
    torch.manual_seed(seed)
    opts = NetworkOptions.from_config(merge(BASE_CONFIG, {"network": {**network, "output_gain": 1.0}}))
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        body = build_body(opts, len(INPUTS), len(OUTPUTS), LOWER, UPPER)
    finally:
        torch.set_default_dtype(prev)
    return Network(body, [HardInitialCondition(t_column=2, t_start=0.0, span=2.0)]).double()


def batch(seed: int = 11) -> dict:
    g = torch.Generator().manual_seed(seed)
    lo, hi = torch.tensor(LOWER, dtype=torch.float64), torch.tensor(UPPER, dtype=torch.float64)
    interior = lo + (hi - lo) * torch.rand(37, 3, generator=g, dtype=torch.float64)
    boundary = lo + (hi - lo) * torch.rand(13, 3, generator=g, dtype=torch.float64)
    return {"interior": interior, "boundary": boundary}


def loss_fn(model, data: dict) -> torch.Tensor:
    """Constraint-like terms: mean squares of second-order jet residuals on the interior (value, first and
    second derivatives, the wave-operator Laplacian channel) plus a plain-tensor boundary term."""
    f = evaluate(model, data["interior"], INPUTS, OUTPUTS, second=[("x", "x"), ("x", "t")],
                 laplacian={"x": 1, "y": 1, "t": -1})
    ch = f.jet.channels  # [1 + 3 + 2 + 1, N, 3]
    wave = ch[-1, :, 0] - 0.5 * ch[1, :, 2] + ch[0, :, 1]       # L[Ez] - 0.5 dHy/dx + Hx
    mixed = ch[4, :, 0] + ch[5, :, 1] - ch[3, :, 2]             # Ez_xx + Hx_xt - Hy_t
    channels = sum((c + 1) * (ch[c] ** 2).mean() for c in range(ch.shape[0]))
    xb = data["boundary"]
    bnd = ((model(xb) - torch.sin(xb[:, :1])) ** 2).mean()
    return (wave ** 2).mean() + (mixed ** 2).mean() + 1e-2 * channels + bnd


def train(model, data: dict, steps: int = STEPS, on_first_grad=None) -> list[float]:
    """``steps`` Adam steps on ``loss_fn``; calls ``on_first_grad()`` after the first backward."""
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    losses = []
    for k in range(steps):
        opt.zero_grad()
        loss = loss_fn(model, data)
        loss.backward()
        if k == 0 and on_first_grad is not None:
            on_first_grad()
        opt.step()
        losses.append(loss.item())
    return losses


def _params(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def main() -> None:
    prefix = sys.argv[1]
    from elecsolver.parallel import tensor_parallel as tpm
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
    from elecsolver.parallel.mesh import DeviceMesh
    from elecsolver.parallel.tensor_parallel import (
        apply_tensor_parallel,
        gather_tensor_parallel,
        load_full_state_dict,
        sharded_modules,
    )

    _, info, _ = init_data_parallel("cpu")
    torch.set_num_threads(1)
    mesh = DeviceMesh(tp=info.world)
    data = batch()
    out: dict = {"rank": info.rank, "cases": {}}

    for case, network in CASES.items():
        model = apply_tensor_parallel(build(network), mesh)
        grads: dict = {}

        def first_grad(model=model, grads=grads):
            full = gather_tensor_parallel(model, mesh, grad=True)
            grads.update({n: p.grad.clone() for n, p in full.named_parameters()})

        losses = train(model, data, on_first_grad=first_grad)
        full = gather_tensor_parallel(model, mesh)
        out["cases"][case] = {
            "losses": losses, "grads": grads, "params": _params(full),
            "sharded": sorted(sharded_modules(model)),
            "local_shapes": {n: tuple(p.shape) for n, p in model.named_parameters()},
        }

    # one all-reduce per row-parallel layer call in the forward of a second-order jet (all channels at once)
    calls = []
    real = tpm.dist.all_reduce
    tpm.dist.all_reduce = lambda t, *a, **k: (calls.append(tuple(t.shape)), real(t, *a, **k))[1]
    try:
        model = apply_tensor_parallel(build(CASES["mlp3"]), mesh)
        with torch.no_grad():
            evaluate(model, data["interior"], INPUTS, OUTPUTS, second=[("x", "x"), ("x", "t")],
                     laplacian={"x": 1, "y": 1, "t": -1})
    finally:
        tpm.dist.all_reduce = real
    out["forward_all_reduces"] = calls
    out["row_layers"] = sum(isinstance(m, tpm.RowParallelJetLinear) for m in model.modules())

    # parameter count per rank: mlp width 64 depth 4
    big = {"kind": "mlp", "activation": "tanh", "width": 64, "depth": 4}
    out["count_full"] = sum(p.numel() for p in build(big).parameters())
    out["count_tp"] = sum(p.numel() for p in apply_tensor_parallel(build(big), mesh).parameters())

    # state-dict round trip: a full state dict (another seed) into the sharded model, then gathered back
    trips = {}
    for case in ("mlp3", "multiscale"):
        ref = build(CASES[case], seed=5)
        sharded = apply_tensor_parallel(build(CASES[case], seed=6), mesh)
        load_full_state_dict(sharded, ref.state_dict(), mesh)
        rng = torch.get_rng_state()
        back = gather_tensor_parallel(sharded, mesh)
        rng_kept = torch.equal(rng, torch.get_rng_state())
        fresh = build(CASES[case], seed=7)
        fresh.load_state_dict(back.state_dict(), strict=True)
        jet = {"second": [("x", "t")], "laplacian": {"x": 1, "y": 1}}
        c_ref = evaluate(ref, data["interior"], INPUTS, OUTPUTS, **jet).jet.channels.detach()
        c_tp = evaluate(sharded, data["interior"], INPUTS, OUTPUTS, **jet).jet.channels.detach()
        sd_ref, sd_back = ref.state_dict(), back.state_dict()
        trips[case] = {
            "keys_equal": list(sd_ref) == list(sd_back),
            "exact": all(torch.equal(sd_ref[k], sd_back[k]) for k in sd_ref),
            "no_tp_layers": not sharded_modules(back),
            "rng_kept": rng_kept,
            "forward_rel": float((c_tp - c_ref).norm() / c_ref.norm()),
            "fresh_exact": all(torch.equal(v, fresh.state_dict()[k]) for k, v in sd_ref.items()),
        }
    out["round_trip"] = trips
    torch.save(out, f"{prefix}.rank{info.rank}.pt")
    shutdown()


if __name__ == "__main__":
    main()
