"""Ready problems, each with its reference solution and presets; a registry maps names to them."""

from __future__ import annotations

from elecsolver.problem import Problem

from .electrostatics_coax import ElectrostaticsCoax
from .dielectric_cylinder_family import DielectricCylinderFamily
from .dielectric_interface_1d import DielectricInterface1D
from .electrostatics_dielectric_cylinder import ElectrostaticsDielectricCylinder
from .helmholtz_square import HelmholtzSquare
from .line_source_2d import LineSource2D
from .magnetostatics_wire import MagnetostaticsWire
from .maxwell_cavity_2d import MaxwellCavity2D
from .maxwell_cavity_3d import MaxwellCavity3D
from .maxwell_plane_wave_2d import MaxwellPlaneWave2D
from .maxwell_point_source_2d import MaxwellPointSource2D
from .maxwell_point_source_family import MaxwellPointSourceFamily
from .pec_cylinder_scattering import PECCylinderScattering
from .waveguide_te10 import WaveguideTE10

__all__ = ["REGISTRY", "get_problem_class", "register"]

REGISTRY: dict[str, type[Problem]] = {}


def register(cls: type[Problem]) -> type[Problem]:
    """Add a problem class to the registry under ``cls.name`` (usable as a decorator)."""
    REGISTRY[cls.name] = cls
    return cls


def get_problem_class(name: str) -> type[Problem]:
    """The problem class registered as ``name``.

    Raises
    ------
    KeyError
        For an unknown name; the message lists the registered ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; registered problems: {', '.join(sorted(REGISTRY))}") from None


register(MaxwellPointSource2D)
register(HelmholtzSquare)
register(MaxwellCavity2D)
register(MaxwellPlaneWave2D)
register(MaxwellCavity3D)
register(ElectrostaticsCoax)
register(MagnetostaticsWire)
register(PECCylinderScattering)
register(WaveguideTE10)
register(LineSource2D)
register(ElectrostaticsDielectricCylinder)
register(DielectricInterface1D)
register(MaxwellPointSourceFamily)
register(DielectricCylinderFamily)
