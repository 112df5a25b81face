"""The time-harmonic field of a Gaussian-smoothed line source in free space, and its quasi-static near field.

Time convention exp(-i omega t).  The outgoing solution of -lap u - k^2 u = delta(rho) in the plane is the
Green's function G(rho) = (i/4) H0^(1)(k rho) (Chew, *Waves and Fields in Inhomogeneous Media*, 1990, eq.
2.2.11; Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., 2012, eq. 11-10 in the exp(j omega t)
convention with H^(2)).  For the smoothed source g(rho) = exp(-rho^2 / (2 sigma^2)) / (2 pi sigma^2) (integral 1)
the field is the convolution u = G * g.  Graf's addition theorem (Abramowitz & Stegun 9.1.79) keeps only its
n = 0 term for a radial g:

    u(rho) = (i/4) [ H0(k rho) A(rho) + J0(k rho) B(rho) ],                                           (1)
    A(rho) = int_0^rho g(r) J0(k r) 2 pi r dr,      B(rho) = int_rho^inf g(r) H0(k r) 2 pi r dr.

Beyond rho = 10 sigma, B < 1e-20 and A equals the Hankel transform of the Gaussian, exp(-(k sigma)^2 / 2),
to 1e-22, so u = (i/4) exp(-(k sigma)^2 / 2) H0(k rho) there; nearer, A and B are integrated by adaptive
quadrature (scipy.integrate.quad_vec).

The electric line current I (A) along z drives -lap Ez - k^2 Ez = i omega mu0 I g, so Ez = i omega mu0 I u
(-(omega mu0 I / 4) H0(k rho) for sigma -> 0).

The quasi-static near field of the smoothed source is the solution of -lap phi = g,

    phi(rho) = -(1 / 4 pi) [ ln(k^2 sigma^2 / 2) + gamma + Ein(rho^2 / (2 sigma^2)) ],                 (2)

with Ein(q) = int_0^q (1 - exp(-t)) / t dt = E1(q) + ln q + gamma (A & S 5.1.40), an entire function; the
constant makes phi equal the real part of G to O((k rho)^2 ln(k rho)) for sigma << rho << 1/k.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import integrate, special

__all__ = ["EIN_SERIES_MAX", "ein", "ein_derivatives", "gaussian_line_source", "line_source_near_field"]

EULER_GAMMA = 0.5772156649015329
EIN_SERIES_MAX = 4.0  # Ein by its series up to q = 4, by ln q + gamma + E1(q) beyond
_EIN_TERMS = 40  # the series' terms below q = 4 (the last is 4^40 / 40! / 40 < 1e-26; the largest, 10.4, costs 1e-15)
_E1_DEPTH = 40  # depth of E1's continued fraction (relative error < 1e-15 for q >= 3)
_FAR = 10.0  # rho / sigma beyond which (1) is the closed form (i/4) exp(-(k sigma)^2/2) H0(k rho)


def ein(q: torch.Tensor) -> torch.Tensor:
    """Ein(q) = int_0^q (1 - exp(-s)) / s ds for q >= 0, a differentiable torch function of the same shape and
    dtype (evaluated in float64 to about 1e-15, and so are its derivatives by autograd or forward-mode AD).

    Up to q = 4 the series sum_{n >= 1} (-1)^(n+1) q^n / (n n!) (A & S 5.1.40); beyond, ln q + gamma + E1(q)
    (A & S 5.1.39) with E1(q) = exp(-q) / (q + 1 - 1 / (q + 3 - 4 / (q + 5 - ...))) (the even part of A & S
    5.1.22), summed from depth 40 backwards."""
    q64 = q.double()
    qs = torch.clamp(q64, max=EIN_SERIES_MAX)
    term, total = torch.ones_like(qs), torch.zeros_like(qs)
    for n in range(1, _EIN_TERMS + 1):
        term = term * (-qs) / n  # (-q)^n / n!
        total = total - term / n
    qf = torch.clamp(q64, min=EIN_SERIES_MAX)
    frac = qf + 2 * _E1_DEPTH + 1
    for n in range(_E1_DEPTH, 0, -1):
        frac = qf + (2 * n - 1) - n * n / frac
    far = torch.log(qf) + EULER_GAMMA + torch.exp(-qf) / frac
    return torch.where(q64 > EIN_SERIES_MAX, far, total).to(q.dtype)


def ein_derivatives(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Ein'(q) = (1 - exp(-q)) / q and Ein''(q) = (exp(-q) (1 + q) - 1) / q^2 for q >= 0, tensors of q's shape and
    dtype (Taylor series below q = 0.05, where the closed forms cancel)."""
    small = q < 0.05
    qs = torch.where(small, torch.ones_like(q), q)
    d1 = -torch.expm1(-qs) / qs
    d2 = (torch.exp(-qs) * (1 + qs) - 1) / qs**2
    qt = torch.where(small, q, torch.zeros_like(q))
    s1, s2, fact = torch.zeros_like(q), torch.zeros_like(q), 1.0
    for n in range(10):  # Ein' = sum_n (-q)^n / (n+1)!
        fact *= n + 1
        s1 = s1 + (-qt) ** n / fact
        if n >= 1:
            s2 = s2 + n * (-1) ** n * qt ** (n - 1) / fact
    return torch.where(small, s1, d1), torch.where(small, s2, d2)


def line_source_near_field(rho2: torch.Tensor, wavenumber: float, sigma: float) -> torch.Tensor:
    """phi of (2) at squared distances rho^2 (m^2) from the source, a differentiable torch function [N]
    (dimensionless, the potential of a unit source; -lap phi = g in 1/m^2)."""
    return -(math.log(wavenumber**2 * sigma**2 / 2) + EULER_GAMMA + ein(rho2 / (2 * sigma**2))) / (4 * math.pi)


def gaussian_line_source(x, y, wavenumber: float, sigma: float, x0: float = 0.0, y0: float = 0.0) -> np.ndarray:
    """u of (1) at SI points (x, y) in m (arrays of one shape) for a source at (x0, y0): complex128 of that shape,
    in 1/(unit of the source strength) (multiply by i omega mu0 I for Ez in V/m).

    Raises
    ------
    ValueError
        For a non-positive wavenumber (rad/m) or width (m).
    """
    if not (wavenumber > 0 and sigma > 0):
        raise ValueError(f"wavenumber (rad/m) and sigma (m) must be > 0, got {wavenumber!r}, {sigma!r}")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rho = np.hypot(x - x0, y - y0)
    ks = wavenumber * sigma
    out = np.empty(rho.shape, dtype=np.complex128)
    far = rho >= _FAR * sigma
    out[far] = 0.25j * math.exp(-ks**2 / 2) * special.hankel1(0, wavenumber * rho[far])
    if (~far).any():
        near, where = np.unique(rho[~far] / sigma, return_inverse=True)  # rho / sigma
        top = 2 * _FAR  # the Gaussian is below exp(-200) beyond

        def a_of(s):  # A(rho) with r = s rho, s in [0, 1]; t e^{-t^2/2} J0(k sigma t) dt, t = r / sigma
            t = s * near
            return near * t * np.exp(-t**2 / 2) * special.j0(ks * t)

        def b_of(s):  # B(rho) with t from rho / sigma to 2 * _FAR
            t = near + s * (top - near)
            h = t * np.exp(-t**2 / 2) * (top - near)
            with np.errstate(invalid="ignore", divide="ignore"):
                y0_ = np.where(t > 0, special.y0(ks * np.maximum(t, 1e-300)), 0.0)
            return np.concatenate([h * special.j0(ks * t), np.where(t > 0, h * y0_, 0.0)])

        a = integrate.quad_vec(a_of, 0.0, 1.0, epsabs=1e-14, epsrel=1e-12)[0]
        b = integrate.quad_vec(b_of, 0.0, 1.0, epsabs=1e-14, epsrel=1e-12, points=[1e-6, 1e-3])[0]
        b = b[: near.size] + 1j * b[near.size:]
        kr = ks * near
        u = 0.25j * (special.hankel1(0, np.maximum(kr, 1e-300)) * a + special.j0(kr) * b)
        u[near == 0] = 0.25j * b[near == 0]  # A(0) = 0 and H0 A -> 0 as rho -> 0 (A ~ rho^2, H0 ~ ln rho)
        out[~far] = u[where]
    return out
