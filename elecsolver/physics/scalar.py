"""Scalar PDEs on one field u: the Helmholtz, wave, Poisson and Laplace equations, in training units.

The field is named by the user ("u" by default, e.g. "Ez" for a TMz component or "phi" for a potential)
and carries an SI unit (default "V/m") whose scale U = ``scales.of_unit(unit)`` nondimensionalises it.
With x = L x', t = T t', u = U u' (:class:`~elecsolver.scales.Scales`), lap = lap' / L^2 and
d2/dt2 = (1 / T^2) d2/dt'2, so each residual below is the SI residual times L^2 / U (stationary
equations) or T^2 / U (wave equation):

=============  ================================  ==========================================================
equation       SI form                           residual in training units, [N, 1]
=============  ================================  ==========================================================
Helmholtz      -lap u - k^2 u = f                -lap' u' - (k L)^2 u' - f L^2 / U
Wave           u_tt - c^2 lap u = f              u'_t't' - (c T / L)^2 lap' u' - f T^2 / U
Poisson        -div(eps_r grad phi) = rhs        -eps_r lap' phi' - grad' eps_r . grad' phi' - rhs L^2 / U
Laplace        -div(eps_r grad phi) = 0          Poisson with rhs = 0
=============  ================================  ==========================================================

The Laplacian travels as one summed jet channel (``Derivatives.laplacian``; for the wave equation the
d'Alembertian u_t't' - (cT/L)^2 lap' u with its scale-dependent weights, when :meth:`Wave.derivatives` is
given the scales).  Sources and right-hand sides are numbers, functions of the SI coordinates
(``f(x, y[, z][, t])``, SI values) or a :class:`~elecsolver.physics.sources.Source` on the field.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

from ..operators import laplacian
from ..scales import C0, Scales
from .base import PDE, Coefficient, Context, Derivatives, coefficient
from .sources import Source

__all__ = ["Helmholtz", "Laplace", "Poisson", "ScalarPDE", "Wave"]


def _space(inputs: Sequence[str]) -> tuple[str, ...]:
    return tuple(n for n in inputs if n != "t")


def _number(name: str, value, minimum: float = 0.0, strict: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum or (strict and value == minimum):
        bound = ">" if strict else ">="
        raise ValueError(f"{name} must be a finite number {bound} {minimum:g}, got {value!r}")
    return float(value)


class ScalarPDE(PDE):
    """Base of the one-field PDEs: owns the field, its unit, the right-hand side and the Laplacian channel.

    Parameters
    ----------
    field : str
        Name of the field (the network's single output).
    unit : str
        Its SI unit (a unit :meth:`~elecsolver.scales.Scales.of_unit` knows, or one declared in
        ``Scales(extra=...)``).
    source : float, callable, Source or None
        Right-hand side in SI (the unit of the field per m^2, or per s^2 for the wave equation; a
        :class:`Source` only for the time-dependent wave equation).

    Raises
    ------
    ValueError
        For a bad field name or unit, or a :class:`Source` on another field or on a stationary equation.
    """

    time_dependent = False

    def __init__(self, field: str, unit: str, source=None):
        if not (isinstance(field, str) and field.isidentifier()):
            raise ValueError(f"{type(self).__name__}: field must be a name like 'u' or 'Ez', got {field!r}")
        what = type(self).__name__
        if not isinstance(unit, str):
            raise ValueError(f"{what}: unit must be an SI unit string like 'V/m', got {unit!r}")
        if isinstance(source, Source) and source.field != field:
            raise ValueError(f"{what}: the source drives {source.field!r}, the field is {field!r}")
        if isinstance(source, Source) and not self.time_dependent:
            raise ValueError(f"{what} is stationary: give its source as a number or a function of the SI "
                             "position, not a Source (a waveform in t)")
        if not (source is None or callable(source) or isinstance(source, (int, float, complex, Source))):
            raise ValueError(f"{what}: source must be a number, a function of the SI coordinates or a "
                             f"Source, got {source!r}")
        self.fields, self.units, self.source = (field,), {field: unit}, source

    @property
    def field(self) -> str:
        return self.fields[0]

    def check_inputs(self, inputs: Sequence[str]) -> None:
        inputs, name = tuple(inputs), type(self).__name__
        if not _space(inputs):
            raise ValueError(f"{name} needs at least one spatial input, got {inputs}")
        if self.time_dependent and "t" not in inputs:
            raise ValueError(f"{name} is time-dependent: it needs the input 't' (a space x TimeDomain), "
                             f"got {inputs}")
        if not self.time_dependent and "t" in inputs:
            raise ValueError(f"{name} is stationary: its inputs are spatial only, got {inputs}; "
                             "use a spatial domain, not a TimeDomain")

    def weights(self, inputs: Sequence[str], scales: Scales | None) -> dict[str, float]:
        """Weights of the summed channel this PDE reads (default: the spatial Laplacian, weights 1)."""
        return {a: 1.0 for a in _space(inputs)}

    def derivatives(self, inputs: Sequence[str], scales: Scales | None = None) -> Derivatives:
        w = self.weights(inputs, scales)
        return Derivatives(wrt=tuple(a for a in inputs if a in w), laplacian=tuple(w.items()))

    def rhs(self, points: torch.Tensor, ctx: Context) -> torch.Tensor | float:
        """The right-hand side at the points, SI ([N] or a number; 0 without a source)."""
        s = self.source
        if s is None:
            return 0.0
        if isinstance(s, Source):
            return s.value(dict(zip(ctx.inputs, ctx.si(points))))
        return coefficient(s, points, ctx)

    def lap(self, f, ctx: Context) -> torch.Tensor:
        """lap' u' [N] (training units) from the summed channel, or from declared d2 pairs."""
        return laplacian(f, self.field, over=list(ctx.space))


class Helmholtz(ScalarPDE):
    """Scalar Helmholtz equation -lap u - k^2 u = f (Pozar, *Microwave Engineering*, 4th ed., 2012, eq. 1.42,
    with a source; for a TMz field u = Ez driven by a current J_z, f = -j omega mu J_z).

    In training units the residual is -lap' u' - (k L)^2 u' - f L^2 / U, [N, 1].

    A time-harmonic field is complex (``complex=True``, time convention exp(-i omega t): an outgoing wave
    is exp(+i k r)); the network then carries u as the channels ``u.re`` and ``u.im`` and the loss is
    |r|^2.  With a :class:`~elecsolver.physics.pml.PML`, each d/dx_a becomes (1/s_a) d/dx_a and the residual
    is

        -sum_a (1 / s_a^2) (u'_aa - (ds_a/dx'_a / s_a) u'_a) - (k L)^2 u' - f L^2 / U,

    which is the plain residual wherever s_a = 1 (outside the layer); it reads u_a and u_aa per axis
    instead of the summed Laplacian channel.

    Parameters
    ----------
    k : float or callable
        Wavenumber in rad/m (>= 0), or a function of the SI coordinates (an inhomogeneous medium,
        k = k0 n(x)).
    source : float, complex, callable or None
        f in the field's unit per m^2 (None: 0).
    field, unit : str
        The field's name and SI unit (default "u", "V/m").
    complex : bool
        A complex (time-harmonic) field (default False; True when ``pml`` is given).
    pml : PML, optional
        A perfectly matched layer (its axes are the problem's spatial axes).

    Raises
    ------
    ValueError
        For a bad wavenumber, ``pml`` that is no PML, or ``pml`` with ``complex=False`` given explicitly.
    """

    time_convention = "exp(-i omega t)"

    def __init__(self, k: Coefficient, source=None, field: str = "u", unit: str = "V/m", complex: bool | None = None,
                 pml=None):
        from .pml import PML

        super().__init__(field, unit, source)
        self.k = k if callable(k) else _number("Helmholtz: the wavenumber k", k)
        if pml is not None and not isinstance(pml, PML):
            raise ValueError(f"Helmholtz: pml must be an elecsolver.PML, got {pml!r}")
        if pml is not None and complex is False:
            raise ValueError("Helmholtz: a PML makes the field complex; drop complex=False")
        self.pml = pml
        self.complex_fields = (field,) if (complex or pml is not None) else ()

    def wavelength(self) -> float | None:
        """The wavelength 2 pi / k in m (None for a wavenumber that varies in space or is 0)."""
        return None if callable(self.k) or self.k == 0 else 2 * math.pi / self.k

    def check_inputs(self, inputs):
        super().check_inputs(inputs)
        if self.pml is not None and self.pml.dim != len(_space(inputs)):
            raise ValueError(f"Helmholtz: the PML has {self.pml.dim} axes, the problem {len(_space(inputs))} "
                             f"({_space(inputs)})")

    def derivatives(self, inputs, scales=None):
        if self.pml is None:
            return super().derivatives(inputs, scales)
        space = _space(inputs)
        return Derivatives(wrt=space, second=tuple((a, a) for a in space))

    def residual(self, f, points, ctx):
        L, U, u = ctx.scales.length, ctx.field_scale(self.field), self.field
        kl = coefficient(self.k, points, ctx) * L
        if self.pml is None:
            op = self.lap(f, ctx)
        else:
            si = ctx.si(points)
            op = 0.0
            for axis, name in enumerate(ctx.space):
                s, ds = self.pml.stretch(axis, si[ctx.inputs.index(name)])
                op = op + (f.d2(u, name, name) - (ds * L / s) * f.d(u, name)) / s**2
        return (-op - kl**2 * f[u] - self.rhs(points, ctx) * (L**2 / U)).unsqueeze(1)

    def interface_residual(self, inner, outer, inner_points, outer_points, normals, ctx):
        """[u_in - u_out, du_in/dn - du_out/dn], [N, 2] (complex for a complex field): across an interface between
        media of equal permeability, where only k jumps, the field and its normal derivative are continuous (TMz:
        Ez and H_phi; Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., sec. 1.8.1 with mu continuous).
        A smooth network meets both by itself, so a piecewise ``k`` in one network is the simpler route
        (``dielectric-cylinder-family``); subdomains let each side's copy carry a kink the other side lacks."""
        u = self.field
        dn_i = sum(normals[:, k] * inner.d(u, a) for k, a in enumerate(ctx.space))
        dn_o = sum(normals[:, k] * outer.d(u, a) for k, a in enumerate(ctx.space))
        return torch.stack([inner[u] - outer[u], dn_i - dn_o], 1)


class Wave(ScalarPDE):
    """Scalar wave equation d2u/dt2 - c^2 lap u = f (Jackson, *Classical Electrodynamics*, 3rd ed., 1999,
    eqs. 6.15-6.16 with c the speed of the medium; each Cartesian component of E in a source-free uniform
    medium obeys it).

    In training units the residual is u'_t't' - (c T / L)^2 lap' u' - f T^2 / U, [N, 1]: one summed channel
    with weight 1 on t and -(c T / L)^2 on each spatial input.  Those weights depend on the scales, so
    :meth:`derivatives` needs them (``derivatives(inputs, scales)``); without scales it declares the
    scale-independent pair (t, t) plus the spatial Laplacian (one channel more), and :meth:`residual`
    reads whichever was carried.

    Parameters
    ----------
    speed : float
        c in m/s (> 0; default c0).
    source : float, callable, Source or None
        f in the field's unit per s^2 (None: 0).
    field, unit : str
        The field's name and SI unit (default "u", "V/m").
    """

    time_dependent = True

    def __init__(self, speed: float = C0, source=None, field: str = "u", unit: str = "V/m"):
        super().__init__(field, unit, source)
        self.speed = _number("Wave: the speed", speed, strict=True)

    def _ratio2(self, scales: Scales) -> float:
        return (self.speed * scales.time / scales.length) ** 2

    def weights(self, inputs, scales):
        if scales is None:
            return super().weights(inputs, scales)
        r2 = self._ratio2(scales)
        return {"t": 1.0, **{a: -r2 for a in _space(inputs)}}

    def derivatives(self, inputs, scales=None):
        d = super().derivatives(inputs, scales)
        if scales is None:
            return Derivatives(wrt=(*d.wrt, "t"), second=(("t", "t"),), laplacian=d.laplacian)
        return d

    def residual(self, f, points, ctx):
        sc, u = ctx.scales, self.field
        w = self.weights(ctx.fields_inputs, sc)
        if f.laplacian_weights == w:
            op = f.lap(u)
        else:
            try:
                op = f.d2(u, "t", "t") - self._ratio2(sc) * self.lap(f, ctx)
            except KeyError as exc:
                raise KeyError(f"Wave needs the summed channel {w} (derivatives(inputs, scales)) or the pair "
                               f"('t', 't') with the spatial Laplacian (derivatives(inputs)); carried: "
                               f"{f.laplacian_weights}, pairs {f.second_pairs}") from exc
        return (op - self.rhs(points, ctx) * (sc.time**2 / ctx.field_scale(u))).unsqueeze(1)


class Poisson(ScalarPDE):
    """Poisson equation -div(eps_r grad phi) = rhs; rhs = rho / eps0 for a potential phi in V (Jackson,
    *Classical Electrodynamics*, 3rd ed., 1999, eq. 1.28 for eps_r = 1; sec. 4.3 for a dielectric,
    div(eps grad phi) = -rho).

    Expanded, -eps_r lap phi - grad eps_r . grad phi = rhs; in training units the residual is
    -eps_r lap' phi' - grad' eps_r . grad' phi' - rhs L^2 / U, [N, 1].

    Parameters
    ----------
    rhs : float, callable or None
        Right-hand side in the field's unit per m^2 (V/m^2 for phi in V); None: 0.
    field, unit : str
        The field's name and SI unit (default "phi", "V").
    eps_r : float or callable
        Relative permittivity (default 1).  A callable's gradient is taken by torch autograd on the
        function itself, so write it with torch operations; a callable whose result does not depend
        differentiably on the coordinates (e.g. :func:`~elecsolver.physics.materials.piecewise`, through
        numpy) counts as piecewise constant: the equation then holds inside each region, and the interface
        conditions (continuity of phi and of eps_r dphi/dn) are not part of this residual.
    """

    def __init__(self, rhs=None, field: str = "phi", unit: str = "V", eps_r: Coefficient = 1.0):
        super().__init__(field, unit, rhs)
        self.eps_r = eps_r if callable(eps_r) else _number("Poisson: eps_r", eps_r, strict=True)

    def _eps(self, points: torch.Tensor, ctx: Context):
        """eps_r [N] (or a number) and its gradient along the spatial training inputs [N, s] (or None)."""
        if not callable(self.eps_r):
            return self.eps_r, None
        with torch.enable_grad():
            p = points.detach().requires_grad_(True)
            e = coefficient(self.eps_r, p, ctx)
            if not e.requires_grad:
                return e, None
            g = torch.autograd.grad(e.sum(), p)[0]
        return e.detach(), g[:, [ctx.inputs.index(a) for a in ctx.space]]

    def residual(self, f, points, ctx):
        L, U, u = ctx.scales.length, ctx.field_scale(self.field), self.field
        eps, grad_eps = self._eps(points, ctx)
        r = -eps * self.lap(f, ctx) - self.rhs(points, ctx) * (L**2 / U)
        if grad_eps is not None:
            r = r - sum(grad_eps[:, k] * f.d(u, a) for k, a in enumerate(ctx.space))
        return r.unsqueeze(1)

    def interface_residual(self, inner, outer, inner_points, outer_points, normals, ctx):
        """[phi_in - phi_out, eps_in dphi_in/dn - eps_out dphi_out/dn], [N, 2]: the potential and the normal
        displacement D_n = -eps dphi/dn are continuous across a charge-free interface (Jackson, 3rd ed., sec.
        4.4, eqs. 4.40-4.41)."""
        u = self.field
        eps_i = coefficient(self.eps_r, inner_points, ctx) if callable(self.eps_r) else self.eps_r
        eps_o = coefficient(self.eps_r, outer_points, ctx) if callable(self.eps_r) else self.eps_r
        dn_i = sum(normals[:, k] * inner.d(u, a) for k, a in enumerate(ctx.space))
        dn_o = sum(normals[:, k] * outer.d(u, a) for k, a in enumerate(ctx.space))
        return torch.stack([inner[u] - outer[u], eps_i * dn_i - eps_o * dn_o], 1)


class Laplace(Poisson):
    """Laplace equation div(eps_r grad phi) = 0 (Jackson, 3rd ed., eq. 1.29 for eps_r = 1): :class:`Poisson`
    with rhs 0; residual -eps_r lap' phi' - grad' eps_r . grad' phi', [N, 1]."""

    def __init__(self, field: str = "phi", unit: str = "V", eps_r: Coefficient = 1.0):
        super().__init__(None, field, unit, eps_r)
