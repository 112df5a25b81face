"""Compiled mode: the same losses as eager, one compile, no graph breaks, no recompiles; clear errors."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from conftest import NO_PNG, run_cli, run_main
from elecsolver.problems import get_problem_class
from torch._dynamo.utils import counters

from elecsolver.config import ConfigError
from elecsolver.trainer import Trainer

HS = get_problem_class("helmholtz-square")
MPS = get_problem_class("maxwell-point-source-2d")


def _helmholtz(compile_: bool, **training) -> Trainer:
    cfg = HS.preset_config("ci")
    cfg["sampling"]["points_per_wavelength"] = 4  # 64 + 32 points: quick
    cfg["sampling"]["resample_every"] = 4         # new points at steps 4 and 8
    cfg["training"].update(compile=compile_, steps=20, lr=2e-3, lr_final=2e-4, **training)
    return Trainer(HS(cfg), progress=False)


def _losses(tr: Trainer, steps: int) -> list[float]:
    return [tr.train_step()[0] for _ in range(steps)]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_compiled_equals_eager_in_float64():
    """In float64 the two agree to round-off (1e-12 over 10 steps): Adam's compiled update keeps a
    float64 step counter, as eager Adam's Python-float bias correction does (a float32 one drifts
    ~1e-6 per step)."""
    a = _losses(_helmholtz(False, dtype="float64"), 10)
    b = _losses(_helmholtz(True, dtype="float64"), 10)
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-12 * abs(x)


def test_compiled_loop_agrees_with_eager_and_compiles_once_without_graph_breaks_or_recompiles():
    """Eleven float32 steps: the compiled losses and parameters are eager's (1e-5, 1e-4 relative), the
    schedule moves both learning rates alike, and the loop compiles two graphs once, with no graph break and no
    recompile when the points are redrawn."""
    eager = _helmholtz(False)
    a = _losses(eager, 11)
    torch._dynamo.reset()
    counters.clear()
    tr = _helmholtz(True)
    b = [tr.train_step()[0]]  # compiles the loss-and-gradient graph and the optimizer-step graph
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 2, dict(counters["stats"])
    assert not counters["graph_break"], dict(counters["graph_break"])
    lr0 = float(tr.optimizer.param_groups[0]["lr"])
    first_points = tr.batches()[0][1].clone()
    with torch.compiler.set_stance("fail_on_recompile"):  # a recompile would raise here
        b += _losses(tr, 10)
    assert counters["stats"]["unique_graphs"] == graphs
    assert not counters["graph_break"]
    assert float(tr.optimizer.param_groups[0]["lr"]) < lr0                 # the schedule moved
    assert not torch.equal(tr.batches()[0][1], first_points)                # and points were resampled
    for k, (x, y) in enumerate(zip(a, b)):
        assert abs(x - y) <= 1e-5 * abs(x), (k, x, y)
    for p, q in zip(eager.model.parameters(), tr.model.parameters()):
        assert (p - q).norm() <= 1e-4 * p.norm()
    assert float(tr.optimizer.param_groups[0]["lr"]) == pytest.approx(eager.optimizer.param_groups[0]["lr"])
    assert eager.optimizer.param_groups[0]["lr"] < 2e-3


def test_compiled_maxwell_point_source_matches_eager():
    """First-order jets, multiscale network, hard initial condition and near-field ansatz compile too."""
    def trainer(compile_):
        cfg = MPS.preset_config("ci")
        cfg["network"].update(width=16, depth=2)
        cfg["sampling"].update(interior=256, source=64, boundary=64, resample_every=1000)
        cfg["training"].update(compile=compile_, steps=50)
        return Trainer(MPS(cfg), progress=False)

    a = _losses(trainer(False), 5)
    b = _losses(trainer(True), 5)
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-5 * abs(x)
    assert not counters["graph_break"]


def test_autograd_with_compile_is_a_clear_error(tmp_path):
    cfg = HS.preset_config("ci")
    cfg["training"].update(compile=True, derivatives="autograd")
    with pytest.raises(ConfigError, match="needs jet derivatives"):
        Trainer(HS(cfg), progress=False)
    out = tmp_path / "never"
    proc = run_main("run", "helmholtz-square", "--compile", "--set", 'training.derivatives="autograd"',
                    "--out", str(out))
    assert proc.returncode == 2
    words = "training.compile (--compile) does not combine with training.derivatives='autograd'"
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr
    assert not out.exists()


def test_cli_compile_flag(tmp_path):
    import json

    out = tmp_path / "c"
    proc = run_cli("run", "helmholtz-square", "--compile", "--steps", "3", "--out", str(out), "--quiet", *NO_PNG)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == 3
    from elecsolver.io.hdf5 import read_fields

    assert read_fields(out / "fields.h5")["attrs"]["config"]["training"]["compile"] is True


def test_compile_without_a_cxx_compiler_is_one_clear_error(monkeypatch):
    """On the CPU torch.compile generates C++: without a compiler the Trainer refuses before any step, naming the
    fix, instead of failing inside the first step's code generation."""
    import shutil

    from elecsolver.training import trainer as trainer_module

    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert trainer_module.cxx_compiler() is None
    with pytest.raises(ConfigError, match="needs a C\\+\\+ compiler.*training.compile=false"):
        _helmholtz(True)
    _helmholtz(False)  # eager needs none
    monkeypatch.setenv("CXX", "/no/such/compiler")
    assert trainer_module.cxx_compiler() is None
