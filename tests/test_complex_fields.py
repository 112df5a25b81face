"""Complex (time-harmonic) fields and the PML: the channel layout, complex operators and residuals against
closed forms, the |r|^2 loss, the PML's stretching and its designed reflection against a finite-difference
solve, and a complex problem that trains to its exact solution."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import elecsolver as es
from elecsolver.operators import evaluate
from elecsolver.training.loss import constraint_residual

K = 2 * math.pi


class Line(es.Problem):
    """exp(i k x) on [0, 1] m: u(0) = 1 and the first-order Sommerfeld condition du/dn - i k u = 0 at x = 1
    (``mode="robin"``), or a PML on [1, 1.5] m closed by u = 0 (``mode="pml"``)."""

    name = "test-line"
    mode = "robin"
    defaults = {"network": {"width": 32, "depth": 3, "activation": "sin", "output_gain": 1.0},
                "sampling": {"interior": 300},
                "training": {"steps": 3000, "lr": 1e-2, "lr_final": 1e-4, "log_every": 500, "dtype": "float64",
                             "checkpoint_every": 100000}}

    def setup(self):
        if self.mode == "pml":
            self.pml = es.PML([0.0], [1.0], 0.5, K, reflection=1e-4)
            self.domain = es.Interval(0.0, 1.5)
            self.pde = es.Helmholtz(K, field="u", pml=self.pml)
            right = es.Dirichlet(on="xmax", value=0.0, name="right", points=1)
        else:
            self.domain = es.Interval(0.0, 1.0)
            self.pde = es.Helmholtz(K, field="u", complex=True)
            right = es.Robin(on="xmax", alpha=-1j * K, beta=1.0, name="right", points=1)
        self.conditions = [es.Dirichlet(on="xmin", value=1.0, name="left", points=1), right]
        self.scales = es.Scales(length=1.0 / K)  # the residual reads -u'' - u in training units
        self.output = es.GridSites({"x": np.linspace(0.0, 1.0, 101)})

    def exact(self, x):
        return {"u": torch.exp(1j * K * x)}


def line(mode):
    return type("L", (Line,), {"mode": mode})()


class _Closed(torch.nn.Module):
    """SI closed form {field: complex tensor} as a network of training-unit inputs (its channels)."""

    def __init__(self, problem, fn):
        super().__init__()
        self.p, self.fn = problem, fn

    def forward(self, x):
        return self.p.channels(self.fn(*self.p.context.si(x)), x.shape[0], training_units=True)


def test_a_complex_field_is_two_real_channels():
    p = line("robin")
    assert p.fields == ("u",) and p.complex_fields == ("u",) and p.outputs == ("u.re", "u.im")
    assert p.time_convention == "exp(-i omega t)"
    ref = p.reference()
    assert ref.is_complex("u") and ref.fields["u"].dtype == np.complex128
    x = ref.points()[:, 0]
    np.testing.assert_allclose(ref.fields["u"], np.exp(1j * K * x), rtol=0, atol=1e-15)
    # output_fieldset joins the channels back, in SI units
    vals = np.stack([np.cos(K * x), np.sin(K * x)], 1) / p.scales.of_unit("V/m")
    np.testing.assert_allclose(p.output_fieldset(vals).fields["u"], np.exp(1j * K * x), atol=1e-15)
    with pytest.raises(ValueError, match="field 'u' is real"):
        _RealLine().channels({"u": torch.ones(2, dtype=torch.complex128)}, 2)


class _RealLine(Line):
    def setup(self):
        super().setup()
        self.pde = es.Helmholtz(K, field="u")
        self.conditions = self.conditions[:1]


def test_fields_give_complex_values_and_derivatives_equal_to_autograd():
    p = line("pml")
    net = p.build_network().double()
    pts = torch.as_tensor(p.sample("pde", 1).points)
    jet = evaluate(net, pts, p.inputs, p.outputs, ("x",), second=[("x", "x")])
    auto = evaluate(net, pts, p.inputs, p.outputs, ("x",), method="autograd", second=[("x", "x")])
    raw = net(pts)
    assert jet["u"].is_complex()
    assert torch.allclose(jet["u"], torch.complex(raw[:, 0], raw[:, 1]), rtol=1e-13, atol=1e-13)
    for a, b in ((jet.d("u", "x"), auto.d("u", "x")), (jet.d2("u", "x", "x"), auto.d2("u", "x", "x"))):
        assert a.is_complex() and float((a - b).abs().max()) < 1e-10 * float(b.abs().max())
    with pytest.raises(KeyError, match=r"no field component 'v'.*\('u',\)"):
        jet["v"]


def test_a_complex_residual_enters_the_loss_as_its_squared_modulus():
    p = line("robin")
    c = p.constraint("pde")
    net = p.build_network().double()
    pts = torch.as_tensor(c.sample(0, 1.0).points)
    flat = constraint_residual(net, c, pts, None, p.inputs, p.outputs, "autograd")
    f = evaluate(net, pts, p.inputs, p.outputs, c.wrt, method="autograd", laplacian=c.laplacian)
    r = c.residual(f, pts, None)
    assert r.is_complex() and flat.shape == (pts.shape[0], 2) and not flat.is_complex()
    assert torch.allclose(flat.pow(2).sum(1), r.abs().pow(2).sum(1), rtol=1e-14, atol=0)


def test_the_closed_form_satisfies_the_complex_pde_and_the_sommerfeld_condition():
    p = line("robin")
    exact = _Closed(p, p.exact)
    wrong = _Closed(p, lambda x: {"u": torch.exp(-1j * K * x)})  # the incoming wave: fails the Sommerfeld condition
    for c in p.constraints():
        cloud = c.sample(0, 1.0)
        pts = torch.as_tensor(cloud.points)
        nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals)
        r = constraint_residual(exact, c, pts, nrm, p.inputs, p.outputs, "autograd").detach()
        assert float(r.abs().max()) < 1e-12, c.name
        if c.name == "right":  # du/dn - i k u = -2 i k exp(-i k) for the incoming wave: |r| = 2 k L = 2
            bad = constraint_residual(wrong, c, pts, nrm, p.inputs, p.outputs, "autograd").detach()
            assert float(bad.norm()) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_pml_stretch_and_its_derivative_are_exactly_one_and_zero_outside_the_layer(order):
    """For every order, also m = 1 whose depth^(m-1) is 1 at depth 0: s = 1 and ds/dx = 0 in the inner box, and
    ds/dx is the derivative of s inside the layer (central differences)."""
    pml = es.PML([-1.0, -2.0], [1.0, 2.0], 0.5, K, reflection=1e-3, order=order)
    x = torch.linspace(-1.0, 1.0, 101, dtype=torch.float64)
    for axis in (0, 1):
        s, ds = pml.stretch(axis, x)
        assert torch.equal(s, torch.ones_like(s)) and torch.equal(ds, torch.zeros_like(ds))
    h, xs = 1e-6, torch.tensor([-1.4, -1.2, 1.1, 1.3, 1.45], dtype=torch.float64)
    num = (pml.stretch(0, xs + h)[0] - pml.stretch(0, xs - h)[0]) / (2 * h)
    assert torch.allclose(num, pml.stretch(0, xs)[1], rtol=1e-7, atol=1e-7)


def test_pml_stretching_is_exactly_one_outside_the_layer_and_designed_by_its_reflection():
    pml = es.PML([-1.0, -2.0], [1.0, 2.0], 0.5, K, reflection=1e-3, order=2)
    x = torch.linspace(-1.0, 1.0, 101, dtype=torch.float64)
    s, ds = pml.stretch(0, x)
    assert torch.equal(s, torch.ones_like(s)) and torch.equal(ds, torch.zeros_like(ds))
    assert pml.alpha == pytest.approx(3 * math.log(1e3) / (2 * K * 0.5), rel=1e-15)
    # round trip of a normally incident outgoing wave, exp(i k x~) past x = 1 and exp(-i k x~) below x = -1,
    # through the layer and back: R
    end = torch.tensor([1.5, -1.5], dtype=torch.float64)
    amp = torch.exp(1j * K * pml.stretched(0, end) * torch.tensor([1.0, -1.0], dtype=torch.float64)).abs()
    assert torch.allclose(amp**2, torch.tensor(1e-3, dtype=torch.float64), rtol=1e-12)
    # ds/dx is the derivative of s, and d x~/dx = s (central differences, float64)
    h = 1e-6
    xs = torch.tensor([-1.4, -1.2, 1.1, 1.3, 1.45], dtype=torch.float64)
    num = (pml.stretch(0, xs + h)[0] - pml.stretch(0, xs - h)[0]) / (2 * h)
    assert torch.allclose(num, pml.stretch(0, xs)[1], rtol=1e-7, atol=1e-7)
    num = (pml.stretched(0, xs + h) - pml.stretched(0, xs - h)) / (2 * h)
    assert torch.allclose(num, pml.stretch(0, xs)[0], rtol=1e-7, atol=1e-7)
    assert pml.outer_bounds() == ((-1.5, -2.5), (1.5, 2.5))


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"thickness": 0.0}, "thickness"), ({"reflection": 1.0}, "reflection"), ({"order": 0}, "order"),
    ({"lower": [1.0], "upper": [0.0]}, "lower < upper"), ({"wavenumber": -1.0}, "wavenumber")])
def test_pml_refuses_bad_designs(kwargs, words):
    args = {"lower": [0.0], "upper": [1.0], "thickness": 0.5, "wavenumber": K, **kwargs}
    with pytest.raises(ValueError, match=words):
        es.PML(**args)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_an_oblique_wave_continued_into_the_pml_satisfies_the_stretched_equation(order):
    """For every order, exp(i k (x~ cos q + y~ sin q)) solves the PML-stretched Helmholtz equation everywhere,
    inner box, layer and corners included (the continuation of a free-space solution: a stretch derivative left
    nonzero inside, as order 1 once had, leaves a residual of order k there); the unstretched wave does not."""

    class Box(es.Problem):
        name = "test-box"

        def setup(self):
            self.pml = es.PML([-1.0, -1.0], [1.0, 1.0], 0.5, K, reflection=1e-3, order=order)
            self.domain = es.Rectangle([-1.5, -1.5], [1.5, 1.5])
            self.pde = es.Helmholtz(K, field="Ez", pml=self.pml)
            self.scales = es.Scales(length=1.0 / K)
            self.output = es.GridSites({"x": np.linspace(-1, 1, 5), "y": np.linspace(-1, 1, 5)})

    p = Box()
    q = math.radians(35.0)
    c = p.constraint("pde")
    pts = torch.as_tensor(c.sample(0, 1.0).points)

    def wave(sign):
        return lambda x, y: {"Ez": torch.exp(1j * K * sign * (p.pml.stretched(0, x) * math.cos(q)
                                                               + p.pml.stretched(1, y) * math.sin(q)))}

    r = constraint_residual(_Closed(p, wave(1.0)), c, pts, None, p.inputs, p.outputs, "autograd").detach()
    inside = (pts.abs() * p.scales.length < 1.0).all(1)
    assert inside.sum() > 100 and (~inside).sum() > 100  # sites in the inner box and in the layer
    assert float(r.abs().max()) < 1e-10
    plain = constraint_residual(_Closed(p, lambda x, y: {"Ez": torch.exp(1j * K * (x * math.cos(q) + y * math.sin(q)))}),
                                c, pts, None, p.inputs, p.outputs, "autograd").detach()
    assert float(plain.abs().max()) > 0.1  # the unstretched wave does not solve the equation inside the layer


def test_pml_reflection_matches_its_design_in_a_finite_difference_solve():
    """1D: -u'' - k^2 u = 0 on [0, 1] with the PML (1) on [1, 1 + delta] closed by u = 0, driven by u(0) = 1,
    solved by second-order finite differences in the stretched form -(1/s) d/dx((1/s) du/dx) - k^2 u = 0.
    The reflected amplitude |r| of u = exp(i k x) + r exp(-i k x) on [0, 1] matches R (3) within 3 %."""
    for reflection in (1e-2, 1e-3):
        pml = es.PML([0.0], [1.0], 0.5, K, reflection=reflection, order=2)
        n = 6000
        x = np.linspace(0.0, 1.5, n + 1)
        h = x[1] - x[0]
        xm = torch.as_tensor(0.5 * (x[1:] + x[:-1]))
        s_mid = pml.stretch(0, xm)[0].numpy()
        s_node = pml.stretch(0, torch.as_tensor(x))[0].numpy()
        inner = np.arange(1, n)
        main = (1 / s_mid[inner - 1] + 1 / s_mid[inner]) / (s_node[inner] * h**2) - K**2
        lower = -1 / (s_mid[inner[1:] - 1] * s_node[inner[1:]] * h**2)
        upper = -1 / (s_mid[inner[:-1]] * s_node[inner[:-1]] * h**2)
        a = sp.diags([lower, main, upper], [-1, 0, 1], format="csc")
        rhs = np.zeros(n - 1, dtype=complex)
        rhs[0] = 1 / (s_mid[0] * s_node[1] * h**2)  # u(0) = 1
        u = spla.spsolve(a, rhs)
        sel = (x[inner] > 0.1) & (x[inner] < 0.9)
        basis = np.stack([np.exp(1j * K * x[inner][sel]), np.exp(-1j * K * x[inner][sel])], 1)
        (inc, ref), *_ = np.linalg.lstsq(basis, u[sel], rcond=None)
        assert abs(inc) == pytest.approx(1.0, rel=0.03)
        assert abs(ref) == pytest.approx(reflection, rel=0.03), (reflection, abs(ref))


# measured (float64, 3000 steps, seed 0): robin 0.2-0.9 %, pml 5.2 % (seed 1: 2.4 %; at lr 3e-3 the PML case stalls
# at 21-30 %: a field that must travel from the port through the layer trains slowly); a zero field scores 100 %
@pytest.mark.accuracy  # trains to check its error: the accuracy set
@pytest.mark.parametrize(("mode", "bound"), [("robin", 0.01), ("pml", 0.08)])
def test_a_complex_problem_trains_to_its_exact_solution(mode, tmp_path, bound):
    p = line(mode)
    metrics = es.train(p, out=str(tmp_path / mode), quiet=True)
    assert metrics["rel_l2"]["full"]["u"] < bound, metrics["rel_l2"]
    with __import__("h5py").File(tmp_path / mode / "fields.h5", "r") as f:
        assert int(f["fields/u"].attrs["complex"]) == 1 and f["fields/u"].shape[-1] == 2


def test_too_few_points_per_wavelength_warns_once_with_the_count_to_use():
    cfg = Line.preset_config()
    cfg["sampling"]["interior"] = 8  # 8 points on 1 m with lambda = 1 m: 8 per wavelength
    with pytest.warns(UserWarning, match=r"8 PDE collocation points give 8.0 points per wavelength.*"
                                         r"sampling.interior >= 10"):
        p = type("L", (Line,), {"mode": "robin"})(cfg)
    assert p.points_per_wavelength() == pytest.approx(8.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert line("robin").points_per_wavelength() == pytest.approx(300.0)
