"""Boundary conditions of the first, second and third kind on named fields, and the initial rate.

Each is a :class:`~elecsolver.physics.base.Condition` in training units on the fields it names
(default: all the PDE's fields), one residual column per field.  With x = L x', u = U u' and the outward
unit normal n (du/dn = (U / L) du'/dn'):

======================  ==========================  ====================================  ==============
condition               SI form                     residual in training units            g in
======================  ==========================  ====================================  ==============
:class:`Dirichlet`      u = g                       u' - g / U                            unit of u
:class:`Neumann`        du/dn = g                   du'/dn' - g L / U                     unit of u / m
:class:`Robin`          alpha u + beta du/dn = g    alpha L u' + beta du'/dn' - g L / U   unit of u / m
:class:`InitialRate`    du/dt = v at t = t0         du'/dt' - v T / U                     unit of u / s
======================  ==========================  ====================================  ==============

(The conditions of the first, second and third kind of a scalar boundary-value problem; Jin, *The
Finite Element Method in Electromagnetics*, 3rd ed., 2014, ch. 4.)  Robin's alpha is in 1/m and beta
is dimensionless, so that ``Robin(alpha=0, beta=1)`` is :class:`Neumann`.  g (or v) is a number, or a
function of the SI coordinates returning SI values (a tensor [N] for one field, else a dict
{field: [N]}, missing fields 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import Coefficient, Condition, Context, Derivatives, coefficient, values_of

__all__ = ["Dirichlet", "Impedance", "InitialRate", "Neumann", "Robin"]


class _FieldCondition(Condition):
    """A condition on some fields; owns the field selection and the given values in training units."""

    def __init__(self, on=None, value=None, fields: str | Sequence[str] | None = None, **kwargs):
        super().__init__(on, **kwargs)
        if not (value is None or callable(value) or isinstance(value, (int, float, complex))):
            raise ValueError(f"{type(self).__name__}: value must be a number or a function of the SI "
                             f"coordinates, got {value!r}")
        self.value = value
        self.fields = (fields,) if isinstance(fields, str) else (None if fields is None else tuple(fields))

    def targets(self, ctx: Context) -> tuple[str, ...]:
        """The fields this condition holds on (default: every field of the PDE)."""
        every = tuple(ctx.pde.fields) if ctx.pde is not None else tuple(ctx.units)
        names = every if self.fields is None else self.fields
        unknown = [n for n in names if n not in every]
        if unknown:
            raise ValueError(f"{type(self).__name__}: no field {unknown}; the fields are {every}")
        return names

    def given(self, names: Sequence[str], points: torch.Tensor, ctx: Context) -> torch.Tensor | float:
        """The value g / (scale of each field), [N, m] (or 0.0 without a value)."""
        if self.value is None:
            return 0.0
        if callable(self.value):
            return values_of(self.value, names, points, ctx, f"{type(self).__name__}(value=...)")
        scale = torch.empty(len(names), dtype=points.dtype, device=points.device)
        for i, n in enumerate(names):  # filled on the device: no copy from the host (a synchronisation on a GPU)
            scale[i] = ctx.field_scale(n)
        return self.value / scale

    @staticmethod
    def normal_derivative(f, names, normals: torch.Tensor, ctx: Context) -> torch.Tensor:
        """n . grad' u' for each field, [N, m]."""
        space = ctx.space
        if normals is None or normals.shape[1] != len(space):
            raise ValueError(f"a normal derivative needs normals [N, {len(space)}] for the inputs {space}")
        cols = [sum(normals[:, k] * f.d(n, a) for k, a in enumerate(space)) for n in names]
        return torch.stack(cols, dim=1)

    def values(self, f, names) -> torch.Tensor:
        return torch.stack([f[n] for n in names], dim=1)


class Dirichlet(_FieldCondition):
    """Dirichlet condition u = g on the tagged boundary; residual u' - g / U, [N, m].

    Parameters
    ----------
    on : str or sequence of str, optional
        Boundary tags (None: the whole boundary).
    value : float or callable, optional
        g in the field's SI unit (None: 0).
    fields : str or sequence of str, optional
        The fields it holds on (default: all the PDE's fields).
    weight, name, points
        As :class:`~elecsolver.physics.base.Condition`.
    """

    default_name = "dirichlet"

    def __init__(self, on=None, value=None, fields=None, **kwargs):
        super().__init__(on, value, fields, **kwargs)

    def residual(self, f, points, normals, ctx):
        names = self.targets(ctx)
        return self.values(f, names) - self.given(names, points, ctx)


class Neumann(_FieldCondition):
    """Neumann condition du/dn = n . grad u = g on the tagged boundary; residual du'/dn' - g L / U, [N, m].

    Parameters
    ----------
    on, fields, weight, name, points
        As :class:`Dirichlet`.
    value : float or callable, optional
        g in the field's SI unit per m (None: 0).
    """

    default_name = "neumann"

    def __init__(self, on=None, value=None, fields=None, **kwargs):
        super().__init__(on, value, fields, **kwargs)

    def derivatives(self, inputs):
        return Derivatives(wrt=tuple(a for a in inputs if a != "t"))

    def residual(self, f, points, normals, ctx):
        names = self.targets(ctx)
        g = self.given(names, points, ctx) * ctx.scales.length
        return self.normal_derivative(f, names, normals, ctx) - g


class Robin(_FieldCondition):
    """Robin (third-kind) condition alpha u + beta du/dn = g; residual alpha L u' + beta du'/dn' - g L / U,
    [N, m].

    Complex coefficients act on complex fields (a PDE's ``complex_fields``): the first-order Sommerfeld
    (impedance) condition of a time-harmonic field, du/dn - i k u = 0 in the exp(-i omega t) convention
    (du/dn + j k u = 0 with e^{j omega t}; Jin, 3rd ed., sec. 9.2), is ``Robin(alpha=-1j * k, beta=1)``.

    Parameters
    ----------
    on, fields, weight, name, points
        As :class:`Dirichlet`.
    alpha : float, complex or callable
        Coefficient of u in 1/m (a function of the SI coordinates for a varying one).
    beta : float or callable
        Coefficient of du/dn, dimensionless.
    value : float or callable, optional
        g in the field's SI unit per m (None: 0).

    Raises
    ------
    ValueError
        If alpha and beta are both the number 0.
    """

    default_name = "robin"

    def __init__(self, on=None, alpha: Coefficient = 0.0, beta: Coefficient = 1.0, value=None, fields=None,
                 **kwargs):
        super().__init__(on, value, fields, **kwargs)
        if not callable(alpha) and not callable(beta) and alpha == 0 and beta == 0:
            raise ValueError("Robin: alpha and beta are both 0; the condition would be g = 0")
        self.alpha, self.beta = alpha, beta

    def derivatives(self, inputs):
        return Derivatives(wrt=tuple(a for a in inputs if a != "t"))

    def residual(self, f, points, normals, ctx):
        names, L = self.targets(ctx), ctx.scales.length

        def col(c):
            c = coefficient(c, points, ctx)
            return c.unsqueeze(1) if isinstance(c, torch.Tensor) else c

        dn = self.normal_derivative(f, names, normals, ctx)
        g = self.given(names, points, ctx) * L
        return col(self.alpha) * L * self.values(f, names) + col(self.beta) * dn - g


Impedance = Robin
"""The impedance condition alpha u + beta du/dn = g: :class:`Robin` (see its note on complex fields)."""


class InitialRate(_FieldCondition):
    """Initial rate du/dt = v at t = t0 (with :class:`~elecsolver.physics.conditions.Initial`, the two Cauchy
    data of the wave equation); residual du'/dt' - v T / U, [N, m].

    Parameters
    ----------
    value : float or callable, optional
        v in the field's SI unit per s (None: 0).
    fields, weight, name, points
        As :class:`Dirichlet`.
    """

    where = "initial"
    default_name = "initial_rate"

    def __init__(self, value=None, fields=None, **kwargs):
        super().__init__(None, value, fields, **kwargs)

    def derivatives(self, inputs):
        return Derivatives(wrt=("t",))

    def residual(self, f, points, normals, ctx):
        names = self.targets(ctx)
        rate = torch.stack([f.d(n, "t") for n in names], dim=1)
        return rate - self.given(names, points, ctx) * ctx.scales.time
