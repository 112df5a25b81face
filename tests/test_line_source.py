"""line-source-2d: the smoothed line source's exact field (Graf's theorem) satisfies its PDE, meets the Hankel
closed form beyond the source, and the quasi-static near-field head is the potential of the source, with jets
equal to autograd; bad configurations are one clear error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_jets_equal_autograd
from elecsolver.problems import REGISTRY
from scipy import special

import elecsolver as es
from elecsolver.reference.line_source import (EULER_GAMMA, ein, ein_derivatives, gaussian_line_source,
                                              line_source_near_field)

LINE = REGISTRY["line-source-2d"]
K, SIGMA = 2 * math.pi, 0.05


def _gauss(rho):
    return np.exp(-(rho**2) / (2 * SIGMA**2)) / (2 * math.pi * SIGMA**2)


@pytest.mark.parametrize("rho", [0.0, 0.01, 0.05, 0.2, 0.499, 0.501, 1.3])
def test_the_reference_satisfies_the_helmholtz_equation_with_its_gaussian_source(rho):
    # five-point Laplacian at h and h/2, Richardson-extrapolated: the O(h^2) error cancels, what is left is the
    # reference's own residual (and O(h^4))
    x0, y0 = 0.6 * rho, 0.8 * rho

    def residual(h):
        u = lambda x, y: gaussian_line_source(x, y, K, SIGMA)  # noqa: E731
        c = u(x0, y0)
        lap = (u(x0 + h, y0) + u(x0 - h, y0) + u(x0, y0 + h) + u(x0, y0 - h) - 4 * c) / h**2
        return -lap - K**2 * c - _gauss(rho)

    r = (4 * residual(5e-4) - residual(1e-3)) / 3
    size = K**2 * abs(gaussian_line_source(x0, y0, K, SIGMA)) + _gauss(rho)
    assert abs(r) / size < 1e-7


def test_the_reference_is_the_hankel_closed_form_beyond_the_source_and_continuous_where_it_switches():
    rho = np.array([0.5 - 1e-12, 0.5 + 1e-12, 0.8, 2.0])  # 10 sigma = 0.5 m is where (1) becomes the closed form
    u = gaussian_line_source(rho, 0 * rho, K, SIGMA)
    assert abs(u[0] - u[1]) < 1e-10 * abs(u[0])  # the quadrature of A and B is to ~1e-12 relative
    far = 0.25j * math.exp(-((K * SIGMA) ** 2) / 2) * special.hankel1(0, K * rho[2:])
    np.testing.assert_allclose(u[2:], far, rtol=1e-13)
    # and the point source's field as sigma -> 0 (the factor exp(-(k sigma)^2 / 2) -> 1)
    tiny = gaussian_line_source(np.array([1.0]), np.array([0.0]), K, 1e-4)
    np.testing.assert_allclose(tiny, 0.25j * special.hankel1(0, K), rtol=1e-6)


def test_ein_and_its_derivatives_against_the_exponential_integral():
    """Ein to 1e-14 on both sides of the switch from its series to ln q + gamma + E1 (q = 4), and its autograd
    derivative equal to the closed form Ein' there too (the series no longer cancels to 1e-9 near q = 20)."""
    q = torch.tensor([0.0, 1e-3, 0.04, 0.06, 0.5, 3.0, 3.99, 4.01, 12.0, 19.9, 20.1, 45.0], dtype=torch.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.where(q.numpy() > 0, special.exp1(q.numpy()) + np.log(q.numpy()) + EULER_GAMMA, 0.0)
    np.testing.assert_allclose(ein(q).numpy(), ref, rtol=1e-14, atol=1e-12 * 1e-3)  # scipy's sum cancels at 1e-3
    qg = q[1:].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(ein(qg).sum(), qg)
    np.testing.assert_allclose(grad.numpy(), ein_derivatives(q[1:])[0].numpy(), rtol=1e-13)
    d1, d2 = ein_derivatives(q)
    qq = q.numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_allclose(d1.numpy()[1:], (-np.expm1(-qq) / qq)[1:], rtol=1e-12)
        np.testing.assert_allclose(d2.numpy()[1:], ((np.exp(-qq) * (1 + qq) - 1) / qq**2)[1:], rtol=1e-9, atol=1e-15)
    assert float(d1[0]) == 1.0 and float(d2[0]) == -0.5


def test_the_near_field_is_the_potential_of_the_source_and_the_real_part_of_the_greens_function():
    x = torch.tensor([[0.003, 0.001], [0.03, -0.02], [0.07, 0.05], [0.2, 0.1]], dtype=torch.float64,
                     requires_grad=True)
    phi = line_source_near_field((x**2).sum(1), K, SIGMA)
    g = torch.autograd.grad(phi.sum(), x, create_graph=True)[0]
    lap = sum(torch.autograd.grad(g[:, a].sum(), x, retain_graph=True)[0][:, a] for a in range(2))
    rho = np.linalg.norm(x.detach().numpy(), axis=1)
    np.testing.assert_allclose(-lap.detach().numpy(), _gauss(rho), rtol=1e-7, atol=1e-9)
    # for sigma << rho << 1/k: -(1 / 2 pi)(ln(k rho / 2) + gamma), the static part of (i/4) H0(k rho)
    rho = 0.02
    phi = float(line_source_near_field(torch.tensor([rho**2], dtype=torch.float64), K, 1e-4))
    assert phi == pytest.approx(-(math.log(K * rho / 2) + EULER_GAMMA) / (2 * math.pi), rel=1e-9)
    assert phi == pytest.approx(float((0.25j * special.hankel1(0, K * rho)).real), rel=0.01)


def test_jets_equal_autograd_with_the_near_field_head():
    problem = LINE(LINE.preset_config("ci"))
    torch.manual_seed(0)
    # the autograd path differentiates the series of Ein, which cancels to ~1e-9 at q ~ 20
    assert_jets_equal_autograd(problem, problem.build_network().double(), 1e-7)


def test_the_problem_declares_the_source_and_its_field():
    problem = LINE(LINE.preset_config("quick"))
    s = problem.config["source"]
    assert problem.complex_fields == ("Ez",) and problem.time_convention == "exp(-i omega t)"
    assert problem.k == pytest.approx(2 * math.pi * s["frequency"] / es.C0)
    # E0 = omega mu0 I / 4 (V/m): the far field is E0 |H0(k rho)|
    assert problem.scales.of_unit("V/m") == pytest.approx(2 * math.pi * s["frequency"] * es.MU0 * s["current"] / 4)
    ref = problem.reference().fields["Ez"]
    xy = problem.output.coordinates()
    rho = np.hypot(xy[:, 0] - s["x0"], xy[:, 1] - s["y0"])
    far = rho > 10 * s["sigma"]
    e0 = 2 * math.pi * s["frequency"] * es.MU0 * s["current"] / 4
    expect = -e0 * math.exp(-((problem.k * s["sigma"]) ** 2) / 2) * special.hankel1(0, problem.k * rho[far])
    np.testing.assert_allclose(ref.reshape(-1)[far], expect, rtol=1e-12)
    assert np.isfinite(ref).all()  # the source's site included


@pytest.mark.parametrize(("key", "value", "words"), [
    ("source.frequency", 0.0, "source.frequency > 0"),
    ("source.sigma", -1.0, "source.sigma > 0"),
    ("source.x0", 1.95, "4 sigma inside the window"),
    ("window.half_width", 0.0, "half_width > 0"),
])
def test_bad_configurations_are_one_clear_error(key, value, words):
    cfg = LINE.preset_config("ci")
    sec, name = key.split(".")
    cfg[sec][name] = value
    with pytest.raises(es.ConfigError, match=words):
        LINE(cfg)
