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

With ``hz_factor`` = eps_r a_E (1 in vacuum at the default scales) the head also adds the magnetic field that
Ampere's law pairs with E_qs, Hz_qs chi, where

    Hz_qs = -eps_r a_E a g'(t) [Ein(rho^2 / (2 sigma^2)) - ln(R^2 / (2 sigma^2)) - gamma] / (4 pi)

(eps_r a_E dE_phi/dt = -dHz/d rho for a radial Hz; Ein(q) = int_0^q (1 - exp(-s))/s ds, A & S 5.1.40, the integral
of E_qs's profile in rho).  The constant makes Hz_qs -> -eps_r a_E a g'(t) ln(rho^2 / R^2) / (4 pi) for rho >>
sigma, independent of sigma, as the true field is there: what the network is left is then the same for every
narrow source beyond rho ~ sigma and smooth within it (without the term, the network's Hz carries the rise of
Ein over rho ~ sigma, the one feature left on the source's scale).  It is the next term of the same
quasi-static expansion: local (chi), non-propagating (no retardation) and independent of the medium beyond the
source.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from elecsolver.jets import Jet
from elecsolver.networks import FuncJet, chain_rule_jet, register_head
from elecsolver.reference.line_source import EULER_GAMMA, ein, ein_derivatives, line_source_near_field

# phi(q) = (1 - exp(-q)) / q = Ein'(q) and its derivative, with Taylor series where the closed forms cancel
_phi_and_dphi = ein_derivatives


class QuasiStaticNearField(nn.Module):
    """Head adding chi E_qs to the body's (Ex, Ey), and with ``hz_factor`` chi Hz_qs to its Hz; see the module
    docstring.

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
    hz_factor : float
        eps_r a_E of the Ampere residual (:mod:`elecsolver.physics.maxwell`) at the source, 1 in vacuum at the
        default scales; 0 (the default) adds nothing to Hz.
    columns : dict, optional
        For a family (parameter inputs): {"x0": k, "y0": k, "f": k}, the input columns holding the source centre
        and the pulse's frequency f' = f T in training units; each given column replaces its number (x0, y0; t0 and
        tau from tau' = sqrt(2.3) / (pi f'), t0' = 3.65 tau', :class:`elecsolver.physics.GaussianPulse`).  The jets
        carry no derivative along these columns.
    """

    def __init__(self, *, amplitude: float, x0: float, y0: float, sigma: float,
                 radius: float, t0: float, tau: float, hz_factor: float = 0.0, columns: dict | None = None):
        super().__init__()
        if sigma <= 0 or radius <= 0 or tau <= 0:
            raise ValueError("sigma, radius and tau must be positive")
        self.a, self.x0, self.y0, self.s, self.r, self.t0, self.tau = (
            float(amplitude), float(x0), float(y0), float(sigma), float(radius), float(t0), float(tau))
        self.hz_factor = float(hz_factor)
        self.hz_offset = math.log(self.r**2 / (2 * self.s**2)) + EULER_GAMMA
        self.columns = dict(columns or {})
        unknown = sorted(set(self.columns) - {"x0", "y0", "f"})
        if unknown:
            raise ValueError(f"columns may name x0, y0 and f, got {unknown}")

    def _source(self, p):
        """(x0, y0, t0, tau) at inputs p [N, d]: the numbers, or per point from the parameter columns."""
        c = self.columns
        x0 = p[:, c["x0"]] if "x0" in c else self.x0
        y0 = p[:, c["y0"]] if "y0" in c else self.y0
        if "f" in c:
            tau = math.sqrt(2.3) / (math.pi * p[:, c["f"]])
            return x0, y0, 3.65 * tau, tau
        return x0, y0, self.t0, self.tau

    def _field_and_jacobian(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(E_qs, Hz_qs) chi at p [N, 3] -> values [N, 3] and d(Ex, Ey, Hz)/d(x, y, t) [N, 3, 3] (float64 inside)."""
        p64 = p.detach().double()
        x0, y0, t0, tau = self._source(p64)
        dx, dy, t = p64[:, 0] - x0, p64[:, 1] - y0, p64[:, 2]
        w = dx**2 + dy**2
        s2, r2 = self.s**2, self.r**2
        phi, dphi = _phi_and_dphi(w / (2 * s2))
        chi = torch.exp(-w / (2 * r2))
        big_p = phi / (2 * s2) * chi                              # h chi, h = phi / (2 sigma^2)
        dp_dw = chi * (dphi / (4 * s2 * s2) - phi / (2 * s2) / (2 * r2))
        u = (t - t0) / tau
        g = torch.exp(-(u**2))
        c = -self.a / (2 * math.pi)  # Ex = -a g h dy / (2 pi), Ey = a g h dx / (2 pi)
        big_g, dg = c * g, c * (-2 * u / tau) * g
        ex, ey = big_g * big_p * dy, -big_g * big_p * dx
        jac = torch.stack([
            torch.stack([big_g * dy * dp_dw * 2 * dx, big_g * (big_p + dy * dp_dw * 2 * dy), dg * big_p * dy], 1),
            torch.stack([-big_g * (big_p + dx * dp_dw * 2 * dx), -big_g * dx * dp_dw * 2 * dy, -dg * big_p * dx], 1),
        ], 1)
        if not self.hz_factor:  # no Hz term: spare the hot path Ein's 80 passes
            zero = torch.zeros_like(ex)
            jac = torch.cat([jac, torch.zeros_like(jac[:, :1])], 1)
            return torch.stack([ex, ey, zero], 1).to(p.dtype), jac.to(p.dtype)
        # Hz = b g'(t) Q(w), Q = (Ein(w / (2 sigma^2)) - offset) chi, b = -hz_factor a / (4 pi)
        ein_q = ein(w / (2 * s2)) - self.hz_offset
        q_val = ein_q * chi
        dq_dw = chi * (phi / (2 * s2) - ein_q / (2 * r2))
        b = -self.hz_factor * self.a / (4 * math.pi)
        gp, gpp = b * (-2 * u / tau) * g, b * (4 * u**2 - 2) / tau**2 * g
        jac_hz = torch.stack([gp * dq_dw * 2 * dx, gp * dq_dw * 2 * dy, gpp * q_val], 1)
        jac = torch.cat([jac, jac_hz.unsqueeze(1)], 1)
        return torch.stack([ex, ey, gp * q_val], 1).to(p.dtype), jac.to(p.dtype)

    def forward(self, y, x):
        if isinstance(x, Jet) and x.second_order:
            return y + FuncJet(_ClosedForm(self))(x)
        if isinstance(x, Jet):
            val, jac = self._field_and_jacobian(x.data[0])
            # chain rule along each seed, through (x, y, t): the parameter columns carry no tangent
            der = torch.einsum("nij,knj->kni", jac, x.data[1:, :, :3])
            return Jet(y.data + torch.cat([val.unsqueeze(0), der], 0), x.wrt)
        return y + self.closed_form(x)

    def closed_form(self, x: torch.Tensor) -> torch.Tensor:
        """The added field chi (E_qs, Hz_qs) at inputs x [N, d] (x, y, t and any parameter columns), a differentiable
        function (of the parameters too), [N, 3]."""
        x0, y0, t0, tau = self._source(x)
        dx, dy, t = x[:, 0] - x0, x[:, 1] - y0, x[:, 2]
        w = dx**2 + dy**2
        phi, _ = _phi_and_dphi(w / (2 * self.s**2))
        chi = torch.exp(-w / (2 * self.r**2))
        big_p = phi / (2 * self.s**2) * chi
        u = (t - t0) / tau
        g = torch.exp(-(u**2))
        big_g = -self.a / (2 * math.pi) * g
        if self.hz_factor:
            gp = -self.hz_factor * self.a / (4 * math.pi) * (-2 * u / tau) * g
            hz = gp * (ein(w / (2 * self.s**2)) - self.hz_offset) * chi
        else:
            hz = torch.zeros_like(dx)
        return torch.stack([big_g * big_p * dy, -big_g * big_p * dx, hz], 1)


class _ClosedForm(nn.Module):
    """The near-field term as a tensor function (for FuncJet)."""

    def __init__(self, head: QuasiStaticNearField):
        super().__init__()
        self.head = [head]  # not a submodule: no parameters, no state

    def forward(self, x):
        return self.head[0].closed_form(x)


register_head("near-field")(lambda d, c: QuasiStaticNearField(amplitude=0.3, x0=0.4, y0=0.5, sigma=0.05, radius=0.2,
                                                             t0=0.5, tau=0.2, hz_factor=1.3))


class LineSourceNearField(nn.Module):
    """Head adding the quasi-static near field of a Gaussian line source, chi phi times a constant, to one output
    channel of a time-harmonic problem (``line-source-2d``).

    phi is eq. (2) of :mod:`elecsolver.reference.line_source` (the potential of the unit Gaussian source, -lap phi
    = g, matched to the real part of the Green's function for sigma << rho << 1/k) and chi = exp(-rho^2 / (2 R^2))
    confines it to rho ~ R: local to the source, independent of the medium beyond it and non-propagating (the
    project's fair-play rule).  The residuals are unchanged (singularity subtraction, as
    :class:`QuasiStaticNearField`); the network is left a field without the source's sigma-scale peak.

    ``forward(y, x)``: y the body's channels [N, C] (tensor or jet), x the inputs in training units [N, 2].

    Parameters
    ----------
    channel, channels : int
        The output channel it adds to (e.g. 1 for ``Ez.im``) and the number of channels.
    factor : float
        Its factor in the channel's training units (4 for Ez' = Ez / (omega mu0 I / 4) on ``Ez.im``).
    center : (float, float)
        Source centre in training units.
    length : float
        The length scale L (m): rho = L |x' - c'|.
    wavenumber, sigma, radius : float
        k (rad/m), the source width sigma (m) and the cut-off radius R (m).
    """

    def __init__(self, *, channel: int, channels: int, factor: float, center, length: float, wavenumber: float,
                 sigma: float, radius: float):
        super().__init__()
        if not (sigma > 0 and radius > 0 and wavenumber > 0 and length > 0):
            raise ValueError("wavenumber, sigma, radius and length must be positive")
        if not 0 <= channel < channels:
            raise ValueError(f"channel {channel} is not among the {channels} output channels")
        self.channel, self.channels = int(channel), int(channels)
        self.factor, self.center = float(factor), tuple(float(c) for c in center)
        self.length, self.k, self.sigma, self.radius = float(length), float(wavenumber), float(sigma), float(radius)


    def _radial(self, x: torch.Tensor):
        """h, h'(w), h''(w) of the added value h(w), w = rho^2 (m^2), and dx = x - c (training units), float64."""
        xd = x.detach().double()
        dx = torch.stack([xd[:, 0] - self.center[0], xd[:, 1] - self.center[1]], dim=1)
        w = (dx**2).sum(1) * self.length**2
        s2, r2 = 2 * self.sigma**2, 2 * self.radius**2
        chi = torch.exp(-w / r2)
        phi = line_source_near_field(w, self.k, self.sigma)
        d1, d2 = ein_derivatives(w / s2)
        dphi, ddphi = -d1 / s2 / (4 * math.pi), -d2 / s2**2 / (4 * math.pi)
        h = self.factor * chi * phi
        dh = self.factor * chi * (dphi - phi / r2)
        ddh = self.factor * chi * (ddphi - 2 * dphi / r2 + phi / r2**2)
        return h, dh, ddh, dx

    def closed_form(self, x: torch.Tensor) -> torch.Tensor:
        """The added channels at inputs x [N, 2] (training units): zeros but ``channel``, a differentiable
        function of x (the autograd path), [N, channels]."""
        rho2 = ((x[:, 0] - self.center[0]) ** 2 + (x[:, 1] - self.center[1]) ** 2) * self.length**2
        h = self.factor * torch.exp(-rho2 / (2 * self.radius**2)) * line_source_near_field(rho2, self.k, self.sigma)
        return torch.stack([h if c == self.channel else torch.zeros_like(h) for c in range(self.channels)], 1)

    def _jet(self, x: Jet) -> Jet:
        """The added term's jet by the chain rule through the closed-form gradient and Hessian (in x'):
        grad h = 2 L^2 h' dx, Hess h = 4 L^4 h'' dx dx^T + 2 L^2 h' I; first channels grad h . a_k, pair channels
        a_i^T Hess a_j + grad h . a_ij, the summed channel sum_k w_k a_k^T Hess a_k + grad h . L[a]."""
        h, dh, ddh, dx = self._radial(x.channels[0])
        l2 = self.length**2
        pick = torch.zeros(self.channels, dtype=h.dtype, device=h.device)
        pick[self.channel] = 1.0  # the term enters one channel

        def lin(u):  # grad h . u for an input channel [N, 2] -> [N, channels]
            return (2 * l2 * dh * (u.double() * dx).sum(-1))[:, None] * pick

        def hess(u, v):  # u^T Hess v
            u, v = u.double(), v.double()
            q = 4 * l2**2 * ddh * (u * dx).sum(-1) * (v * dx).sum(-1) + 2 * l2 * dh * (u * v).sum(-1)
            return q[:, None] * pick

        return chain_rule_jet(x, h[:, None] * pick, lin, hess)

    def forward(self, y, x):
        return y + (self._jet(x) if isinstance(x, Jet) else self.closed_form(x))
