"""Quasi-static near field of a Gaussian magnetic line current, as an output ansatz on jets.

The PINN's electric field is written E = E_qs chi + N_E (H = N_H), where

    E_qs = a g(t) (1 - exp(-rho^2 / (2 sigma^2))) / (2 pi rho)  phi_hat

is the field whose curl is exactly +J (the problem's equation mu0 dHz/dt = -(curl E)_z + J with
dHz/dt neglected; Faraday's law around a circle of radius rho, (curl E)_z = (1/rho) d(rho E_phi)/d rho), and chi = exp(-rho^2 / (2 R^2)) confines it to the source
region.  This is singularity subtraction, a standard device for point sources (e.g. Jin, *The
Finite Element Method in Electromagnetics*, 3rd ed., 2014, sec. 9.6 on source modelling): the
residuals are unchanged, but the network no longer has to create a field that varies on the scale
sigma; what remains varies on the scale R and on the wavelength.
All quantities are nondimensional (x' = x/L, t' = t c0/L, E' = E/E0); a = A / (E0 L).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from elecsolver.jets import Jet
from elecsolver.networks import FuncJet, register_head

# phi(q) = (1 - exp(-q)) / q and its derivative; Taylor series below Q_SERIES avoid cancellation
Q_SERIES = 0.05


def _phi_and_dphi(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    small = q < Q_SERIES
    qs = torch.where(small, torch.ones_like(q), q)
    phi_f = -torch.expm1(-qs) / qs
    dphi_f = (torch.exp(-qs) * (1 + qs) - 1) / qs**2
    qt = torch.where(small, q, torch.zeros_like(q))
    phi_s = torch.zeros_like(q)
    dphi_s = torch.zeros_like(q)
    fact = 1.0
    for n in range(10):  # phi = sum (-q)^n / (n+1)!
        fact *= n + 1
        phi_s = phi_s + (-1) ** n * qt**n / fact
        if n >= 1:
            dphi_s = dphi_s + (-1) ** n * n * qt ** (n - 1) / fact
    return torch.where(small, phi_s, phi_f), torch.where(small, dphi_s, dphi_f)


class QuasiStaticNearField(nn.Module):
    """Head adding chi E_qs to the body's (Ex, Ey); see the module docstring.

    ``forward(y, x)``: y the body's (Ex', Ey', Hz') [N, 3] (tensor or jet), x the inputs (x', y', t') [N, 3]
    (tensor or the input jet).  First-order jets use the closed-form Jacobian; second-order jets take the
    term's jet by forward-mode AD of its closed form (:class:`elecsolver.networks.FuncJet`).

    Parameters
    ----------
    amplitude : float
        a = A / (E0 L), nondimensional.
    x0, y0, sigma, radius : float
        Source centre, Gaussian width and cut-off radius R, nondimensional.
    t0, tau : float
        Pulse centre and width, nondimensional.
    """

    def __init__(self, *, amplitude: float, x0: float, y0: float, sigma: float,
                 radius: float, t0: float, tau: float):
        super().__init__()
        if sigma <= 0 or radius <= 0 or tau <= 0:
            raise ValueError("sigma, radius and tau must be positive")
        self.a, self.x0, self.y0, self.s, self.r, self.t0, self.tau = (
            float(amplitude), float(x0), float(y0), float(sigma), float(radius), float(t0), float(tau))

    def _field_and_jacobian(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """E_qs chi at p [N, 3] -> values [N, 2] and d(Ex, Ey)/d(x, y, t) [N, 2, 3] (float64 inside)."""
        p64 = p.detach().double()
        dx, dy, t = p64[:, 0] - self.x0, p64[:, 1] - self.y0, p64[:, 2]
        w = dx**2 + dy**2
        s2, r2 = self.s**2, self.r**2
        phi, dphi = _phi_and_dphi(w / (2 * s2))
        chi = torch.exp(-w / (2 * r2))
        big_p = phi / (2 * s2) * chi                              # h chi, h = phi / (2 sigma^2)
        dp_dw = chi * (dphi / (4 * s2 * s2) - phi / (2 * s2) / (2 * r2))
        u = (t - self.t0) / self.tau
        g = torch.exp(-(u**2))
        c = -self.a / (2 * math.pi)  # Ex = -a g h dy / (2 pi), Ey = a g h dx / (2 pi)
        big_g, dg = c * g, c * (-2 * u / self.tau) * g
        ex, ey = big_g * big_p * dy, -big_g * big_p * dx
        jac = torch.stack([
            torch.stack([big_g * dy * dp_dw * 2 * dx, big_g * (big_p + dy * dp_dw * 2 * dy), dg * big_p * dy], 1),
            torch.stack([-big_g * (big_p + dx * dp_dw * 2 * dx), -big_g * dx * dp_dw * 2 * dy, -dg * big_p * dx], 1),
        ], 1)
        return torch.stack([ex, ey], 1).to(p.dtype), jac.to(p.dtype)

    def forward(self, y, x):
        if isinstance(x, Jet) and x.second_order:
            return y + FuncJet(_ClosedForm(self))(x)
        if isinstance(x, Jet):
            val, jac = self._field_and_jacobian(x.data[0])
            der = torch.einsum("nij,knj->kni", jac, x.data[1:])     # chain rule along each seed
            add = torch.cat([val.unsqueeze(0), der], 0)
            zeros = torch.zeros_like(add[..., :1])
            return Jet(y.data + torch.cat([add, zeros], -1), x.wrt)
        return y + self.closed_form(x)

    def closed_form(self, x: torch.Tensor) -> torch.Tensor:
        """The added field (chi E_qs, 0) at inputs x [N, 3], a differentiable function, [N, 3]."""
        dx, dy, t = x[:, 0] - self.x0, x[:, 1] - self.y0, x[:, 2]
        w = dx**2 + dy**2
        phi, _ = _phi_and_dphi(w / (2 * self.s**2))
        big_p = phi / (2 * self.s**2) * torch.exp(-w / (2 * self.r**2))
        big_g = -self.a / (2 * math.pi) * torch.exp(-(((t - self.t0) / self.tau) ** 2))
        return torch.stack([big_g * big_p * dy, -big_g * big_p * dx, torch.zeros_like(dx)], 1)


class _ClosedForm(nn.Module):
    """The near-field term as a tensor function (for FuncJet)."""

    def __init__(self, head: QuasiStaticNearField):
        super().__init__()
        self.head = [head]  # not a submodule: no parameters, no state

    def forward(self, x):
        return self.head[0].closed_form(x)


register_head("near-field")(lambda d, c: QuasiStaticNearField(amplitude=0.3, x0=0.4, y0=0.5, sigma=0.05, radius=0.2,
                                                             t0=0.5, tau=0.2))
