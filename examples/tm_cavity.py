"""A TMz mode in a 2 m x 1 m PEC rectangle, against its closed form.

    python examples/tm_cavity.py --out out-tm               # default preset: <= 5 % per field
    python examples/tm_cavity.py --preset ci --out out-tm   # shorter
    mpirun -n 2 python examples/tm_cavity.py --out out-tm   # the same, data parallel

TM_mn of a rectangle a x b with PEC walls (Pozar, *Microwave Engineering*, 4th ed., sec. 6.3), with
kx = m pi / a, ky = n pi / b, w = c0 sqrt(kx^2 + ky^2)::

    Ez = sin(kx x) sin(ky y) cos(w t)                          [V/m]
    Hx = -(ky / (mu0 w)) sin(kx x) cos(ky y) sin(w t)          [A/m]
    Hy =  (kx / (mu0 w)) cos(kx x) sin(ky y) sin(w t)          [A/m]

over ``window.periods`` periods (default 1/2: Ez swings from +1 to -1), started from its t = 0 state (imposed
exactly by the network's head, ``network.hard_initial``); Ez = 0 on the walls is the PEC condition.
"""

import math

import numpy as np
import torch

import elecsolver as es


class TMCavity(es.Problem):
    """TM_mn mode of a 2 m x 1 m PEC rectangle (TMz: Ez, Hx, Hy) against its closed form."""

    name = "tm-cavity"
    defaults = {"mode": {"m": 1, "n": 1}, "window": {"periods": 0.5}, "output": {"nx": 61, "ny": 31, "nt": 21},
                "network": {"width": 64, "depth": 3, "activation": "sin", "output_gain": 1.0, "hard_initial": True},
                "training": {"steps": 4000, "lr": 3e-3, "lr_final": 1e-4}}
    presets = {"quick": {}, "ci": {"training": {"steps": 1500}}}
    bounds = {"quick": {"full": {"Ez": 0.05, "Hx": 0.05, "Hy": 0.05}}, "ci": {"full": {"Ez": 0.05, "Hx": 0.06, "Hy": 0.09}}}

    def setup(self):
        out, w = self.config["output"], self.wavenumbers()[2]
        t_end = self.config["window"]["periods"] * 2 * math.pi / w
        self.domain = es.TimeDomain(es.Rectangle([0, 0], [2, 1]), 0.0, t_end)
        self.pde = es.MaxwellTMz()
        self.conditions = [es.PEC(weight=10.0), es.Initial(self.exact, weight=10.0)]
        self.output = es.GridSites({"x": np.linspace(0, 2, out["nx"]), "y": np.linspace(0, 1, out["ny"])})
        self.times = np.linspace(0.0, t_end, out["nt"])

    def wavenumbers(self):
        kx, ky = math.pi * self.config["mode"]["m"] / 2, math.pi * self.config["mode"]["n"] / 1
        return kx, ky, es.C0 * math.hypot(kx, ky)

    def exact(self, x, y, t):
        kx, ky, w = self.wavenumbers()
        return {"Ez": torch.sin(kx * x) * torch.sin(ky * y) * torch.cos(w * t),
                "Hx": -ky / (es.MU0 * w) * torch.sin(kx * x) * torch.cos(ky * y) * torch.sin(w * t),
                "Hy": kx / (es.MU0 * w) * torch.cos(kx * x) * torch.sin(ky * y) * torch.sin(w * t)}


if __name__ == "__main__":
    es.main(TMCavity)
