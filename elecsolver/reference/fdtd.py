"""Reference 2D TEz Yee FDTD solvers (vectorised numpy, float64).

This module produces reference data for the physics-informed networks of
``elecsolver``: the transverse-electric (TEz: ``Ex``, ``Ey``, ``Hz``) field of a
Gaussian-pulsed, Gaussian-profiled line source in vacuum, and the standing TE_mn
modes of a perfectly conducting (PEC) rectangle used to verify the scheme.

Equations (SI units, vacuum, sign of the source term as in MindSpore Elec)::

    eps0 dEx/dt =  dHz/dy
    eps0 dEy/dt = -dHz/dx
    mu0  dHz/dt =  dEx/dy - dEy/dx + J(x, y, t)

``J`` [V/m^2] plays the role of ``-M_z`` in the textbook convention, where ``M`` is
a magnetic current density (Taflove & Hagness, *Computational Electrodynamics*,
3rd ed., Ch. 3: Sec. 3.3 reduces Maxwell's curl equations with electric and
magnetic current sources to the 2D TEz mode, Sec. 3.6 gives the Yee
finite-difference expressions, including the 2D case).  The source used
throughout is::

    J(x, y, t) = A g(t) s(x, y)
    g(t) = exp(-((t - t0)/tau)^2),   tau = sqrt(2.3)/(pi f),   t0 = 3.65 tau
    s(x, y) = exp(-r^2/(2 sigma^2)) / (2 pi sigma^2)      [1/m^2]

Discretisation (Taflove & Hagness, Ch. 3, "The Yee algorithm"):

* square cells ``dx = dy``; ``Ex`` at ``(i+1/2, j)``, ``Ey`` at ``(i, j+1/2)``,
  ``Hz`` at ``(i+1/2, j+1/2)`` (grid node ``(i, j)`` at ``(x_min + i dx, y_min + j dx)``);
* ``E`` at integer time steps ``n dt``, ``Hz`` at half steps ``(n+1/2) dt``
  (leapfrog in time, Ch. 3); the source enters the ``Hz`` update from
  ``n-1/2`` to ``n+1/2`` sampled at its time centre ``t_n`` and at the ``Hz``
  positions, which keeps the scheme second order in time and space;
* the 2D stability bound for square cells is ``c dt/dx <= 1/sqrt(2)`` (Taflove &
  Hagness Ch. 4, numerical stability of the Yee algorithm); we require the
  Courant number to be strictly below it.

Free space for the point-source problem is emulated by a PEC-terminated buffer
(no PML): the buffer thickness on each side is chosen from the geometry so that
the shortest path source -> outer wall -> output window is longer than
``c t_end`` plus a margin, hence by causality nothing reflected can reach the
output window before the last output time (image principle for a PEC wall:
the reflection is the field of a mirror source; the numerical scheme cannot
propagate anything faster than one cell per step, and the precursor beyond the light
cone is negligible with the margin used; checked in the tests against a
thicker buffer).

Functions
---------
pulse_tau, pulse_t0, gaussian_pulse, pulse_max_frequency
    The temporal source waveform and its helpers (thin wrappers of the shared
    :class:`elecsolver.physics.sources.GaussianPulse`, which the networks' sources use too).
gaussian_source_profile
    The spatial profile ``s(x, y)`` (the shared :class:`~elecsolver.physics.sources.GaussianProfile`).
plan_te_point_source
    The grid (dx, dt, buffer, ...) that :func:`solve_te_point_source` will use.
solve_te_point_source
    Yee FDTD of the Gaussian line source, fields on the output grid.
cavity_mode_te, solve_te_cavity
    Closed-form TE_mn standing wave of a PEC rectangle and its FDTD solution.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy import constants

from ..physics.sources import GaussianProfile, GaussianPulse

__all__ = [
    "BOUNDARIES",
    "C0",
    "COURANT_LIMIT_2D",
    "DEFAULT_CELLS_PER_WAVELENGTH",
    "DEFAULT_SPECTRUM_FLOOR",
    "EPS0",
    "MU0",
    "PointSourceGrid",
    "cavity_mode_te",
    "gaussian_pulse",
    "gaussian_source_profile",
    "plan_te_point_source",
    "pulse_max_frequency",
    "pulse_t0",
    "pulse_tau",
    "solve_te_cavity",
    "solve_te_point_source",
]

logger = logging.getLogger(__name__)

EPS0: float = constants.epsilon_0
"""Vacuum permittivity [F/m] (``scipy.constants.epsilon_0``)."""
MU0: float = constants.mu_0
"""Vacuum permeability [H/m] (``scipy.constants.mu_0``)."""
C0: float = constants.c
"""Speed of light in vacuum [m/s] (``scipy.constants.c``)."""

COURANT_LIMIT_2D: float = 1.0 / math.sqrt(2.0)
"""2D Yee stability limit on ``c dt / dx`` for square cells (Taflove & Hagness Ch. 4)."""

DEFAULT_CELLS_PER_WAVELENGTH: int = 40
"""Cells per shortest significant wavelength used for the default ``dx``."""

DEFAULT_SPECTRUM_FLOOR: float = 1e-4
"""Relative level of the pulse amplitude spectrum defining ``f_max`` for the default ``dx``."""

# Relative tolerance used when checking that spacings are integer multiples of each other.
_RATIO_TOL = 1e-6
# The source is truncated (set to zero) beyond this many sigma from its centre.
_SOURCE_TRUNCATION_SIGMAS = 8.0
# Source extent (in sigma) accounted for in the reflection-free buffer distance.
_SOURCE_EXTENT_SIGMAS = 6.0
# Extra cells added to the reflection-free buffer distance.
_BUFFER_MARGIN_CELLS = 10
# Refuse grids larger than this many Hz cells (about 2.4 GB of field arrays).
_MAX_CELLS = 100_000_000

BOUNDARIES: tuple[str, ...] = ("pec", "silver-muller")
"""Wall models of the Yee kernel: PEC (a reflection-free buffer emulates free space) or the first-order
Silver-Mueller absorbing condition (the padded box the PINN trains on)."""


# ---------------------------------------------------------------------------
# Source waveform and profile
# ---------------------------------------------------------------------------
def _check_positive_finite(value, name: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}; pass a positive value")
    return value


def _check_finite(value, name: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def _pulse(frequency: float) -> GaussianPulse:
    """The shared :class:`~elecsolver.physics.sources.GaussianPulse` of frequency ``f`` (checked first)."""
    return GaussianPulse(_check_positive_finite(frequency, "frequency"))


def pulse_tau(frequency: float) -> float:
    """Width parameter of the Gaussian pulse.

    Parameters
    ----------
    frequency : float
        Characteristic frequency ``f`` of the pulse [Hz], > 0.

    Returns
    -------
    float
        ``tau = sqrt(2.3) / (pi f)`` [s].  At ``f`` the amplitude spectrum
        ``exp(-(omega tau)^2/4)`` has fallen to ``exp(-2.3) ~ 0.1`` of its DC value.

    Raises
    ------
    ValueError
        If ``frequency`` is not a finite positive number.
    """
    return _pulse(frequency).tau


def pulse_t0(frequency: float) -> float:
    """Delay of the Gaussian pulse peak, ``t0 = 3.65 tau`` [s].

    With this delay ``g(0) = exp(-3.65^2) ~ 1.6e-6``, so switching the source on at
    ``t = 0`` from zero fields is a negligible perturbation.

    Parameters
    ----------
    frequency : float
        Characteristic frequency ``f`` [Hz], > 0.

    Returns
    -------
    float
        ``t0`` [s].

    Raises
    ------
    ValueError
        If ``frequency`` is not a finite positive number.
    """
    return _pulse(frequency).t0


def gaussian_pulse(t, frequency: float) -> np.ndarray:
    """Gaussian temporal waveform ``g(t) = exp(-((t - t0)/tau)^2)`` (dimensionless).

    Parameters
    ----------
    t : array_like of float
        Times [s], any shape.
    frequency : float
        Characteristic frequency ``f`` [Hz], > 0; see :func:`pulse_tau`,
        :func:`pulse_t0`.

    Returns
    -------
    numpy.ndarray of float64
        ``g(t)``, same shape as ``t``; peak value 1 at ``t = t0``.

    Raises
    ------
    ValueError
        If ``frequency`` is not a finite positive number.
    """
    return _pulse(frequency)(np.asarray(t, dtype=np.float64))


def pulse_max_frequency(frequency: float, floor: float = DEFAULT_SPECTRUM_FLOOR) -> float:
    """Frequency where the pulse amplitude spectrum falls to ``floor`` of its peak.

    The Fourier transform of ``g`` is ``G(omega) = tau sqrt(pi) exp(-(omega tau)^2/4)
    exp(-j omega t0)``, so ``|G(omega)|/|G(0)| = floor`` at
    ``omega tau = 2 sqrt(ln(1/floor))``.

    Parameters
    ----------
    frequency : float
        Characteristic frequency ``f`` [Hz], > 0.
    floor : float, optional
        Relative spectral level in (0, 1).  Default ``1e-4`` (gives ``f_max ~ 2.0 f``).

    Returns
    -------
    float
        ``f_max`` [Hz].

    Raises
    ------
    ValueError
        If ``frequency`` is not positive or ``floor`` is not in (0, 1).
    """
    tau = pulse_tau(frequency)
    floor = _check_positive_finite(floor, "floor")
    if floor >= 1.0:
        raise ValueError(f"floor must be in (0, 1), got {floor!r}")
    return 2.0 * math.sqrt(math.log(1.0 / floor)) / tau / (2.0 * math.pi)


def gaussian_source_profile(x, y, sigma: float, x0: float, y0: float) -> np.ndarray:
    """Normalised Gaussian spatial profile ``s = exp(-r^2/(2 sigma^2)) / (2 pi sigma^2)``.

    Parameters
    ----------
    x, y : array_like of float
        Coordinates [m]; broadcast against each other.
    sigma : float
        Standard deviation of the profile [m], > 0.
    x0, y0 : float
        Centre [m].

    Returns
    -------
    numpy.ndarray of float64
        ``s(x, y)`` [1/m^2], broadcast shape of ``x`` and ``y``; integrates to 1 over
        the plane.

    Raises
    ------
    ValueError
        If ``sigma`` is not a finite positive number or ``x0``/``y0`` are not finite.
    """
    sigma = _check_positive_finite(sigma, "sigma")
    x0 = _check_finite(x0, "x0")
    y0 = _check_finite(y0, "y0")
    return GaussianProfile((x0, y0), sigma)(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))


# ---------------------------------------------------------------------------
# Argument checking helpers
# ---------------------------------------------------------------------------
def _uniform_axis(values, name: str, min_len: int, unit: str) -> tuple[np.ndarray, float]:
    """Validate a 1-D strictly increasing uniform axis; return (array, spacing)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array [{unit}], got shape {arr.shape}")
    if arr.size < min_len:
        raise ValueError(f"{name} must have at least {min_len} point(s), got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values")
    if arr.size == 1:
        return arr, 0.0
    steps = np.diff(arr)
    if np.any(steps <= 0.0):
        raise ValueError(f"{name} must be strictly increasing")
    step = (arr[-1] - arr[0]) / (arr.size - 1)
    if np.max(np.abs(steps - step)) > _RATIO_TOL * step:
        raise ValueError(
            f"{name} must be uniformly spaced (max deviation of the spacing "
            f"{np.max(np.abs(steps - step)):.3e} {unit} from the mean {step:.6e} {unit}); "
            f"use numpy.linspace to build it"
        )
    return arr, float(step)


def _integer_ratio(numer: float, denom: float) -> int | None:
    """Return round(numer/denom) if it is an integer within tolerance, else None."""
    ratio = numer / denom
    k = round(ratio)
    if k < 1 or abs(ratio - k) > _RATIO_TOL * max(1.0, ratio):
        return None
    return k


def _check_courant(courant) -> float:
    courant = _check_positive_finite(courant, "courant")
    if courant >= COURANT_LIMIT_2D:
        raise ValueError(
            f"courant = {courant!r} must be below the 2D Yee stability limit 1/sqrt(2) = "
            f"{COURANT_LIMIT_2D:.6f}; pass e.g. courant=0.68"
        )
    return courant


def _time_stepping(t: np.ndarray, dt_out: float, dt_max: float) -> tuple[float, int, int]:
    """Choose dt so all output times are integer multiples of it.

    Returns (dt, steps_per_output, first_output_step).
    """
    if t.size == 1:
        if t[0] == 0.0:
            return dt_max, 1, 0
        unit = float(t[0])
    else:
        unit = dt_out
        if t[0] != 0.0 and _integer_ratio(float(t[0]), dt_out) is None:
            raise ValueError(
                f"t[0] = {t[0]!r} s must be 0 or an integer multiple of the output time step "
                f"{dt_out!r} s so that every output time falls on a time step; shift t"
            )
    steps = max(1, math.ceil(unit / dt_max * (1.0 - 1e-9)))
    dt = unit / steps
    first = round(float(t[0]) / dt)
    return dt, steps, first


# ---------------------------------------------------------------------------
# Yee kernel shared by the solvers
# ---------------------------------------------------------------------------
class _YeeTEz:
    """In-place leapfrog update of the TEz Yee fields on a rectangle closed by PEC or Silver-Mueller walls.

    Array layout is ``[y, x]``: ``Ex[j, i]`` at ``(i+1/2, j)`` with shape
    ``(ny+1, nx)``; ``Ey[j, i]`` at ``(i, j+1/2)`` with shape ``(ny, nx+1)``;
    ``Hz[j, i]`` at ``(i+1/2, j+1/2)`` with shape ``(ny, nx)``, where ``nx``, ``ny``
    are the numbers of cells.  The walls are the outermost grid lines, where the
    tangential ``Ex`` rows ``j = 0, ny`` and ``Ey`` columns ``i = 0, nx`` live.

    ``boundary="pec"``: those values are never updated and stay zero (Taflove &
    Hagness Ch. 3 Yee update equations with PEC terminations).
    ``boundary="silver-muller"``: the first-order absorbing condition
    ``E . tau = eta0 Hz`` (tau = z x n, n the outward normal; at x_min Ey = -eta0 Hz,
    at x_max Ey = eta0 Hz, at y_min Ex = eta0 Hz, at y_max Ex = -eta0 Hz), the
    condition the PINN's :class:`~elecsolver.physics.SilverMueller` imposes.  The wall
    value is updated on its half cell: e.g. at x_min,
    ``eps0 (dx/2) dEy/dt = -(Hz_{1/2} - Hz_wall)`` with ``Hz_wall = -Ey / eta0`` at the
    time centre, i.e. ``Ey^{n+1} (1 + C) = Ey^n (1 - C) - 2 dt/(eps0 dx) Hz_{1/2}``
    (C = c dt / dx); it reflects a plane wave arriving at angle q from the normal by
    (1 - cos q) / (1 + cos q) (Taflove & Hagness Ch. 6 on one-way boundary
    conditions; the discrete scheme adds O(dx^2)).
    """

    def __init__(self, nx: int, ny: int, dx: float, dt: float, boundary: str = "pec"):
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
        self.nx, self.ny, self.boundary = nx, ny, boundary
        self.Ex = np.zeros((ny + 1, nx))
        self.Ey = np.zeros((ny, nx + 1))
        self.Hz = np.zeros((ny, nx))
        # Coefficients of the discrete curls (square cells).
        self.ce = dt / (EPS0 * dx)
        self.ch = dt / (MU0 * dx)
        self.source_coeff = dt / MU0
        courant = C0 * dt / dx
        self._wall_keep, self._wall_h = (1 - courant) / (1 + courant), 2 * self.ce / (1 + courant)
        self._scratch = np.empty(nx * ny)

    def _buf(self, shape: tuple[int, int]) -> np.ndarray:
        return self._scratch[: shape[0] * shape[1]].reshape(shape)

    def update_h(self, source_slices=None, source_values=None) -> None:
        """Hz^{n-1/2} -> Hz^{n+1/2}: mu0 dHz/dt = dEx/dy - dEy/dx + J^n."""
        tmp = self._buf(self.Hz.shape)
        np.subtract(self.Ex[1:, :], self.Ex[:-1, :], out=tmp)
        np.subtract(tmp, self.Ey[:, 1:], out=tmp)
        np.add(tmp, self.Ey[:, :-1], out=tmp)
        tmp *= self.ch
        self.Hz += tmp
        if source_slices is not None:
            self.Hz[source_slices] += source_values

    def update_e(self) -> None:
        """E^n -> E^{n+1}: eps0 dEx/dt = dHz/dy, eps0 dEy/dt = -dHz/dx (and the walls, see the class)."""
        if self.boundary == "silver-muller":
            keep, gain, hz = self._wall_keep, self._wall_h, self.Hz
            self.Ey[:, 0] = keep * self.Ey[:, 0] - gain * hz[:, 0]
            self.Ey[:, -1] = keep * self.Ey[:, -1] + gain * hz[:, -1]
            self.Ex[0, :] = keep * self.Ex[0, :] + gain * hz[0, :]
            self.Ex[-1, :] = keep * self.Ex[-1, :] - gain * hz[-1, :]
        tmp = self._buf((self.ny - 1, self.nx))
        np.subtract(self.Hz[1:, :], self.Hz[:-1, :], out=tmp)
        tmp *= self.ce
        self.Ex[1:-1, :] += tmp
        tmp = self._buf((self.ny, self.nx - 1))
        np.subtract(self.Hz[:, 1:], self.Hz[:, :-1], out=tmp)
        tmp *= self.ce
        self.Ey[:, 1:-1] -= tmp


def _node_average_slices(i0: int, n: int, stride: int) -> tuple[slice, slice]:
    """Slices picking the staggered values at index (node-1) and (node) for n nodes."""
    stop = i0 + stride * (n - 1) + 1
    return slice(i0 - 1, stop - 1, stride), slice(i0, stop, stride)


# ---------------------------------------------------------------------------
# Point source
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PointSourceGrid:
    """Grid chosen by :func:`plan_te_point_source`.

    Attributes
    ----------
    dx : float
        Cell size [m] (square cells, ``dy = dx``).
    dt : float
        Time step [s].
    courant : float
        Actual Courant number ``c dt / dx`` (dimensionless).
    steps_per_output : int
        Number of time steps between consecutive output times.
    first_output_step : int
        Step index ``n`` of the first output time (``t[0] = n dt``).
    n_steps : int
        Index of the last output step (number of E updates performed).
    x_min, y_min : float
        Coordinates of grid node (0, 0) [m]; the PEC walls are at ``x_min``,
        ``x_min + nx_cells dx``, ``y_min`` and ``y_min + ny_cells dx``.
    nx_cells, ny_cells : int
        Number of cells in x and y.
    ix0, iy0 : int
        Grid node indices of the output point ``(x[0], y[0])``.
    stride_x, stride_y : int
        Output spacing in cells.
    buffer : tuple of float
        Distance [m] from the output window to the PEC walls: (left, right, bottom, top).
    reflection_free : bool
        True if no wall reflection can reach the output window before the last output time.
    """

    dx: float
    dt: float
    courant: float
    steps_per_output: int
    first_output_step: int
    n_steps: int
    x_min: float
    y_min: float
    nx_cells: int
    ny_cells: int
    ix0: int
    iy0: int
    stride_x: int
    stride_y: int
    buffer: tuple[float, float, float, float]
    reflection_free: bool


def _default_dx(hx: float, hy: float, limit: float) -> float:
    """Largest dx <= limit dividing both output spacings."""
    k = max(1, math.ceil(hx / limit * (1.0 - 1e-12)))
    for kk in range(k, k + 10_000):
        dx = hx / kk
        if _integer_ratio(hy, dx) is not None:
            return dx
    raise ValueError(
        f"cannot find a cell size dividing both output spacings {hx!r} m and {hy!r} m; "
        f"use commensurate x and y spacings or pass dx explicitly"
    )


def _buffer_sides(buffer) -> tuple[float, float, float, float]:
    """``buffer`` as (xmin, xmax, ymin, ymax) distances in m: one number for every side, or four."""
    try:
        sides = (float(buffer),) * 4 if np.ndim(buffer) == 0 else tuple(float(b) for b in buffer)
    except (TypeError, ValueError):
        sides = ()
    if len(sides) != 4 or not all(math.isfinite(b) and b >= 0.0 for b in sides):
        raise ValueError(f"buffer must be a finite distance >= 0 m, or four (xmin, xmax, ymin, ymax), or None; "
                         f"got {buffer!r}")
    return sides


def plan_te_point_source(
    *,
    frequency: float,
    sigma: float,
    x0: float,
    y0: float,
    x,
    y,
    t,
    dx: float | None = None,
    courant: float = 0.68,
    buffer: float | tuple[float, float, float, float] | None = None,
    boundary: str = "pec",
) -> PointSourceGrid:
    """Choose the Yee grid used by :func:`solve_te_point_source`.

    Cell size: if ``dx`` is None, the largest ``dx = h/k`` (``h`` the output spacing,
    ``k`` integer) with ``dx <= min(lambda_min / N, sigma / 2)``, where
    ``lambda_min = c / f_max``, ``f_max`` from :func:`pulse_max_frequency`
    (spectrum at 1e-4 of its peak, ``f_max ~ 2.0 f``) and
    ``N = DEFAULT_CELLS_PER_WAVELENGTH = 40``.  For the default problem
    (``f = 1 GHz``, ``sigma = 7.5 mm``, ``h = 10 mm``) this gives ``dx = 10/3 mm``.

    Time step: ``dt = dt_out / M`` with the smallest integer ``M`` such that
    ``c dt / dx <= courant``, so that every output time is a multiple of ``dt``.

    Buffer: unless given, per side the smallest whole number of cells such that
    ``(distance from the source edge, at 6 sigma, to the wall) + (distance from
    the wall to the output window) >= c t[-1] + 10 dx``, and such that the
    source (truncated at 8 sigma) lies inside the grid.  By the image principle
    for a PEC wall, this guarantees that no reflection reaches the window
    before ``t[-1]``.

    Parameters
    ----------
    frequency, sigma, x0, y0 : float
        Pulse frequency [Hz] (> 0), source width [m] (> 0), source centre [m].
    x, y : array_like of float, shape (nx,), (ny,)
        Output coordinates [m], uniform, strictly increasing, at least 2 points.
    t : array_like of float, shape (nt,)
        Output times [s], uniform, strictly increasing, ``t[0] >= 0`` and ``t[0]``
        an integer multiple of the output step.
    dx : float, optional
        Cell size [m]; must divide both output spacings.
    courant : float, optional
        Upper bound on ``c dt / dx``, in (0, 1/sqrt(2)).  Default 0.68.
    buffer : float or sequence of 4 float, optional
        Distance [m] from the output window to the walls on all four sides, or per
        side as (xmin, xmax, ymin, ymax) (rounded up to whole cells).  Default:
        computed as above.
    boundary : {"pec", "silver-muller"}, optional
        The walls' model (see :class:`_YeeTEz`); "silver-muller" needs ``buffer`` (the
        padding of the box) and never warns of wall reflections (they are the point).

    Returns
    -------
    PointSourceGrid

    Raises
    ------
    ValueError
        For non-positive ``frequency``/``sigma``/``dx``, ``courant`` outside
        (0, 1/sqrt(2)), non-uniform or non-increasing axes, ``t[0] < 0``, ``dx``
        not dividing the output spacing, a negative ``buffer``, a ``buffer`` too
        small to contain the source, or a grid above 1e8 cells.
    """
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    if boundary != "pec" and buffer is None:
        raise ValueError(f"boundary={boundary!r} needs buffer: the distance [m] from the output window to the walls")
    frequency = _check_positive_finite(frequency, "frequency")
    sigma = _check_positive_finite(sigma, "sigma")
    x0 = _check_finite(x0, "x0")
    y0 = _check_finite(y0, "y0")
    courant = _check_courant(courant)
    x, hx = _uniform_axis(x, "x", 2, "m")
    y, hy = _uniform_axis(y, "y", 2, "m")
    t, ht = _uniform_axis(t, "t", 1, "s")
    if t[0] < 0.0:
        raise ValueError(f"t[0] = {t[0]!r} s must be >= 0 (fields are zero at t = 0)")

    if dx is None:
        lam_min = C0 / pulse_max_frequency(frequency)
        limit = min(lam_min / DEFAULT_CELLS_PER_WAVELENGTH, sigma / 2.0)
        dx = _default_dx(hx, hy, limit)
    else:
        dx = _check_positive_finite(dx, "dx")
    stride_x = _integer_ratio(hx, dx)
    stride_y = _integer_ratio(hy, dx)
    if stride_x is None or stride_y is None:
        raise ValueError(
            f"dx = {dx!r} m must divide the output spacings (x: {hx!r} m, y: {hy!r} m) "
            f"so that output points fall on grid nodes; pass e.g. dx = {hx}/k for an integer k"
        )
    if dx > sigma:
        logger.warning("dx = %.3e m exceeds sigma = %.3e m: the source profile is under-resolved", dx, sigma)

    dt_max = courant * dx / C0
    dt, steps_per_output, first = _time_stepping(t, ht, dt_max)
    n_steps = first + steps_per_output * (t.size - 1)
    t_end = float(t[-1])

    x_lo, x_hi, y_lo, y_hi = float(x[0]), float(x[-1]), float(y[0]), float(y[-1])
    src_in = _SOURCE_TRUNCATION_SIGMAS * sigma
    if buffer is None:
        path = C0 * t_end + _BUFFER_MARGIN_CELLS * dx
        ext = _SOURCE_EXTENT_SIGMAS * sigma
        wall_l = min(x_lo - 2 * dx, x0 - src_in - dx, 0.5 * (x0 - ext + x_lo - path))
        wall_r = max(x_hi + 2 * dx, x0 + src_in + dx, 0.5 * (x0 + ext + x_hi + path))
        wall_b = min(y_lo - 2 * dx, y0 - src_in - dx, 0.5 * (y0 - ext + y_lo - path))
        wall_t = max(y_hi + 2 * dx, y0 + src_in + dx, 0.5 * (y0 + ext + y_hi + path))
        n_l = math.ceil((x_lo - wall_l) / dx - 1e-9)
        n_r = math.ceil((wall_r - x_hi) / dx - 1e-9)
        n_b = math.ceil((y_lo - wall_b) / dx - 1e-9)
        n_t = math.ceil((wall_t - y_hi) / dx - 1e-9)
    else:
        sides = _buffer_sides(buffer)
        n_l, n_r, n_b, n_t = (max(1, math.ceil(b / dx - 1e-9)) for b in sides)

    nx_cells = n_l + stride_x * (x.size - 1) + n_r
    ny_cells = n_b + stride_y * (y.size - 1) + n_t
    x_min = x_lo - n_l * dx
    y_min = y_lo - n_b * dx
    x_max = x_min + nx_cells * dx
    y_max = y_min + ny_cells * dx
    if x0 - src_in < x_min or x0 + src_in > x_max or y0 - src_in < y_min or y0 + src_in > y_max:
        raise ValueError(
            f"the source (centre ({x0}, {y0}) m, 8 sigma = {src_in} m) does not fit in the grid "
            f"[{x_min:.4f}, {x_max:.4f}] x [{y_min:.4f}, {y_max:.4f}] m; increase buffer or pass buffer=None"
        )
    if nx_cells * ny_cells > _MAX_CELLS:
        raise ValueError(
            f"the grid would have {nx_cells} x {ny_cells} cells (> {_MAX_CELLS}); increase dx, "
            f"reduce t[-1] or the buffer"
        )
    # Shortest source -> wall -> window path over the four walls (image principle).
    ext = _SOURCE_EXTENT_SIGMAS * sigma
    shortest = min(
        (x0 - ext - x_min) + (x_lo - x_min),
        (x_max - x0 - ext) + (x_max - x_hi),
        (y0 - ext - y_min) + (y_lo - y_min),
        (y_max - y0 - ext) + (y_max - y_hi),
    )
    reflection_free = shortest >= C0 * t_end
    if not reflection_free and boundary == "pec":
        logger.warning(
            "buffer too thin: wall reflections reach the output window after %.3e s < t[-1] = %.3e s",
            shortest / C0,
            t_end,
        )
    return PointSourceGrid(
        dx=dx,
        dt=dt,
        courant=C0 * dt / dx,
        steps_per_output=steps_per_output,
        first_output_step=first,
        n_steps=n_steps,
        x_min=x_min,
        y_min=y_min,
        nx_cells=nx_cells,
        ny_cells=ny_cells,
        ix0=n_l,
        iy0=n_b,
        stride_x=stride_x,
        stride_y=stride_y,
        buffer=(n_l * dx, n_r * dx, n_b * dx, n_t * dx),
        reflection_free=reflection_free,
    )


def solve_te_point_source(
    *,
    amplitude: float = 1.0,
    frequency: float = 1e9,
    sigma: float = 7.5e-3,
    x0: float = 0.4975,
    y0: float = 0.4975,
    x=None,
    y=None,
    t=None,
    dx: float | None = None,
    courant: float = 0.68,
    buffer: float | tuple[float, float, float, float] | None = None,
    boundary: str = "pec",
) -> dict[str, np.ndarray]:
    """TEz field of a Gaussian line source in vacuum by the Yee FDTD method.

    Solves (Taflove & Hagness, 3rd ed., Sec. 3.3 TEz equations and the Yee updates
    of Sec. 3.6, with the source entering like ``-M_z``)::

        eps0 dEx/dt = dHz/dy,  eps0 dEy/dt = -dHz/dx,  mu0 dHz/dt = dEx/dy - dEy/dx + J
        J = A g(t) s(x, y)

    with zero fields at ``t = 0`` in an unbounded medium (emulated by a
    reflection-free PEC buffer, see :func:`plan_te_point_source`).  ``J`` is sampled
    at the ``Hz`` positions and at integer time steps (the time centre of the
    ``Hz`` update), truncated at 8 sigma.  Fields are brought to the output nodes
    with second-order interpolation: ``Ex`` is the average of the two ``Ex``
    values left/right of the node, ``Ey`` of the two below/above, ``Hz`` of the
    four surrounding cells and of the half steps just before and after the
    output time.

    Parameters
    ----------
    amplitude : float, optional
        Source amplitude ``A`` [V].  Default 1.
    frequency : float, optional
        Pulse frequency ``f`` [Hz] (> 0); ``tau = sqrt(2.3)/(pi f)``, ``t0 = 3.65 tau``.
        Default 1e9.
    sigma : float, optional
        Gaussian source width [m] (> 0).  Default 7.5e-3.
    x0, y0 : float, optional
        Source centre [m].  Default 0.4975 each.
    x, y : array_like of float, shape (nx,), (ny,), optional
        Output coordinates [m]: uniform, strictly increasing, >= 2 points.
        Default ``linspace(0, 1, 101)``.
    t : array_like of float, shape (nt,), optional
        Output times [s]: uniform, strictly increasing, ``t[0] >= 0`` and ``t[0]``
        a multiple of the output step.  Default ``linspace(0, 4e-9, 41)``.
    dx : float, optional
        Cell size [m]; must divide the output spacings.  Default: see
        :func:`plan_te_point_source` (10/3 mm for the default problem).
    courant : float, optional
        Upper bound on ``c dt / dx`` in (0, 1/sqrt(2)).  Default 0.68.
    buffer : float or sequence of 4 float, optional
        Window-to-wall distance [m] on every side, or per side as (xmin, xmax,
        ymin, ymax).  Default: computed so that
        no reflection reaches the output window before ``t[-1]``.
    boundary : {"pec", "silver-muller"}, optional
        "pec" (default): free space, emulated by the reflection-free buffer.
        "silver-muller": the box padded by ``buffer`` and closed by the first-order
        absorbing condition E . tau = eta0 Hz, the model the PINN trains on; its
        difference from the free-space solution is the modelling floor of that model
        (``benchmarks/boundary_floor.py``).

    Returns
    -------
    dict of str to numpy.ndarray
        ``{"Ex": ..., "Ey": ..., "Hz": ...}``, each float64 of shape ``(nt, ny, nx)``
        (index order ``[time, y, x]``); ``Ex``, ``Ey`` in V/m, ``Hz`` in A/m.

    Raises
    ------
    ValueError
        For invalid arguments (see :func:`plan_te_point_source`; an unknown ``boundary``,
        or "silver-muller" without ``buffer``) or a non-finite ``amplitude``.

    Notes
    -----
    Cost: about 7 array passes over the grid per time step; the default
    problem (535 x 535 cells, 560 steps) runs in about 0.6 s on one core.
    """
    amplitude = _check_finite(amplitude, "amplitude")
    if x is None:
        x = np.linspace(0.0, 1.0, 101)
    if y is None:
        y = np.linspace(0.0, 1.0, 101)
    if t is None:
        t = np.linspace(0.0, 4e-9, 41)
    plan = plan_te_point_source(
        frequency=frequency, sigma=sigma, x0=x0, y0=y0, x=x, y=y, t=t, dx=dx, courant=courant, buffer=buffer,
        boundary=boundary,
    )
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    logger.info(
        "TEz point source FDTD: %d x %d cells, dx = %.4e m, dt = %.4e s, Courant %.4f, %d steps, buffer %s m",
        plan.nx_cells,
        plan.ny_cells,
        plan.dx,
        plan.dt,
        plan.courant,
        plan.n_steps,
        tuple(round(b, 4) for b in plan.buffer),
    )

    dx, dt = plan.dx, plan.dt
    kernel = _YeeTEz(plan.nx_cells, plan.ny_cells, dx, dt, boundary)

    # Source patch at the Hz positions ((i+1/2) dx, (j+1/2) dx), truncated at 8 sigma.
    reach = _SOURCE_TRUNCATION_SIGMAS * sigma
    i_lo = max(0, math.floor((x0 - reach - plan.x_min) / dx - 0.5))
    i_hi = min(plan.nx_cells, math.ceil((x0 + reach - plan.x_min) / dx - 0.5) + 1)
    j_lo = max(0, math.floor((y0 - reach - plan.y_min) / dx - 0.5))
    j_hi = min(plan.ny_cells, math.ceil((y0 + reach - plan.y_min) / dx - 0.5) + 1)
    xs = plan.x_min + (np.arange(i_lo, i_hi) + 0.5) * dx
    ys = plan.y_min + (np.arange(j_lo, j_hi) + 0.5) * dx
    profile = gaussian_source_profile(xs[None, :], ys[:, None], sigma, x0, y0)
    profile *= amplitude * kernel.source_coeff  # dt/mu0 * A * s
    src_slices = (slice(j_lo, j_hi), slice(i_lo, i_hi))
    src_values = np.empty_like(profile)
    pulse = _pulse(frequency)

    nt, ny, nx = t.size, y.size, x.size
    out = {name: np.empty((nt, ny, nx)) for name in ("Ex", "Ey", "Hz")}
    # Output-node slices into the staggered arrays.
    xm, xp = _node_average_slices(plan.ix0, nx, plan.stride_x)
    ym, yp = _node_average_slices(plan.iy0, ny, plan.stride_y)
    xn = slice(plan.ix0, plan.ix0 + plan.stride_x * (nx - 1) + 1, plan.stride_x)
    yn = slice(plan.iy0, plan.iy0 + plan.stride_y * (ny - 1) + 1, plan.stride_y)

    def hz_nodes() -> np.ndarray:
        h = kernel.Hz
        return 0.25 * (h[ym, xm] + h[ym, xp] + h[yp, xm] + h[yp, xp])

    k_out = 0
    next_out = plan.first_output_step
    for n in range(plan.n_steps + 1):
        is_out = n == next_out
        if is_out:
            out["Ex"][k_out] = 0.5 * (kernel.Ex[yn, xm] + kernel.Ex[yn, xp])
            out["Ey"][k_out] = 0.5 * (kernel.Ey[ym, xn] + kernel.Ey[yp, xn])
            hz_before = hz_nodes()
        np.multiply(profile, pulse(n * dt), out=src_values)
        kernel.update_h(src_slices, src_values)
        if is_out:
            out["Hz"][k_out] = 0.5 * (hz_before + hz_nodes())
            k_out += 1
            next_out += plan.steps_per_output
        if n < plan.n_steps:
            kernel.update_e()
    return out


# ---------------------------------------------------------------------------
# PEC cavity
# ---------------------------------------------------------------------------
def _check_mode_indices(m, n) -> tuple[int, int]:
    out = []
    for name, v in (("m", m), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        out.append(int(v))
    if out[0] == 0 and out[1] == 0:
        raise ValueError("m and n must not both be 0 (TE_00 is not a resonant mode); pass e.g. m=2, n=1")
    return out[0], out[1]


def cavity_mode_te(
    m: int, n: int, a: float, b: float, x, y, t, amplitude: float = 1.0
) -> dict[str, np.ndarray]:
    """Closed-form TE_mn standing wave of a PEC rectangle ``[0, a] x [0, b]``.

    With ``kx = m pi / a``, ``ky = n pi / b``, ``omega = c sqrt(kx^2 + ky^2)``::

        Hz =  A cos(kx x) cos(ky y) cos(omega t)
        Ex = -A ky / (eps0 omega) cos(kx x) sin(ky y) sin(omega t)
        Ey =  A kx / (eps0 omega) sin(kx x) cos(ky y) sin(omega t)

    These satisfy ``eps0 dEx/dt = dHz/dy``, ``eps0 dEy/dt = -dHz/dx`` and
    ``mu0 dHz/dt = dEx/dy - dEy/dx`` (which requires ``omega^2 = c^2 (kx^2 + ky^2)``),
    the PEC conditions ``Ex = 0`` on ``y = 0, b`` and ``Ey = 0`` on ``x = 0, a``, and
    ``E = 0`` at ``t = 0`` (cf. Taflove & Hagness Sec. 3.6 and Balanis, *Advanced
    Engineering Electromagnetics*, Sec. 8.2 for the TE_mn modes of a rectangular
    guide / cavity).

    Parameters
    ----------
    m, n : int
        Mode indices (>= 0, not both 0).
    a, b : float
        Cavity size [m] (> 0).
    x : array_like of float, shape (nx,)
        x coordinates [m].
    y : array_like of float, shape (ny,)
        y coordinates [m].
    t : array_like of float, shape (nt,)
        Times [s].
    amplitude : float, optional
        ``A`` [A/m].  Default 1.

    Returns
    -------
    dict of str to numpy.ndarray
        ``{"Ex", "Ey", "Hz"}``, float64 of shape ``(nt, ny, nx)`` on the tensor grid
        ``[t, y, x]``; ``Ex``, ``Ey`` in V/m, ``Hz`` in A/m.  Also ``"omega"``: 0-d
        array, the angular frequency [rad/s].

    Raises
    ------
    ValueError
        For invalid mode indices, non-positive ``a``/``b`` or non 1-D coordinates.
    """
    m, n = _check_mode_indices(m, n)
    a = _check_positive_finite(a, "a")
    b = _check_positive_finite(b, "b")
    amplitude = _check_finite(amplitude, "amplitude")
    arrs = []
    for name, v in (("x", x), ("y", y), ("t", t)):
        v = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if v.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array, got shape {v.shape}")
        arrs.append(v)
    x, y, t = arrs
    kx, ky = m * math.pi / a, n * math.pi / b
    omega = C0 * math.hypot(kx, ky)
    cx, sx = np.cos(kx * x)[None, None, :], np.sin(kx * x)[None, None, :]
    cy, sy = np.cos(ky * y)[None, :, None], np.sin(ky * y)[None, :, None]
    ct, st = np.cos(omega * t)[:, None, None], np.sin(omega * t)[:, None, None]
    ce = amplitude / (EPS0 * omega)
    return {
        "Ex": -ce * ky * cx * sy * st,
        "Ey": ce * kx * sx * cy * st,
        "Hz": amplitude * cx * cy * ct,
        "omega": np.asarray(omega),
    }


def solve_te_cavity(
    *,
    m: int,
    n: int,
    a: float,
    b: float,
    dx: float,
    t,
    courant: float = 0.5,
    amplitude: float = 1.0,
) -> dict[str, np.ndarray]:
    """Yee FDTD of a TE_mn standing wave in a PEC rectangle ``[0, a] x [0, b]``.

    Same leapfrog update as :func:`solve_te_point_source` (no source), with the
    PEC walls on the grid lines ``x = 0, a`` and ``y = 0, b``.  Initial data are
    the exact mode of :func:`cavity_mode_te`: ``E^0 = 0`` and
    ``Hz^{-1/2} = A cos(kx x) cos(ky y) cos(omega dt / 2)``.  The sampled mode is
    an exact eigenvector of the discrete curl-curl operator, so the error is the
    O(dx^2) numerical-dispersion phase error (Taflove & Hagness Ch. 4):
    the test of second-order convergence.

    Fields are returned at their own staggered positions (no spatial
    interpolation); ``Hz`` at output time ``t_k`` is the average of the half steps
    just before and after it (second order).

    Parameters
    ----------
    m, n : int
        Mode indices (>= 0, not both 0).
    a, b : float
        Cavity size [m] (> 0); both must be integer multiples of ``dx``.
    dx : float
        Cell size [m] (> 0), ``dy = dx``.
    t : array_like of float, shape (nt,)
        Output times [s]: uniform, strictly increasing, ``t[0] >= 0`` and ``t[0]``
        a multiple of the output step.
    courant : float, optional
        Upper bound on ``c dt / dx`` in (0, 1/sqrt(2)); the actual value is
        ``c dt / dx`` with ``dt`` the largest step dividing the output step.  Default 0.5.
    amplitude : float, optional
        Mode amplitude ``A`` of ``Hz`` [A/m].  Default 1.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"Ex"``: shape (nt, ny+1, nx) at ``(x_Ex, y_Ex)``;
        ``"Ey"``: shape (nt, ny, nx+1) at ``(x_Ey, y_Ey)``;
        ``"Hz"``: shape (nt, ny, nx) at ``(x_Hz, y_Hz)``, where ``nx = a/dx``,
        ``ny = b/dx`` are the numbers of cells; the 1-D coordinate arrays
        ``"x_Ex", "y_Ex", "x_Ey", "y_Ey", "x_Hz", "y_Hz"`` [m]; ``"dt"`` (0-d) [s].
        All float64; ``Ex``, ``Ey`` in V/m, ``Hz`` in A/m.

    Raises
    ------
    ValueError
        For invalid mode indices, sizes, ``dx`` not dividing ``a`` and ``b``,
        ``courant`` outside (0, 1/sqrt(2)) or an invalid ``t``.
    """
    m, n = _check_mode_indices(m, n)
    a = _check_positive_finite(a, "a")
    b = _check_positive_finite(b, "b")
    dx = _check_positive_finite(dx, "dx")
    courant = _check_courant(courant)
    amplitude = _check_finite(amplitude, "amplitude")
    t, ht = _uniform_axis(t, "t", 1, "s")
    if t[0] < 0.0:
        raise ValueError(f"t[0] = {t[0]!r} s must be >= 0")
    nx = _integer_ratio(a, dx)
    ny = _integer_ratio(b, dx)
    if nx is None or ny is None or nx < 2 or ny < 2:
        raise ValueError(f"dx = {dx!r} m must divide a = {a!r} m and b = {b!r} m into at least 2 cells each")
    if nx * ny > _MAX_CELLS:
        raise ValueError(f"the grid would have {nx} x {ny} cells (> {_MAX_CELLS}); increase dx")
    dt, steps_per_output, first = _time_stepping(t, ht, courant * dx / C0)
    n_steps = first + steps_per_output * (t.size - 1)

    kernel = _YeeTEz(nx, ny, dx, dt)
    xc = np.arange(nx + 1) * dx
    xh = (np.arange(nx) + 0.5) * dx
    yc = np.arange(ny + 1) * dx
    yh = (np.arange(ny) + 0.5) * dx
    kernel.Hz[...] = cavity_mode_te(m, n, a, b, xh, yh, [-0.5 * dt], amplitude=amplitude)["Hz"][0]

    out = {
        "Ex": np.empty((t.size, ny + 1, nx)),
        "Ey": np.empty((t.size, ny, nx + 1)),
        "Hz": np.empty((t.size, ny, nx)),
    }
    k_out, next_out = 0, first
    for step in range(n_steps + 1):
        is_out = step == next_out
        if is_out:
            out["Ex"][k_out] = kernel.Ex
            out["Ey"][k_out] = kernel.Ey
            out["Hz"][k_out] = kernel.Hz
        kernel.update_h()
        if is_out:
            out["Hz"][k_out] += kernel.Hz
            out["Hz"][k_out] *= 0.5
            k_out += 1
            next_out += steps_per_output
        if step < n_steps:
            kernel.update_e()
    out.update(x_Ex=xh, y_Ex=yc, x_Ey=xc, y_Ey=yh, x_Hz=xh, y_Hz=yh, dt=np.asarray(dt))
    return out
