"""Tensor parallelism (Megatron-LM column/row pairs on jets): 2 tp ranks give the loss, the gradients and
the parameters after 5 Adam steps of one process, for the same seeded network on the same points.

float64, normwise relative 1e-10 (shared/DESIGN.md invariant), with a second-order jet loss (second
derivatives and a wave-operator Laplacian channel) plus a plain-tensor term.  The 2-rank side runs once
(tests/tp_worker.py, gloo) for all cases; the one-process reference is computed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import free_port
from elecsolver.parallel.mesh import DeviceMesh
from elecsolver.parallel.tensor_parallel import apply_tensor_parallel, copy_to_tp, reduce_from_tp
from tp_worker import CASES, batch, build, train

HERE = Path(__file__).resolve().parent
TOL = 1e-10


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    prefix = tmp_path_factory.mktemp("tp") / "out"
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, str(HERE / "tp_worker.py"), str(prefix)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        text, _ = p.communicate(timeout=240)
        assert p.returncode == 0, text
    return [torch.load(f"{prefix}.rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.fixture(scope="module")
def single() -> dict:
    """The one-process reference: the same seeded networks, points, loss and optimizer."""
    data, out = batch(), {}
    for case, network in CASES.items():
        model = build(network)
        params0 = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads: dict = {}
        losses = train(model, data, on_first_grad=lambda m=model, g=grads: g.update(
            {n: p.grad.clone() for n, p in m.named_parameters()}))
        out[case] = {"losses": losses, "grads": grads, "params0": params0,
                     "params": {n: p.detach().clone() for n, p in model.named_parameters()}}
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_two_tp_ranks_equal_one_process(two_ranks, single, case):
    ref = single[case]
    names = list(ref["params"])
    flat = lambda d: torch.cat([d[n].reshape(-1) for n in names])
    for r in two_ranks:  # every tp rank holds the same loss and gathers the same full model
        got = r["cases"][case]
        assert got["sharded"], "nothing was sharded"
        assert list(got["params"]) == names  # the gathered model keeps the unsharded parameter names
        assert _rel(torch.tensor(got["losses"]), torch.tensor(ref["losses"])) <= TOL
        assert abs(got["losses"][0] - ref["losses"][0]) <= TOL * abs(ref["losses"][0])
        for n in names:
            assert got["grads"][n].shape == ref["grads"][n].shape
            assert _rel(got["grads"][n], ref["grads"][n]) <= TOL, n
        assert _rel(flat(got["params"]), flat(ref["params"])) <= TOL
        moved = flat(got["params"]) - flat(ref["params0"])
        moved_ref = flat(ref["params"]) - flat(ref["params0"])
        assert _rel(moved, moved_ref) <= TOL  # the displacement too, not only parameters near their start
        assert float(moved_ref.norm() / flat(ref["params0"]).norm()) > 1e-4  # not vacuous


def test_layout_and_sharding(two_ranks):
    r0, r1 = two_ranks
    # mlp depth 3: 4 linears, two pairs (the output layer row parallel); depth 4: the output layer replicated
    assert r0["cases"]["mlp3"]["sharded"] == ["body.1", "body.3", "body.5", "body.7"]
    assert r0["cases"]["mlp4"]["sharded"] == ["body.1", "body.3", "body.5", "body.7"]
    assert r0["cases"]["mlp4"]["local_shapes"]["body.9.weight"] == (3, 16)
    # multiscale: ScaleReplicate at 1, grouped linears at 2, 4, 6; the last one stays replicated
    assert r0["cases"]["multiscale"]["sharded"] == ["body.2", "body.4"]
    shapes = r0["cases"]["multiscale"]["local_shapes"]
    assert shapes["body.2.weight"] == (2, 4, 3) and shapes["body.2.bias"] == (2, 4)
    assert shapes["body.4.weight"] == (2, 8, 4) and shapes["body.4.bias"] == (2, 8)
    assert r0["cases"]["mlp3"]["local_shapes"] == r1["cases"]["mlp3"]["local_shapes"]
    # one all-reduce of the whole [C, N, out] tensor per row-parallel layer in the forward
    assert len(r0["forward_all_reduces"]) == r0["row_layers"] == 2
    assert all(shape[:2] == (7, 37) for shape in r0["forward_all_reduces"])


def test_parameters_per_rank(two_ranks):
    for r in two_ranks:  # mlp width 64 depth 4: shards only
        assert r["count_tp"] <= 0.55 * r["count_full"], (r["count_tp"], r["count_full"])


def test_state_dict_round_trip(two_ranks):
    """A full state dict loads into the shards; gathering gives it back exactly, loads strictly into an
    unsharded model, and the sharded model is then the same function as the network of that state dict."""
    for r in two_ranks:
        for case, trip in r["round_trip"].items():
            assert trip["keys_equal"] and trip["exact"] and trip["fresh_exact"], (case, trip)
            assert trip["no_tp_layers"] and trip["rng_kept"], (case, trip)
            assert trip["forward_rel"] <= TOL, (case, trip)


class _StubMesh:
    """Sizes only: the divisibility check runs before any process group is touched."""

    def __init__(self, tp: int):
        self.tp = tp

    def size(self, axis):
        return self.tp if axis == "tp" else 1

    def index(self, axis):
        return 0

    def group(self, axis):
        raise AssertionError("no group may be used before the divisibility check")


def test_width_not_divisible_by_tp():
    model = build({"kind": "mlp", "activation": "tanh", "width": 15, "depth": 2})
    before = [type(m) for m in model.body]
    with pytest.raises(ValueError, match=r"body\.1 .*width 15.*tp=2.*network\.width"):
        apply_tensor_parallel(model, _StubMesh(2))
    assert [type(m) for m in model.body] == before  # nothing changed
    ms = build({"kind": "multiscale", "activation": "sin", "width": 9, "depth": 2, "scales": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"GroupedJetLinear.*width 9.*network\.width"):
        apply_tensor_parallel(ms, _StubMesh(2))


def test_one_rank_is_unchanged():
    model = build(CASES["mlp3"])
    types = [type(m) for m in model.body]
    assert apply_tensor_parallel(model, DeviceMesh()) is model
    assert [type(m) for m in model.body] == types
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)  # f and g over no group: identities
    y = reduce_from_tp(copy_to_tp(x, None), None)
    y.sum().backward()
    assert torch.equal(y, x) and torch.equal(x.grad, torch.ones_like(x))
