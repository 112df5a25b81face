"""dielectric-interface-1d: the Fresnel pulses conserve energy and split it as r^2 : n tau^2, are continuous across
the interface, satisfy Maxwell's equations and the interface conditions (and a wrong reflection coefficient does
not), and bad configurations are one clear error."""

from __future__ import annotations

import pytest
import torch
from elecsolver.problems import REGISTRY

import elecsolver as es
from elecsolver.config import apply_overrides
from elecsolver.training.loss import constraint_residual

PROBLEM = REGISTRY["dielectric-interface-1d"]


def build(overrides=(), cls=PROBLEM):
    return cls(apply_overrides(PROBLEM.preset_config("ci"), list(overrides)))


def energy(problem, x, t, eps_r):
    """W = int (eps0 eps_r Ey^2 + mu0 Hz^2) / 2 dx (J/m^2), trapezoidal rule."""
    f = problem.fields_at(x, torch.full_like(x, t))
    density = 0.5 * (es.EPS0 * eps_r * f["Ey"] ** 2 + es.MU0 * f["Hz"] ** 2)
    return float(torch.trapezoid(density, x))


@pytest.mark.parametrize("eps_r", [2.25, 4.0, 0.5])
def test_fresnel_pulses_conserve_energy_and_split_it(eps_r):
    # a long line, so that every pulse lies inside it at the start and the end
    p = build([f"medium.eps_r={eps_r}", "domain.half_width=8.0", "pulse.start=-3.0", "window.travel=6.0"])
    n = eps_r**0.5
    r, tau = (1 - n) / (1 + n), 2 / (1 + n)
    x = torch.linspace(-8.0, 8.0, 320001, dtype=torch.float64)
    eps = torch.where(x >= 0, eps_r, 1.0)
    w0, w1 = energy(p, x, 0.0, eps), energy(p, x, 6.0 / es.C0, eps)
    assert abs(w1 - w0) / w0 < 1e-9
    right = x >= 0
    transmitted = float(torch.trapezoid(torch.where(right, 1.0, 0.0) * 0.5 * (
        es.EPS0 * eps * p.fields_at(x, torch.full_like(x, 6.0 / es.C0))["Ey"] ** 2
        + es.MU0 * p.fields_at(x, torch.full_like(x, 6.0 / es.C0))["Hz"] ** 2), x))
    assert transmitted / w0 == pytest.approx(n * tau**2, rel=1e-9)
    assert 1 - transmitted / w0 == pytest.approx(r**2, rel=1e-6)


def test_both_fields_are_continuous_across_the_interface():
    p = build(["medium.eps_r=4.0"])
    t = torch.linspace(0.0, float(p.times[-1]), 50, dtype=torch.float64)
    sides = p.exact(torch.zeros_like(t), t)
    for c in ("Ey", "Hz"):
        assert torch.allclose(sides[f"{c}@background"], sides[f"{c}@dielectric"], rtol=1e-14, atol=0.0), c
        assert float(sides[f"{c}@dielectric"].abs().max()) > 0.1 * (1 if c == "Ey" else 1 / es.ETA0)


class _Exact(torch.nn.Module):
    def __init__(self, problem):
        super().__init__()
        self.p = problem

    def forward(self, x):
        return self.p.channels(self.p.exact(*self.p.context.si(x)), x.shape[0], training_units=True)


def residuals(problem):
    out = {}
    for c in problem.constraints():
        cloud = c.sample(5, 1.0)
        pts = torch.as_tensor(cloud.points, dtype=torch.float64)
        nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals, dtype=torch.float64)
        r = constraint_residual(_Exact(problem), c, pts, nrm, problem.inputs, problem.outputs, "autograd")
        out[c.name] = float(r.detach().pow(2).mean().sqrt())
    return out


@pytest.mark.parametrize("overrides", [[], ["medium.eps_r=4.0", "pulse.width=0.15", "pulse.start=-0.5"],
                                       ["medium.eps_r=9.0", "pulse.amplitude=300.0", "domain.half_width=0.1",
                                        "pulse.width=0.02", "pulse.start=-0.05", "window.travel=0.1"]])
def test_the_fresnel_answer_satisfies_maxwell_and_the_interface_conditions(overrides):
    res = residuals(build(overrides))
    assert set(res) >= {"pde", "ends", "interface"}, res
    assert max(res.values()) < 1e-9, res  # training units: the fields are O(1)


def test_a_wrong_reflection_coefficient_breaks_the_interface_conditions_only():
    class Wrong(PROBLEM):
        def exact(self, x, t):
            sides = super().exact(x, t)  # the reflected pulse 10 % too strong: each side still solves Maxwell
            p = self.config["pulse"]
            extra = -0.02 * p["amplitude"] * torch.exp(-(((-x - p["start"] - es.C0 * t) / p["width"]) ** 2))
            sides["Ey@background"] = sides["Ey@background"] + extra
            sides["Hz@background"] = sides["Hz@background"] - extra / es.ETA0
            return sides

    res = residuals(build(["sampling.interior=300"], cls=Wrong))
    assert res["pde"] < 1e-9, res
    assert res["interface"] > 1e-3, res


@pytest.mark.parametrize(("overrides", "words"), [
    (["pulse.start=0.1"], "pulse.start"), (["pulse.start=-1.5"], "pulse.start"),
    (["medium.eps_r=0"], "medium.eps_r"), (['pulse.width="wide"'], "pulse.width"),
    (["window.travel=-1.0"], "window.travel"), (["output.nt=1"], "output.nt"),
])
def test_bad_configurations_are_one_clear_error(overrides, words):
    with pytest.raises(es.ConfigError, match=words):
        build(overrides)


@pytest.mark.slow
def test_quick_preset_reaches_its_measured_error(tmp_path):
    import json

    from conftest import run_cli

    out = tmp_path / "q"
    proc = run_cli("run", "dielectric-interface-1d", "--out", str(out), "--quiet", timeout=1800)
    assert proc.returncode == 0, proc.stderr
    rel = json.loads((out / "metrics.json").read_text())["rel_l2"]["full"]
    assert rel["Ey"] < 0.01 and rel["Hz"] < 0.01, rel  # measured 0.45 / 0.44 %
