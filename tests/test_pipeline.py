"""Pipeline parallelism: pp = 2 stages (GPipe and 1F1B, 4 micro-batches) give the loss terms, the gradients
and the parameters after 5 Adam steps of one process running loss_terms on the same points.

float64, normwise relative 1e-10 (shared/DESIGN.md invariant 3), on the small 2-D point source with and
without the hard initial-condition head, and with a constraint that has no points on the rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import free_port
from dp_worker import small_problem
from elecsolver.parallel.pipeline import (
    PipelineSchedule,
    full_state_dict,
    load_full_state_dict,
    partition_layers,
    split_network,
)
from pp_worker import LR, make_batches

from elecsolver.trainer import build_model
from elecsolver.training.loss import loss_terms

HERE = Path(__file__).resolve().parent
STEPS = 5
CASES = [
    {"name": "gpipe", "schedule": "gpipe", "hard_initial": False, "microbatches": 4, "steps": STEPS, "empty": None},
    {"name": "1f1b", "schedule": "1f1b", "hard_initial": False, "microbatches": 4, "steps": STEPS, "empty": None},
    {"name": "gpipe-hard", "schedule": "gpipe", "hard_initial": True, "microbatches": 4, "steps": STEPS,
     "empty": None},
    {"name": "1f1b-hard", "schedule": "1f1b", "hard_initial": True, "microbatches": 4, "steps": STEPS,
     "empty": None},
    {"name": "1f1b-empty", "schedule": "1f1b", "hard_initial": False, "microbatches": 4, "steps": STEPS,
     "empty": "source"},
]


def _rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(np.asarray(b)), 1e-300))


@pytest.fixture(scope="module")
def two_stages(tmp_path_factory):
    """Run all cases in one 2-rank launch; {case: [rank-0 results, rank-1 results]}."""
    prefix = tmp_path_factory.mktemp("pp") / "out"
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(HERE / "pp_worker.py"), str(prefix), json.dumps(CASES)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        text, _ = p.communicate(timeout=300)
        assert p.returncode == 0, text
    out = {c["name"]: [{}, {}] for c in CASES}
    for rank in range(2):
        with np.load(f"{prefix}.{rank}.npz") as d:
            for key in d.files:
                case, rest = key.split("__", 1)
                out[case][rank][rest] = d[key]
    return out


def _single_process(case: dict) -> dict:
    """loss_terms of the unsplit network on the same points: terms, gradients, parameters after the steps."""
    problem = small_problem(hard_initial=case["hard_initial"])
    model = build_model(problem)
    params = list(model.parameters())
    constraints, batches = problem.constraints(), make_batches(problem, case["empty"])
    opt = torch.optim.Adam(params, lr=LR)
    out = {}
    for step in range(case["steps"]):
        opt.zero_grad(set_to_none=True)
        terms = loss_terms(model, params, constraints, batches, problem.inputs, problem.outputs)
        terms.sum().backward()
        if step == 0:
            out["terms"] = terms.detach().numpy().copy()
            out["grads"] = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
            out["params0"] = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
        opt.step()
    out["params"] = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_two_stages_equal_one_process(two_stages, case):
    ref = _single_process(case)
    ranks = two_stages[case["name"]]
    # the loss terms: identical on both stages (broadcast from the last), equal to one process
    np.testing.assert_array_equal(ranks[0]["terms"], ranks[1]["terms"])
    assert _rel(ranks[0]["terms"], ref["terms"]) < 1e-10
    if case["empty"]:
        assert ranks[0]["terms"][1] == 0.0
    # every stage's gradients against the unsplit network's parameters of the same names
    seen = []
    for rank, res in enumerate(ranks):
        names = [k[len("grad__"):] for k in res if k.startswith("grad__")]
        assert names, f"stage {rank} holds no parameters"
        for name in names:
            assert _rel(res["grad__" + name], ref["grads"][name]) < 1e-10, (rank, name)
            assert np.linalg.norm(res["grad__" + name]) > 0, (rank, name)
        seen += names
    assert sorted(seen) == sorted(ref["grads"])  # the stages' parameters partition the network's
    # the parameters after the Adam steps (every stage gathers the same full state)
    for res in ranks:
        for name, value in ref["params"].items():
            assert _rel(res["param__" + name], value) < 1e-10, name
    moved = max(_rel(ref["params"][n], v) for n, v in ref["params0"].items())
    assert moved > 1e-6  # not vacuous: the steps moved the parameters by far more than the tolerance
    # the gathered single-device model reproduces the pipeline's loss
    assert float(ranks[0]["gather_err"]) < 1e-10


def test_full_state_dict_round_trip(two_stages):
    """split_network + full_state_dict give the unsplit network's state (keys in its order), and a loaded
    full state reads back; in process: names, balance and the one-stage round trip."""
    for res in two_stages["gpipe"]:
        assert bool(res["roundtrip_keys"])
        assert float(res["roundtrip_err"]) == 0.0
        assert float(res["reload_err"]) == 0.0
    model = build_model(small_problem())
    full = {k: v.clone() for k, v in model.state_dict().items()}
    stages = [split_network(model, 2, s) for s in range(2)]
    assert stages[0].bounds == [(0, 4), (4, 8)]  # the parameters balance: 128 | 544 + 102
    own = [set(s.state_dict()) for s in stages]
    assert not own[0] & own[1] and own[0] | own[1] == set(full)
    one = split_network(model, 1, 0)
    sd = full_state_dict(one)
    assert list(sd) == list(full) and all(torch.equal(sd[k], full[k]) for k in full)
    load_full_state_dict(one, {k: v * 2 for k, v in sd.items()})
    assert torch.equal(model.body[4].weight, 2 * full["body.4.weight"])  # the stage shares the layers


def test_split_errors():
    model = build_model(small_problem())
    with pytest.raises(ValueError, match="8 layers into 9 pipeline stages"):
        split_network(model, 9, 0)
    assert partition_layers([1] * 3, 3) == [(0, 1), (1, 2), (2, 3)]


def test_too_few_points_for_the_microbatches():
    problem = small_problem()
    model = build_model(problem)
    stage = split_network(model, 1, 0)
    constraints = problem.constraints()
    sched = PipelineSchedule(stage, None, constraints, problem.inputs, problem.outputs, 4, "1f1b")
    batches = make_batches(problem)
    pts, nrm, w, denom = batches[2]
    batches[2] = (pts[:3], nrm[:3], w[:3], denom)
    name = constraints[2].name
    with pytest.raises(ValueError, match=rf"fewer points on this rank than the 4 pipeline micro-batches: {name!r} \(3\); use --microbatches 3 or less"):
        sched(batches)
    assert all(p.grad is None for p in stage.parameters())  # raised before any work
