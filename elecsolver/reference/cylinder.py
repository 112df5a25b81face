"""Plane-wave scattering by circular cylinders, perfectly conducting or dielectric: the Bessel/Hankel series.

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

__all__ = ["dielectric_cylinder_coefficients", "dielectric_cylinder_total", "pec_cylinder_coefficients",
           "pec_cylinder_scattered"]

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
    outside = r >= radius * (1 - 1e-12)  # sites on the surface (r = a to round-off) take the series' surface value
    kr, ph = wavenumber * r[outside], phi[outside]
    total = c[0] * special.hankel1(0, kr)
    for n in range(1, c.size):
        total = total + 2 * (1j**n) * c[n] * special.hankel1(n, kr) * np.cos(n * ph)
    out = -amplitude * np.exp(1j * wavenumber * x)
    out[outside] = amplitude * total
    return out


# ---- a dielectric cylinder ---------------------------------------------------------------------------------------
def dielectric_cylinder_coefficients(k0: float, radius: float, eps_r: complex,
                                     n_max: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The TMz series of a plane wave A exp(i k0 x) on a homogeneous dielectric cylinder r < a (relative
    permittivity eps_r, mu_r = 1; time convention exp(-i omega t)): Ez_total = A sum_n i^n e_n(r) exp(i n phi) with

        e_n = b_n J_n(k1 r) / J_n(k1 a)         r < a,     k1 = k0 sqrt(eps_r),
        e_n = J_n(k0 r) + c_n H_n^(1)(k0 r)     r >= a,                                            (2)

    Ez and its normal derivative dEz/dr (so H_phi, with mu continuous) continuous on r = a give, with
    q_n = k1 J_n'(k1 a) / J_n(k1 a),

        c_n = (k0 J_n'(k0 a) - q_n J_n(k0 a)) / (q_n H_n(k0 a) - k0 H_n'(k0 a)),    b_n = J_n(k0 a) + c_n H_n(k0 a)

    (Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., 2012, sec. 11.5, there for exp(j omega t) with H^(2);
    Bohren & Huffman, *Absorption and Scattering of Light by Small Particles*, 1983, sec. 8.4 for the same series in
    optics).  eps_r = 1 gives c_n = 0; a lossy eps_r with |eps_r| -> infinity gives the PEC coefficients
    -J_n(k0 a) / H_n(k0 a); a real eps_r gives |c_n|^2 = -Re c_n (no absorption, the optical theorem term by term).

    Parameters
    ----------
    k0 : float
        Free-space wavenumber, rad/m (> 0).
    radius : float
        a, m (> 0).
    eps_r : float or complex
        Relative permittivity (Im eps_r >= 0 for a lossy medium in this convention).
    n_max : int, optional
        The last order kept (default: where |J_n(k0 a)| falls below 1e-17 past n > k0 a; every later c_n and b_n is
        at most of that size, since J_n(k1 r) / J_n(k1 a) <= 1 roughly for r < a).

    Returns
    -------
    (c, b) : complex128 [N + 1] each, orders 0..N (the orders -n equal them: J_{-n} = (-1)^n J_n).  q_n and the
    interior ratio use the exponentially scaled J (``scipy.special.jve``), so a very lossy cylinder does not overflow.

    Raises
    ------
    ValueError
        For k0 <= 0, radius <= 0 or eps_r = 0.
    """
    if not (k0 > 0 and radius > 0) or eps_r == 0:
        raise ValueError(f"k0 (rad/m) and radius (m) must be > 0 and eps_r != 0, got {k0!r}, {radius!r}, {eps_r!r}")
    k1 = k0 * np.sqrt(complex(eps_r))
    x0, x1 = k0 * radius, k1 * radius
    if n_max is None:
        n = np.arange(int(x0) + 2000)
        small = np.nonzero((np.abs(special.jv(n, x0)) < 1e-17) & (n > x0))[0]
        n_max = int(small[0]) if small.size else int(n[-1])
    n = np.arange(n_max + 1)
    j0, j0p, h0, h0p = special.jv(n, x0), special.jvp(n, x0), special.hankel1(n, x0), special.h1vp(n, x0)
    j1 = special.jve(np.arange(n_max + 2), x1)  # J_n(k1 a) exp(-|Im k1 a|), n = 0..N+1
    j1m = np.concatenate([[-j1[1]], j1[:-2]])  # J_{n-1} (J_{-1} = -J_1)
    q = k1 * 0.5 * (j1m - j1[1:]) / j1[:-1]  # J_n' = (J_{n-1} - J_{n+1}) / 2 (Abramowitz & Stegun 9.1.27)
    c = (k0 * j0p - q * j0) / (q * h0 - k0 * h0p)
    return c.astype(np.complex128), (j0 + c * h0).astype(np.complex128)


def dielectric_cylinder_total(x, y, k0: float, radius: float, eps_r: complex, amplitude: float = 1.0) -> np.ndarray:
    """The total field Ez of (2) at SI points (x, y) in m (arrays of one shape), complex128 of that shape, in the unit
    of ``amplitude`` (V/m).  The scattered field is this minus A exp(i k0 x), inside the cylinder too.

    Raises
    ------
    ValueError
        As :func:`dielectric_cylinder_coefficients`.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    c, b = dielectric_cylinder_coefficients(k0, radius, eps_r)
    k1 = k0 * np.sqrt(complex(eps_r))
    r, phi = np.hypot(x, y), np.arctan2(y, x)
    inside = r < radius
    out = np.zeros(x.shape, dtype=np.complex128)
    decay = np.exp(abs(k1.imag) * (r[inside] - radius))  # the scaling of jve between r and a
    for n in range(c.size):
        w = (1.0 if n == 0 else 2.0) * (1j**n) * np.cos(n * phi)  # orders n and -n together
        ratio = special.jve(n, k1 * r[inside]) / special.jve(n, k1 * radius) * decay
        out[inside] += w[inside] * b[n] * ratio
        out[~inside] += w[~inside] * c[n] * special.hankel1(n, k0 * r[~inside])
    out[~inside] += np.exp(1j * k0 * x[~inside])  # the incident part of (2) outside, summed exactly
    return amplitude * out
