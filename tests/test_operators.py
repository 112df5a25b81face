"""Jets equal nested autograd, and the TEz residuals vanish on a closed-form PEC cavity mode."""

from __future__ import annotations

import math

import pytest
import torch
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D
from torch import nn

from elecsolver.jets import Jet, seed_jet
from elecsolver.networks import MLP, HardInitialCondition, Network, build_network
from elecsolver.operators import curl_te, curl_z, div, evaluate, grad

IN, OUT = ("x", "y", "t"), ("Ex", "Ey", "Hz")


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


@pytest.mark.parametrize("kind,activation", [("mlp", "tanh"), ("mlp", "sin"), ("mlp", "silu"),
                                             ("multiscale", "sin"), ("multiscale", "tanh")])
@pytest.mark.parametrize("hard", [False, True])
def test_jets_equal_autograd(kind, activation, hard):
    torch.manual_seed(0)
    net = build_network(kind, 3, 3, [-0.2, -0.1, 0.0], [1.2, 1.1, 1.3], width=12, depth=3,
                        activation=activation, scales=[1.0, 3.0], first_omega=5.0, output_gain=1.0)
    if hard:
        net = Network(net, [HardInitialCondition(t_column=2, t_start=0.0, span=1.3)])
    net = net.double()
    pts = torch.rand(64, 3, dtype=torch.float64)
    for wrt in [("x", "y", "t"), ("t",), ("y", "x")]:
        a = evaluate(net, pts, IN, OUT, wrt, method="jet").jet.data
        b = evaluate(net, pts, IN, OUT, wrt, method="autograd").jet.data
        assert _rel(a, b) < 1e-10


def test_jet_gradients_wrt_parameters_equal_autograd():
    """The first-order backward through jets gives the double-backward gradients."""
    torch.manual_seed(1)
    net = MLP(3, 3, width=10, depth=2, activation="tanh", output_gain=1.0).double()
    pts = torch.rand(40, 3, dtype=torch.float64)
    grads = []
    for method in ("jet", "autograd"):
        net.zero_grad()
        f = evaluate(net, pts, IN, OUT, method=method)
        (curl_z(f) ** 2 + f.d("Hz", "t") ** 2).sum().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    assert _rel(grads[0], grads[1]) < 1e-10


class _Poly(nn.Module):
    """u = (-y, x, x^2 + y^2) on jets and tensors (for closed-form operator values)."""

    def forward(self, x):
        if isinstance(x, Jet):
            d = x.data
            x0, y0 = d[0, :, 0], d[0, :, 1]
            dx, dy = d[1:, :, 0], d[1:, :, 1]
            val = torch.stack([-y0, x0, x0**2 + y0**2], 1)
            der = torch.stack([-dy, dx, 2 * x0 * dx + 2 * y0 * dy], 2)
            return Jet(torch.cat([val.unsqueeze(0), der], 0), x.wrt)
        return torch.stack([-x[:, 1], x[:, 0], x[:, 0] ** 2 + x[:, 1] ** 2], 1)


@pytest.mark.parametrize("method", ["jet", "autograd"])
def test_closed_form_operator_values(method):
    pts = torch.rand(20, 3, dtype=torch.float64)
    f = evaluate(_Poly(), pts, IN, ("u", "v", "p"), method=method)
    assert torch.allclose(curl_z(f, "u", "v"), torch.full((20,), 2.0, dtype=torch.float64))
    assert torch.allclose(div(f, ("u", "v")), torch.zeros(20, dtype=torch.float64))
    assert torch.allclose(grad(f, "p"), 2 * pts[:, :2])
    assert torch.allclose(curl_te(f, "p"), torch.stack([2 * pts[:, 1], -2 * pts[:, 0]], 1))
    assert torch.allclose(f.d("p", "t"), torch.zeros(20, dtype=torch.float64))


class CavityModeTE(nn.Module):
    """Closed-form TE_mn mode of the PEC unit square, nondimensional (c = 1, eta = 1):
    Hz = cos(m pi x) cos(n pi y) cos(w t), Ex = -(n pi / w) cos(m pi x) sin(n pi y) sin(w t),
    Ey = (m pi / w) sin(m pi x) cos(n pi y) sin(w t), w = pi sqrt(m^2 + n^2)
    (Pozar, *Microwave Engineering*, 4th ed., sec. 6.3, in the time domain)."""

    def __init__(self, m: int, n: int, order=("Ex", "Ey", "Hz")):
        super().__init__()
        self.m, self.n, self.order = m, n, order
        self.w = math.pi * math.hypot(m, n)

    def forward(self, p):
        a, b, w = self.m * math.pi, self.n * math.pi, self.w
        x, y, t = p[:, 0], p[:, 1], p[:, 2]
        comps = {
            "Hz": torch.cos(a * x) * torch.cos(b * y) * torch.cos(w * t),
            "Ex": -(b / w) * torch.cos(a * x) * torch.sin(b * y) * torch.sin(w * t),
            "Ey": (a / w) * torch.sin(a * x) * torch.cos(b * y) * torch.sin(w * t),
        }
        return torch.stack([comps[k] for k in self.order], 1)


def _cavity_residual(model):
    problem = MaxwellPointSource2D()
    g = torch.Generator().manual_seed(5)
    pts = torch.rand(500, 3, generator=g, dtype=torch.float64)
    far = torch.hypot(pts[:, 0] - 0.4975, pts[:, 1] - 0.4975) > 0.3  # the source term is exp(-800) there
    pts = pts[far]
    f = evaluate(model, pts, IN, OUT, method="autograd")
    return problem.pde.residual(f, pts, problem.context), f


@pytest.mark.parametrize("m,n", [(1, 0), (2, 1), (1, 3)])
def test_cavity_mode_satisfies_the_training_residual(m, n):
    res, f = _cavity_residual(CavityModeTE(m, n))
    scale = f.jet.data[1:].abs().max()
    assert float(res.detach().abs().max()) < 1e-10 * float(scale.detach())
    # PEC walls: tangential E vanishes on x = 0, 1 (Ey) and y = 0, 1 (Ex)
    mode = CavityModeTE(m, n)
    edge = torch.tensor([[0.0, 0.3, 0.7], [1.0, 0.6, 0.2], [0.4, 0.0, 0.5], [0.8, 1.0, 0.9]], dtype=torch.float64)
    u = mode(edge)
    assert abs(float(u[0, 1])) < 1e-12 and abs(float(u[1, 1])) < 1e-12
    assert abs(float(u[2, 0])) < 1e-12 and abs(float(u[3, 0])) < 1e-12


@pytest.mark.parametrize("order", [("Ey", "Ex", "Hz"), ("Ex", "Hz", "Ey")])
def test_component_swap_breaks_the_residual(order):
    res, _ = _cavity_residual(CavityModeTE(2, 1, order))
    assert float(res.detach().abs().max()) > 0.1


def test_sign_flip_breaks_the_residual():
    class Flipped(CavityModeTE):
        def forward(self, p):
            u = super().forward(p)
            return torch.stack([u[:, 0], u[:, 1], -u[:, 2]], 1)

    res, _ = _cavity_residual(Flipped(2, 1))
    assert float(res.detach().abs().max()) > 0.1


def test_source_term_integrates_to_amplitude():
    """The nondimensional source integrates to A g(t) / (E0 L) over the plane (s has unit integral)."""
    problem = MaxwellPointSource2D()
    s, src = problem.scales, problem.config["source"]
    tau = math.sqrt(2.3) / (math.pi * src["frequency"])
    t_peak = 3.65 * tau / s.time
    h = 0.0005
    xs = torch.arange(0.4, 0.6, h, dtype=torch.float64)
    xx, yy = torch.meshgrid(xs, xs, indexing="ij")
    pts = torch.stack([xx.ravel(), yy.ravel(), torch.full_like(xx.ravel(), t_peak)], 1)
    total = float(problem.pde.source_terms(pts, problem.context)["Hz"].sum()) * (s.length / s.E0) * h * h
    assert abs(total - src["amplitude"] / (s.E0 * s.length)) < 1e-6


def test_seed_jet_rejects_bad_columns():
    with pytest.raises(ValueError, match="distinct input columns"):
        seed_jet(torch.zeros(3, 2), [0, 0])
    with pytest.raises(ValueError, match="distinct input columns"):
        seed_jet(torch.zeros(3, 2), [2])


def test_unknown_names_raise():
    net = MLP(3, 3, width=4, depth=1).double()
    f = evaluate(net, torch.rand(5, 3, dtype=torch.float64), IN, OUT, ("x",))
    with pytest.raises(KeyError, match="no field component"):
        f.d("Bz", "x")
    with pytest.raises(KeyError, match="dEx/dt is read but was not declared.*add 't'"):
        f.d("Ex", "t")
    with pytest.raises(ValueError, match="cannot differentiate"):
        evaluate(net, torch.rand(5, 3, dtype=torch.float64), IN, OUT, ("z",))
