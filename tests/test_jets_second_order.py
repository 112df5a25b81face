"""Second-order jets equal nested autograd (float64, 1e-10), and closed-form operator values."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from elecsolver.jets import Jet, JetSpec, seed_jet
from elecsolver.networks import (
    ACTIVATIONS,
    MLP,
    Activation,
    FourierFeatures,
    HardInitialCondition,
    InputScaling,
    JetLinear,
    Network,
    Residual,
    build_network,
)
from elecsolver.operators import curl, curl_curl, ddt, div, evaluate, grad, grad_div, laplacian

IN, OUT = ("x", "y", "t"), ("Ex", "Ey", "Hz")
ALL_PAIRS = [("x", "x"), ("y", "y"), ("t", "t"), ("x", "y"), ("y", "t"), ("t", "x")]
DECLARATIONS = [
    # (wrt, second, laplacian)
    (None, ALL_PAIRS, None),
    (("t",), [("x", "x"), ("y", "y")], None),
    (("t",), None, {"x": 1.0, "y": 1.0}),
    (None, None, {"x": 1.0, "y": 1.0, "t": -1.0}),                 # wave operator
    (("y", "x"), [("x", "y"), ("y", "y")], {"x": 2.5, "y": -0.3}),  # anisotropic, negative
]


def _rel(a, b):
    a, b = a.detach(), b.detach()
    return float((a - b).norm() / max(float(b.norm()), 1.0))


def _both(model, pts, inputs, outputs, wrt, second, lap):
    a = evaluate(model, pts, inputs, outputs, wrt, method="jet", second=second, laplacian=lap)
    b = evaluate(model, pts, inputs, outputs, wrt, method="autograd", second=second, laplacian=lap)
    return a, b


def _networks():
    torch.manual_seed(0)
    box = ([-0.2, -0.1, 0.0], [1.2, 3.1, 0.4])  # anisotropic input scaling
    nets = {}
    for act in sorted(ACTIVATIONS):
        nets[f"mlp-{act}"] = build_network("mlp", 3, 3, *box, width=10, depth=3, activation=act,
                                           first_omega=3.0, output_gain=1.0)
    nets["multiscale-sin"] = build_network("multiscale", 3, 3, *box, width=8, depth=2, activation="sin",
                                           scales=[1.0, 3.0], first_omega=4.0, output_gain=1.0)
    nets["multiscale-tanh-hard"] = Network(
        build_network("multiscale", 3, 3, *box, width=8, depth=2, activation="tanh", scales=[1.0, 2.0],
                      output_gain=1.0), [HardInitialCondition(t_column=2, t_start=0.0, span=0.4)])
    nets["fourier-residual-gelu"] = nn.Sequential(
        InputScaling(*box), FourierFeatures(3, 6, scale=1.5), JetLinear(12, 12), Activation("gelu"),
        Residual(nn.Sequential(JetLinear(12, 12), Activation("silu"))), JetLinear(12, 3))
    nets["linear"] = JetLinear(3, 3)
    nets["activation-tanh"] = nn.Sequential(JetLinear(3, 3), Activation("tanh"))
    nets["input-scaling"] = nn.Sequential(InputScaling(*box), Activation("sin"))
    return {k: v.double() for k, v in nets.items()}


NETS = _networks()


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("decl", range(len(DECLARATIONS)))
def test_second_order_jets_equal_autograd(name, decl):
    wrt, second, lap = DECLARATIONS[decl]
    net = NETS[name]
    pts = torch.rand(48, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(decl))
    a, b = _both(net, pts, IN, OUT, wrt, second, lap)
    assert a.jet.spec == b.jet.spec
    assert a.jet.channels.shape == (a.jet.spec.n_channels, 48, 3)
    assert _rel(a.jet.channels, b.jet.channels) < 1e-10
    # each named second derivative and the summed channel individually
    for i, j in second or ():
        for comp in OUT:
            assert _rel(a.d2(comp, i, j), b.d2(comp, i, j)) < 1e-10
            assert torch.equal(a.d2(comp, i, j), a.d2(comp, j, i))
    if lap is not None:
        assert _rel(laplacian(a, OUT), laplacian(b, OUT)) < 1e-10


def test_summed_laplacian_equals_sum_of_diagonal_pairs():
    net = NETS["mlp-tanh"]
    pts = torch.rand(64, 3, dtype=torch.float64)
    w = {"x": 2.0, "y": -0.5, "t": -1.0}
    f = evaluate(net, pts, IN, OUT, second=[("x", "x"), ("y", "y"), ("t", "t")], laplacian=w)
    for comp in OUT:
        by_pairs = sum(wk * f.d2(comp, k, k) for k, wk in w.items())
        assert _rel(f.lap(comp), by_pairs) < 1e-12
        assert _rel(laplacian(f, comp, over=w), f.lap(comp)) < 1e-12
    # over= that differs from the carried weights falls back to the diagonal pairs
    assert _rel(laplacian(f, "Ex", over=("x", "y")), f.d2("Ex", "x", "x") + f.d2("Ex", "y", "y")) < 1e-12


def test_first_order_jets_are_unchanged():
    net = NETS["mlp-sin"]
    pts = torch.rand(16, 3, dtype=torch.float64)
    f1 = evaluate(net, pts, IN, OUT, ("x", "t"))
    assert not f1.jet.second_order and f1.jet.data.shape == (3, 16, 3) and f1.jet.data is f1.jet.channels
    f2 = evaluate(net, pts, IN, OUT, ("x", "t"), second=[("x", "x")], laplacian={"x": 1, "y": 1})
    assert f2.jet.wrt == (0, 2, 1)  # y added for the Laplacian
    assert torch.allclose(f2.jet.data[:3], f1.jet.data, rtol=1e-13, atol=1e-13)


class _Product(nn.Module):
    """u * v of two networks, by Jet.__mul__ on jets (the Leibniz rule to second order)."""

    def __init__(self):
        super().__init__()
        self.u, self.v = NETS["mlp-tanh"], NETS["mlp-sin"]

    def forward(self, x):
        return self.u(x) * self.v(x)


@pytest.mark.parametrize("decl", range(len(DECLARATIONS)))
def test_product_rule_equals_autograd(decl):
    wrt, second, lap = DECLARATIONS[decl]
    pts = torch.rand(32, 3, dtype=torch.float64)
    a, b = _both(_Product(), pts, IN, OUT, wrt, second, lap)
    assert _rel(a.jet.channels, b.jet.channels) < 1e-10


@pytest.mark.parametrize("activation", ["tanh", "sin", "gelu"])
def test_parameter_gradients_of_a_second_order_loss_equal_autograd(activation):
    torch.manual_seed(1)
    net = Network(build_network("mlp", 3, 3, [0, 0, 0], [1, 2, 0.5], width=10, depth=2,
                                activation=activation, output_gain=1.0), [HardInitialCondition(2, 0.0, 0.5)]).double()
    pts = torch.rand(40, 3, dtype=torch.float64)
    grads = []
    for method in ("jet", "autograd"):
        net.zero_grad()
        f = evaluate(net, pts, IN, OUT, ("t",), method=method, second=[("x", "y"), ("t", "t")],
                     laplacian={"x": 1.0, "y": 1.0, "t": -1.0})
        loss = ((f.lap("Hz") - f.d2("Ex", "t", "t")) ** 2 + f.d2("Ey", "x", "y") ** 2 + ddt(f, "Hz") ** 2).sum()
        loss.backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    assert _rel(grads[0], grads[1]) < 1e-10


def test_input_order_and_multi_letter_names():
    """Inputs and components in any order, addressed by name."""
    torch.manual_seed(2)
    net = MLP(3, 3, width=8, depth=2, activation="silu", output_gain=1.0).double()
    inputs, outputs = ("t", "y", "x"), ("Hz", "E_re", "Ey")
    pts = torch.rand(30, 3, dtype=torch.float64)
    a, b = _both(net, pts, inputs, outputs, ("x",), [("y", "x"), ("t", "t")], {"y": 1.0})
    for comp in outputs:
        assert _rel(a.d2(comp, "x", "y"), b.d2(comp, "y", "x")) < 1e-10
        assert _rel(a.d2(comp, "t", "t"), b.d2(comp, "t", "t")) < 1e-10
        assert _rel(a.lap(comp), b.lap(comp)) < 1e-10
        assert _rel(a.d(comp, "t"), b.d(comp, "t")) < 1e-10
    assert a.second_pairs == (("y", "x"), ("t", "t")) and a.laplacian_weights == {"y": 1.0}


# ---- closed forms ------------------------------------------------------------------------------
K_VEC = (1.3, -0.7, 2.1)
OMEGA = math.sqrt(sum(k * k for k in K_VEC))  # c = 1: the plane wave solves the wave equation


class _Closed(nn.Module):
    """Closed-form fields of (x, y, z, t) built from Jet arithmetic (map, +, -, *, elementwise), so
    the same formulas run on tensors and on jets.

    fields: u = -y, v = x, w = 0 (curl (0, 0, 2)); p = x^2 + y^2, q = x^2 - y^2 (Laplacian 4, 0);
    a = yz, b = xz, c = xy (div 0, curl 0); s = sin(k.x - w t); g = y^2 (curl curl (-2, 0, 0)).
    """

    NAMES = ("u", "v", "w", "p", "q", "a", "b", "c", "s", "g")

    def forward(self, x):
        jet = isinstance(x, Jet)
        cols = [x.map(lambda ch, i=i: ch[..., i : i + 1]) if jet else x[:, i : i + 1] for i in range(4)]
        X, Y, Z, _ = cols
        kw = torch.tensor([*K_VEC, -OMEGA], dtype=(x.channels if jet else x).dtype).unsqueeze(1)  # [4, 1]
        phase = x.map(lambda ch: ch @ kw) if jet else x @ kw
        if jet:
            p0 = phase.value
            s = phase.elementwise(torch.sin(p0), torch.cos(p0), -torch.sin(p0))
        else:
            s = torch.sin(phase)
        comps = [-Y, X, X - X, X * X + Y * Y, X * X - Y * Y, Y * Z, X * Z, X * Y, s, Y * Y]
        if jet:
            return x.like(torch.cat([c.channels for c in comps], dim=-1))
        return torch.cat(comps, dim=-1)


IN4 = ("x", "y", "z", "t")
PAIRS3 = [("x", "x"), ("y", "y"), ("z", "z"), ("x", "y"), ("y", "z"), ("x", "z")]


@pytest.mark.parametrize("method", ["jet", "autograd"])
def test_closed_form_operators(method):
    pts = torch.rand(25, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    n = pts.shape[0]
    f = evaluate(_Closed(), pts, IN4, _Closed.NAMES, method=method, second=PAIRS3,
                 laplacian={"x": 1.0, "y": 1.0, "z": 1.0, "t": -1.0})
    zeros, ones = torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64)

    def close(a, b):
        return torch.allclose(a, b, rtol=1e-12, atol=1e-12)

    assert close(curl(f, ("u", "v", "w")), torch.stack([zeros, zeros, 2 * ones], 1))
    assert close(curl(f, ("u", "v")), 2 * ones)
    assert close(laplacian(f, ("p", "q"), over=("x", "y")), torch.stack([4 * ones, zeros], 1))
    assert close(div(f, ("a", "b", "c"), over=("x", "y", "z")), zeros)
    assert close(curl(f, ("a", "b", "c")), torch.zeros(n, 3, dtype=torch.float64))
    phase = pts[:, :3] @ torch.tensor(K_VEC, dtype=torch.float64) - OMEGA * pts[:, 3]
    k = torch.tensor(K_VEC, dtype=torch.float64)
    assert close(grad(f, "s", over=("x", "y", "z")), torch.cos(phase).unsqueeze(1) * k)
    assert close(ddt(f, "s"), -OMEGA * torch.cos(phase))
    assert close(laplacian(f, "s", over=("x", "y", "z")), -(OMEGA**2) * torch.sin(phase))
    assert close(f.lap("s"), zeros)  # the wave operator annihilates the plane wave
    assert close(grad_div(f, ("g", "w", "w")), torch.zeros(n, 3, dtype=torch.float64))
    assert close(curl_curl(f, ("g", "w", "w")), torch.stack([-2 * ones, zeros, zeros], 1))
    assert close(curl_curl(f, ("a", "b", "c")), torch.zeros(n, 3, dtype=torch.float64))
    assert close(grad_div(f, ("p", "q", "w")), torch.stack([2 * ones, -2 * ones, zeros], 1))  # div = 2x - 2y
    assert close(f.d2("p", "x", "y"), zeros) and close(f.d2("c", "y", "x"), ones)


def test_closed_form_jets_equal_autograd():
    pts = torch.rand(20, 4, dtype=torch.float64)
    a, b = _both(_Closed(), pts, IN4, _Closed.NAMES, ("t",), PAIRS3, {"x": 0.5, "z": -2.0, "t": 3.0})
    assert _rel(a.jet.channels, b.jet.channels) < 1e-12


# ---- errors -------------------------------------------------------------------------------------
def test_bad_declarations_raise():
    net = NETS["mlp-tanh"]
    pts = torch.rand(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="pair of input names"):
        evaluate(net, pts, IN, OUT, second=["xy"])
    with pytest.raises(ValueError, match="cannot take second derivatives"):
        evaluate(net, pts, IN, OUT, second=[("x", "z")])
    with pytest.raises(ValueError, match="cannot take second derivatives"):
        evaluate(net, pts, IN, OUT, laplacian={"z": 1.0})
    with pytest.raises(ValueError, match="declared twice"):
        evaluate(net, pts, IN, OUT, second=[("x", "y"), ("y", "x")])
    with pytest.raises(ValueError, match="nonzero weight"):
        evaluate(net, pts, IN, OUT, laplacian={"x": 0.0})
    with pytest.raises(ValueError, match="finite"):
        evaluate(net, pts, IN, OUT, laplacian={"x": float("nan")})
    with pytest.raises(ValueError, match="map input names"):
        evaluate(net, pts, IN, OUT, laplacian=["x", "y"])
    with pytest.raises(ValueError, match="among wrt"):
        seed_jet(pts, [0], pairs=[(0, 1)])
    with pytest.raises(ValueError, match="shape"):
        Jet(torch.zeros(2, 4, 3), (0,), pairs=[(0, 0)])
    f = evaluate(net, pts, IN, OUT, second=[("x", "y")])
    with pytest.raises(KeyError, match="is read but was not declared.*second= pairs"):
        f.d2("Ex", "x", "x")
    with pytest.raises(KeyError, match="no summed Laplacian"):
        f.lap("Ex")
    with pytest.raises(KeyError, match="is read but was not declared"):
        laplacian(f, "Ex", over=("x", "y"))
    with pytest.raises(ValueError, match="1 \\(out-of-plane\\), 2"):
        curl(f, ("Ex", "Ey", "Hz", "Ex"))
    with pytest.raises(ValueError, match="sequence of input names"):
        laplacian(f, "Ex", over="x")


def test_module_without_second_order_rules_is_refused():
    class FirstOrderOnly(nn.Module):  # rebuilds a first-order jet and so drops the second order
        def forward(self, x):
            y = NETS["mlp-tanh"](x)
            return Jet(y.data, y.wrt) if isinstance(y, Jet) else y

    pts = torch.rand(4, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match="dropped the second-order channels"):
        evaluate(FirstOrderOnly(), pts, IN, OUT, second=[("x", "x")])
    f = evaluate(FirstOrderOnly(), pts, IN, OUT, second=[("x", "x")], method="autograd")  # the fallback
    assert f.d2("Ex", "x", "x").shape == (4,)


def test_mixing_jets_with_different_derivatives_raises():
    pts = torch.rand(4, 3, dtype=torch.float64)
    a = seed_jet(pts, [0, 1], pairs=[(0, 0)])
    b = seed_jet(pts, [0, 1], laplacian={0: 1.0})
    with pytest.raises(ValueError, match="different derivatives"):
        a * b
    with pytest.raises(ValueError, match="no second derivative"):
        a.elementwise(torch.sin(a.value), torch.cos(a.value))
    assert JetSpec([0, 1], [(1, 0)]) == JetSpec((0, 1), ((1, 0),))


class _UserBlock(torch.nn.Module):
    """A layer with no jet rule: softplus(W x) * x (needs the fallback)."""

    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.nn.functional.softplus(self.lin(x)) * x


def test_funcjet_fallback_matches_autograd_and_gradients():
    from elecsolver.networks import MLP, FuncJet

    torch.manual_seed(5)
    net = torch.nn.Sequential(FuncJet(_UserBlock(3)), MLP(3, 2, 12, 2, "tanh")).double()
    pts = torch.rand(40, 3, dtype=torch.float64)
    names, outs = ("x", "y", "t"), ("u", "v")
    for kw in ({}, {"second": [("x", "y"), ("t", "t")], "laplacian": {"x": 1.0, "y": 1.0, "t": -1.0}}):
        a = evaluate(net, pts, names, outs, **kw).jet.channels
        b = evaluate(net, pts, names, outs, method="autograd", **kw).jet.channels
        assert (a - b).norm() / b.norm() < 1e-10
        ga = torch.autograd.grad(a.pow(2).sum(), list(net.parameters()))
        gb = torch.autograd.grad(b.pow(2).sum(), list(net.parameters()))
        for x, y in zip(ga, gb):
            assert (x - y).norm() <= 1e-10 * max(1.0, y.norm())
    # without the wrapper the jet path says what to do
    bare = torch.nn.Sequential(torch.nn.Identity(), _UserBlock(3)).double()
    with pytest.raises(TypeError, match="FuncJet"):
        evaluate(bare, pts, names, outs)


# ---- the layer and head registries, to second order ----------------------------------------------------------
import elecsolver.problems  # noqa: F401  (registers the problems' own heads, e.g. the near field)

from elecsolver.networks import HEADS, LAYERS

_KW = {"second": [("x", "y"), ("t", "t"), ("x", "t")], "laplacian": {"x": 1.0, "y": 1.0, "t": -0.5}}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_registered_layer_equals_autograd_to_second_order(name):
    torch.manual_seed(2)
    layer = LAYERS[name](3)
    net = nn.Sequential(layer, Activation("tanh"), JetLinear(_width(layer), 3)).double()
    pts = torch.rand(30, 3, dtype=torch.float64) * 1.2 - 0.1
    a = evaluate(net, pts, IN, OUT, **_KW).jet.channels
    b = evaluate(net, pts, IN, OUT, method="autograd", **_KW).jet.channels
    assert _rel(a, b) < 1e-10, name


def _width(layer) -> int:
    with torch.no_grad():
        return layer.double()(torch.zeros(1, 3, dtype=torch.float64)).shape[-1]


@pytest.mark.parametrize("name", sorted(HEADS))
def test_every_registered_head_equals_autograd_to_second_order(name):
    torch.manual_seed(3)
    body = nn.Sequential(JetLinear(3, 8), Activation("sin"), JetLinear(8, 3))
    net = Network(body, [HEADS[name](3, 3)]).double()
    pts = torch.rand(30, 3, dtype=torch.float64)
    for kw in (_KW, {}):  # second-order jets, and first-order ones (some heads have a rule of their own)
        a = evaluate(net, pts, IN, OUT, **kw).jet.channels
        b = evaluate(net, pts, IN, OUT, method="autograd", **kw).jet.channels
        assert _rel(a, b) < 1e-10, (name, kw)
