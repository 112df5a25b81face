"""Physics objects: PDEs, boundary and initial conditions, sources, each written once in training units.

A PDE declares its fields, their SI units and the input derivatives its residual reads; a condition is
bound to boundary tags of a domain (or to t = t0); a source is a waveform times a spatial profile.
See :mod:`elecsolver.physics.base` for the conventions.
"""

from .base import PDE, Condition, Context, Derivatives, Interface, coefficient
from .conditions import PEC, PMC, Initial, SilverMueller
from .materials import Piecewise, piecewise
from .maxwell import Maxwell, Maxwell1D, Maxwell3D, MaxwellTEz, MaxwellTMz
from .pml import PML
from .scalar import Helmholtz, Laplace, Poisson, ScalarPDE, Wave
from .scalar_conditions import Dirichlet, Impedance, InitialRate, Neumann, Robin
from .sources import GaussianProfile, GaussianPulse, ModulatedGaussian, RampedSinusoid, Source

__all__ = [
           "PDE",
           "PEC",
           "PMC",
           "PML",
           "Condition",
           "Context",
           "Derivatives",
           "Dirichlet",
           "GaussianProfile",
           "GaussianPulse",
           "Helmholtz",
           "Impedance",
           "Initial",
           "InitialRate",
           "Interface",
           "Laplace",
           "Maxwell",
           "Maxwell1D",
           "Maxwell3D",
           "MaxwellTEz",
           "MaxwellTMz",
           "ModulatedGaussian",
           "Neumann",
           "Piecewise",
           "Poisson",
           "RampedSinusoid",
           "Robin",
           "ScalarPDE",
           "SilverMueller",
           "Source",
           "Wave",
           "coefficient",
           "piecewise",
]
