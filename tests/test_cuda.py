"""The GPU path: the same numbers on a CUDA device as the CPU tests hold (marked ``cuda``; skipped without a GPU).

- jets equal nested autograd on the GPU, float64, 1e-10: every registered layer and head to second order, and every
  loss term of the main job and of helmholtz-square (shared/DESIGN.md invariant 1);
- the compiled step equals eager over 10 steps, float32, 1e-5 (invariant 5), with and without CUDA graphs;
- dp = 2, tp = 2 and pp = 2 as two processes on ONE GPU equal one process on it, float64, 1e-10 (invariants 2, 3).
  NCCL refuses two ranks on one device, so the ranks meet on gloo and every collective goes through the host
  (:mod:`elecsolver.parallel.collectives`);
- bf16 autocast on the GPU within the CPU test's bound (tests/test_mixed_precision.py: 10 u = 3.9e-2);
- ``elecsolver run maxwell-point-source-2d --preset ci --device cuda`` within the preset's declared bounds.

``tools/device_check.sh`` runs these on a GPU machine (``pytest -m cuda``).
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from conftest import assert_jets_equal_autograd, run_cli

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")]

DEV = "cuda"


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    nb = float(b.norm())
    return float((a - b).norm()) / (nb if nb > 0 else 1.0)


# ---- jets = autograd ---------------------------------------------------------------------------------------------
def test_every_registered_layer_and_head_equals_autograd_on_cuda():
    import elecsolver.problems  # noqa: F401  (registers the problems' own heads, e.g. the near field)
    from elecsolver.networks import HEADS, LAYERS, Activation, JetLinear, Network
    from elecsolver.operators import evaluate

    names, outs = ["x", "y", "t"], ["u", "v", "w"]
    kw = {"second": [("x", "y"), ("t", "t"), ("x", "t")], "laplacian": {"x": 1.0, "y": 1.0, "t": -0.5}}
    g = torch.Generator().manual_seed(2)
    pts = (torch.rand(30, 3, generator=g, dtype=torch.float64) * 1.2 - 0.1).to(DEV)
    for name, factory in sorted(LAYERS.items()):
        torch.manual_seed(2)
        layer = factory(3)
        with torch.no_grad():
            width = layer.double()(torch.zeros(1, 3, dtype=torch.float64)).shape[-1]
        net = torch.nn.Sequential(layer, Activation("tanh"), JetLinear(width, 3)).double().to(DEV)
        a = evaluate(net, pts, names, outs, **kw).jet.channels
        b = evaluate(net, pts, names, outs, method="autograd", **kw).jet.channels
        assert a.device.type == "cuda" and _rel(a, b) < 1e-10, name
    for name, factory in sorted(HEADS.items()):
        torch.manual_seed(3)
        body = torch.nn.Sequential(JetLinear(3, 8), Activation("sin"), JetLinear(8, 3))
        net = Network(body, [factory(3, 3)]).double().to(DEV)
        for k in (kw, {}):
            a = evaluate(net, pts.clamp(0, 1), names, outs, **k).jet.channels
            b = evaluate(net, pts.clamp(0, 1), names, outs, method="autograd", **k).jet.channels
            assert _rel(a, b) < 1e-10, (name, k)


@pytest.mark.parametrize("name", ["maxwell-point-source-2d", "helmholtz-square"])
def test_problem_residuals_jets_equal_autograd_on_cuda(name):
    from elecsolver.problems import get_problem_class

    cls = get_problem_class(name)
    problem = cls(cls.preset_config("ci"))
    torch.manual_seed(0)
    net = problem.build_network().double().to(DEV)
    assert_jets_equal_autograd(problem, net, 1e-10, device=DEV)


# ---- compiled = eager ----------------------------------------------------------------------------------------------
def _helmholtz_trainer(compile_: bool, cuda_graphs: bool = False):
    from elecsolver.problems import get_problem_class
    from elecsolver.trainer import Trainer

    cls = get_problem_class("helmholtz-square")
    cfg = cls.preset_config("ci")
    cfg["sampling"]["points_per_wavelength"] = 4  # 64 + 32 points
    cfg["sampling"]["resample_every"] = 4         # new points at steps 4 and 8
    cfg["training"].update(compile=compile_, cuda_graphs=cuda_graphs, steps=20, lr=2e-3, lr_final=2e-4,
                           balance={"every": 5, "alpha": 0.5})
    return Trainer(cls(cfg), device=DEV, progress=False)


@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["compiled", "cuda-graphs"])
def test_compiled_step_equals_eager_on_cuda(cuda_graphs):
    import torch._dynamo

    torch._dynamo.reset()
    eager = _helmholtz_trainer(False)
    a = [eager.advance()[0] for _ in range(10)]  # with a loss balancing at step 5 (eager, between compiled steps)
    compiled = _helmholtz_trainer(True, cuda_graphs)
    b = [compiled.advance()[0] for _ in range(10)]
    for k, (x, y) in enumerate(zip(a, b)):
        assert abs(x - y) <= 1e-5 * abs(x), (k, x, y)
    for p, q in zip(eager.model.parameters(), compiled.model.parameters()):
        assert float((p - q).norm()) <= 1e-4 * float(p.norm())
    assert eager.optimizer.param_groups[0]["lr"] == pytest.approx(float(compiled.optimizer.param_groups[0]["lr"]))
    torch._dynamo.reset()


# ---- parallel strategies on one GPU --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def single_cuda(tmp_path_factory):
    from test_parallel import merged, run_strategy

    return merged(run_strategy(tmp_path_factory.mktemp("one-cuda"), 1, {"device": DEV}, "single"))


@pytest.mark.parametrize("parallel", [{"dp": 2}, {"tp": 2}, {"pp": 2, "microbatches": 4, "schedule": "1f1b"}],
                         ids=["dp2", "tp2", "pp2"])
def test_two_ranks_on_one_gpu_equal_one_process(tmp_path, single_cuda, parallel):
    from test_parallel import assert_equal_runs, merged, run_strategy

    got = merged(run_strategy(tmp_path, 2, {"device": DEV, "parallel": parallel}, "two"))
    assert_equal_runs(got, single_cuda)


# ---- bf16 autocast -------------------------------------------------------------------------------------------------
def test_bf16_autocast_on_cuda_within_the_cpu_bound():
    from mp_worker import HALF_WIDTH, jet_channels, sin_network
    from test_mixed_precision import TOL, U

    from elecsolver.parallel.mixed_precision import apply_mixed_precision, autocast

    net = sin_network().to(DEV)
    x = torch.linspace(-HALF_WIDTH, HALF_WIDTH, 33, device=DEV).unsqueeze(1)
    ref = jet_channels(net, x)
    mixed = apply_mixed_precision(copy.deepcopy(net), "bf16")
    with autocast(DEV, "bf16"):
        out = jet_channels(mixed, x)
        plain = mixed(x)
    assert plain.dtype == torch.bfloat16
    assert out.dtype == torch.float32 and bool(torch.isfinite(out).all())
    for c, name in enumerate(["u", "du/dx", "d2u/dx2"]):
        assert _rel(out[c], ref[c]) < TOL["bf16"], (name, _rel(out[c], ref[c]))
    assert _rel(out[0], ref[0]) > U["bf16"] / 10  # the value really went through bf16


# ---- the main job's ci preset on the GPU ---------------------------------------------------------------------------
def test_main_job_ci_preset_on_cuda_within_its_bounds(tmp_path):
    from elecsolver.problems import get_problem_class

    out = tmp_path / "ci"
    proc = run_cli("run", "maxwell-point-source-2d", "--preset", "ci", "--device", DEV, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    bounds = get_problem_class("maxwell-point-source-2d").bounds["ci"]
    for window, per_field in bounds.items():
        for field, bound in per_field.items():
            assert metrics["rel_l2"][window][field] < bound, (window, field, metrics["rel_l2"][window][field])
    assert (out / "fields.h5").is_file()
