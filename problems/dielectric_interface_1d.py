"""``dielectric-interface-1d``: a Gaussian pulse meets a dielectric half-space, time domain, against the Fresnel answer.

In 1D (a plane wave along x: Ey in V/m, Hz in A/m, :class:`~elecsolver.physics.Maxwell1D`) vacuum fills x < 0 and a
lossless dielectric of relative permittivity eps_r (n = sqrt(eps_r), mu_r = 1) fills x > 0.  The incident pulse
Ey = A g(x - x0 - c0 t), g(s) = exp(-(s / w)^2), Hz = Ey / eta0, splits at x = 0 into (normal incidence: Born & Wolf,
*Principles of Optics*, 7th ed., 1999, sec. 1.5.2; Jackson, *Classical Electrodynamics*, 3rd ed., 1999, eq. 7.42)::

    reflected    Ey = r A g(-x - x0 - c0 t),      Hz = -Ey / eta0,      r   = (1 - n) / (1 + n),
    transmitted  Ey = tau A g(n x - x0 - c0 t),   Hz = n Ey / eta0,     tau = 2 / (1 + n),

exact for any pulse shape since neither medium disperses (the transmitted pulse is n times narrower and travels at
c0 / n).  The window is [-D, D] m over the time the incident pulse takes to travel ``window.travel`` metres; the
network's head imposes the exact state at t = 0 (``network.hard_initial``: the incident pulse, whose leading tail
may already have reached the interface) and the exact Ey is given on both ends, which lets the pulses leave.  The
permittivity jumps at x = 0, so the network carries one copy of (Ey, Hz) in the dielectric and one in vacuum
(``subdomains``); the copies are continuous by construction, so the tangential fields' continuity (the interface
term of :meth:`~elecsolver.physics.Maxwell.interface_residual`) holds exactly and the PDE itself makes the
reflection.  Defaults: eps_r = 2.25 (glass, n = 1.5: r = -0.2, tau = 0.8), A = 1 V/m, w = 0.3 m, x0 = -0.6 m,
D = 1 m, travel 1.2 m.  Scales: L = D, T = D / c0, E0 = A, H0 = A / eta0.  Output: Ey and Hz on nx sites at nt times.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

import elecsolver as es

__all__ = ["DielectricInterface1D"]


class DielectricInterface1D(es.Problem):
    """A Gaussian pulse reflected and transmitted at a vacuum-dielectric interface; see the module docstring.

    Configuration keys
    ------------------
    medium.eps_r : relative permittivity of the dielectric in x > 0
    pulse.amplitude : peak Ey of the incident pulse (V/m)
    pulse.width : width w of the pulse exp(-(s/w)^2)
    pulse.start : centre x0 of the incident pulse at t = 0
    domain.half_width : half width D of the window [-D, D]
    window.travel : distance the incident pulse travels over the time window
    """

    name = "dielectric-interface-1d"
    defaults = {
        "medium": {"eps_r": 2.25},
        "pulse": {"amplitude": 1.0, "width": 0.3, "start": -0.6},
        "domain": {"half_width": 1.0},
        "window": {"travel": 1.2},
        "output": {"nx": 201, "nt": 25},
        "network": {"width": 64, "depth": 3, "activation": "sin", "first_omega": 6.0, "output_gain": 1.0,
                    "hard_initial": True},
        "sampling": {"interior": 2000, "ends": 200, "interface": 100},
        "training": {"steps": 6000, "lr": 3e-3, "lr_final": 1e-4, "log_every": 500, "checkpoint_every": 2000},
    }
    presets = {
        "ci": {"sampling": {"interior": 1500}, "training": {"steps": 1000, "lr_final": 1e-3}},
        "quick": {},  # the default: 433 s on one thread, Ey 0.45 %, Hz 0.44 %
        "full": {"network": {"width": 128, "depth": 4},  # GPU preset, not measured
                 "sampling": {"interior": 20000, "ends": 2000, "interface": 1000},
                 "training": {"steps": 30000, "lr_final": 1e-5, "log_every": 2000, "checkpoint_every": 5000}},
    }
    # ci measured Ey 4.20 / 4.19 / 4.72 %, Hz 3.91 / 4.03 / 4.41 % (seeds 0 / 1 / 2); the pulse passing as in
    # vacuum scores 50 / 38 %, the right transmitted pulse with no reflected one 17 / 14 %
    bounds = {"ci": {"full": {"Ey": 0.08, "Hz": 0.08}}}

    def setup(self):
        m, p, d = self.config["medium"], self.config["pulse"], self.config["domain"]["half_width"]
        travel, out = self.config["window"]["travel"], self.config["output"]
        rules = {"medium.eps_r": (m["eps_r"], 0, "> 0"), "pulse.amplitude": (p["amplitude"], 0, "> 0 (V/m)"),
                 "pulse.width": (p["width"], 0, "> 0 (m)"), "domain.half_width": (d, 0, "> 0 (m)"),
                 "window.travel": (travel, 0, "> 0 (m)"), "output.nx": (out["nx"], 2, ">= 2"),
                 "output.nt": (out["nt"], 2, ">= 2")}
        for key, (value, low, rule) in rules.items():
            if not (isinstance(value, numbers.Real) and not isinstance(value, bool)
                    and (value >= low if rule.startswith(">=") else value > low)):
                raise es.ConfigError(f"{key} must be a number {rule}, got {value!r}")
        if not (isinstance(p["start"], numbers.Real) and -d < p["start"] < 0):
            raise es.ConfigError(f"pulse.start = {p['start']!r} m must lie on the vacuum side of the line, "
                                 f"-domain.half_width = -{d} < start < 0 (m)")
        self.n = math.sqrt(m["eps_r"])
        dielectric = es.Interval(0.0, d, name="dielectric")
        self.domain = es.TimeDomain(es.Interval(-d, d, name="line"), 0.0, travel / es.C0)
        self.subdomains = {"dielectric": dielectric}
        self.pde = es.Maxwell1D("Ey", eps_r=es.piecewise([(dielectric, m["eps_r"])], default=1.0))
        self.interfaces = [es.Interface("dielectric", on="dielectric:xmin")]
        self.conditions = [es.Dirichlet(on=["line:xmin", "line:xmax"], fields="Ey", name="ends", weight=10.0,
                                        value=lambda x, t: self.fields_at(x, t)["Ey"]),
                           es.Initial(self.fields_at)]
        self.scales = es.Scales(length=d, E0=p["amplitude"])
        self.output = es.GridSites({"x": np.linspace(-d, d, out["nx"])})
        self.times = np.linspace(0.0, travel / es.C0, out["nt"])

    def exact(self, x, t):
        """Each side's fields continued over the line, SI (V/m, A/m) at SI coordinates (m, s), tensors [N]:
        incident + reflected in vacuum ("Ey@background", "Hz@background"), transmitted in the dielectric
        ("Ey@dielectric", "Hz@dielectric")."""
        p, n = self.config["pulse"], self.n
        r, tau = (1 - n) / (1 + n), 2 / (1 + n)

        def g(s):
            return p["amplitude"] * torch.exp(-((s / p["width"]) ** 2))

        inc, ref = g(x - p["start"] - es.C0 * t), r * g(-x - p["start"] - es.C0 * t)
        tra = tau * g(n * x - p["start"] - es.C0 * t)
        return {"Ey@background": inc + ref, "Hz@background": (inc - ref) / es.ETA0,
                "Ey@dielectric": tra, "Hz@dielectric": n * tra / es.ETA0}

    def fields_at(self, x, t):
        """The exact (Ey, Hz) of the side each point lies on, SI, tensors [N] (the end and initial values)."""
        sides = self.exact(x, t)
        inside = x >= 0
        return {c: torch.where(inside, sides[f"{c}@dielectric"], sides[f"{c}@background"]) for c in ("Ey", "Hz")}
