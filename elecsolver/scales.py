"""Nondimensionalisation: one :class:`Scales` object maps SI values to training units and back.

Training works with O(1) numbers (shared/DESIGN.md, "The data path"):

    x' = x / L,   t' = t / T,   E' = E / E0,   H' = H / H0,

with the defaults T = L / c0 (light crosses L in one time unit) and H0 = E0 / eta0 (a plane wave
has E' = H'), under which Maxwell's equations in vacuum keep their form with c = 1 and eta = 1.
Any other field's scale follows from its SI unit: "V" -> E0 L, "A" -> H0 L, and units a problem
declares in ``extra``.  The scales are written into every output file (:meth:`Scales.as_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scipy import constants

__all__ = ["C0", "EPS0", "ETA0", "MU0", "Scales"]

C0 = constants.c
EPS0 = constants.epsilon_0
MU0 = constants.mu_0
ETA0 = math.sqrt(MU0 / EPS0)


@dataclass(frozen=True)
class Scales:
    """Reference scales of a problem, SI.

    Parameters
    ----------
    length : float
        L in m (default 1).
    time : float, optional
        T in s; default L / c0.
    E0 : float
        Electric field scale in V/m (also the scale of any field declared in V/m; default 1).
    H0 : float, optional
        Magnetic field scale in A/m; default E0 / eta0.
    extra : mapping str -> float
        Scales of further units, e.g. {"T": 1e-3} for a flux density in tesla.

    Raises
    ------
    ValueError
        If a scale is not a positive finite number.
    """

    length: float = 1.0
    time: float | None = None
    E0: float = 1.0
    H0: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.time is None:
            object.__setattr__(self, "time", self.length / C0)
        if self.H0 is None:
            object.__setattr__(self, "H0", self.E0 / ETA0)
        object.__setattr__(self, "extra", dict(self.extra))
        for name, value in [("length", self.length), ("time", self.time), ("E0", self.E0), ("H0", self.H0),
                            *self.extra.items()]:
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"scale {name!r} must be a positive finite number, got {value!r}")

    def of_unit(self, unit: str) -> float:
        """The scale of a quantity in SI unit ``unit`` ("m", "s", "V/m", "A/m", "V", "A", "Hz" = 1/T, "1" or an
        ``extra`` unit).

        Raises
        ------
        ValueError
            For a unit with no declared scale (the message says how to declare one).
        """
        table = {"m": self.length, "s": self.time, "V/m": self.E0, "A/m": self.H0, "V": self.E0 * self.length,
                 "A": self.H0 * self.length, "1": 1.0, "": 1.0, "Hz": 1.0 / self.time, "1/s": 1.0 / self.time,
                 **self.extra}
        try:
            return float(table[unit])
        except KeyError:
            raise ValueError(f"no scale for the unit {unit!r}; declare it with Scales(extra={{{unit!r}: value}})") \
                from None

    @property
    def impedance(self) -> float:
        """E0 / H0 in ohm (eta0 with the default H0): the wave impedance of vacuum in training units is eta0 / this."""
        return self.E0 / self.H0

    @property
    def speed(self) -> float:
        """L / T in m/s (c0 with the default T)."""
        return self.length / self.time

    def as_dict(self) -> dict[str, float]:
        """The scales for output files: length_m, time_s, E0_V_per_m, H0_A_per_m and the extra units."""
        out = {"length_m": self.length, "time_s": self.time, "E0_V_per_m": self.E0, "H0_A_per_m": self.H0}
        out.update({f"scale_{k}": v for k, v in self.extra.items()})
        return out
