"""Maxwell's equations in first-order curl form, in E and H, for TEz, TMz and 3D.

In SI, for a linear isotropic medium (eps = eps0 eps_r, mu = mu0 mu_r, conductivity sigma)::

    eps dE/dt =  curl H - sigma E + S_E        (S_E in A/m^2; an electric current density J gives S_E = -J)
    mu  dH/dt = -curl E + S_H                  (S_H in V/m^2; a magnetic current density M gives S_H = -M)

(Taflove & Hagness, *Computational Electrodynamics*, 3rd ed., 2005, eqs. 3.1-3.2, with the sources
written as terms added to the right-hand side.)  With x = L x', t = T t', E = E0 E', H = H0 H'
(:class:`~elecsolver.scales.Scales`) the residuals in training units are

    r_E = eps_r a_E dE'/dt' - curl' H' + (sigma E0 L / H0) E' - S_E L / H0,   a_E = eps0 E0 L / (T H0)
    r_H = mu_r  a_H dH'/dt' + curl' E' - S_H L / E0,                          a_H = mu0 H0 L / (T E0)

and a_E = a_H = 1 with the default scales T = L/c0, H0 = E0/eta0.  TEz has (Ex, Ey, Hz), TMz (Ez, Hx, Hy),
both independent of z; 3D has all six; 1D (a plane wave along x) has (Ey, Hz) or (Ez, Hy).  eps_r, mu_r and sigma (S/m) are numbers or functions of the SI
position (e.g. a piecewise function of regions, :func:`elecsolver.physics.piecewise`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..scales import EPS0, MU0
from .base import PDE, Coefficient, Context, Derivatives, coefficient

__all__ = ["Maxwell", "Maxwell1D", "Maxwell3D", "MaxwellTEz", "MaxwellTMz", "curl_vector", "vector"]

_AXES = ("x", "y", "z")


def vector(f, comps: Sequence[str | None]) -> list[torch.Tensor | None]:
    """Values of a vector field (three component names, None for a component that is zero)."""
    return [None if c is None else f[c] for c in comps]


def curl_vector(f, comps: Sequence[str | None], space: Sequence[str]) -> list[torch.Tensor | None]:
    """(curl V)_x, _y, _z of the vector with components ``comps`` (None: identically zero), from the
    first derivatives in ``f``; derivatives along an axis not in ``space`` are zero (2D problems)."""

    def d(k: int, axis: str):
        name = comps[k]
        return None if name is None or axis not in space else f.d(name, axis)

    def sub(a, b):
        if a is None:
            return None if b is None else -b
        return a if b is None else a - b

    return [sub(d(2, "y"), d(1, "z")), sub(d(0, "z"), d(2, "x")), sub(d(1, "x"), d(0, "y"))]


class Maxwell(PDE):
    """Maxwell's equations with the electric components ``E`` and magnetic components ``H`` (see the module docstring).

    Parameters
    ----------
    E, H : sequence of 3 (str or None)
        Component names along x, y, z (None for a component that is zero).
    eps_r, mu_r : float or callable
        Relative permittivity and permeability (default 1).
    sigma : float or callable
        Conductivity in S/m (default 0).
    sources : sequence of Source
        Each adds ``source.value`` to the right-hand side of its component's equation
        (:class:`elecsolver.physics.sources.Source`).

    Raises
    ------
    ValueError
        For a source on a component the equations do not have.
    """

    def __init__(self, E: Sequence[str | None], H: Sequence[str | None], *, eps_r: Coefficient = 1.0,
                 mu_r: Coefficient = 1.0, sigma: Coefficient = 0.0, sources: Sequence = ()):
        self.E, self.H = tuple(E), tuple(H)
        self.fields = tuple(c for c in self.E + self.H if c is not None)
        self.units = {c: ("V/m" if c in self.E else "A/m") for c in self.fields}
        self.eps_r, self.mu_r, self.sigma = eps_r, mu_r, sigma
        self.sources = tuple(sources)
        for s in self.sources:
            if s.field not in self.fields:
                raise ValueError(f"{type(self).__name__}: a source drives {s.field!r}, but the fields are {self.fields}")

    @property
    def axes(self) -> tuple[str, ...]:
        """Spatial axes the fields depend on."""
        return _AXES

    def check_inputs(self, inputs: Sequence[str]) -> None:
        need = (*self.axes, "t")
        if tuple(inputs) != need:
            raise ValueError(f"{type(self).__name__} needs the inputs {need} (a {len(self.axes)}D space x "
                             f"TimeDomain), got {tuple(inputs)}")

    def derivatives(self, inputs: Sequence[str], scales=None) -> Derivatives:
        return Derivatives(wrt=tuple(inputs))

    def source_terms(self, points: torch.Tensor, ctx: Context) -> dict[str, torch.Tensor]:
        """Sum of the sources on each driven component, SI, {component: [N]}."""
        coords = dict(zip(ctx.inputs, ctx.si(points)))
        out: dict[str, torch.Tensor] = {}
        for s in self.sources:
            v = s.value(coords)
            out[s.field] = out[s.field] + v if s.field in out else v
        return out

    def residual(self, f, points: torch.Tensor, ctx: Context) -> torch.Tensor:
        sc = ctx.scales
        a_e = EPS0 * sc.E0 * sc.length / (sc.time * sc.H0)
        a_h = MU0 * sc.H0 * sc.length / (sc.time * sc.E0)
        eps = coefficient(self.eps_r, points, ctx)
        mu = coefficient(self.mu_r, points, ctx)
        sig = coefficient(self.sigma, points, ctx)
        lossy = callable(self.sigma) or sig != 0.0
        curl_h = curl_vector(f, self.H, ctx.space)
        curl_e = curl_vector(f, self.E, ctx.space)
        src = self.source_terms(points, ctx) if self.sources else {}
        out = {}
        for k, name in enumerate(self.E):
            if name is None:
                continue
            r = eps * a_e * f.d(name, "t")
            if curl_h[k] is not None:
                r = r - curl_h[k]
            if lossy:
                r = r + sig * (sc.E0 * sc.length / sc.H0) * f[name]
            if name in src:
                r = r - src[name] * (sc.length / sc.H0)
            out[name] = r
        for k, name in enumerate(self.H):
            if name is None:
                continue
            r = mu * a_h * f.d(name, "t")
            if curl_e[k] is not None:
                r = r + curl_e[k]
            if name in src:
                r = r - src[name] * (sc.length / sc.E0)
            out[name] = r
        return torch.stack([out[c] for c in self.fields], dim=1)

    def interface_derivatives(self, inputs: Sequence[str]) -> Derivatives:
        return Derivatives()

    def interface_residual(self, inner, outer, inner_points, outer_points, normals, ctx):
        """n x (E_in - E_out) and n x (H_in - H_out), the nonzero components of each, [N, m]: the tangential
        fields are continuous across an interface without surface currents (Jackson, 3rd ed., sec. I.5;
        Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., eqs. 1-79 and 1-80).  With the level-set
        copies of ``Problem.subdomains`` every field is continuous by construction and this residual is zero;
        it holds independent copies to the same conditions."""
        n = [normals[:, k] if k < normals.shape[1] else None for k in range(3)]
        cols = []
        for comps in (self.E, self.H):
            jump = [None if c is None else inner[c] - outer[c] for c in comps]
            for a, b, c in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):  # (n x J)_c = n_a J_b - n_b J_a
                terms = [n[a] * jump[b] if n[a] is not None and jump[b] is not None else None,
                         -n[b] * jump[a] if n[b] is not None and jump[a] is not None else None]
                terms = [t for t in terms if t is not None]
                if terms:
                    cols.append(sum(terms))
        return torch.stack(cols, 1)


class Maxwell1D(Maxwell):
    """1D: a plane wave along x, fields (Ey, Hz) (``polarisation="Ey"``) or (Ez, Hy) (``"Ez"``), inputs (x, t)
    (see :class:`Maxwell`): eps dEy/dt = -dHz/dx, mu dHz/dt = -dEy/dx (Taflove & Hagness, 3rd ed., eqs.
    3.13-3.14).

    Raises
    ------
    ValueError
        For another polarisation.
    """

    def __init__(self, polarisation: str = "Ey", **kwargs):
        if polarisation not in ("Ey", "Ez"):
            raise ValueError(f"Maxwell1D: polarisation must be 'Ey' (Ey, Hz) or 'Ez' (Ez, Hy), got {polarisation!r}")
        if polarisation == "Ey":
            super().__init__((None, "Ey", None), (None, None, "Hz"), **kwargs)
        else:
            super().__init__((None, None, "Ez"), (None, "Hy", None), **kwargs)

    @property
    def axes(self) -> tuple[str, ...]:
        return ("x",)


class MaxwellTEz(Maxwell):
    """2D TEz: fields (Ex, Ey, Hz), inputs (x, y, t); residuals in that order (see :class:`Maxwell`)."""

    def __init__(self, **kwargs):
        super().__init__(("Ex", "Ey", None), (None, None, "Hz"), **kwargs)

    @property
    def axes(self) -> tuple[str, ...]:
        return ("x", "y")


class MaxwellTMz(Maxwell):
    """2D TMz: fields (Ez, Hx, Hy), inputs (x, y, t); residuals in that order (see :class:`Maxwell`)."""

    def __init__(self, **kwargs):
        super().__init__((None, None, "Ez"), ("Hx", "Hy", None), **kwargs)

    @property
    def axes(self) -> tuple[str, ...]:
        return ("x", "y")


class Maxwell3D(Maxwell):
    """3D: fields (Ex, Ey, Ez, Hx, Hy, Hz), inputs (x, y, z, t) (see :class:`Maxwell`)."""

    def __init__(self, **kwargs):
        super().__init__(("Ex", "Ey", "Ez"), ("Hx", "Hy", "Hz"), **kwargs)
