"""Networks built from jet-aware layers.

Every module here accepts either a plain tensor [N, d] (values only, for evaluation) or a
:class:`~elecsolver.jets.Jet` (values and input derivatives, for residuals) and returns the same
kind.  A network is written once for one device; ``parallel/`` transforms it from outside.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import nn

from .jets import Jet

__all__ = [
    "ACTIVATIONS",
    "BODIES",
    "HEADS",
    "INITS",
    "LAYERS",
    "MLP",
    "Activation",
    "ActivationRule",
    "FourierFeatures",
    "FuncJet",
    "GroupSum",
    "GroupedJetLinear",
    "HardDirichlet",
    "HardInitialCondition",
    "HardInitialValue",
    "InputScaling",
    "JetLinear",
    "MultiscaleMLP",
    "Network",
    "NodeInterpolation",
    "Residual",
    "ScaleReplicate",
    "SubdomainFeatures",
    "SubdomainMerge",
    "build_body",
    "build_network",
    "chebyshev_lobatto",
    "chain_rule_jet",
    "flat_multiscale_layers",
    "grouped_matmul",
    "register_head",
    "register_layer",
]


class ActivationRule(NamedTuple):
    """An elementwise function with its first and second derivatives (each [...] -> [...])."""

    fn: Callable[[torch.Tensor], torch.Tensor]
    d1: Callable[[torch.Tensor], torch.Tensor]
    d2: Callable[[torch.Tensor], torch.Tensor]


def _tanh_d1(a: torch.Tensor) -> torch.Tensor:
    return 1.0 - torch.tanh(a) ** 2


def _tanh_d2(a: torch.Tensor) -> torch.Tensor:
    t = torch.tanh(a)
    return -2.0 * t * (1.0 - t * t)


def _silu_d1(a: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(a) * (1 + a * (1 - torch.sigmoid(a)))


def _silu_d2(a: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(a)
    return s * (1 - s) * (2 + a * (1 - 2 * s))


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_d1(a: torch.Tensor) -> torch.Tensor:  # Phi(a) + a phi(a)
    return 0.5 * (1.0 + torch.erf(a * (1.0 / math.sqrt(2.0)))) + a * torch.exp(-0.5 * a * a) * _INV_SQRT_2PI


def _gelu_d2(a: torch.Tensor) -> torch.Tensor:  # phi(a) (2 - a^2)
    return torch.exp(-0.5 * a * a) * _INV_SQRT_2PI * (2.0 - a * a)


def _neg_sin(a: torch.Tensor) -> torch.Tensor:
    return -torch.sin(a)


ACTIVATIONS = {
    # name: (sigma, sigma', sigma'');  gelu is the exact (erf) form, Hendrycks & Gimpel 2016
    "tanh": ActivationRule(torch.tanh, _tanh_d1, _tanh_d2),
    "sin": ActivationRule(torch.sin, torch.cos, _neg_sin),
    "silu": ActivationRule(torch.nn.functional.silu, _silu_d1, _silu_d2),
    "gelu": ActivationRule(torch.nn.functional.gelu, _gelu_d1, _gelu_d2),
}


def _fused(name: str, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """sigma, sigma', sigma'' at ``a`` sharing intermediate results (second-order jets only)."""
    if name == "tanh":
        t = torch.tanh(a)
        d1 = 1.0 - t * t
        return t, d1, -2.0 * t * d1
    if name == "sin":
        s = torch.sin(a)
        return s, torch.cos(a), -s
    if name == "silu":
        s = torch.sigmoid(a)
        one_m = 1 - s
        return a * s, s * (1 + a * one_m), s * one_m * (2 + a * (1 - 2 * s))
    rule = ACTIVATIONS[name]
    return rule.fn(a), rule.d1(a), rule.d2(a)


class Activation(nn.Module):
    """Elementwise activation with the chain rule on jets:
    d sigma(a) = sigma'(a) da, and to second order
    d2 sigma(a)/dx_i dx_j = sigma''(a) a_i a_j + sigma'(a) a_ij,
    L[sigma(a)] = sigma'(a) L[a] + sigma''(a) sum_k w_k a_k^2 for a summed Laplacian channel
    (Griewank & Walther 2008, ch. 13; Li et al. 2023, forward Laplacian).

    Parameters
    ----------
    name : str
        One of ``ACTIVATIONS`` ("tanh", "sin", "silu", "gelu").

    Raises
    ------
    ValueError
        For an unknown name.
    """

    def __init__(self, name: str):
        super().__init__()
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
        self.name = name
        self.fn, self.d1, self.d2 = ACTIVATIONS[name]

    def forward(self, x):
        if isinstance(x, Jet):
            if not x.second_order:
                # split, not indexing: its backward concatenates the parts' gradients instead of
                # zero-filling a full-size gradient per index (about a quarter of a CPU step)
                a0, rest = torch.split(x.channels, [1, x.channels.shape[0] - 1], dim=0)
                return x.like(torch.cat([self.fn(a0), self.d1(a0) * rest], dim=0))
            return x.elementwise(*_fused(self.name, x.value))
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.name


class JetLinear(nn.Linear):
    """``nn.Linear`` on jets: all channels (value, first and second derivatives, summed Laplacian)
    through one matmul, the bias on the value channel only.

    Shapes: [N, in] -> [N, out]; jets [1+K+P+L, N, in] -> [1+K+P+L, N, out].
    """

    def forward(self, x):
        if isinstance(x, Jet):
            out = torch.matmul(x.channels, self.weight.t())  # [1 + K + P + L, N, out]
            if self.bias is not None:
                v, rest = torch.split(out, [1, out.shape[0] - 1], dim=0)  # a cheaper backward than slicing
                out = torch.cat([v + self.bias, rest], dim=0)
            return x.like(out)
        return super().forward(x)


class InputScaling(nn.Module):
    """Affine input map x' = s (x - centre) / half_width, so that input column m spans [-s_m, s_m] (s_m = 1 unless
    ``spans`` says otherwise).

    On jets every derivative channel of input column m is multiplied by inv_m = 1 / half_width_m
    (the map is affine), so that the network's second derivatives along the original inputs come
    out scaled by inv_i inv_j and a summed Laplacian sum_k w_k d2/dx_k^2 by w_k inv_k^2 per
    direction, with nothing special to do.

    Parameters
    ----------
    lower, upper : sequence of float
        The box the inputs live in, one entry per input column (nondimensional units).
    spans : sequence of float, optional
        The half width s_m each column is mapped to (positive; default 1 for every column).  With a first layer
        initialised in proportion to its inputs (SIREN) a column with s_m < 1 starts with proportionally lower
        frequencies along it: the network's parameter axes (``network.parameter_scale``).

    Raises
    ------
    ValueError
        If the shapes differ, upper <= lower in some column, or a span is not positive.
    """

    def __init__(self, lower: Sequence[float], upper: Sequence[float], spans: Sequence[float] | None = None):
        super().__init__()
        lo = torch.as_tensor(lower, dtype=torch.float64)
        hi = torch.as_tensor(upper, dtype=torch.float64)
        if lo.shape != hi.shape or bool((hi <= lo).any()):
            raise ValueError(f"input box needs upper > lower in every column, got {lower} and {upper}")
        self.register_buffer("centre", (lo + hi) / 2)
        inv_half = 2.0 / (hi - lo)
        if spans is not None:
            s = torch.as_tensor(spans, dtype=torch.float64)
            if s.shape != lo.shape or not bool((s > 0).all()):
                raise ValueError(f"input spans need one positive entry per column, got {spans}")
            inv_half = inv_half * s
        self.register_buffer("inv_half", inv_half)

    def forward(self, x):
        if isinstance(x, Jet):
            d = x.channels
            inv = self.inv_half.to(d.dtype)
            v = (d[0] - self.centre.to(d.dtype)) * inv
            return x.like(torch.cat([v.unsqueeze(0), d[1:] * inv], dim=0))
        return (x - self.centre.to(x.dtype)) * self.inv_half.to(x.dtype)


class MLP(nn.Module):
    """Fully connected network: ``depth`` hidden layers of ``width`` with one activation.

    Parameters
    ----------
    in_features, out_features : int
        Input dimension d and output components c.
    width, depth : int
        Hidden width and number of hidden layers (>= 1).
    activation : str
        "tanh", "sin", "silu" or "gelu".
    first_omega : float
        For "sin" with the SIREN initialisation, the frequency factor of the first layer
        (Sitzmann et al. 2020, sec. 3.2); with "fourier", the standard deviation of its frequencies.
    output_gain : float
        Factor on the output layer's initial weights (its bias starts at zero), so that the
        initial fields are small compared with O(1) nondimensional fields.
    init : {"auto", "glorot", "siren", "fourier"}
        Weight initialisation: "glorot" is Glorot (Xavier) uniform weights and zero biases
        (Glorot & Bengio, AISTATS 2010), "siren" the SIREN uniform scheme, "fourier" the SIREN scheme with a
        first layer of random Fourier features (frequencies N(0, first_omega^2) per unit of the scaled inputs,
        phases uniform in [-pi, pi]; Rahimi & Recht, NIPS 2007), for random-feature least squares; "auto"
        (default) picks "siren" for "sin" and "glorot" otherwise.

    Raises
    ------
    ValueError
        For width or depth < 1, or an unknown ``init``.

    Shapes: [N, in_features] -> [N, out_features]; jets [1+K+P+L, N, in] -> [1+K+P+L, N, out].
    """

    def __init__(self, in_features: int, out_features: int, width: int = 64, depth: int = 4,
                 activation: str = "tanh", first_omega: float = 1.0, output_gain: float = 0.1,
                 init: str = "auto"):
        super().__init__()
        if width < 1 or depth < 1:
            raise ValueError(f"width and depth must be >= 1, got width={width}, depth={depth}")
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; choose one of {list(INITS)}")
        scheme = ("siren" if activation == "sin" else "glorot") if init == "auto" else init
        layers: list[nn.Module] = []
        dims = [in_features] + [width] * depth
        for i in range(depth):
            lin = JetLinear(dims[i], dims[i + 1])
            self._init(lin, scheme, first=(i == 0), omega=first_omega)
            layers += [lin, Activation(activation)]
        out = JetLinear(width, out_features)
        self._init(out, scheme, first=False, omega=first_omega)
        with torch.no_grad():  # start near zero fields: a small output layer (zero bias)
            out.weight.mul_(output_gain)
            out.bias.zero_()
        layers.append(out)
        self.layers = nn.Sequential(*layers)

    @staticmethod
    def _init(lin: nn.Linear, scheme: str, first: bool, omega: float) -> None:
        with torch.no_grad():
            if scheme == "fourier" and first:
                # random Fourier features (Rahimi & Recht, NIPS 2007): N(0, omega^2) frequencies, uniform phases
                lin.weight.normal_(0.0, omega)
                lin.bias.uniform_(-math.pi, math.pi)
            elif scheme in ("siren", "fourier"):
                # SIREN: first layer U(-omega/n, omega/n), later layers U(-sqrt(6/n), sqrt(6/n))
                bound = omega / lin.in_features if first else math.sqrt(6.0 / lin.in_features)
                lin.weight.uniform_(-bound, bound)
                lin.bias.uniform_(-1.0 / math.sqrt(lin.in_features), 1.0 / math.sqrt(lin.in_features))
            else:
                nn.init.xavier_uniform_(lin.weight)
                nn.init.zeros_(lin.bias)

    def forward(self, x):
        return self.layers(x)


class MultiscaleMLP(nn.Module):
    """Sum of MLPs that see the input scaled by different factors (multiscale DNN, Liu, Cai & Xu,
    Commun. Comput. Phys. 28 (2020) 1970, as used by MindSpore Elec's point-source example).

    Parameters
    ----------
    scales : sequence of float
        One sub-network per factor a_i, fed a_i * x; outputs are summed.
    Other parameters as :class:`MLP`.
    """

    def __init__(self, in_features: int, out_features: int, width: int = 64, depth: int = 4,
                 activation: str = "tanh", scales: Sequence[float] = (1.0, 2.0, 4.0), first_omega: float = 1.0,
                 output_gain: float = 0.1, init: str = "auto"):
        super().__init__()
        if not scales:
            raise ValueError("a multiscale network needs at least one scale factor")
        self.register_buffer("factors", torch.as_tensor(list(scales), dtype=torch.float64))
        self.nets = nn.ModuleList(
            MLP(in_features, out_features, width, depth, activation, first_omega, output_gain, init) for _ in scales
        )

    def forward(self, x):
        outs = []
        for a, net in zip(self.factors, self.nets):
            if isinstance(x, Jet):
                outs.append(net(x.like(x.channels * a.to(x.channels.dtype))).channels)
            else:
                outs.append(net(x * a.to(x.dtype)))
        total = torch.stack(outs).sum(0)
        return x.like(total) if isinstance(x, Jet) else total


class ScaleReplicate(nn.Module):
    """x -> [a_1 x, a_2 x, ..., a_G x] along the features: the input of G sub-networks that see the input
    scaled by different factors (the first layer of a flat multiscale body).  Linear, so every jet channel
    is scaled alike.

    Parameters
    ----------
    factors : sequence of float
        The G scale factors a_g.

    Shapes: [N, d] -> [N, G d]; jets [C, N, d] -> [C, N, G d] (group g is features g d ... (g + 1) d - 1).
    """

    def __init__(self, factors: Sequence[float]):
        super().__init__()
        if not len(factors):
            raise ValueError("a multiscale network needs at least one scale factor")
        self.register_buffer("factors", torch.as_tensor(list(factors), dtype=torch.float64))

    def _map(self, t: torch.Tensor) -> torch.Tensor:  # [..., d] -> [..., G d]
        a = self.factors.to(t.dtype)
        return (t.unsqueeze(-2) * a.unsqueeze(-1)).flatten(-2)

    def forward(self, x):
        if isinstance(x, Jet):
            return x.like(self._map(x.channels))
        return self._map(x)

    def extra_repr(self) -> str:
        return f"factors={self.factors.tolist()}"


def grouped_matmul(t: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Block-diagonal product: ``t`` [..., G in] (G contiguous feature groups) times each group's ``weight[g]``
    [out, in] transposed, as one batched matmul over [G, M, in] (M the leading elements), without expanding the
    weight per point.  Returns [..., G, out]."""
    groups, n_out, n_in = weight.shape
    lead = t.shape[:-1]
    g = t.reshape(-1, groups, n_in).transpose(0, 1)       # [G, M, in]
    y = torch.bmm(g, weight.transpose(1, 2))              # [G, M, out]
    return y.transpose(0, 1).reshape(*lead, groups, n_out)


class GroupedJetLinear(nn.Module):
    """G independent linear maps side by side (a block-diagonal linear layer): group g maps features
    g*in ... (g+1)*in - 1 to g*out ... (g+1)*out - 1 with its own weight [out, in] and bias [out]; on jets
    every channel goes through the same batched matmul, the bias on the value channel only.

    Parameters
    ----------
    groups, in_features, out_features : int

    Attributes
    ----------
    weight : Parameter [G, out, in]
    bias : Parameter [G, out]

    Shapes: [N, G in] -> [N, G out]; jets [C, N, G in] -> [C, N, G out].
    """

    def __init__(self, groups: int, in_features: int, out_features: int):
        super().__init__()
        self.groups, self.in_features, self.out_features = groups, in_features, out_features
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default range
        self.weight = nn.Parameter(torch.empty(groups, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(groups, out_features).uniform_(-bound, bound))

    @classmethod
    def from_linears(cls, linears: Sequence[nn.Linear]) -> GroupedJetLinear:
        """The grouped layer holding copies of ``linears`` (same shapes), group g = ``linears[g]``."""
        first = linears[0]
        out = cls(len(linears), first.in_features, first.out_features)
        with torch.no_grad():
            out.weight.copy_(torch.stack([lin.weight for lin in linears]))
            out.bias.copy_(torch.stack([lin.bias for lin in linears]))
        return out

    def _matmul(self, t: torch.Tensor) -> torch.Tensor:  # [..., G in] -> [..., G, out], no bias
        return grouped_matmul(t, self.weight)

    def forward(self, x):
        if isinstance(x, Jet):
            out = self._matmul(x.channels)                            # [C, N, G, out]
            v, rest = torch.split(out, [1, out.shape[0] - 1], dim=0)
            return x.like(torch.cat([v + self.bias, rest], dim=0).flatten(-2))
        return (self._matmul(x) + self.bias).flatten(-2)

    def extra_repr(self) -> str:
        return f"groups={self.groups}, in_features={self.in_features}, out_features={self.out_features}"


class GroupSum(nn.Module):
    """Sum of G feature groups: [..., G c] -> [..., c] (the last layer of a flat multiscale body)."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def _map(self, t: torch.Tensor) -> torch.Tensor:
        return t.unflatten(-1, (self.groups, t.shape[-1] // self.groups)).sum(-2)

    def forward(self, x):
        if isinstance(x, Jet):
            return x.like(self._map(x.channels))
        return self._map(x)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


def flat_multiscale_layers(net: MultiscaleMLP) -> list[nn.Module]:
    """The layers of ``net`` as a flat sequence with the same function and parameters:
    ``ScaleReplicate``, then per depth a ``GroupedJetLinear`` (one group per scale) and the activation,
    the grouped output layer and a ``GroupSum`` -- so that a multiscale body can be cut between any two
    layers (pipeline stages) and its hidden widths sharded (tensor parallelism)."""
    layers: list[nn.Module] = [ScaleReplicate(net.factors.tolist())]
    per_net = [list(m.layers) for m in net.nets]
    for k, layer in enumerate(per_net[0]):
        if isinstance(layer, nn.Linear):
            layers.append(GroupedJetLinear.from_linears([p[k] for p in per_net]))
        else:
            layers.append(layer)
    layers.append(GroupSum(len(net.nets)))
    return layers


class FourierFeatures(nn.Module):
    """Fixed Fourier feature map x -> [sin(B x), cos(B x)] (Tancik et al., NeurIPS 2020; Wang, Wang &
    Perdikaris, CMAME 384 (2021) 113938 for PINNs), on jets by the chain rule to second order.

    Parameters
    ----------
    in_features : int
        Input dimension d.
    n_frequencies : int
        Number m of rows of B; the output has 2 m features.
    scale : float
        B has i.i.d. N(0, scale^2) entries, drawn from the global torch generator (seed it first).
    matrix : torch.Tensor, optional
        A given B of shape [m, d] instead of a random one (``n_frequencies`` and ``scale`` are then
        ignored).

    Shapes: [N, d] -> [N, 2m]; jets [1+K+P+L, N, d] -> [1+K+P+L, N, 2m].  B is a buffer (not trained).

    Raises
    ------
    ValueError
        If ``matrix`` is not [m, in_features], or m < 1, or scale <= 0.
    """

    def __init__(self, in_features: int, n_frequencies: int = 16, scale: float = 1.0,
                 matrix: torch.Tensor | None = None):
        super().__init__()
        if matrix is None:
            if n_frequencies < 1 or not scale > 0:
                raise ValueError(f"Fourier features need n_frequencies >= 1 and scale > 0, "
                                 f"got {n_frequencies} and {scale}")
            b = torch.randn(n_frequencies, in_features) * float(scale)
        else:
            b = torch.as_tensor(matrix).detach().clone()
            if b.dim() != 2 or b.shape[1] != in_features or b.shape[0] < 1:
                raise ValueError(f"the Fourier matrix B must have shape [m, {in_features}], got {tuple(b.shape)}")
        self.register_buffer("B", b.to(torch.get_default_dtype()))

    def forward(self, x):
        if isinstance(x, Jet):
            z = torch.matmul(x.channels, self.B.to(x.channels.dtype).t())  # [C, N, m]
            zz = x.like(torch.cat([z, z], dim=-1))
            s, c = torch.sin(z[0]), torch.cos(z[0])
            s0 = torch.cat([s, c], dim=-1)
            s1 = torch.cat([c, -s], dim=-1)
            return zz.elementwise(s0, s1, -s0)
        z = x @ self.B.to(x.dtype).t()
        return torch.cat([torch.sin(z), torch.cos(z)], dim=-1)

    def extra_repr(self) -> str:
        return f"in_features={self.B.shape[1]}, out_features={2 * self.B.shape[0]}"


class Residual(nn.Module):
    """Residual connection y = x + body(x) (He et al., CVPR 2016); on jets every channel adds.

    Parameters
    ----------
    body : nn.Module
        Maps [N, c] to [N, c] (and jets to jets with the same derivatives).

    Raises
    ------
    ValueError
        At call time, if the body changes the number of features.
    """

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        y = self.body(x)
        xs, ys = (x.channels, y.channels) if isinstance(x, Jet) else (x, y)
        if xs.shape[-1] != ys.shape[-1]:
            raise ValueError(f"a residual block needs body output width {xs.shape[-1]}, got {ys.shape[-1]}")
        return x + y


def build_network(kind: str, in_features: int, out_features: int, lower: Sequence[float],
                  upper: Sequence[float], **kwargs) -> nn.Module:
    """Input scaling to [-1, 1] followed by an "mlp" or "multiscale" network.

    Raises
    ------
    ValueError
        For an unknown ``kind``.
    """
    body: nn.Module
    if kind == "mlp":
        kwargs.pop("scales", None)
        body = MLP(in_features, out_features, **kwargs)
    elif kind == "multiscale":
        body = MultiscaleMLP(in_features, out_features, **kwargs)
    else:
        raise ValueError(f"unknown network kind {kind!r}; choose 'mlp' or 'multiscale'")
    return nn.Sequential(InputScaling(lower, upper), body)


class HardInitialCondition(nn.Module):
    """Head u(x, t) = ((t - t_start) / span) * y(x, t), so that u = 0 at t = t_start exactly.

    A hard constraint as an output transform (Lagaris, Likas & Fotiadis, IEEE Trans. Neural Netw. 9
    (1998) 987; Lu et al., SIAM J. Sci. Comput. 43 (2021) B1105), on jets by the product rule
    (to second order for second-order jets, :meth:`Jet.__mul__`).

    Parameters
    ----------
    t_column : int
        Column of t in the input.
    t_start, span : float
        Start time and time scale, in the network's (nondimensional) input units.

    Shapes: ``forward(y, x)`` with y [N, c] (or a jet) the body's output and x [N, d] (or the input jet).

    Raises
    ------
    ValueError
        If span <= 0.
    """

    def __init__(self, t_column: int, t_start: float, span: float):
        super().__init__()
        if span <= 0:
            raise ValueError(f"span must be positive, got {span}")
        self.t_column, self.t_start, self.span = int(t_column), float(t_start), float(span)

    def forward(self, y, x):
        if isinstance(x, Jet):
            tj = x.channels[:, :, self.t_column : self.t_column + 1]  # [1+K+P+L, N, 1]
            phi = torch.cat([((tj[0] - self.t_start) / self.span).unsqueeze(0), tj[1:] / self.span], dim=0)
            return x.like(phi) * y
        return y * ((x[:, self.t_column : self.t_column + 1] - self.t_start) / self.span)

    def extra_repr(self) -> str:
        return f"t_column={self.t_column}, t_start={self.t_start}, span={self.span}"


class HardInitialValue(nn.Module):
    """Head u(x, t) = u0(x) + ((t - t_start) / span) * y(x, t), so that u = u0 at t = t_start exactly.

    The initial state u0 is a function of the (training-unit) inputs, evaluated with t set to t_start; its
    jet comes from forward-mode AD of that function (:class:`FuncJet`), so any smooth u0 works to second
    order.  With u0 = 0 this is :class:`HardInitialCondition`.

    Parameters
    ----------
    initial : nn.Module
        Training-unit inputs [N, d] -> u0 [N, c] (a differentiable tensor function).
    t_column : int
    t_start, span : float
        As :class:`HardInitialCondition`.
    """

    def __init__(self, initial: nn.Module, t_column: int, t_start: float, span: float):
        super().__init__()
        self.initial = FuncJet(_AtTime(initial, t_column, t_start))
        self.zero = HardInitialCondition(t_column, t_start, span)

    def forward(self, y, x):
        return self.initial(x) + self.zero(y, x)


class _AtTime(nn.Module):
    """``module`` evaluated with input column ``t_column`` replaced by ``t``."""

    def __init__(self, module: nn.Module, t_column: int, t: float):
        super().__init__()
        self.module, self.t_column, self.t = module, int(t_column), float(t)

    def forward(self, x):
        return self.module(at_time(x, self.t_column, self.t))


def at_time(x, t_column: int, t: float):
    """Inputs (tensor [N, d] or jet) with column ``t_column`` held at ``t``: its value set to t and, in a jet, its
    derivative channels set to 0 (the inputs of a function of x alone)."""
    if isinstance(x, Jet):
        ch = x.channels
        keep = torch.ones(ch.shape[-1], dtype=ch.dtype, device=ch.device)
        keep[t_column] = 0
        put = torch.zeros_like(ch[:1])
        put[..., t_column] = t
        return x.like(ch * keep + torch.cat([put, torch.zeros_like(ch[1:])], 0))
    cols = [torch.full_like(x[:, k], t) if k == t_column else x[:, k] for k in range(x.shape[1])]
    return torch.stack(cols, dim=1)


class HardDirichlet(nn.Module):
    """Head u(x) = b(x) y(x) with b(x) = prod_i (x_i - lower_i)(upper_i - x_i) / h_i^2,
    h_i = (upper_i - lower_i) / 2, so that u = 0 on every face of the box exactly (a homogeneous
    Dirichlet condition, e.g. tangential E on a PEC wall).

    A hard constraint as an output transform (Lagaris, Likas & Fotiadis, IEEE Trans. Neural Netw. 9
    (1998) 987, eq. 11; Lu et al., SIAM J. Sci. Comput. 43 (2021) B1105): on jets b is built from the
    input jet by the product rule (:meth:`Jet.__mul__`), so its first and second derivatives (and a
    summed Laplacian channel) are exact.  The 1/h_i^2 normalisation keeps b of order one (max 1 at
    the centre); any positive factor gives the same function class.

    Parameters
    ----------
    lower, upper : sequence of float
        The box faces, one pair per constrained column (input units).
    columns : sequence of int, optional
        Input columns the box spans (default 0, 1, ..., len(lower) - 1); other columns (e.g. t)
        are unconstrained.
    normalise : bool
        Divide each factor by h_i^2 (default True); False gives b = prod_i (x_i - lower_i)(upper_i - x_i)
        as written, e.g. x (1 - x) y (1 - y) with max 1/16 on the unit square (DeepXDE's demos).
    components : sequence of int, optional
        Output components the factor multiplies (default all), e.g. only Ez of a TMz field (PEC walls).

    Shapes: ``forward(y, x)`` with y [N, c] (or a jet) the body's output and x [N, d] (or the input jet).

    Raises
    ------
    ValueError
        If the lengths differ or upper <= lower somewhere.
    """

    def __init__(self, lower: Sequence[float], upper: Sequence[float],
                 columns: Sequence[int] | None = None, normalise: bool = True,
                 components: Sequence[int] | None = None):
        super().__init__()
        self.normalise = bool(normalise)
        self.components = None if components is None else [int(c) for c in components]
        lower, upper = [float(v) for v in lower], [float(v) for v in upper]
        columns = list(range(len(lower))) if columns is None else [int(c) for c in columns]
        if not (len(lower) == len(upper) == len(columns)) or any(h <= lo for lo, h in zip(lower, upper)):
            raise ValueError(f"a Dirichlet box needs one (lower < upper) per column, got lower={lower}, "
                             f"upper={upper}, columns={columns}")
        self.lower, self.upper, self.columns = lower, upper, columns

    def factor(self, x):
        """b(x): a tensor [N, 1] for a tensor x [N, d]; a jet [C, N, 1] for an input jet."""
        out = None
        for col, lo, hi in zip(self.columns, self.lower, self.upper):
            inv = 2.0 / (hi - lo) if self.normalise else 1.0
            if isinstance(x, Jet):
                ch = x.channels[:, :, col : col + 1]  # the jet of x_col
                v, rest = ch[:1], ch[1:]
                a = x.like(torch.cat([(v - lo) * inv, rest * inv], dim=0))
                b = x.like(torch.cat([(hi - v) * inv, -rest * inv], dim=0))
            else:
                xc = x[:, col : col + 1]
                a, b = (xc - lo) * inv, (hi - xc) * inv
            term = a * b
            out = term if out is None else out * term
        return out

    def forward(self, y, x):
        b = self.factor(x)
        if self.components is None:
            return b * y
        c = (y.channels if isinstance(y, Jet) else y).shape[-1]
        sel = torch.zeros(c, dtype=torch.bool, device=(x.channels if isinstance(x, Jet) else x).device)
        for k in self.components:  # one element at a time: no index tensor copied from the host
            sel[k] = True
        if isinstance(y, Jet):  # factor 1 (value 1, derivatives 0) on the other components
            one = torch.zeros_like(b.channels[:, :, :1]).expand(-1, -1, c).clone()
            one[0] = 1.0
            return y.like(torch.where(sel, b.channels.expand(-1, -1, c), one)) * y
        return torch.where(sel, b, torch.ones_like(b)) * y

    def extra_repr(self) -> str:
        return (f"lower={self.lower}, upper={self.upper}, columns={self.columns}, normalise={self.normalise}, "
                f"components={self.components}")


def chebyshev_lobatto(n: int, lower: float, upper: float) -> list[float]:
    """The n >= 2 Chebyshev-Lobatto points of [lower, upper], lower first: (lower + upper)/2 - (upper - lower)/2
    cos(pi j / (n - 1)), j = 0..n-1 (Trefethen, *Approximation Theory and Approximation Practice*, 2013, ch. 2),
    the nodes at which polynomial interpolation of a smooth function converges geometrically."""
    if n < 2:
        raise ValueError(f"Chebyshev-Lobatto nodes need n >= 2, got {n}")
    return [0.5 * (lower + upper) - 0.5 * (upper - lower) * math.cos(math.pi * j / (n - 1)) for j in range(n)]


class NodeInterpolation(nn.Module):
    """Head: an output layer whose weights are polynomials in the parameter inputs, interpolating the output layers
    solved at a tensor grid of nodes of the parameters.

    y = sum_s l_s(p) (W_s h + b_s), with h the body's last hidden features [N, in], p the parameter columns of
    the input and l_s the tensor-product Lagrange polynomials of the nodes (one per node, 1 at node s and 0 at the
    others; Trefethen, *Approximation Theory and Approximation Practice*, 2013, ch. 5).  The parameters do not
    enter the features' derivatives: on jets the polynomials scale every channel alike, which is exact as long
    as no jet differentiates along a parameter column (refused).  Reverse mode through p (an inversion) is exact.

    Parameters
    ----------
    nodes : sequence of sequence of float
        The nodes of each parameter column, training units (e.g. :func:`chebyshev_lobatto`), >= 2 each, distinct.
    columns : sequence of int
        The input columns of the parameters, one per entry of ``nodes``.
    in_features, out_features : int
        Hidden features and output channels.

    Attributes
    ----------
    weight : [S, out, in] and bias : [S, out], S = prod(len(n) for n in nodes), nodes in C order (the last
    parameter fastest); zero until set.

    Shapes: ``forward(y, x)`` with y [N, in] (or a jet [C, N, in]) and x [N, d] (or the input jet) -> [N, out].

    Raises
    ------
    ValueError
        For nodes and columns of different lengths, fewer than two or repeated nodes of a parameter, or a jet
        that differentiates along a parameter column.
    """

    def __init__(self, nodes: Sequence[Sequence[float]], columns: Sequence[int], in_features: int,
                 out_features: int):
        super().__init__()
        self.nodes = [[float(v) for v in n] for n in nodes]
        self.columns = [int(c) for c in columns]
        if len(self.nodes) != len(self.columns) or not self.nodes:
            raise ValueError(f"one list of nodes per parameter column, got {len(self.nodes)} lists for columns "
                             f"{self.columns}")
        for n in self.nodes:
            if len(n) < 2 or len(set(n)) != len(n):
                raise ValueError(f"each parameter needs >= 2 distinct nodes, got {n}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        size = math.prod(len(n) for n in self.nodes)
        self.weight = nn.Parameter(torch.zeros(size, self.out_features, self.in_features))
        self.bias = nn.Parameter(torch.zeros(size, self.out_features))

    def node_values(self) -> list[tuple[float, ...]]:
        """The nodes, [S] tuples of one value per parameter column (training units), in the order of ``weight``."""
        import itertools

        return list(itertools.product(*self.nodes))

    def basis(self, p: torch.Tensor) -> torch.Tensor:
        """The Lagrange polynomials l_s at parameter values p [N, P] (training units), [N, S]."""
        out = None
        for k, nodes in enumerate(self.nodes):
            v = p[:, k : k + 1]
            cols = []
            for j, xj in enumerate(nodes):
                term = torch.ones_like(v)
                for m, xm in enumerate(nodes):
                    if m != j:
                        term = term * ((v - xm) / (xj - xm))
                cols.append(term)
            lk = torch.cat(cols, 1)  # [N, n_k]
            out = lk if out is None else (out[:, :, None] * lk[:, None, :]).reshape(p.shape[0], -1)
        return out

    def forward(self, y, x):
        if isinstance(x, Jet):
            clash = sorted(set(self.columns) & set(x.spec.wrt))
            if clash:
                raise ValueError(f"NodeInterpolation: the jet differentiates along parameter columns {clash}; "
                                 "its polynomials in the parameters carry no derivatives")
            p = x.channels[0][:, self.columns]
        else:
            p = x[:, self.columns]
        h = y.channels if isinstance(y, Jet) else y[None]
        # one output layer per distinct configuration (a run, a query and an inversion have one or a few): the
        # weights of each are interpolated once, from the row that stands for it (its gradient is the same)
        uniq, inverse = torch.unique(p.detach(), dim=0, return_inverse=True)
        out = h.new_zeros(h.shape[0], h.shape[1], self.out_features)
        if uniq.shape[0] <= 64:
            first = torch.full((uniq.shape[0],), -1, dtype=torch.long, device=p.device)
            first = first.scatter_reduce(0, inverse, torch.arange(p.shape[0], device=p.device), "amin",
                                         include_self=False)
            lu = self.basis(p[first])  # [U, S]
            w = torch.einsum("us,soi->uoi", lu, self.weight)
            b = lu @ self.bias  # [U, out]
            pieces = []
            for u in range(uniq.shape[0]):
                idx = (inverse == u).nonzero()[:, 0]
                val = torch.matmul(h[:, idx], w[u].t())
                val = torch.cat([val[:1] + b[u], val[1:]], 0)
                pieces.append((idx, val))
            for idx, val in pieces:
                out = out.index_copy(1, idx, val)
        else:  # every point its own configuration: per-point weights
            lp = self.basis(p)  # [N, S]
            w = torch.einsum("ns,soi->noi", lp, self.weight)
            out = torch.einsum("cni,noi->cno", h, w)
            out = torch.cat([out[:1] + lp @ self.bias, out[1:]], 0)
        return y.like(out) if isinstance(y, Jet) else out[0]

    def extra_repr(self) -> str:
        return (f"nodes={[len(n) for n in self.nodes]}, columns={self.columns}, in_features={self.in_features}, "
                f"out_features={self.out_features}")


class Network(nn.Module):
    """A network as a flat body of jet layers followed by heads (output transforms).

    The body is an ``nn.Sequential`` of layers that each map a tensor or a jet to the same kind (so it can
    be cut into pipeline stages between any two layers); each head sees the body's output and the input,
    ``y = head(y, x)``, e.g. a hard initial condition, a hard Dirichlet factor or a near-field ansatz.

    Parameters
    ----------
    body : nn.Sequential
        [N, d] -> [N, c] (tensors or jets).
    heads : sequence of nn.Module
        Each with ``forward(y, x)``, applied in order.

    Shapes: [N, d] -> [N, c]; jets [1+K+P+L, N, d] -> [1+K+P+L, N, c].
    """

    def __init__(self, body: nn.Module, heads: Sequence[nn.Module] = ()):
        super().__init__()
        self.body = body if isinstance(body, nn.Sequential) else nn.Sequential(body)
        self.heads = nn.ModuleList(heads)

    def forward(self, x):
        y = self.body(x)
        for head in self.heads:
            y = head(y, x)
        return y


def input_function_jet(fn: Callable[[torch.Tensor], torch.Tensor], x: Jet) -> Jet:
    """The jet of a parameter-free function of the inputs, fn: [N, D] -> [N, m] row by row, on the input jet ``x``.

    With g and H the gradient and Hessian of each output at the value (by reverse mode on the small graph of
    ``fn``), the channels are fn, g . a_k, a_i^T H a_j + g . a_ij and sum_k w_k a_k^T H a_k + g . L[a] (the
    chain rule to second order, as :class:`FuncJet`, but without a forward-mode pass per channel: ``fn`` is
    cheap and its derivatives carry no parameter gradients, so they are computed once and detached).
    """
    spec = x.spec
    with torch.enable_grad():
        x0 = x.channels[0].detach().requires_grad_(True)
        val = fn(x0)
        m = val.shape[1]
        grads = [torch.autograd.grad(val[:, j].sum(), x0, create_graph=spec.second_order, allow_unused=True)[0]
                 for j in range(m)]
        grads = [torch.zeros_like(x0) if g is None else g for g in grads]
        hess = None
        if spec.second_order:  # hess[j][:, i, :] = d grad_j[:, i] / dx
            hess = []
            for g in grads:
                rows = []
                for i in range(x0.shape[1]):
                    h = (torch.autograd.grad(g[:, i].sum(), x0, retain_graph=True, allow_unused=True)[0]
                         if g.requires_grad else None)
                    rows.append(torch.zeros_like(x0) if h is None else h)
                hess.append(torch.stack(rows, 1).detach())
    grad = torch.stack([g.detach() for g in grads], 1)  # [N, m, D]
    hess_fn = None if hess is None else (lambda u, v, h=torch.stack(hess, 1): torch.einsum("ni,nmij,nj->nm", u, h, v))
    return chain_rule_jet(x, val.detach(), lambda u: torch.einsum("nmi,ni->nm", grad, u), hess_fn)


def chain_rule_jet(x: Jet, value: torch.Tensor, lin, hess) -> Jet:
    """The jet of a function f of the inputs from its first and second directional derivatives at the input
    jet's value (Griewank & Walther, *Evaluating Derivatives*, 2nd ed., 2008, ch. 13): channels f, f'[a_k],
    f''[a_i, a_j] + f'[a_ij] and sum_k w_k f''[a_k, a_k] + f'[L[a]], a_* the input jet's channels.

    Parameters
    ----------
    x : Jet
        The input jet, channels [1+K+P+L, N, D].
    value : torch.Tensor
        f at the value, [N, m].
    lin : callable
        lin(u) -> f'[u], [N, D] -> [N, m].
    hess : callable or None
        hess(u, v) -> f''[u, v], two [N, D] -> [N, m]; None for a first-order jet.

    Returns a jet like ``x`` with [1+K+P+L, N, m] channels, in ``x``'s dtype (:class:`FuncJet`,
    :func:`input_function_jet` and the near-field heads assemble their jets here).
    """
    ch, spec = x.channels, x.spec
    out = [value] + [lin(ch[1 + k]) for k in range(spec.k)]
    for p, (i, j) in enumerate(spec.pairs):
        ki, kj = spec.wrt.index(i), spec.wrt.index(j)
        out.append(hess(ch[1 + ki], ch[1 + kj]) + lin(ch[1 + spec.k + p]))
    if spec.has_lap:
        acc = lin(ch[-1])
        for col, w in spec.laplacian:
            k = spec.wrt.index(col)
            acc = acc + w * hess(ch[1 + k], ch[1 + k])
        out.append(acc)
    return x.like(torch.stack(out, 0).to(ch.dtype))


class InputFeatures(nn.Module):
    """First layer that appends functions of the inputs as further inputs, [N, d] -> [N, d + m].

    For a material interface inside one network: a feature that is C1 across the interface with a jump in its
    second derivative (e.g. phi |phi| / (1 + phi^2) of a level set phi) lets the field carry the kink of its second
    derivative that a jump in the wavenumber puts there (the cusp-capturing idea of Tseng, Lin, Hu & Lai, J.
    Comput. Phys. 491 (2023) 112359, one derivative higher).

    Parameters
    ----------
    fn : callable
        [N, d] -> [N, m], a parameter-free function of the inputs (training units).  If it has a method
        ``derivatives(x) -> (value [N, m], gradient [N, m, d], hessian [N, m, d, d])``, the jets are assembled from
        these (:func:`chain_rule_jet`; no autograd, so that ``torch.func`` transforms such as the least-squares
        solve's Jacobian pass through), else by :func:`input_function_jet`.
    keep_inputs : bool
        Pass the inputs on before the features (default True).  False makes the features the body's only inputs:
        new coordinates, e.g. a map that holds a moving interface in place (``fn.keep_inputs = False`` on a
        problem's ``input_features`` says the same).

    Shapes: tensors [N, d] -> [N, d + m] ([N, m] without the inputs); jets likewise.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], keep_inputs: bool = True):
        super().__init__()
        self.fn, self.keep_inputs = fn, bool(keep_inputs)

    def _jet(self, x: Jet) -> Jet:
        derivatives = getattr(self.fn, "derivatives", None)
        if derivatives is None:
            return input_function_jet(self.fn, x)
        val, grad, hess = derivatives(x.channels[0])
        hess_fn = None if not x.spec.second_order else (
            lambda u, v: torch.einsum("ni,nmij,nj->nm", u, hess, v))
        return chain_rule_jet(x, val, lambda u: torch.einsum("nmi,ni->nm", grad, u), hess_fn)

    def forward(self, x):
        if isinstance(x, Jet):
            feats = self._jet(x)
            return x.like(torch.cat([x.channels, feats.channels], -1)) if self.keep_inputs else feats
        return torch.cat([x, self.fn(x)], -1) if self.keep_inputs else self.fn(x)


class SubdomainFeatures(nn.Module):
    """First layer of a body with one copy of the fields per subdomain: appends the subdomains' level sets as
    inputs and stacks one copy of the points per subdomain, [N, d] -> [(m + 1) N, d + m].

    Copy k < m (subdomain k) carries the features (l_1, ..., -l_k, ..., l_m), the last copy (the background)
    (l_1, ..., l_m).  Since l_k = 0 on subdomain k's boundary, the copies of its two sides agree there: the
    field is continuous by construction while its derivatives may jump.  The field read on each side, u(x,
    |l_k|) near an interface, is the cusp-capturing network of Tseng, Lin, Hu & Lai (J. Comput. Phys. 491
    (2023) 112359).  :class:`SubdomainMerge` is the body's last layer.

    Parameters
    ----------
    level_sets : nn.Module
        [N, d] -> [N, m], smooth functions of the inputs (training units), each zero on one subdomain's boundary.

    Shapes: tensors [N, d] -> [(m+1) N, d+m]; jets likewise in the point dimension (the features' jets by
    :func:`input_function_jet`).
    """

    def __init__(self, level_sets: nn.Module, m: int):
        super().__init__()
        self.level_sets, self.m = level_sets, int(m)
        signs = torch.ones(self.m + 1, self.m)
        signs[torch.arange(self.m), torch.arange(self.m)] = -1.0
        self.register_buffer("signs", signs, persistent=False)

    def _stack(self, x: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:  # [..., N, d], [..., N, m]
        copies = [torch.cat([x, feats * self.signs[k].to(feats.dtype)], -1) for k in range(self.m + 1)]
        return torch.cat(copies, -2)

    def forward(self, x):
        if isinstance(x, Jet):
            return x.like(self._stack(x.channels, input_function_jet(self.level_sets, x).channels))
        return self._stack(x, self.level_sets(x))


class SubdomainMerge(nn.Module):
    """Last layer of a body with subdomain copies: [(m + 1) N, c] -> [N, (m + 1) c], the copies' channels side by
    side in copy order (tensors or jets)."""

    def __init__(self, m: int):
        super().__init__()
        self.m = int(m)

    def _merge(self, y: torch.Tensor) -> torch.Tensor:  # [..., (m+1) N, c]
        *lead, n, c = y.shape
        y = y.reshape(*lead, self.m + 1, n // (self.m + 1), c)
        return y.movedim(-3, -2).reshape(*lead, n // (self.m + 1), (self.m + 1) * c)

    def forward(self, y):
        return y.like(self._merge(y.channels)) if isinstance(y, Jet) else self._merge(y)


INITS = ("auto", "glorot", "siren", "fourier")


def _mlp_layers(o, d_in: int, d_out: int) -> list[nn.Module]:
    mlp = MLP(d_in, d_out, o.width, o.depth, o.activation, o.first_omega, o.output_gain, o.init)
    return list(mlp.layers)


def _multiscale_layers(o, d_in: int, d_out: int) -> list[nn.Module]:
    # initialised as the sub-networks of MultiscaleMLP (the same draws), then laid out flat
    net = MultiscaleMLP(d_in, d_out, o.width, o.depth, o.activation, o.scales, o.first_omega, o.output_gain, o.init)
    return flat_multiscale_layers(net)


def _resnet_layers(o, d_in: int, d_out: int) -> list[nn.Module]:
    """A first linear layer and activation, depth - 1 residual blocks (linear + activation), a linear output."""
    first = MLP(d_in, o.width, o.width, 1, o.activation, o.first_omega, 1.0, o.init)
    blocks = [Residual(nn.Sequential(*list(MLP(o.width, o.width, o.width, 1, o.activation, 1.0, 1.0, "glorot")
                                           .layers)[:2])) for _ in range(o.depth - 1)]
    out = MLP(o.width, d_out, o.width, 1, o.activation, 1.0, o.output_gain, o.init).layers[-1]
    return [*list(first.layers)[:2], *blocks, out]


BODIES: dict[str, Callable] = {"mlp": _mlp_layers, "multiscale": _multiscale_layers, "resnet": _resnet_layers}

# Every layer and head with a jet rule, as a factory of a small instance (d inputs, c outputs for heads): the
# jets-equal-autograd test runs over these registries to second order.  register_layer / register_head add
# one (a problem's own head, such as the point source's near field, registers itself).
LAYERS: dict[str, Callable[[int], nn.Module]] = {}
HEADS: dict[str, Callable[[int, int], nn.Module]] = {}


def register_layer(name: str):
    """Decorator: add ``factory(d) -> layer`` to :data:`LAYERS` under ``name``."""
    def add(factory):
        LAYERS[name] = factory
        return factory
    return add


def register_head(name: str):
    """Decorator: add ``factory(d, c) -> head`` to :data:`HEADS` under ``name``."""
    def add(factory):
        HEADS[name] = factory
        return factory
    return add


for _act in ACTIVATIONS:
    LAYERS[f"activation-{_act}"] = (lambda a: lambda d: Activation(a))(_act)
LAYERS["linear"] = lambda d: JetLinear(d, 5)
LAYERS["input-scaling"] = lambda d: InputScaling([-0.5] * d, [1.5 + 0.5 * k for k in range(d)])
LAYERS["fourier-features"] = lambda d: FourierFeatures(d, 4, scale=1.5)
LAYERS["mlp"] = lambda d: MLP(d, 3, 8, 2, "tanh", output_gain=1.0)
LAYERS["multiscale"] = lambda d: MultiscaleMLP(d, 3, 6, 2, "sin", scales=[1.0, 3.0], first_omega=2.0, output_gain=1.0)
LAYERS["multiscale-flat"] = lambda d: nn.Sequential(*flat_multiscale_layers(
    MultiscaleMLP(d, 3, 6, 2, "sin", scales=[1.0, 3.0], first_omega=2.0, output_gain=1.0)))
LAYERS["grouped-linear"] = lambda d: nn.Sequential(ScaleReplicate([1.0, 2.0]), GroupedJetLinear(2, d, 3), GroupSum(3))
LAYERS["residual"] = lambda d: Residual(nn.Sequential(JetLinear(d, d), Activation("silu")))
LAYERS["funcjet"] = lambda d: FuncJet(nn.Sequential(nn.Linear(d, 4), nn.Softplus()))
HEADS["hard-initial"] = lambda d, c: HardInitialCondition(t_column=d - 1, t_start=0.0, span=1.5)
HEADS["hard-initial-value"] = lambda d, c: HardInitialValue(nn.Sequential(nn.Linear(d, c), nn.Tanh()), d - 1, 0.0, 1.5)
HEADS["hard-dirichlet"] = lambda d, c: HardDirichlet([0.0, -1.0], [1.0, 2.0])
HEADS["hard-dirichlet-component"] = lambda d, c: HardDirichlet([0.0], [1.0], components=[0])


def build_body(options, in_features: int, out_features: int, lower: Sequence[float],
               upper: Sequence[float], spans: Sequence[float] | None = None) -> nn.Sequential:
    """The flat body the ``network`` block describes: input scaling to [-1, 1] over the box [lower, upper]
    (``input_scaling``), optional Fourier features (``fourier_features`` > 0 rows, ``fourier_scale``), then
    the layers of ``kind`` ("mlp": linear and activation layers; "multiscale": the flat multiscale layers of
    :func:`flat_multiscale_layers`).

    Parameters
    ----------
    options : NetworkOptions
        The validated ``network`` block (:class:`elecsolver.training.options.NetworkOptions`).
    in_features, out_features : int
    lower, upper : sequence of float
        The input box in training units.
    spans : sequence of float, optional
        The half width each input column is scaled to (:class:`InputScaling`; default 1).
    """
    layers: list[nn.Module] = []
    if options.input_scaling:
        layers.append(InputScaling(lower, upper, spans))
    d = in_features
    if options.fourier_features:
        layers.append(FourierFeatures(in_features, options.fourier_features, options.fourier_scale))
        d = 2 * options.fourier_features
    layers += BODIES[options.kind](options, d, out_features)
    return nn.Sequential(*layers)


class FuncJet(nn.Module):
    """Jet rule for any module without one, by forward-mode AD (``torch.func.jvp``).

    Wraps a module that maps [N, in] to [N, out] row by row (each output row depends on its own
    input row only, as for pointwise networks).  On a jet with first-derivative channels a_k, pair
    channels a_ij and a summed channel L[a] = sum_k w_k a_kk it returns, with f' and f'' the first
    and second derivatives of the module at the value a_0,

        f(a_0),   f'[a_k],   f''[a_i, a_j] + f'[a_ij],   sum_k w_k f''[a_k, a_k] + f'[L[a]],

    (the chain rule to second order; Griewank & Walther, *Evaluating Derivatives*, 2nd ed., 2008,
    ch. 13), each directional derivative one ``jvp`` (nested for f'').  The result is an ordinary
    differentiable function of the parameters (reverse over forward mode), so the loss still needs
    only a first-order backward.  It costs one forward per channel (and two per second-order
    direction), more than a native jet rule; use it for a user's own layer, not for the package's.

    Parameters
    ----------
    module : nn.Module
        The wrapped module, [N, in] -> [N, out].

    Shapes: tensors [N, in] -> [N, out] (the module itself); jets [1+K+P+L, N, in] -> [1+K+P+L, N, out].
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x):
        if not isinstance(x, Jet):
            return self.module(x)
        from torch.func import jvp

        f = self.module
        a0 = x.channels[0]

        def d1(direction):
            return jvp(f, (a0,), (direction,))[1]

        def d2(u, v):  # f''(a0)[u, v]
            return jvp(lambda z: jvp(f, (z,), (v,))[1], (a0,), (u,))[1]

        return chain_rule_jet(x, f(a0), d1, d2)
