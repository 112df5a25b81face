"""Physics objects: PDEs, boundary and initial conditions, sources, each written once in training units.

A PDE declares its fields, their SI units and the input derivatives its residual reads; a condition is
bound to boundary tags of a domain (or to t = t0); a source is a waveform times a spatial profile.
See :mod:`elecsolver.physics.base` for the conventions.
"""

from .base import Condition, Context, Derivatives, PDE, coefficient
from .conditions import PEC, PMC, Initial, SilverMueller
from .maxwell import Maxwell, Maxwell3D, MaxwellTEz, MaxwellTMz
from .sources import GaussianProfile, GaussianPulse, Source

__all__ = ["PDE", "PEC", "PMC", "Condition", "Context", "Derivatives", "GaussianProfile", "GaussianPulse",
           "Initial", "Maxwell", "Maxwell3D", "MaxwellTEz", "MaxwellTMz", "SilverMueller", "Source", "coefficient"]
