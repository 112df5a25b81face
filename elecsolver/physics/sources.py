"""Sources: waveforms g(t), spatial profiles s(x) and their product, shared by problems and reference solvers.

A :class:`Source` is the term A g(t) s(x) added to the right-hand side of one field component's
equation (see :mod:`elecsolver.physics.maxwell` for the sign convention).  Waveforms and profiles
accept numpy arrays or torch tensors (in s and m) and return the same kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

__all__ = ["GaussianProfile", "GaussianPulse", "Source"]


def _lib(x):
    return torch if isinstance(x, torch.Tensor) else np


def _positive(name: str, value) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


class GaussianPulse:
    """g(t) = exp(-((t - t0) / tau)^2) with tau = sqrt(2.3) / (pi f) and t0 = 3.65 tau (MindSpore Elec's
    point-source pulse: its spectrum falls to 10 % at f, and g(0) = exp(-3.65^2) = 1.6e-6, so zero initial
    fields are consistent).

    Parameters
    ----------
    frequency : float
        f in Hz.

    Raises
    ------
    ValueError
        If f is not positive and finite.
    """

    def __init__(self, frequency: float):
        self.frequency = _positive("the pulse frequency", frequency)
        self.tau = math.sqrt(2.3) / (math.pi * self.frequency)
        self.t0 = 3.65 * self.tau

    def __call__(self, t):
        return _lib(t).exp(-(((t - self.t0) / self.tau) ** 2))

    def __repr__(self) -> str:
        return f"GaussianPulse(frequency={self.frequency:g})"


class GaussianProfile:
    """Normalised Gaussian s(x) = exp(-|x - c|^2 / (2 sigma^2)) / (2 pi sigma^2)^(d/2) in 1/m^d (integral 1).

    In 2D it is a smoothed line source along z (a point in the plane); in 3D a point source.

    Parameters
    ----------
    center : sequence of float
        c in m (d = len(center) = 1, 2 or 3).
    sigma : float
        Width in m.

    Raises
    ------
    ValueError
        For a bad centre or width.
    """

    def __init__(self, center: Sequence[float], sigma: float):
        self.center = tuple(float(c) for c in center)
        if not 1 <= len(self.center) <= 3 or not all(math.isfinite(c) for c in self.center):
            raise ValueError(f"the source centre needs 1-3 finite coordinates, got {center!r}")
        self.sigma = _positive("the source width sigma", sigma)
        self.norm = 1.0 / (2 * math.pi * self.sigma**2) ** (len(self.center) / 2)

    @property
    def dim(self) -> int:
        return len(self.center)

    def __call__(self, *xs):
        if len(xs) != self.dim:
            raise ValueError(f"a {self.dim}D profile needs {self.dim} coordinates, got {len(xs)}")
        r2 = sum((x - c) ** 2 for x, c in zip(xs, self.center))
        return self.norm * _lib(xs[0]).exp(-r2 / (2 * self.sigma**2))

    def __repr__(self) -> str:
        return f"GaussianProfile(center={self.center}, sigma={self.sigma:g})"


class Source:
    """The term amplitude * waveform(t) * profile(x) on field component ``field`` (SI).

    Parameters
    ----------
    field : str
        The component whose equation it enters, e.g. "Hz".
    waveform : callable
        g(t), t in s (e.g. :class:`GaussianPulse`).
    profile : callable
        s(x, y[, z]) in 1/m^d (e.g. :class:`GaussianProfile`).
    amplitude : float
        A, in the unit that makes A g s the equation's source unit (V for a 2D magnetic line source on Hz:
        A g s in V/m^2).
    """

    def __init__(self, field: str, waveform, profile, amplitude: float = 1.0):
        if not isinstance(field, str):
            raise ValueError(f"Source: field must be a component name like 'Hz', got {field!r}")
        if not (isinstance(amplitude, (int, float)) and math.isfinite(amplitude)):
            raise ValueError(f"Source: amplitude must be a finite number, got {amplitude!r}")
        self.field, self.waveform, self.profile, self.amplitude = field, waveform, profile, float(amplitude)

    def value(self, coords: Mapping[str, torch.Tensor]):
        """A g(t) s(x) at SI coordinates {"x": [N], "y": [N], ..., "t": [N]}, SI [N]."""
        space = [coords[a] for a in ("x", "y", "z")[: self.profile.dim]]
        return self.amplitude * self.waveform(coords["t"]) * self.profile(*space)

    def __repr__(self) -> str:
        return f"Source({self.field!r}, {self.waveform!r}, {self.profile!r}, amplitude={self.amplitude:g})"
