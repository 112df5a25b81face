"""Boundary and initial conditions, each a :class:`~elecsolver.physics.base.Condition` in training units.

Electromagnetic conditions read the PDE's electric and magnetic components (``ctx.pde.E``,
``ctx.pde.H``, three names each, None where a component is zero) and the outward unit normal n:

- :class:`PEC`: n x E = 0 (tangential E vanishes on a perfect electric conductor);
- :class:`PMC`: n x H = 0;
- :class:`SilverMueller`: the first-order absorbing condition n x E + eta n x (n x H) = 0, exact for a
  plane wave leaving along n (Silver-Mueller radiation condition; Jin, *Theory and Computation of
  Electromagnetic Fields*, 2nd ed., 2015, eq. 10.1.12), with eta = eta0 sqrt(mu_r / eps_r).  In 2D TEz it
  reads E.tau = eta Hz with tau = z x n; a wave arriving at angle q from the normal is reflected by
  (1 - cos q) / (1 + cos q).

Only components of n x E that are not identically zero form the residual (TEz: one, the z
component; TMz: two, whose squares sum to Ez^2).  :class:`Initial` holds every field at t = t0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from ..scales import ETA0
from .base import Coefficient, Condition, Context, coefficient, values_of

__all__ = ["PEC", "PMC", "Initial", "SilverMueller", "cross_normal"]


def cross_normal(normals: torch.Tensor, v: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """n x V for unit normals [N, s] (s = 2: n_z = 0) and a vector V of three components (None: zero)."""
    n = [normals[:, k] for k in range(normals.shape[1])] + [None] * (3 - normals.shape[1])

    def term(a, b):
        return None if a is None or b is None else a * b

    def sub(a, b):
        if a is None:
            return None if b is None else -b
        return a if b is None else a - b

    return [sub(term(n[1], v[2]), term(n[2], v[1])), sub(term(n[2], v[0]), term(n[0], v[2])),
            sub(term(n[0], v[1]), term(n[1], v[0]))]


def _em(ctx: Context, what: str):
    pde = ctx.pde
    if pde is None or not hasattr(pde, "E") or not hasattr(pde, "H"):
        raise ValueError(f"{what} needs a Maxwell PDE (electric and magnetic components), got {pde!r}")
    return pde.E, pde.H


def _stack(parts: Sequence[torch.Tensor | None], what: str) -> torch.Tensor:
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError(f"{what}: the condition is identically satisfied by these fields; remove it")
    return torch.stack(parts, dim=1)


def _vec(f, comps):
    return [None if c is None else f[c] for c in comps]


class PEC(Condition):
    """Perfect electric conductor: n x E = 0 on the tagged boundary; residual [N, m] (m nonzero components)."""

    default_name = "pec"

    def residual(self, f, points, normals, ctx):
        e, _ = _em(ctx, "PEC")
        return _stack(cross_normal(normals, _vec(f, e)), "PEC")


class PMC(Condition):
    """Perfect magnetic conductor: n x H = 0 on the tagged boundary; residual [N, m]."""

    default_name = "pmc"

    def residual(self, f, points, normals, ctx):
        _, h = _em(ctx, "PMC")
        return _stack(cross_normal(normals, _vec(f, h)), "PMC")


class SilverMueller(Condition):
    """First-order absorbing condition n x E + eta n x (n x H) = 0 (see the module docstring).

    Parameters
    ----------
    on, weight, name, points
        As :class:`~elecsolver.physics.base.Condition`.
    eps_r, mu_r : float or callable
        The medium at the boundary (default: the PDE's), numbers or functions of the SI position evaluated
        at the boundary points (e.g. a :func:`~elecsolver.physics.piecewise` permittivity).
    """

    default_name = "absorbing"

    def __init__(self, on=None, *, eps_r: Coefficient | None = None, mu_r: Coefficient | None = None,
                 **kwargs):
        super().__init__(on, **kwargs)
        self.eps_r, self.mu_r = eps_r, mu_r

    def _relative_impedance(self, points: torch.Tensor, ctx: Context) -> torch.Tensor | float:
        """eta H0 / E0 at the points (a number for a uniform medium)."""

        def medium(own, attr):
            return coefficient(own if own is not None else getattr(ctx.pde, attr, 1.0), points, ctx)

        eta = (medium(self.mu_r, "mu_r") / medium(self.eps_r, "eps_r")) ** 0.5
        return eta * ETA0 * ctx.scales.H0 / ctx.scales.E0

    def residual(self, f, points, normals, ctx):
        e, h = _em(ctx, "SilverMueller")
        k = self._relative_impedance(points, ctx)
        n_e = cross_normal(normals, _vec(f, e))
        n_n_h = cross_normal(normals, cross_normal(normals, _vec(f, h)))
        parts = []
        for a, b in zip(n_e, n_n_h):
            parts.append(None if a is None and b is None else (a if b is None else (k * b if a is None else a + k * b)))
        return _stack(parts, "SilverMueller")


class Initial(Condition):
    """Initial values at t = t0: every field equals ``values`` (zero by default); residual [N, c].

    Parameters
    ----------
    values : callable, optional
        ``values(*si_coordinates) -> {component: SI values [N]}`` (missing components are zero; one
        tensor for a single-component PDE); None: zero fields.
    hard : bool
        Impose the initial values exactly through the network's head (u = u0 + ((t - t0)/T) N) instead of a
        loss term (the same as ``network.hard_initial``).
    weight, name, points
        As :class:`~elecsolver.physics.base.Condition`.

    """

    where = "initial"
    default_name = "initial"

    def __init__(self, values: Callable[..., Mapping[str, torch.Tensor] | torch.Tensor] | None = None, *,
                 hard: bool = False, **kwargs):
        super().__init__(None, **kwargs)
        self.values, self.hard = values, bool(hard)

    def residual(self, f, points, normals, ctx):
        u = f.values
        if self.values is None:
            return u
        names = list(ctx.pde.fields) if ctx.pde is not None else list(ctx.units)
        return u - values_of(self.values, names, points, ctx, "Initial(values=...)")
