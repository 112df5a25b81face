"""Closed-form field of the Gaussian line source (TEz, vacuum).

Problem (SI units; same equations and source as :mod:`elecsolver.reference.fdtd`)::

    eps0 dEx/dt =  dHz/dy
    eps0 dEy/dt = -dHz/dx
    mu0  dHz/dt =  dEx/dy - dEy/dx + J,      J = A g(t) s(x - x0, y - y0)

with ``g(t) = exp(-((t - t0)/tau)^2)`` and the unit-area Gaussian
``s = exp(-r^2/(2 sigma^2))/(2 pi sigma^2)``; the medium is unbounded and the
fields vanish before the pulse.

Derivation and signs (``e^{j omega t}`` convention, ``F(omega) = int f(t) e^{-j omega t} dt``)
--------------------------------------------------------------------------------------
Transforming, ``j omega eps0 Ex = dHz/dy``, ``j omega eps0 Ey = -dHz/dx`` and
``j omega mu0 Hz = dEx/dy - dEy/dx + J_hat``.  Eliminating ``E``::

    (lap + k^2) Hz_hat = -j omega eps0 J_hat,     k = omega / c.

The outgoing (radiation-condition) Green's function with ``(lap + k^2) G = delta``
is ``G = (j/4) H0^(2)(k r)``: for ``k r >> 1`` it behaves as ``e^{-j k r}``, i.e.
``e^{j(omega t - k r)}`` travels outwards, and for ``k r << 1``,
``H0^(2)(z) ~ -j (2/pi) ln z`` so ``G ~ (1/(2 pi)) ln r``, the static Green's
function of ``lap G = delta``.  (Equivalently ``(1/(4j)) H0^(2)(kr)`` for
``-delta``, the form in Harrington and in Balanis, *Advanced Engineering
Electromagnetics*, Ch. 11, infinite line-source cylindrical-wave radiation.)  For a point
(line) source ``J_hat = A G(omega) delta(r)``::

    Hz_hat = (j/4) H0^(2)(k r) (-j omega eps0) A G(omega) = (omega eps0 / 4) H0^(2)(k r) A G(omega).

For the Gaussian profile and ``r`` outside the source, the addition theorem
``H0(k|r - r'|) = sum_m J_m(k r') H_m(k r) e^{j m (phi - phi')}`` (``r' < r``)
leaves only ``m = 0`` for a circularly symmetric profile, and
``int s(r') J0(k r') dA' = exp(-k^2 sigma^2 / 2)`` (the 2D Fourier transform of
``s``), so the point-source result is multiplied by the form factor
``exp(-k^2 sigma^2/2)``; the neglected part is of order of the profile mass
beyond ``r``, ``exp(-r^2/(2 sigma^2))`` (3.7e-6 at ``r = 5 sigma``).

The electric field follows from ``E = (1/(j omega eps0)) (dHz/dy, -dHz/dx)`` and
``d/dr H0^(2)(k r) = -k H1^(2)(k r)``: ``E_r = 0`` and::

    E_phi_hat = -(1/(j omega eps0)) dHz_hat/dr = -(j k / 4) H1^(2)(k r) A G(omega) exp(-k^2 sigma^2/2)
    Ex = -E_phi sin(phi),   Ey = E_phi cos(phi),    phi = atan2(y - y0, x - x0).

Checks of the signs: in the far field ``E_phi_hat / Hz_hat -> +eta0`` so the
Poynting vector ``E_phi phi_hat x Hz z_hat = E_phi Hz r_hat`` points outwards;
and ``E_phi_hat(omega -> 0) = A G(0)/(2 pi r)`` agrees with the time integral
of Faraday's law, ``2 pi r int E_phi dt = int int J dA dt = A G(0)`` (the
circulation of ``int E dt`` equals the integrated source).

Time domain: with ``G(omega) = tau sqrt(pi) exp(-(omega tau)^2/4) exp(-j omega t0)``
(the transform of ``g``) and real fields, ``f(t) = (1/pi) Re int_0^inf f_hat(omega)
e^{j omega t} d omega``, evaluated here by composite Gauss-Legendre quadrature
(panels geometrically refined towards ``omega = 0``, where ``omega H0^(2)`` has an
``omega ln omega`` behaviour) up to the frequency where ``|G|`` has fallen to
1e-16 of its peak.  The transform of ``g`` over all ``t`` differs from the
FDTD source, switched on at ``t = 0``, by ``g(0) = exp(-3.65^2) ~ 1.6e-6``.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scipy import special

from .fdtd import C0, EPS0, pulse_t0, pulse_tau
from .fdtd import _check_finite as _finite
from .fdtd import _check_positive_finite as _positive

__all__ = [
    "gaussian_pulse_spectrum",
    "line_source_frequency_domain",
    "line_source_time_domain",
]

logger = logging.getLogger(__name__)

_GL_NODES = 16
# Truncation of the inverse transform: |G(omega)| / G(0) = exp(-(omega tau)^2/4) <= 1e-16.
_SPECTRUM_CUTOFF = 1e-16
# Points closer than this many sigma to the source centre are outside the form-factor validity.
_MIN_DISTANCE_SIGMAS = 5.0
_CHUNK = 512


def gaussian_pulse_spectrum(omega, frequency: float) -> np.ndarray:
    """Fourier transform of the Gaussian pulse ``g`` (``e^{-j omega t}`` kernel).

    ``G(omega) = int g(t) e^{-j omega t} dt = tau sqrt(pi) exp(-(omega tau)^2/4) exp(-j omega t0)``
    with ``tau``, ``t0`` from :func:`elecsolver.reference.fdtd.pulse_tau` /
    :func:`~elecsolver.reference.fdtd.pulse_t0`.

    Parameters
    ----------
    omega : array_like of float
        Angular frequencies [rad/s], any shape.
    frequency : float
        Pulse frequency ``f`` [Hz], > 0.

    Returns
    -------
    numpy.ndarray of complex128
        ``G(omega)`` [s], same shape as ``omega``.

    Raises
    ------
    ValueError
        If ``frequency`` is not a finite positive number.
    """
    tau = pulse_tau(frequency)
    t0 = pulse_t0(frequency)
    omega = np.asarray(omega, dtype=np.float64)
    return tau * math.sqrt(math.pi) * np.exp(-((omega * tau) ** 2) / 4.0) * np.exp(-1j * omega * t0)


def line_source_frequency_domain(omega, r, sigma: float, amplitude: float = 1.0) -> dict[str, np.ndarray]:
    """Frequency-domain field of the Gaussian line source per unit source spectrum.

    For ``J_hat(x, y, omega) = amplitude * s(r) * 1`` (unit temporal spectrum),
    outside the source (see the module docstring for the derivation and signs)::

        Hz_hat   =  amplitude (omega eps0 / 4) H0^(2)(k r) exp(-k^2 sigma^2 / 2)
        Ephi_hat = -amplitude (j k / 4)        H1^(2)(k r) exp(-k^2 sigma^2 / 2),   E_r = 0

    with ``k = omega / c`` (Green's function ``(j/4) H0^(2)(k r)`` of
    ``(lap + k^2) G = delta``, cf. Balanis, *Advanced Engineering
    Electromagnetics*, Ch. 11, line-source radiation).  At ``omega = 0`` the
    limits ``Hz_hat = 0`` and ``Ephi_hat = amplitude / (2 pi r)`` are returned.
    Multiply by the pulse spectrum :func:`gaussian_pulse_spectrum` to get the
    transform of the time-domain field.

    Parameters
    ----------
    omega : array_like of float
        Angular frequency [rad/s], >= 0; broadcast against ``r``.
    r : array_like of float
        Distance from the source centre [m], > 0.  The form-factor result is
        accurate (relative error ~ ``exp(-r^2/(2 sigma^2))``) for ``r`` of several
        ``sigma`` and beyond.
    sigma : float
        Gaussian source width [m], > 0.
    amplitude : float, optional
        Source amplitude ``A`` [V].  Default 1.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"Hz"`` [A/m per (1/s)] and ``"Ephi"`` [V/m per (1/s)], complex128 of the
        broadcast shape of ``omega`` and ``r``.

    Raises
    ------
    ValueError
        If ``sigma`` is not positive, ``amplitude`` not finite, any ``omega < 0``,
        any ``r <= 0`` or non-finite inputs.
    """
    sigma = _positive(sigma, "sigma")
    amplitude = _finite(amplitude, "amplitude")
    omega = np.asarray(omega, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(r))):
        raise ValueError("omega and r must be finite")
    if np.any(omega < 0.0):
        raise ValueError(
            "omega must be >= 0 (use the real-field symmetry f_hat(-omega) = conj(f_hat(omega)))"
        )
    if np.any(r <= 0.0):
        raise ValueError("r must be > 0: the line-source field is singular at the source centre")
    omega, r = np.broadcast_arrays(omega, r)
    k = omega / C0
    kr = k * r
    form = amplitude * np.exp(-0.5 * (k * sigma) ** 2)
    zero = kr == 0.0
    kr_safe = np.where(zero, 1.0, kr)
    hz = (omega * EPS0 / 4.0) * special.hankel2(0, kr_safe) * form
    ephi = -(1j * k / 4.0) * special.hankel2(1, kr_safe) * form
    hz = np.where(zero, 0.0, hz)
    ephi = np.where(zero, amplitude / (2.0 * math.pi * r), ephi)
    return {"Hz": hz.astype(np.complex128), "Ephi": ephi.astype(np.complex128)}


def _quadrature(omega_max: float, span: float, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes/weights on [0, omega_max].

    Uniform panels with phase ``omega * span`` below ~2 rad per panel, and the
    first panel split geometrically (ratio 1/2, 30 levels) towards 0.
    """
    n_panels = max(32, math.ceil(omega_max * span / 2.0))
    edges = np.linspace(0.0, omega_max, n_panels + 1)
    first = edges[1]
    geo = first * 0.5 ** np.arange(30, -1, -1)
    edges = np.concatenate(([0.0], geo, edges[2:]))
    xg, wg = np.polynomial.legendre.leggauss(n_nodes)
    a, b = edges[:-1, None], edges[1:, None]
    nodes = 0.5 * (b - a) * xg[None, :] + 0.5 * (a + b)
    weights = 0.5 * (b - a) * wg[None, :]
    return nodes.ravel(), weights.ravel()


def line_source_time_domain(
    x,
    y,
    t,
    *,
    amplitude: float = 1.0,
    frequency: float = 1e9,
    sigma: float = 7.5e-3,
    x0: float = 0.4975,
    y0: float = 0.4975,
    near_source: str = "raise",
    n_nodes: int = _GL_NODES,
) -> dict[str, np.ndarray]:
    """Time-domain field of the Gaussian-pulsed Gaussian line source (closed form + quadrature).

    ``f(t) = (1/pi) Re int_0^inf f_hat(omega) G(omega) e^{j omega t} d omega`` for
    ``f`` in ``Hz``, ``E_phi``, with ``f_hat`` from
    :func:`line_source_frequency_domain` and ``G`` from
    :func:`gaussian_pulse_spectrum`; ``Ex = -E_phi sin(phi)``, ``Ey = E_phi cos(phi)``.
    The quadrature (see the module docstring) is converged to ~1e-10 relative.
    This is the unbounded-medium solution the FDTD of
    :func:`elecsolver.reference.fdtd.solve_te_point_source` approximates.

    Parameters
    ----------
    x, y : array_like of float
        Observation point coordinates [m]; broadcast together to the point shape ``P``
        (pass ``numpy.meshgrid`` output for a grid).
    t : array_like of float, shape (nt,)
        Times [s] (1-D; a scalar is treated as shape (1,)).
    amplitude : float, optional
        ``A`` [V].  Default 1.
    frequency : float, optional
        Pulse frequency ``f`` [Hz], > 0.  Default 1e9.
    sigma : float, optional
        Source width [m], > 0.  Default 7.5e-3.
    x0, y0 : float, optional
        Source centre [m].  Default 0.4975.
    near_source : {"raise", "nan"}, optional
        What to do with points closer than ``5 sigma`` to the source centre, where
        the form-factor approximation is not valid: raise ``ValueError``
        (default) or return NaN there.
    n_nodes : int, optional
        Gauss-Legendre nodes per panel (>= 4).  Default 16.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"Hz"`` [A/m], ``"Ex"``, ``"Ey"`` [V/m], float64 of shape ``(nt,) + P``.

    Raises
    ------
    ValueError
        For non-positive ``frequency``/``sigma``, non-finite inputs, ``t`` not 1-D,
        an unknown ``near_source``, ``n_nodes < 4``, or (with
        ``near_source="raise"``) points within ``5 sigma`` of the source.
    """
    amplitude = _finite(amplitude, "amplitude")
    frequency = _positive(frequency, "frequency")
    sigma = _positive(sigma, "sigma")
    x0 = _finite(x0, "x0")
    y0 = _finite(y0, "y0")
    if near_source not in ("raise", "nan"):
        raise ValueError(f"near_source must be 'raise' or 'nan', got {near_source!r}")
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 4:
        raise ValueError(f"n_nodes must be an integer >= 4, got {n_nodes!r}")
    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if t.ndim != 1:
        raise ValueError(f"t must be 1-D [s], got shape {t.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.isfinite(t))):
        raise ValueError("x, y and t must be finite")
    pshape = x.shape
    dxp = (x - x0).ravel()
    dyp = (y - y0).ravel()
    r = np.hypot(dxp, dyp)
    near = r < _MIN_DISTANCE_SIGMAS * sigma
    if np.any(near) and near_source == "raise":
        raise ValueError(
            f"{int(near.sum())} point(s) lie within 5 sigma = {_MIN_DISTANCE_SIGMAS * sigma:.4g} m of the "
            f"source, where the closed form is not valid; remove them or pass near_source='nan'"
        )

    tau = pulse_tau(frequency)
    t0 = pulse_t0(frequency)
    omega_max = 2.0 * math.sqrt(math.log(1.0 / _SPECTRUM_CUTOFF)) / tau
    far = ~near
    r_far = r[far]
    span = float(np.max(np.abs(t - t0))) + (float(r_far.max()) / C0 if r_far.size else 0.0)
    omega, weights = _quadrature(omega_max, max(span, tau), int(n_nodes))
    # (1/pi) * weight * G(omega) * exp(j omega t): shape (nt, n_omega)
    spec = weights * gaussian_pulse_spectrum(omega, frequency) / math.pi
    kernel = np.exp(1j * np.outer(t, omega)) * spec[None, :]

    n_pts = r.size
    hz = np.full((t.size, n_pts), np.nan)
    ephi = np.full((t.size, n_pts), np.nan)
    if r_far.size:
        r_unique, inverse = np.unique(r_far, return_inverse=True)
        hz_u = np.empty((t.size, r_unique.size))
        ephi_u = np.empty((t.size, r_unique.size))
        for start in range(0, r_unique.size, _CHUNK):
            rr = r_unique[start : start + _CHUNK]
            fd = line_source_frequency_domain(omega[:, None], rr[None, :], sigma, amplitude)
            hz_u[:, start : start + rr.size] = (kernel @ fd["Hz"]).real
            ephi_u[:, start : start + rr.size] = (kernel @ fd["Ephi"]).real
        hz[:, far] = hz_u[:, inverse.ravel()]
        ephi[:, far] = ephi_u[:, inverse.ravel()]
    with np.errstate(invalid="ignore", divide="ignore"):
        sin_phi = np.where(r > 0, dyp / np.where(r > 0, r, 1.0), 0.0)
        cos_phi = np.where(r > 0, dxp / np.where(r > 0, r, 1.0), 0.0)
    out_shape = (t.size,) + pshape
    return {
        "Hz": hz.reshape(out_shape),
        "Ex": (-ephi * sin_phi[None, :]).reshape(out_shape),
        "Ey": (ephi * cos_phi[None, :]).reshape(out_shape),
    }
