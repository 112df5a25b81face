"""Differential operators on named field components.

:func:`evaluate` runs a network on collocation points and returns a :class:`Fields` object that
holds the values and the first input derivatives the residuals ask for, by one of two paths:

* ``method="jet"`` (default): derivatives propagated forward through jet-aware layers
  (:mod:`elecsolver.jets`); the loss then needs only a first-order backward.
* ``method="autograd"``: nested reverse mode (``torch.autograd.grad(create_graph=True)``), the
  reference implementation and the fallback for a module without jet rules.

Tests hold the two equal to 1e-10 (float64).  Operators address components by name ("Ex", "Hz")
and inputs by name ("x", "y", "t").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .jets import Jet, seed_jet

__all__ = ["Fields", "curl_te", "curl_z", "ddt", "div", "evaluate", "grad"]

METHODS = ("jet", "autograd")


class Fields:
    """Values and first derivatives of named field components at N points.

    Parameters
    ----------
    jet : Jet
        data [1 + K, N, c], derivatives along input columns ``jet.wrt``.
    inputs : sequence of str
        Names of the input columns, e.g. ("x", "y", "t").
    outputs : sequence of str
        Names of the c output components, e.g. ("Ex", "Ey", "Hz").
    """

    def __init__(self, jet: Jet, inputs: Sequence[str], outputs: Sequence[str]):
        if jet.data.shape[-1] != len(outputs):
            raise ValueError(f"the network gives {jet.data.shape[-1]} components, the problem names {outputs}")
        self.jet, self.inputs, self.outputs = jet, tuple(inputs), tuple(outputs)

    def _component(self, name: str) -> int:
        try:
            return self.outputs.index(name)
        except ValueError:
            raise KeyError(f"no field component {name!r}; this problem has {self.outputs}") from None

    def __getitem__(self, name: str) -> torch.Tensor:
        """Value of component ``name``, shape [N]."""
        return self.jet.value[:, self._component(name)]

    def d(self, name: str, wrt: str) -> torch.Tensor:
        """d(component ``name``)/d(input ``wrt``), shape [N].

        Raises
        ------
        KeyError
            For an unknown component or input, or an input whose derivative was not requested.
        """
        try:
            col = self.inputs.index(wrt)
        except ValueError:
            raise KeyError(f"no input {wrt!r}; this problem's inputs are {self.inputs}") from None
        return self.jet.derivative(col)[:, self._component(name)]

    @property
    def values(self) -> torch.Tensor:
        """All components, shape [N, c]."""
        return self.jet.value


def _autograd_jet(model: nn.Module, points: torch.Tensor, wrt: tuple[int, ...]) -> Jet:
    x = points.detach().requires_grad_(True)
    u = model(x)
    if isinstance(u, Jet):
        raise TypeError("the autograd path needs a module that maps tensors to tensors")
    chans = [u]
    grads = [torch.autograd.grad(u[:, c].sum(), x, create_graph=True)[0] for c in range(u.shape[1])]
    for k in wrt:
        chans.append(torch.stack([g[:, k] for g in grads], dim=1))
    return Jet(torch.stack(chans, dim=0), wrt)


def evaluate(model: nn.Module, points: torch.Tensor, inputs: Sequence[str], outputs: Sequence[str],
             wrt: Sequence[str] | None = None, method: str = "jet") -> Fields:
    """Evaluate ``model`` and its first derivatives along ``wrt`` at ``points``.

    Parameters
    ----------
    model : nn.Module
        Maps [N, d] to [N, c]; for ``method="jet"`` every layer must accept jets.
    points : torch.Tensor
        Shape [N, d], columns in the order of ``inputs`` (nondimensional).
    inputs, outputs : sequence of str
        Column and component names.
    wrt : sequence of str, optional
        Inputs to differentiate along; default all.
    method : {"jet", "autograd"}

    Returns
    -------
    Fields

    Raises
    ------
    ValueError
        For an unknown method or input name.
    """
    if method not in METHODS:
        raise ValueError(f"unknown derivative method {method!r}; choose one of {METHODS}")
    names = tuple(inputs) if wrt is None else tuple(wrt)
    unknown = [w for w in names if w not in inputs]
    if unknown:
        raise ValueError(f"cannot differentiate along {unknown}: the inputs are {tuple(inputs)}")
    cols = tuple(inputs.index(w) for w in names)
    if method == "jet":
        jet = model(seed_jet(points, cols))
    else:
        jet = _autograd_jet(model, points, cols)
    return Fields(jet, inputs, outputs)


def ddt(f: Fields, name: str, t: str = "t") -> torch.Tensor:
    """Time derivative d(name)/dt, shape [N]."""
    return f.d(name, t)


def grad(f: Fields, name: str, over: Sequence[str] = ("x", "y")) -> torch.Tensor:
    """Gradient of a scalar component over the named inputs, shape [N, len(over)]."""
    return torch.stack([f.d(name, w) for w in over], dim=1)


def div(f: Fields, names: Sequence[str], over: Sequence[str] = ("x", "y")) -> torch.Tensor:
    """Divergence sum_i d(names[i])/d(over[i]), shape [N]."""
    if len(names) != len(over):
        raise ValueError(f"div needs one component per input, got {names} over {over}")
    return sum(f.d(n, w) for n, w in zip(names, over))


def curl_z(f: Fields, ex: str = "Ex", ey: str = "Ey", x: str = "x", y: str = "y") -> torch.Tensor:
    """z component of the curl of an in-plane field: d(ey)/dx - d(ex)/dy, shape [N]."""
    return f.d(ey, x) - f.d(ex, y)


def curl_te(f: Fields, hz: str = "Hz", x: str = "x", y: str = "y") -> torch.Tensor:
    """In-plane curl of H = Hz z: (dHz/dy, -dHz/dx), shape [N, 2]."""
    return torch.stack([f.d(hz, y), -f.d(hz, x)], dim=1)
