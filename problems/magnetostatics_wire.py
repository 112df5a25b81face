"""``magnetostatics-wire``: the vector potential A_z of a round wire with uniform current, against its closed form.

A straight wire of radius a along z carries the current I (A) with uniform density J = I / (pi a^2) (A/m^2);
on the disk r <= R (R > a, vacuum, mu = mu0) the z-component of the magnetic vector potential obeys Poisson's
equation (Jackson, *Classical Electrodynamics*, 3rd ed., 1999, eq. 5.31 in the Coulomb gauge; Griffiths,
*Introduction to Electrodynamics*, 4th ed., 2017, sec. 5.4)::

    -lap A_z = mu0 J  (r < a),   0  (a < r < R),      A_z = 0 at r = R,

    A_z = mu0 I (a^2 - r^2) / (4 pi a^2) + C     (r <= a)
    A_z = -(mu0 I / (2 pi)) ln(r / a) + C        (a <= r <= R),     C = (mu0 I / (2 pi)) ln(R / a)   [Wb/m],

continuous with a continuous derivative at r = a; B_phi = -dA_z/dr = mu0 I r / (2 pi a^2) inside and
mu0 I / (2 pi r) outside (T; Ampere's law).  The source jumps at r = a, so the solution's second derivative
does too: a smooth network fits it only in the least-squares sense, and the error is set by how well the
collocation points resolve the wire (about 1 % needs some 6000 points per round; points made dense near the wire
by a region did not help).  Scales: L = R, A0 = A_z(0) = (mu0 I / (2 pi)) (1/2 + ln(R / a)) (the unit "Wb/m",
``Scales(extra=...)``).  Output: A_z on a grid over [-R, R]^2 (sites outside the disk masked out).  B_phi is
not an output: a problem's outputs are its PDE's fields (see the README).
"""

from __future__ import annotations

import math

import numpy as np
import torch

import elecsolver as es

__all__ = ["MagnetostaticsWire"]


class MagnetostaticsWire(es.Problem):
    """A_z of a round wire with uniform current on a disk, A_z = 0 on its edge; see the module docstring.

    Configuration keys
    ------------------
    wire.a : wire radius a
    wire.R : radius R of the disk, where A_z = 0
    wire.I : current in the wire (A)
    """

    name = "magnetostatics-wire"
    defaults = {
        "wire": {"a": 1.0e-3, "R": 5.0e-3, "I": 1.0},
        "output": {"n": 101},
        "network": {"width": 32, "depth": 3, "activation": "tanh", "output_gain": 1.0},
        "sampling": {"interior": 6000, "boundary": 400},
        "training": {"steps": 3000, "lr": 3e-3, "lr_final": 1e-4, "log_every": 250, "checkpoint_every": 1000},
    }
    presets = {
        "ci": {"sampling": {"interior": 3000}, "training": {"steps": 1000}},  # 15-18 s on one CPU core
        "quick": {},  # the default: 104 s, 0.89 % (0.4-2 % between resamplings)
        "full": {"network": {"width": 64, "depth": 4},  # GPU preset, not measured
                 "sampling": {"interior": 32768, "boundary": 4096},
                 "training": {"steps": 20000, "lr_final": 1e-5, "log_every": 1000, "checkpoint_every": 5000}},
    }
    bounds = {"ci": {"full": {"Az": 0.037}}}  # measured 1.40 / 2.10 / 2.45 % (seeds 0 / 1 / 2)

    def setup(self):
        c = self.config["wire"]
        a, big_r, current, n = c["a"], c["R"], c["I"], self.config["output"]["n"]
        if not (0 < a < big_r and current != 0 and n >= 2):
            raise es.ConfigError(f"need 0 < wire.a < wire.R (m) and wire.I != 0 (A), output.n >= 2; got "
                                 f"a={a!r}, R={big_r!r}, I={current!r}, n={n!r}")
        mu_j = es.MU0 * current / (math.pi * a**2)
        self.domain = es.Disk([0.0, 0.0], big_r)
        self.pde = es.Poisson(rhs=lambda x, y: mu_j * (x**2 + y**2 <= a**2).to(x.dtype), field="Az", unit="Wb/m")
        self.conditions = [es.Dirichlet(value=0.0, name="edge", weight=100.0)]
        a0 = es.MU0 * abs(current) / (2 * math.pi) * (0.5 + math.log(big_r / a))
        self.scales = es.Scales(length=big_r, extra={"Wb/m": a0})
        axis = np.linspace(-big_r, big_r, n)
        self.output = es.GridSites({"x": axis, "y": axis})

    def exact(self, x, y):
        """A_z (Wb/m) at the SI coordinates (m), tensors [N], inside and outside the wire (Jackson eq. 5.31)."""
        c = self.config["wire"]
        a, k = c["a"], es.MU0 * c["I"] / (2 * math.pi)
        r2 = x**2 + y**2
        inside = k * (a**2 - r2) / (2 * a**2)
        outside = -0.5 * k * torch.log(torch.clamp(r2, min=a**2) / a**2)
        return {"Az": torch.where(r2 <= a**2, inside, outside) + k * math.log(c["R"] / a)}

    def field_bphi(self, x, y):
        """B_phi = -dA_z/dr in T, the closed form (for users; not an output)."""
        c = self.config["wire"]
        r, a, k = torch.sqrt(x**2 + y**2), c["a"], es.MU0 * c["I"] / (2 * math.pi)
        return torch.where(r <= a, k * r / a**2, k / torch.clamp(r, min=a))
