"""Sources: waveforms g(t), spatial profiles s(x) and their product, shared by problems and reference solvers.

A :class:`Source` is the term A g(t) s(x) added to the right-hand side of one field component's
equation (see :mod:`elecsolver.physics.maxwell` for the sign convention).  Waveforms and profiles
accept numpy arrays or torch tensors (in s and m) and return the same kind.

:class:`GaussianPulse`'s frequency and :class:`GaussianProfile`'s centre may be :class:`~elecsolver.axes.Parameter`
inputs of a family (``GaussianProfile((x0, y0), sigma)``, ``GaussianPulse(f)``): they are then read per point from
the coordinates the source is evaluated at (``coords={"x0": [N], ...}``, SI).  Such objects have
``parametric = True`` and take ``coords=`` in their call.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ..axes import is_parameter, value_of

__all__ = ["GaussianProfile", "GaussianPulse", "ModulatedGaussian", "RampedSinusoid", "Source"]


def _lib(x):
    return torch if isinstance(x, torch.Tensor) else np


def _clip01(x):
    return torch.clamp(x, 0.0, 1.0) if isinstance(x, torch.Tensor) else np.clip(x, 0.0, 1.0)


def _real(value) -> bool:
    """A finite real number (numpy scalars included, bools not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _positive(name: str, value) -> float:
    if not (_real(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


class GaussianPulse:
    """g(t) = exp(-((t - t0) / tau)^2) with tau = sqrt(2.3) / (pi f) and t0 = 3.65 tau (MindSpore Elec's
    point-source pulse: its spectrum falls to 10 % at f, and g(0) = exp(-3.65^2) = 1.6e-6, so zero initial
    fields are consistent).

    Parameters
    ----------
    frequency : float or Parameter
        f in Hz (a :class:`~elecsolver.axes.Parameter`: per point, from ``coords``; its range must be positive).

    Raises
    ------
    ValueError
        If f is not positive and finite.
    """

    parametric = True

    def __init__(self, frequency):
        if is_parameter(frequency):
            if frequency.lower <= 0:
                raise ValueError(f"the pulse frequency {frequency!r} needs a positive range")
            self.frequency, self.tau, self.t0 = frequency, None, None
            return
        self.frequency = _positive("the pulse frequency", frequency)
        self.t0, self.tau = self.timing()

    def timing(self, coords=None):
        """(t0, tau) in s: numbers, or per-point values [N] for a parameter frequency (from ``coords``)."""
        f = value_of(self.frequency, coords)
        tau = math.sqrt(2.3) / (math.pi * f)
        return 3.65 * tau, tau

    def __call__(self, t, coords=None):
        t0, tau = (self.t0, self.tau) if self.tau is not None else self.timing(coords)
        return _lib(t).exp(-(((t - t0) / tau) ** 2))

    def __repr__(self) -> str:
        f = self.frequency
        return f"GaussianPulse(frequency={f!r})" if is_parameter(f) else f"GaussianPulse(frequency={f:g})"


class ModulatedGaussian:
    """g(t) = exp(-((t - t0) / tau)^2) sin(2 pi f0 (t - t0)): a band-pass pulse centred on f0.

    Its amplitude spectrum is the Gaussian envelope's, tau sqrt(pi) exp(-(pi tau f)^2), shifted to +-f0
    and halved: (tau sqrt(pi) / 2) exp(-(pi tau (f - f0))^2) near f0 (modulation property of the Fourier
    transform; Oppenheim & Willsky, *Signals and Systems*, 2nd ed., 1997, sec. 4.5).  ``bandwidth`` B is
    the full width of the band [f0 - B/2, f0 + B/2] at whose edges that spectrum has fallen to 10 % of its
    peak: exp(-(pi tau B / 2)^2) = 0.1, i.e. tau = 2 sqrt(ln 10) / (pi B).  The sine makes g odd about
    t0 (g(t0) = 0), so its integral, the spectrum at f = 0, vanishes: the pulse leaves no static field.

    Parameters
    ----------
    f0 : float
        Centre (carrier) frequency in Hz.
    bandwidth : float, optional
        B in Hz; default f0 (used when ``tau`` is not given either).
    tau : float, optional
        Envelope width in s, instead of ``bandwidth``.
    t0 : float, optional
        Delay of the envelope's peak in s; default 3.65 tau (envelope exp(-3.65^2) = 1.6e-6 at t = 0, as
        :class:`GaussianPulse`).

    Raises
    ------
    ValueError
        If both ``bandwidth`` and ``tau`` are given, or a value is not positive and finite.
    """

    def __init__(self, f0: float, bandwidth: float | None = None, *, tau: float | None = None,
                 t0: float | None = None):
        self.f0 = _positive("the carrier frequency f0", f0)
        if bandwidth is not None and tau is not None:
            raise ValueError("ModulatedGaussian: give bandwidth= or tau=, not both")
        if tau is None:
            b = self.f0 if bandwidth is None else _positive("the bandwidth", bandwidth)
            tau = 2.0 * math.sqrt(math.log(10.0)) / (math.pi * b)
        self.tau = _positive("the envelope width tau", tau)
        if not (t0 is None or _real(t0)):
            raise ValueError(f"the delay t0 must be a finite number, got {t0!r}")
        self.t0 = 3.65 * self.tau if t0 is None else float(t0)

    def __call__(self, t):
        lib, s = _lib(t), t - self.t0
        return lib.exp(-((s / self.tau) ** 2)) * lib.sin(2 * math.pi * self.f0 * s)

    def __repr__(self) -> str:
        return f"ModulatedGaussian(f0={self.f0:g}, tau={self.tau:g}, t0={self.t0:g})"


class RampedSinusoid:
    """g(t) = r(t) sin(2 pi f t) with a raised-cosine ramp r from 0 to 1 over ``ramp_cycles`` periods.

    r(t) = (1 - cos(pi s)) / 2 with s = clip(t / t_r, 0, 1) and t_r = ramp_cycles / f: r = 0 for t <= 0,
    r = 1 for t >= t_r, and r' = 0 at both ends, so g and g' are continuous (a continuous-wave source
    switched on smoothly, which keeps the transient spectrum narrow; r is the rising half of the Hann
    window, Harris, Proc. IEEE 66 (1978) 51).
    ``ramp_cycles = 0`` gives the bare sine for t >= 0 (and 0 before).

    Parameters
    ----------
    frequency : float
        f in Hz.
    ramp_cycles : float
        Length of the ramp in periods 1/f (default 3, >= 0).

    Raises
    ------
    ValueError
        If f is not positive and finite or ``ramp_cycles`` is negative.
    """

    def __init__(self, frequency: float, ramp_cycles: float = 3):
        self.frequency = _positive("the frequency", frequency)
        if not (_real(ramp_cycles) and ramp_cycles >= 0):
            raise ValueError(f"ramp_cycles must be a finite number >= 0, got {ramp_cycles!r}")
        self.ramp_cycles = float(ramp_cycles)
        self.ramp_time = self.ramp_cycles / self.frequency

    def ramp(self, t):
        """r(t), dimensionless, same kind as t."""
        lib = _lib(t)
        if self.ramp_time == 0.0:
            return (t >= 0) * 1.0 if lib is np else (t >= 0).to(t.dtype)
        return 0.5 * (1.0 - lib.cos(math.pi * _clip01(t / self.ramp_time)))

    def __call__(self, t):
        return self.ramp(t) * _lib(t).sin(2 * math.pi * self.frequency * t)

    def __repr__(self) -> str:
        return f"RampedSinusoid(frequency={self.frequency:g}, ramp_cycles={self.ramp_cycles:g})"


class GaussianProfile:
    """Normalised Gaussian s(x) = exp(-|x - c|^2 / (2 sigma^2)) / (2 pi sigma^2)^(d/2) in 1/m^d (integral 1).

    In 2D it is a smoothed line source along z (a point in the plane); in 3D a point source.

    Parameters
    ----------
    center : sequence of float or Parameter
        c in m (d = len(center) = 1, 2 or 3); a :class:`~elecsolver.axes.Parameter` coordinate is read per point
        from ``coords``.
    sigma : float
        Width in m.

    Raises
    ------
    ValueError
        For a bad centre or width.
    """

    parametric = True

    def __init__(self, center: Sequence, sigma: float):
        self.center = tuple(c if is_parameter(c) else float(c) for c in center)
        if not 1 <= len(self.center) <= 3 or not all(is_parameter(c) or math.isfinite(c) for c in self.center):
            raise ValueError(f"the source centre needs 1-3 finite coordinates, got {center!r}")
        self.sigma = _positive("the source width sigma", sigma)
        d = len(self.center)
        self.norm = (2 * math.pi) ** (-d / 2) * self.sigma ** (-d)  # 1 / (2 pi sigma^2)^(d/2), never overflowing

    @property
    def dim(self) -> int:
        return len(self.center)

    def __call__(self, *xs, coords=None):
        if len(xs) != self.dim:
            raise ValueError(f"a {self.dim}D profile needs {self.dim} coordinates, got {len(xs)}")
        r2 = sum((x - value_of(c, coords)) ** 2 for x, c in zip(xs, self.center))
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
        if not _real(amplitude):
            raise ValueError(f"Source: amplitude must be a finite number, got {amplitude!r}")
        self.field, self.waveform, self.profile, self.amplitude = field, waveform, profile, float(amplitude)

    def value(self, coords: Mapping[str, torch.Tensor]):
        """A g(t) s(x) at SI coordinates {"x": [N], "y": [N], ..., "t": [N], and any parameters}, SI [N]."""
        space = [coords[a] for a in ("x", "y", "z")[: self.profile.dim]]
        g = self.waveform(coords["t"], coords=coords) if getattr(self.waveform, "parametric", False) \
            else self.waveform(coords["t"])
        s = self.profile(*space, coords=coords) if getattr(self.profile, "parametric", False) else self.profile(*space)
        return self.amplitude * g * s

    def __repr__(self) -> str:
        return f"Source({self.field!r}, {self.waveform!r}, {self.profile!r}, amplitude={self.amplitude:g})"
