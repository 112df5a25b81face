"""One rank of the pipeline-parallel equality tests (run as a subprocess by test_pipeline.py).

Usage: python pp_worker.py OUT_PREFIX CASES_JSON
CASES_JSON: a list of {"name", "schedule", "hard_initial", "microbatches", "steps", "empty"} (``empty``: a
constraint given no points, or null).  Rank and world come from torchrun-style variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); every rank is one stage of a pp = world pipeline and writes OUT_PREFIX.RANK.npz
with, per case: the loss terms, its stage's gradients (full-network names), the full state dict after the
Adam steps, and the round-trip checks of full_state_dict / load_full_state_dict / gather_pipeline.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from dp_worker import small_problem

from elecsolver.trainer import build_model

SEED = 5
LR = 1e-3


def make_batches(problem, empty: str | None = None, dtype=torch.float64) -> list[tuple]:
    """(points, normals, weights, denominator) per constraint from ``c.sample(SEED, 1.0)``; ``empty`` names a
    constraint that gets no points (a data-parallel rank without any)."""
    out = []
    for c in problem.constraints():
        cloud = c.sample(SEED, 1.0)

        def t(a):
            return None if a is None else torch.as_tensor(np.asarray(a), dtype=dtype)

        pts, nrm, w = t(cloud.points), t(cloud.normals), t(cloud.weights)
        denom = float(len(cloud)) if cloud.weights is None else float(np.sum(cloud.weights))
        if c.name == empty:
            pts, nrm, w = pts[:0], None if nrm is None else nrm[:0], None if w is None else w[:0]
        out.append((pts, nrm, w, denom))
    return out


def run_case(case: dict, mesh) -> dict:
    from elecsolver.parallel.pipeline import (
        PipelineSchedule,
        full_state_dict,
        gather_pipeline,
        load_full_state_dict,
        split_network,
    )

    from elecsolver.training.loss import loss_terms

    problem = small_problem(hard_initial=case["hard_initial"])
    full = build_model(problem)
    reference_state = {k: v.clone() for k, v in full.state_dict().items()}
    stage = split_network(full, mesh.size("pp"), mesh.index("pp"))
    constraints = problem.constraints()
    batches = make_batches(problem, case.get("empty"))
    out: dict = {}

    # round trip: the stages' full state dict is the unsplit one; loading a perturbed one reads back
    sd = full_state_dict(stage, mesh)
    out["roundtrip_keys"] = np.array(list(sd) == list(reference_state))
    out["roundtrip_err"] = np.array(max(float((sd[k] - v).abs().max()) for k, v in reference_state.items()))
    perturbed = {k: v + 0.125 if v.is_floating_point() else v for k, v in sd.items()}
    load_full_state_dict(stage, perturbed)
    back = full_state_dict(stage, mesh)
    out["reload_err"] = np.array(max(float((back[k] - v).abs().max()) for k, v in perturbed.items()))
    load_full_state_dict(stage, sd)

    sched = PipelineSchedule(stage, mesh, constraints, problem.inputs, problem.outputs, case["microbatches"],
                             case["schedule"])
    params = list(stage.parameters())
    opt = torch.optim.Adam(params, lr=LR)
    names = {id(p): n for n, p in stage.named_parameters()}
    for step in range(case["steps"]):
        opt.zero_grad(set_to_none=True)
        terms = sched(batches, scale=1.0)
        if step == 0:
            out["terms"] = terms.numpy().copy()
            for p in params:
                out["grad__" + names[id(p)]] = p.grad.numpy().copy()
        opt.step()
    for k, v in full_state_dict(stage, mesh).items():
        out["param__" + k] = v.numpy().copy()
    # the gathered single-device model gives the same terms as the pipeline at the final parameters
    final = sched(batches)
    opt.zero_grad(set_to_none=True)
    model = gather_pipeline(stage, mesh, build_model(problem))
    terms_full = loss_terms(model, list(model.parameters()), constraints, batches, problem.inputs, problem.outputs)
    out["gather_err"] = np.array(float((final - terms_full.detach()).norm() / terms_full.detach().norm()))
    return out


def main() -> None:
    prefix, cases = sys.argv[1], json.loads(sys.argv[2])
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
    from elecsolver.parallel.mesh import DeviceMesh

    _, info, _ = init_data_parallel("cpu")
    torch.set_num_threads(1)
    mesh = DeviceMesh(dp=1, tp=1, pp=info.world)
    saved = {}
    for case in cases:
        for k, v in run_case(case, mesh).items():
            saved[case["name"] + "__" + k] = v
    np.savez(f"{prefix}.{info.rank}.npz", **saved)
    shutdown()


if __name__ == "__main__":
    main()
