"""Plane-wave scattering by a perfectly conducting circular cylinder: the Bessel/Hankel series.

A plane wave u_inc = A exp(i k x) (time convention exp(-i omega t)) meets a PEC cylinder of radius a on the
z axis.  With the Jacobi-Anger expansion exp(i k r cos phi) = sum_n i^n J_n(k r) exp(i n phi), the scattered
field that radiates outward (Hankel functions of the first kind in this convention) is

    u_s(r, phi) = A sum_{n=-N}^{N} i^n c_n H_n^(1)(k r) exp(i n phi),                       (1)

    TM (u = Ez, Ez_total = 0 on r = a):           c_n = -J_n(k a) / H_n^(1)(k a),
    TE (u = Hz, dHz_total/dr = 0 on r = a):       c_n = -J_n'(k a) / H_n^(1)'(k a)

(Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., 2012, sec. 11.5.1, eqs. 11-89 and 11-109,
there in the exp(j omega t) convention with H^(2); Harrington, *Time-Harmonic Electromagnetic Fields*,
1961, sec. 5-8).  Since J_{-n} = (-1)^n J_n and H_{-n} = (-1)^n H_n, the terms n and -n combine to
2 i^n c_n H_n(k r) cos(n phi).  The series is cut where |J_n(k a)| (TM) or |J_n'(k a)| (TE) falls below
1e-17 past n > k a, which bounds every dropped term on r >= a well below the float64 round-off.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["pec_cylinder_coefficients", "pec_cylinder_scattered"]

POLARISATIONS = ("TM", "TE")


def pec_cylinder_coefficients(ka: float, polarisation: str) -> np.ndarray:
    """The coefficients c_0..c_N of (1), complex128 [N + 1], for k a > 0 and polarisation "TM" or "TE".

    Raises
    ------
    ValueError
        For k a <= 0 or another polarisation.
    """
    if polarisation not in POLARISATIONS:
        raise ValueError(f"polarisation must be one of {POLARISATIONS}, got {polarisation!r}")
    if not ka > 0:
        raise ValueError(f"k a must be > 0, got {ka!r}")
    n = np.arange(int(ka) + 2000)
    if polarisation == "TM":
        num, den = special.jv(n, ka), special.hankel1(n, ka)
    else:
        num, den = special.jvp(n, ka), special.h1vp(n, ka)
    small = np.nonzero((np.abs(num) < 1e-17) & (n > ka))[0]
    last = int(small[0]) if small.size else n[-1]
    return -(num[: last + 1] / den[: last + 1]).astype(np.complex128)


def pec_cylinder_scattered(x, y, wavenumber: float, radius: float, polarisation: str = "TM",
                           amplitude: float = 1.0) -> np.ndarray:
    """The scattered field (1) at SI points (x, y) in m (arrays of one shape), complex128 of that shape.

    The unit is the incident field's (V/m for TM, A/m for TE, ``amplitude`` being |u_inc|).  Inside the
    cylinder (r < a) the total field of a conductor vanishes, so the scattered field there is -u_inc.

    Raises
    ------
    ValueError
        For a non-positive wavenumber or radius, or a polarisation other than "TM" and "TE".
    """
    if not (wavenumber > 0 and radius > 0):
        raise ValueError(f"wavenumber (rad/m) and radius (m) must be > 0, got {wavenumber!r}, {radius!r}")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    c = pec_cylinder_coefficients(wavenumber * radius, polarisation)
    r, phi = np.hypot(x, y), np.arctan2(y, x)
    outside = r >= radius
    kr, ph = wavenumber * r[outside], phi[outside]
    total = c[0] * special.hankel1(0, kr)
    for n in range(1, c.size):
        total = total + 2 * (1j**n) * c[n] * special.hankel1(n, kr) * np.cos(n * ph)
    out = -amplitude * np.exp(1j * wavenumber * x)
    out[outside] = amplitude * total
    return out
