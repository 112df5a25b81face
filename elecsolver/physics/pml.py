"""A perfectly matched layer (PML) for time-harmonic fields, by complex coordinate stretching.

Outside an axis-aligned inner box (the region where the field is wanted) each coordinate is continued
into the complex plane, d/dx_a -> (1 / s_a) d/dx_a with (time convention exp(-i omega t))

    s_a(x_a) = 1 + i alpha (d_a / delta)^m,     d_a = max(0, lo_a - x_a, x_a - hi_a)      (1)

(Chew & Weedon, Microw. Opt. Technol. Lett. 7 (1994) 599; Teixeira & Chew, IEEE Microw. Guided Wave Lett.
8 (1998) 223; the polynomial grading of Taflove & Hagness, *Computational Electrodynamics*, 3rd ed., 2005,
eq. 7.60).  d_a is the depth into the layer along axis a, delta its thickness and m the grading order.
sigma = alpha (d/delta)^m is exactly zero in the inner box, so the equations there are untouched.  An
outgoing wave exp(i k x) becomes exp(i k x~) with the stretched coordinate

    x~_a = x_a + i alpha delta / (m + 1) (d_a / delta)^(m + 1) sign_a                              (2)

(sign_a = +1 past hi_a, -1 below lo_a), which decays in the layer without reflection at its inner face.
A wave at normal incidence that crosses the layer, meets the wall closing it (u = 0) and comes back is
attenuated by the round-trip reflection

    R = exp(-2 k alpha delta / (m + 1)),   so   alpha = (m + 1) ln(1 / R) / (2 k delta)           (3)

(Johnson, *Notes on Perfectly Matched Layers*, MIT, 2008, sec. 4; at incidence angle q the exponent is
multiplied by cos q).  The layer is designed for the wavenumber k of the medium it borders.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

__all__ = ["PML"]

MAX_ORDER = 10  # a higher grading order only pushes the absorption into the layer's last cells


def _positive(name: str, v) -> float:
    if not (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
        raise ValueError(f"PML: {name} must be a finite number > 0, got {v!r}")
    return float(v)


class PML:
    """Complex coordinate stretching (1) outside an axis-aligned inner box, designed by (3).

    Parameters
    ----------
    lower, upper : sequence of float
        Corners of the inner box in m (one entry per spatial axis, in the problem's axis order x, y, z);
        the layer of thickness ``thickness`` surrounds it on every side.
    thickness : float
        delta in m (> 0).
    wavenumber : float
        k in rad/m of the medium next to the layer (> 0).
    reflection : float
        Target round-trip reflection R at normal incidence, in (0, 1) (default 1e-4).
    order : int
        Grading order m, an integer in [1, 10] (default 2: s_a and its first derivative are continuous at the
        inner face).

    Raises
    ------
    ValueError
        For corners that do not form a box, or a non-positive thickness or wavenumber, R outside (0, 1),
        or an order outside [1, 10].

    Attributes
    ----------
    alpha : float
        The peak stretching Im s_a at the layer's end (dimensionless), from (3).
    """

    def __init__(self, lower: Sequence[float], upper: Sequence[float], thickness: float, wavenumber: float,
                 reflection: float = 1e-4, order: int = 2):
        lo, hi = [float(v) for v in lower], [float(v) for v in upper]
        if not lo or len(lo) != len(hi) or len(lo) > 3 or any(not (a < b) for a, b in zip(lo, hi)):
            raise ValueError(f"PML: lower {list(lower)} and upper {list(upper)} must be the corners of a 1-3D box "
                             "with lower < upper on every axis")
        self.lower, self.upper = tuple(lo), tuple(hi)
        self.thickness = _positive("thickness", thickness)
        self.wavenumber = _positive("wavenumber", wavenumber)
        if not (isinstance(reflection, numbers.Real) and 0 < reflection < 1):
            raise ValueError(f"PML: reflection must be in (0, 1), e.g. 1e-4, got {reflection!r}")
        if not (isinstance(order, int) and not isinstance(order, bool) and 1 <= order <= MAX_ORDER):
            raise ValueError(f"PML: order must be an integer in [1, {MAX_ORDER}] (2 to 4 are usual), got {order!r}")
        self.reflection, self.order = float(reflection), order
        self.alpha = (order + 1) * math.log(1.0 / reflection) / (2.0 * self.wavenumber * self.thickness)

    @property
    def dim(self) -> int:
        return len(self.lower)

    def outer_bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Corners (m) of the box that the layer fills up to: the inner box grown by the thickness."""
        d = self.thickness
        return tuple(v - d for v in self.lower), tuple(v + d for v in self.upper)

    def _depth(self, axis: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(d_a / delta, sign_a) at SI positions x [N] along ``axis``."""
        below, above = self.lower[axis] - x, x - self.upper[axis]
        depth = torch.clamp(torch.maximum(below, above), min=0.0) / self.thickness
        return depth, torch.where(above > 0, 1.0, -1.0).to(x.dtype)

    def stretch(self, axis: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """s_a (1) and ds_a/dx_a (1/m) at SI positions x [N] (m) along spatial axis ``axis`` (0: x, 1: y, 2: z),
        complex tensors [N]; exactly 1 and 0 inside the inner box."""
        depth, sign = self._depth(axis, x)
        m, a = self.order, self.alpha
        s = torch.complex(torch.ones_like(x), a * depth**m)
        # depth^(m-1) is 1 at depth 0 for m = 1: the derivative is zero outside the layer for every order
        slope = torch.where(depth > 0, a * m * depth ** (m - 1) * sign / self.thickness, torch.zeros_like(x))
        ds = torch.complex(torch.zeros_like(x), slope)
        return s, ds

    def stretched(self, axis: int, x: torch.Tensor) -> torch.Tensor:
        """The complex coordinate x~_a (2) in m at SI positions x [N] along ``axis``: the point at which a
        free-space solution continued into the layer is evaluated (d x~ / dx = s)."""
        depth, sign = self._depth(axis, x)
        m = self.order
        return torch.complex(x, self.alpha * self.thickness / (m + 1) * depth ** (m + 1) * sign)

    def __repr__(self) -> str:
        return (f"PML(lower={self.lower}, upper={self.upper}, thickness={self.thickness}, "
                f"wavenumber={self.wavenumber}, reflection={self.reflection}, order={self.order})")
