"""Base classes of the physics objects: a PDE, a condition, and what both need to form a residual.

A physics object is written once, in training units (see :mod:`elecsolver.scales`), and declares
the input derivatives its residual reads (:class:`Derivatives`), so that the jets carry exactly
those.  The problem base binds it to a domain and a :class:`Context` (input names, scales, field
units, the PDE), samples its points and hands it the network's :class:`~elecsolver.operators.Fields`.

Conventions
-----------
- ``residual`` returns a tensor [N, m] (m residual components per point) in training units.
- User functions (exact solutions, initial values, boundary values, material coefficients) are
  called with the SI coordinates of the points as positional tensors in the problem's input order,
  e.g. ``fn(x, y, t)`` in m, m, s, and return SI values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..scales import Scales

__all__ = ["PDE", "Coefficient", "Condition", "Context", "Derivatives", "Interface", "axis_scale", "coefficient",
           "si_columns", "values_of"]

Coefficient = float | complex | Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Derivatives:
    """The input derivatives a residual reads.

    Attributes
    ----------
    wrt : tuple of str
        Inputs of the first derivatives (e.g. ("x", "y", "t")).
    second : tuple of (str, str)
        Input pairs of second derivatives read with ``Fields.d2``.
    laplacian : tuple of (str, float) or dict str -> float, optional
        Weights of one summed channel sum_k w_k d2/dx_k^2 read with ``Fields.lap``, e.g. {"x": 1.0, "y": 1.0}.
    """

    wrt: tuple[str, ...] = ()
    second: tuple[tuple[str, str], ...] = ()
    laplacian: tuple[tuple[str, float], ...] | None = None

    def laplacian_dict(self) -> dict[str, float] | None:
        """The Laplacian weights as a dict (None when no summed channel is read)."""
        return None if self.laplacian is None else dict(self.laplacian)


@dataclass(frozen=True)
class Context:
    """What a residual needs besides the fields.

    Attributes
    ----------
    inputs : tuple of str
        Column names of the points: the spatial axes, then "t" for a time-dependent problem, then the parameters.
    scales : Scales
    units : mapping str -> str
        SI unit of every field component.
    pde : PDE, optional
        The problem's PDE (conditions read its electric and magnetic components).
    parameters : mapping str -> str, optional
        The parameter inputs {name: SI unit} (:class:`elecsolver.axes.Parameter`); every other input is a spatial
        axis or t.
    """

    inputs: tuple[str, ...]
    scales: Scales = field(default_factory=Scales)
    units: Mapping[str, str] = field(default_factory=dict)
    pde: PDE | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def space(self) -> tuple[str, ...]:
        """The spatial inputs."""
        return tuple(n for n in self.inputs if n != "t" and n not in self.parameters)

    @property
    def has_time(self) -> bool:
        return "t" in self.inputs

    @property
    def fields_inputs(self) -> tuple[str, ...]:
        """The inputs the PDE differentiates along: space, then t (the parameters left out)."""
        return tuple(n for n in self.inputs if n not in self.parameters)

    def si(self, points: torch.Tensor) -> list[torch.Tensor]:
        """SI coordinates of nondimensional points [N, d]: one tensor [N] per input (m for space, s for t, a
        parameter in its unit)."""
        return si_columns(points, self.inputs, self.scales, self.parameters)

    def field_scale(self, name: str) -> float:
        """SI scale of field component ``name`` (from its unit)."""
        return self.scales.of_unit(self.units[name])


def si_columns(points: torch.Tensor, inputs: Sequence[str], scales: Scales,
               parameters: Mapping[str, str] | None = None) -> list[torch.Tensor]:
    """SI coordinates of nondimensional points [N, d], one tensor [N] per input column (``parameters``: {name: SI
    unit} of the parameter inputs, scaled by their unit's scale)."""
    return [points[:, k] * axis_scale(name, scales, parameters) for k, name in enumerate(inputs)]


def axis_scale(name: str, scales: Scales, parameters: Mapping[str, str] | None = None) -> float:
    """The SI value of one training unit along input ``name``: T for t, a parameter's unit scale, else L."""
    if parameters and name in parameters:
        return scales.of_unit(parameters[name])
    return scales.time if name == "t" else scales.length


def coefficient(value: Coefficient, points: torch.Tensor, ctx: Context) -> torch.Tensor | float:
    """A material coefficient at the points: the number itself, or ``value(*si_coordinates)`` [N] for a function
    (complex numbers and complex results are kept: a complex coefficient acts on complex fields)."""
    if callable(value):
        out = torch.as_tensor(value(*ctx.si(points)), device=points.device)
        return out.to(_complex_of(points.dtype) if out.is_complex() else points.dtype).reshape(-1)
    return complex(value) if isinstance(value, complex) else float(value)


class PDE:
    """A partial differential equation in training units.

    Subclasses set ``fields`` and ``units`` (in their ``__init__`` or as class attributes) and
    implement :meth:`derivatives` and :meth:`residual`.

    Attributes
    ----------
    fields : tuple of str
        The field components, in the network's output order.
    units : dict str -> str
        SI unit of each component.
    name : str
        Name of its loss term (default "pde").
    """

    fields: tuple[str, ...] = ()
    units: Mapping[str, str] = {}
    name = "pde"

    def check_inputs(self, inputs: Sequence[str]) -> None:
        """Raise ValueError if the problem's inputs do not fit this PDE (e.g. TEz needs x, y, t)."""

    def derivatives(self, inputs: Sequence[str], scales: Scales | None = None) -> Derivatives:
        """The derivatives :meth:`residual` reads, for a problem with these inputs.

        ``scales`` (the problem's :class:`~elecsolver.scales.Scales`) matters only to a PDE whose
        summed Laplacian channel has scale-dependent weights (:class:`~elecsolver.physics.Wave`);
        without it such a PDE declares scale-independent channels instead (one more channel).
        """
        raise NotImplementedError

    def residual(self, f, points: torch.Tensor, ctx: Context) -> torch.Tensor:
        """The residual [N, m] at nondimensional ``points`` [N, d] from the fields ``f``."""
        raise NotImplementedError

    def interface_derivatives(self, inputs: Sequence[str]) -> Derivatives:
        """The derivatives :meth:`interface_residual` reads (default: the first spatial ones)."""
        return Derivatives(wrt=tuple(n for n in inputs if n != "t"))

    def interface_residual(self, inner, outer, inner_points: torch.Tensor, outer_points: torch.Tensor,
                           normals: torch.Tensor, ctx: Context) -> torch.Tensor:
        """The continuity conditions across an interface between two media, [N, m] in training units.

        ``inner`` and ``outer`` are the fields of the two sides (the copies of a subdomain and of its
        neighbour), ``normals`` [N, s] the unit normals from the inner side to the outer one, and
        ``inner_points`` / ``outer_points`` [N, d] the interface points moved a hair to each side (where a
        coefficient that jumps is read).

        Raises
        ------
        NotImplementedError
            For a PDE that declares no interface conditions.
        """
        raise NotImplementedError(f"{type(self).__name__} declares no interface conditions; subdomains need a PDE "
                                  "with interface_residual (Poisson, Laplace, Helmholtz, Maxwell)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fields={self.fields})"


class Condition:
    """A condition on part of a domain's boundary (``where="boundary"``) or at t = t0 (``where="initial"``).

    Parameters
    ----------
    on : str or sequence of str, optional
        Boundary tags of the domain the condition holds on (None: the whole boundary).
    weight : float
        Weight of its loss term.
    name : str, optional
        Name of its loss term (default the class's ``default_name``).
    points : int, optional
        Collocation points per round (default: the ``sampling.boundary`` or ``sampling.initial`` entry).
    """

    where = "boundary"
    default_name = "condition"

    def __init__(self, on: str | Sequence[str] | None = None, *, weight: float = 1.0, name: str | None = None,
                 points: int | None = None):
        if not (isinstance(weight, (int, float)) and weight >= 0):
            raise ValueError(f"{type(self).__name__}: weight must be a number >= 0, got {weight!r}")
        if points is not None and (not isinstance(points, int) or points < 0):
            raise ValueError(f"{type(self).__name__}: points must be an integer >= 0, got {points!r}")
        self.on = (on,) if isinstance(on, str) else (None if on is None else tuple(on))
        self.weight, self.points = float(weight), points
        self.name = name or self.default_name

    def derivatives(self, inputs: Sequence[str]) -> Derivatives:
        """The derivatives :meth:`residual` reads (default: values only)."""
        return Derivatives()

    def residual(self, f, points: torch.Tensor, normals: torch.Tensor | None, ctx: Context) -> torch.Tensor:
        """The residual [N, m] at nondimensional ``points`` [N, d] with outward unit ``normals`` [N, s]."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, on={self.on}, weight={self.weight})"


class Interface(Condition):
    """The interface between a subdomain (``Problem.subdomains``) and its neighbour, where the PDE's continuity
    conditions (``PDE.interface_residual``) join the copies of the fields on the two sides.

    Parameters
    ----------
    subdomain : str
        The subdomain whose boundary it is (its normals point out of it).
    on : str or sequence of str, optional
        Boundary tags of that subdomain (default its whole boundary; e.g. only "slab:xmin" when the slab's
        other face is the domain's own edge).
    outside : str, optional
        The neighbour's name (default "background", every point outside the subdomains).
    weight, name, points
        As :class:`Condition` (default name "interface"; points from the term's own entry ``sampling.<name>``,
        else ``sampling.interface``, else ``sampling.boundary``).
    """

    where = "interface"
    default_name = "interface"

    def __init__(self, subdomain: str, on: str | Sequence[str] | None = None, *, outside: str | None = None,
                 **kwargs):
        if not isinstance(subdomain, str):
            raise ValueError(f"Interface: subdomain must be the name of one of Problem.subdomains, got {subdomain!r}")
        super().__init__(on, **kwargs)
        self.subdomain, self.outside = subdomain, outside

    def __repr__(self) -> str:
        return f"Interface({self.subdomain!r}, on={self.on}, outside={self.outside!r}, name={self.name!r})"


def values_of(fn: Callable[..., Mapping[str, torch.Tensor] | torch.Tensor], names: Sequence[str],
              points: torch.Tensor, ctx: Context, what: str) -> torch.Tensor:
    """``fn(*si_coordinates)`` in training units, [N, len(names)].

    ``fn`` returns a dict {component: SI values [N]} (components missing from it count as zero) or,
    for one component, a tensor [N]; complex values (for complex fields) come back complex.

    Raises
    ------
    ValueError
        If ``fn`` returns a name outside ``names`` or a wrong shape (the message names ``what``).
    """
    out = fn(*ctx.si(points))
    n = points.shape[0]
    if not isinstance(out, Mapping):
        if len(names) != 1:
            raise ValueError(f"{what}: return a dict {{component: values}} for the components {tuple(names)}")
        out = {names[0]: out}
    unknown = sorted(set(out) - set(names))
    if unknown:
        raise ValueError(f"{what}: returns components {unknown}, but the fields are {tuple(names)}")
    cols = []
    for name in names:
        v = out.get(name, 0.0)
        v = torch.as_tensor(v, device=points.device)
        v = v.to(_complex_of(points.dtype) if v.is_complex() else points.dtype)
        if v.dim() > 1:
            v = v.reshape(-1) if v.numel() == n else v
        v = v.expand(n) if v.dim() == 0 else v
        if v.shape != (n,):
            raise ValueError(f"{what}: component {name!r} has shape {tuple(v.shape)}, expected [{n}]")
        cols.append(v / ctx.field_scale(name))
    if any(c.is_complex() for c in cols):
        cols = [c.to(_complex_of(points.dtype)) for c in cols]
    return torch.stack(cols, dim=1)


def _complex_of(dtype: torch.dtype) -> torch.dtype:
    return torch.complex128 if dtype == torch.float64 else torch.complex64
