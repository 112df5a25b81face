"""helmholtz-square: residual against the exact solution, the hard constraint, and the ci accuracy target."""

from __future__ import annotations

import json
import math

import meshio
import numpy as np
import pytest
import torch
from conftest import run_cli
from elecsolver.problems import get_problem_class

from elecsolver.config import apply_overrides
from elecsolver.io.hdf5 import read_fields
from elecsolver.networks import MLP, HardDirichlet, Network
from elecsolver.operators import evaluate
from elecsolver.trainer import Trainer

HS = get_problem_class("helmholtz-square")


class _Exact(torch.nn.Module):
    """sin(k0 x) sin(k0 y) (+ eps x y (1 - x)(1 - y) to test that the residual sees a change)."""

    def __init__(self, k0: float, eps: float = 0.0):
        super().__init__()
        self.k0, self.eps = k0, eps

    def forward(self, x):
        u = torch.sin(self.k0 * x[:, 0]) * torch.sin(self.k0 * x[:, 1])
        return (u + self.eps * x[:, 0] * (1 - x[:, 0]) * x[:, 1] * (1 - x[:, 1])).unsqueeze(1)


def _residual(problem, model, pts):
    d = problem.pde.derivatives(problem.inputs, problem.scales)
    f = evaluate(model, pts, problem.inputs, problem.outputs, d.wrt, method="autograd", laplacian=d.laplacian_dict())
    return problem.pde.residual(f, pts, problem.context)


def test_exact_solution_has_zero_residual_and_a_perturbation_does_not():
    problem = HS(HS.preset_config("ci"))
    k0 = problem.config["physics"]["wavenumber"]
    assert k0 == pytest.approx(4 * math.pi)
    pts = torch.rand(500, 2, dtype=torch.float64)
    r = _residual(problem, _Exact(k0), pts)
    assert r.shape == (500, 1)
    assert r.abs().max().item() < 1e-10 * k0**2
    # u + eps b(x): residual -eps (lap b + k0^2 b), lap b = -2 (x(1-x) + y(1-y)) -- checks the signs
    eps = 1e-3
    r2 = _residual(problem, _Exact(k0, eps), pts)[:, 0]
    x, y = pts[:, 0], pts[:, 1]
    b = x * (1 - x) * y * (1 - y)
    lap_b = -2 * (x * (1 - x) + y * (1 - y))
    assert torch.allclose(r2, -eps * (lap_b + k0**2 * b), atol=1e-12)


def test_hard_dirichlet_vanishes_on_the_boundary_and_matches_autograd():
    torch.manual_seed(3)
    for normalise in (True, False):
        head = HardDirichlet([0.0, -1.0], [1.0, 2.0], normalise=normalise)
        net = Network(MLP(2, 2, 16, 2, "sin", init="glorot", output_gain=1.0), [head]).double()
        edge = torch.tensor([[0.0, 0.5], [1.0, 0.1], [0.3, -1.0], [0.7, 2.0]], dtype=torch.float64)
        assert net(edge).abs().max().item() == 0.0
        pts = torch.rand(64, 2, dtype=torch.float64)
        kw = {"second": [("x", "y"), ("x", "x")], "laplacian": {"x": 1.0, "y": -0.5}}
        a = evaluate(net, pts, ("x", "y"), ("u", "v"), **kw).jet.channels
        b = evaluate(net, pts, ("x", "y"), ("u", "v"), method="autograd", **kw).jet.channels
        assert (a - b).norm() / b.norm() < 1e-10
    # the factor itself: b = x(1-x) y(1-y) unnormalised, 16x that normalised, on the unit square
    plain = HardDirichlet([0, 0], [1, 1], normalise=False)
    scaled = HardDirichlet([0, 0], [1, 1])
    p = torch.tensor([[0.5, 0.5], [0.25, 0.1]], dtype=torch.float64)
    expect = p[:, 0] * (1 - p[:, 0]) * p[:, 1] * (1 - p[:, 1])
    assert torch.allclose(plain.factor(p)[:, 0], expect)
    assert torch.allclose(scaled.factor(p)[:, 0], 16 * expect)


def test_points_follow_deepxde_rule_and_variants():
    hard = HS(HS.preset_config("quick"))
    assert hard.grid_size() == 20
    (c,) = hard.constraints()  # the boundary points carry no loss term (hard constraint) but anchor the PDE
    cloud = c.sample(0, 0.0)
    assert len(cloud) == 400 + 80 and c.laplacian == {"x": 1.0, "y": 1.0}
    assert np.all((cloud.points >= 0) & (cloud.points <= 1))
    on_edge = np.isclose(cloud.points, 0).any(1) | np.isclose(cloud.points, 1).any(1)
    assert on_edge.sum() == 80
    soft = HS(HS.preset_config("soft"))
    names = [c.name for c in soft.constraints()]
    assert names == ["pde", "boundary"] and soft.constraints()[1].weight == 100.0
    assert not any(isinstance(h, HardDirichlet) for h in soft.build_network().heads)
    assert any(isinstance(h, HardDirichlet) for h in hard.build_network().heads)
    # the soft variant trains (boundary term present) and its loss falls
    tr = Trainer(HS(apply_overrides(HS.preset_config("soft"), ["sampling.points_per_wavelength=4"])), progress=False)
    first, terms = tr.train_step()
    assert len(terms) == 2
    for _ in range(30):
        last, _ = tr.train_step()
    assert last < first


@pytest.mark.accuracy  # trains to check its error: the accuracy set
def test_ci_preset_reaches_five_percent(tmp_path):
    """The target: ``--preset ci`` (2000 steps, hard constraint) <= 0.05 on the 101 x 101 grid
    (measured 0.8-1.9 % over seeds 0-4 at lr 3e-3, eager)."""
    out = tmp_path / "hs"
    proc = run_cli("run", "helmholtz-square", "--preset", "ci", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == 2000
    assert m["rel_l2"]["full"]["Ez"] <= 0.05
    # static fields: no t coordinate, [ny, nx], one XDMF step, one PNG
    data = read_fields(out / "fields.h5")
    assert set(data["coords"]) == {"x", "y"} and data["fields"]["Ez"].shape == (101, 101)
    assert data["units"]["Ez"] == "V/m"
    x, y = np.meshgrid(data["coords"]["x"], data["coords"]["y"])
    assert np.allclose(data["reference"]["Ez"], np.sin(4 * np.pi * x) * np.sin(4 * np.pi * y))
    err = np.linalg.norm(data["fields"]["Ez"] - data["reference"]["Ez"]) / np.linalg.norm(data["reference"]["Ez"])
    assert err == pytest.approx(m["rel_l2"]["full"]["Ez"], rel=1e-6)
    with meshio.xdmf.TimeSeriesReader(out / "fields.xdmf") as reader:
        reader.read_points_cells()
        assert reader.num_steps == 1
        _, point_data, _ = reader.read_data(0)
    assert np.allclose(point_data["Ez"], data["fields"]["Ez"].ravel())
    assert (out / "Ez.png").is_file()


def test_features_preset_solves_to_round_off_in_one_least_squares_step(tmp_path):
    """--preset features: one hidden layer of 300 random sin features and one step of training.optimizer
    "least_squares" in float64 (the random-feature method): Ez < 1e-6 on the 101 x 101 grid (measured 2.5e-10 to
    4.4e-10 for seeds 0-4), where the same network before the solve is at ~1; the step leaves the
    hidden layer as initialised and the loss gradient with respect to the output layer at zero."""
    out = tmp_path / "hf"
    proc = run_cli("run", "helmholtz-square", "--preset", "features", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == 1 and m["dtype"] == "float64"
    assert m["rel_l2"]["full"]["Ez"] < HS.bounds["features"]["full"]["Ez"] == 1e-6
    assert "e-" in proc.stdout.splitlines()[-1]  # an error this small is printed in scientific notation

    from elecsolver.training.least_squares import output_layer

    problem = HS(HS.preset_config("features"))
    tr = Trainer(problem, progress=False)
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    last = sorted(output_layer(tr.model))
    params = dict(tr.model.named_parameters())

    def layer_gradient() -> float:
        grads = torch.autograd.grad(tr.loss_terms().sum(), [params[n] for n in last])
        return float(torch.cat([g.reshape(-1) for g in grads]).norm())

    assert problem.metrics(tr.predict(), problem.reference())["full"]["Ez"] > 0.5
    g_before = layer_gradient()
    tr.train()
    assert problem.metrics(tr.predict(), problem.reference())["full"]["Ez"] < 1e-6
    for n, p in params.items():
        assert torch.equal(p.detach(), before[n]) == (n not in last), n
    assert layer_gradient() < 1e-10 * g_before
