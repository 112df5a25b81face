"""Input axes: every column of the network's input has a name, a kind and a unit.

A problem's inputs are its spatial axes (x, y, z, kind "space", m), then its time axis (t, kind "time", s) when it
is time-dependent, then its parameters (kind "parameter", any unit): quantities of the configuration that the
network takes as inputs, so that one training answers a family of configurations (source positions, frequencies,
materials).  A :class:`Parameter` is declared with the box it is trained over; sources, materials and conditions
accept one wherever they accept a number (:func:`value_of`).  The PDE differentiates along the space and time axes
only: the jets carry no derivative along a parameter.

Points hold every axis in training units: space / L, time / T, a parameter / the scale of its unit
(:meth:`elecsolver.scales.Scales.of_unit`: "m" -> L, "Hz" -> 1/T, "1" -> 1, ...).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["KINDS", "Axis", "Parameter", "is_parameter", "value_of"]

KINDS = ("space", "time", "parameter")
_RESERVED = ("x", "y", "z", "t")


@dataclass(frozen=True)
class Axis:
    """One input column: ``name`` (e.g. "x", "t", "x0"), ``kind`` (one of :data:`KINDS`) and SI ``unit``."""

    name: str
    kind: str
    unit: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"axis {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")


class Parameter:
    """A configuration quantity taken as an input of the network, trained over the box [lower, upper].

    Parameters
    ----------
    name : str
        The input's name: an identifier other than x, y, z and t (e.g. "x0", "f", "eps_r").
    lower, upper : float
        The trained range, in ``unit`` (finite, upper > lower).
    unit : str
        SI unit ("m", "Hz", "1", ...); its scale (:meth:`elecsolver.scales.Scales.of_unit`) makes the training
        unit of the column.
    key : str, optional
        The dotted configuration key of the quantity (e.g. "source.x0"): the configuration value a run exports
        and a query sets is read there.

    Raises
    ------
    ValueError
        For a name that is no identifier or is reserved, or a range that is not finite with upper > lower (the
        message names the parameter and the numbers).

    Examples
    --------
    >>> f = Parameter("f", 0.8e9, 1.2e9, unit="Hz", key="source.frequency")
    >>> GaussianPulse(f)                                    # doctest: +SKIP
    """

    def __init__(self, name: str, lower: float, upper: float, unit: str = "1", key: str | None = None):
        if not (isinstance(name, str) and name.isidentifier() and name not in _RESERVED):
            raise ValueError(f"a parameter's name must be an identifier other than {_RESERVED}, got {name!r}")
        what = f"parameter {name!r}" + (f" ({key})" if key else "")
        for label, v in (("lower", lower), ("upper", upper)):
            if not (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)):
                raise ValueError(f"{what}: the {label} end of its range must be a finite number, got {v!r}")
        if not upper > lower:
            raise ValueError(f"{what}: its range needs upper > lower, got [{lower!r}, {upper!r}]")
        if not isinstance(unit, str):
            raise ValueError(f"{what}: unit must be a string such as 'm' or 'Hz', got {unit!r}")
        self.name, self.lower, self.upper, self.unit, self.key = name, float(lower), float(upper), unit, key

    @property
    def axis(self) -> Axis:
        return Axis(self.name, "parameter", self.unit)

    def contains(self, value: float, rel: float = 1e-12) -> bool:
        """Whether ``value`` lies in [lower, upper] (within ``rel`` of the range's width)."""
        tol = rel * (self.upper - self.lower)
        return self.lower - tol <= value <= self.upper + tol

    def quantity(self, value: float) -> str:
        """``value`` with the unit, for messages ("0.42 m"; a dimensionless parameter without one: "2.5")."""
        return f"{value:g}" if self.unit in ("1", "") else f"{value:g} {self.unit}"

    def range_text(self) -> str:
        """The trained range for messages ("[0.3, 0.7] m"; "[1.5, 4]" when dimensionless)."""
        return f"[{self.lower:g}, {self.upper:g}]" + ("" if self.unit in ("1", "") else f" {self.unit}")

    def __repr__(self) -> str:
        return f"Parameter({self.name!r}, {self.lower:g}, {self.upper:g}, unit={self.unit!r})"


def is_parameter(value) -> bool:
    """True if ``value`` is an :class:`Parameter` (an input axis standing where a number would), else False."""
    return isinstance(value, Parameter)


def value_of(value, coords: Mapping[str, object] | None):
    """``value`` itself, or for a :class:`Parameter` its per-point SI values ``coords[name]`` ([N] tensor or array).

    Raises
    ------
    ValueError
        For a parameter that is not among the coordinates (the problem does not declare it).
    """
    if not isinstance(value, Parameter):
        return value
    if coords is None or value.name not in coords:
        have = sorted(coords) if coords is not None else []
        raise ValueError(f"{value!r} is not an input of this problem (its inputs are {have}); declare it in the "
                         "problem's parameters")
    return coords[value.name]
