"""Networks built from jet-aware layers.

Every module here accepts either a plain tensor [N, d] (values only, for evaluation) or a
:class:`~elecsolver.jets.Jet` (values and input derivatives, for residuals) and returns the same
kind.  A network is written once for one device; ``parallel/`` transforms it from outside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .jets import Jet

__all__ = ["ACTIVATIONS", "MLP", "Activation", "InputScaling", "JetLinear", "MultiscaleMLP", "build_network"]


def _tanh_d1(a: torch.Tensor) -> torch.Tensor:
    return 1.0 - torch.tanh(a) ** 2


ACTIVATIONS = {
    # name: (sigma, sigma')
    "tanh": (torch.tanh, _tanh_d1),
    "sin": (torch.sin, torch.cos),
    "silu": (torch.nn.functional.silu, lambda a: torch.sigmoid(a) * (1 + a * (1 - torch.sigmoid(a)))),
}


class Activation(nn.Module):
    """Elementwise activation with the chain rule on jets: d sigma(a) = sigma'(a) da.

    Parameters
    ----------
    name : str
        One of ``ACTIVATIONS`` ("tanh", "sin", "silu").

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
        self.fn, self.d1 = ACTIVATIONS[name]

    def forward(self, x):
        if isinstance(x, Jet):
            a = x.data
            v = self.fn(a[0])
            return Jet(torch.cat([v.unsqueeze(0), self.d1(a[0]).unsqueeze(0) * a[1:]], dim=0), x.wrt)
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.name


class JetLinear(nn.Linear):
    """``nn.Linear`` on jets: all channels through one matmul, the bias on the value channel only."""

    def forward(self, x):
        if isinstance(x, Jet):
            out = torch.matmul(x.data, self.weight.t())  # [1 + K, N, out]
            if self.bias is not None:
                out = torch.cat([(out[0] + self.bias).unsqueeze(0), out[1:]], dim=0)
            return Jet(out, x.wrt)
        return super().forward(x)


class InputScaling(nn.Module):
    """Affine input map x' = (x - centre) / half_width, so that every input spans [-1, 1].

    Parameters
    ----------
    lower, upper : sequence of float
        The box the inputs live in, one entry per input column (nondimensional units).
    """

    def __init__(self, lower: Sequence[float], upper: Sequence[float]):
        super().__init__()
        lo = torch.as_tensor(lower, dtype=torch.float64)
        hi = torch.as_tensor(upper, dtype=torch.float64)
        if lo.shape != hi.shape or bool((hi <= lo).any()):
            raise ValueError(f"input box needs upper > lower in every column, got {lower} and {upper}")
        self.register_buffer("centre", (lo + hi) / 2)
        self.register_buffer("inv_half", 2.0 / (hi - lo))

    def forward(self, x):
        if isinstance(x, Jet):
            d = x.data
            inv = self.inv_half.to(d.dtype)
            v = (d[0] - self.centre.to(d.dtype)) * inv
            return Jet(torch.cat([v.unsqueeze(0), d[1:] * inv], dim=0), x.wrt)
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
        "tanh", "sin" or "silu".
    first_omega : float
        For "sin", the frequency factor of the first layer (SIREN, Sitzmann et al. 2020, sec. 3.2);
        hidden layers use the SIREN uniform initialisation. Ignored for other activations, which use
        Glorot (Xavier) uniform weights and zero biases.
    output_gain : float
        Factor on the output layer's initial weights (its bias starts at zero), so that the
        initial fields are small compared with O(1) nondimensional fields.

    Shapes: [N, in_features] -> [N, out_features]; jets [1+K, N, in] -> [1+K, N, out].
    """

    def __init__(self, in_features: int, out_features: int, width: int = 64, depth: int = 4,
                 activation: str = "tanh", first_omega: float = 1.0, output_gain: float = 0.1):
        super().__init__()
        if width < 1 or depth < 1:
            raise ValueError(f"width and depth must be >= 1, got width={width}, depth={depth}")
        layers: list[nn.Module] = []
        dims = [in_features] + [width] * depth
        for i in range(depth):
            lin = JetLinear(dims[i], dims[i + 1])
            self._init(lin, activation, first=(i == 0), omega=first_omega)
            layers += [lin, Activation(activation)]
        out = JetLinear(width, out_features)
        self._init(out, activation, first=False, omega=first_omega)
        with torch.no_grad():  # start near zero fields: a small output layer (zero bias)
            out.weight.mul_(output_gain)
            out.bias.zero_()
        layers.append(out)
        self.layers = nn.Sequential(*layers)

    @staticmethod
    def _init(lin: nn.Linear, activation: str, first: bool, omega: float) -> None:
        with torch.no_grad():
            if activation == "sin":
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
                 output_gain: float = 0.1):
        super().__init__()
        if not scales:
            raise ValueError("a multiscale network needs at least one scale factor")
        self.register_buffer("factors", torch.as_tensor(list(scales), dtype=torch.float64))
        self.nets = nn.ModuleList(
            MLP(in_features, out_features, width, depth, activation, first_omega, output_gain) for _ in scales
        )

    def forward(self, x):
        outs = []
        for a, net in zip(self.factors, self.nets):
            if isinstance(x, Jet):
                outs.append(net(Jet(x.data * a.to(x.data.dtype), x.wrt)).data)
            else:
                outs.append(net(x * a.to(x.dtype)))
        total = torch.stack(outs).sum(0)
        return Jet(total, x.wrt) if isinstance(x, Jet) else total


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
    """Output transform u(x, t) = ((t - t_start) / span) * N(x, t), so that u = 0 at t = t_start exactly.

    A hard constraint as an output transform (Lagaris, Likas & Fotiadis, IEEE Trans. Neural Netw. 9
    (1998) 987; Lu et al., SIAM J. Sci. Comput. 43 (2021) B1105), on jets by the product rule.

    Parameters
    ----------
    net : nn.Module
        The network N, [N, d] -> [N, c].
    t_column : int
        Column of t in the input.
    t_start, span : float
        Start time and time scale, in the network's (nondimensional) input units.
    """

    def __init__(self, net: nn.Module, t_column: int, t_start: float, span: float):
        super().__init__()
        if span <= 0:
            raise ValueError(f"span must be positive, got {span}")
        self.net = net
        self.t_column, self.t_start, self.span = int(t_column), float(t_start), float(span)

    def forward(self, x):
        out = self.net(x)
        if isinstance(x, Jet):
            tj = x.data[:, :, self.t_column : self.t_column + 1]  # [1+K, N, 1]
            phi = torch.cat([((tj[0] - self.t_start) / self.span).unsqueeze(0), tj[1:] / self.span], dim=0)
            return Jet(phi, x.wrt) * out
        return out * ((x[:, self.t_column : self.t_column + 1] - self.t_start) / self.span)
