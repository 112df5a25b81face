"""``maxwell-cavity-2d``: a TE_mn or TM_mn standing wave in a PEC rectangle, against its closed form.

The rectangle 0 <= x <= a, 0 <= y <= b (m; default 2 m x 1 m) has PEC walls, vacuum inside.  With
kx = m pi / a, ky = n pi / b, k = sqrt(kx^2 + ky^2), omega = c0 k and A the amplitude (``mode.amplitude``,
V/m), the modes of the rectangular cross-section (Pozar, *Microwave Engineering*, 4th ed., 2012, sec. 3.3
and 6.3, cut-off modes of the waveguide = the 2D cavity modes), written as real standing waves in time::

    TE_mn (TEz: Ex, Ey, Hz; m, n >= 0, not both 0)
        Hz =  (A / eta0)   cos(kx x) cos(ky y) cos(omega t)      [A/m]
        Ex = -(ky / k) A   cos(kx x) sin(ky y) sin(omega t)      [V/m]
        Ey =  (kx / k) A   sin(kx x) cos(ky y) sin(omega t)      [V/m]
    TM_mn (TMz: Ez, Hx, Hy; m, n >= 1)
        Ez =  A            sin(kx x) sin(ky y) cos(omega t)      [V/m]
        Hx = -(ky / k) A / eta0 * sin(kx x) cos(ky y) sin(omega t)  [A/m]
        Hy =  (kx / k) A / eta0 * cos(kx x) sin(ky y) sin(omega t)  [A/m]

They satisfy eps0 dE/dt = curl H, mu0 dH/dt = -curl E (:class:`elecsolver.physics.MaxwellTEz` /
``MaxwellTMz``, TEz means Ex, Ey, Hz) and n x E = 0 on the walls.  A TE mode with m = n = 0 is a uniform
static Hz, and a TM mode with m = 0 or n = 0 is identically zero: both are refused.  The run covers
``window.periods`` periods 2 pi / omega from the t = 0 state (E = 0 for TE, H = 0 for TM), which the network's
head imposes exactly (``network.hard_initial``); PEC walls are a loss term.  Scales: L = min(a, b),
T = L / c0, E0 = A, H0 = A / eta0.  Error: relative L2 per field over the output grid and times.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

import elecsolver as es

__all__ = ["MaxwellCavity2D"]


def _mode_index(key: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
        raise es.ConfigError(f"{key} must be an integer >= 0 (a mode index), got {value!r}; e.g. --set {key}=1")
    return int(value)


class MaxwellCavity2D(es.Problem):
    """TE_mn (Ex, Ey, Hz) or TM_mn (Ez, Hx, Hy) mode of a PEC rectangle; see the module docstring.

    Configuration keys
    ------------------
    cavity.a : side a along x
    cavity.b : side b along y
    mode.polarisation : TE (Ex, Ey, Hz) or TM (Ez, Hx, Hy)
    mode.m : mode index m along x
    mode.n : mode index n along y
    mode.amplitude : amplitude A (V/m)
    window.periods : periods 2 pi / omega of the time window
    """

    name = "maxwell-cavity-2d"
    defaults = {
        "cavity": {"a": 2.0, "b": 1.0},
        "mode": {"polarisation": "TM", "m": 1, "n": 1, "amplitude": 1.0},
        "window": {"periods": 0.5},
        "output": {"nx": 61, "ny": 31, "nt": 21},
        "network": {"width": 64, "depth": 3, "activation": "sin", "output_gain": 1.0, "hard_initial": True},
        "sampling": {"interior": 2000, "boundary": 400},
        "training": {"steps": 4000, "lr": 3e-3, "lr_final": 1e-4, "log_every": 250, "checkpoint_every": 1000},
    }
    presets = {
        "ci": {"training": {"steps": 1200}},  # 32-40 s of training on one (shared) CPU core
        "quick": {"training": {"steps": 16000, "lr_final": 1e-5}},  # the default: 8.5 min, 0.4-0.7 % per field
        "full": {"network": {"width": 128, "depth": 4},  # GPU preset, not measured
                 "sampling": {"interior": 16384, "boundary": 2048, "resample_every": 200},
                 "training": {"steps": 20000, "lr_final": 1e-5, "log_every": 1000, "checkpoint_every": 5000}},
    }
    # ci measured (seeds 0 / 1 / 2): Ez 3.9 / 4.5 / 5.1 %, Hx 4.6 / 5.4 / 5.9 %, Hy 7.8 / 7.9 / 11.1 %
    bounds = {"ci": {"full": {"Ez": 0.077, "Hx": 0.089, "Hy": 0.166}}}

    def setup(self):
        c = self.config
        a, b, pol = c["cavity"]["a"], c["cavity"]["b"], c["mode"]["polarisation"]
        m, n = _mode_index("mode.m", c["mode"]["m"]), _mode_index("mode.n", c["mode"]["n"])
        if pol not in ("TE", "TM"):
            raise es.ConfigError(f"mode.polarisation must be 'TE' (Ex, Ey, Hz) or 'TM' (Ez, Hx, Hy), got {pol!r}")
        if pol == "TE" and m == n == 0:
            raise es.ConfigError("TE_00 is a static uniform Hz, not a cavity mode; set mode.m >= 1 or mode.n >= 1")
        if pol == "TM" and (m == 0 or n == 0):
            raise es.ConfigError(f"TM_{m}{n} vanishes identically (Ez ~ sin(m pi x/a) sin(n pi y/b)); "
                                 "set both mode.m and mode.n >= 1")
        out, amp, periods = c["output"], c["mode"]["amplitude"], c["window"]["periods"]
        if not (a > 0 and b > 0 and amp > 0 and periods > 0 and min(out["nx"], out["ny"], out["nt"]) >= 2):
            raise es.ConfigError("cavity.a, cavity.b (m), mode.amplitude (V/m) and window.periods must be > 0, "
                                 "output.nx, output.ny and output.nt >= 2")
        self.k = (math.pi * m / a, math.pi * n / b)
        t_end = periods * 2 * math.pi / (es.C0 * math.hypot(*self.k))
        self.domain = es.TimeDomain(es.Rectangle([0.0, 0.0], [a, b]), 0.0, t_end)
        self.pde = es.MaxwellTEz() if pol == "TE" else es.MaxwellTMz()
        self.conditions = [es.PEC(weight=10.0), es.Initial(self.initial)]
        self.scales = es.Scales(length=min(a, b), E0=amp)
        self.output = es.GridSites({"x": np.linspace(0, a, out["nx"]), "y": np.linspace(0, b, out["ny"])})
        self.times = np.linspace(0.0, t_end, out["nt"])

    def initial(self, x, y, t):
        """The t = 0 state (SI): only Hz (TE) or Ez (TM) is nonzero; cheaper than exact() in the head."""
        (kx, ky), amp = self.k, self.config["mode"]["amplitude"]
        if self.config["mode"]["polarisation"] == "TE":
            return {"Hz": amp / es.ETA0 * torch.cos(kx * x) * torch.cos(ky * y)}
        return {"Ez": amp * torch.sin(kx * x) * torch.sin(ky * y)}

    def exact(self, x, y, t):
        """The mode's fields (V/m, A/m) at the SI coordinates (m, s), tensors [N] (Pozar sec. 3.3, 6.3)."""
        (kx, ky), amp = self.k, self.config["mode"]["amplitude"]
        k = math.hypot(kx, ky)
        cx, sx, cy, sy = torch.cos(kx * x), torch.sin(kx * x), torch.cos(ky * y), torch.sin(ky * y)
        ct, st = torch.cos(es.C0 * k * t), torch.sin(es.C0 * k * t)
        if self.config["mode"]["polarisation"] == "TE":
            return {"Hz": amp / es.ETA0 * cx * cy * ct, "Ex": -(ky / k) * amp * cx * sy * st,
                    "Ey": (kx / k) * amp * sx * cy * st}
        return {"Ez": amp * sx * sy * ct, "Hx": -(ky / k) * amp / es.ETA0 * sx * cy * st,
                "Hy": (kx / k) * amp / es.ETA0 * cx * sy * st}
