"""Scripting a new problem: a TE_mn standing wave in a 1 m x 1 m PEC cavity, against its closed form.

    python examples/pec_cavity_te.py --steps 1500 --out out-cavity
    mpirun -n 2 python examples/pec_cavity_te.py --preset ci --out out-cavity

The closed form (Pozar, *Microwave Engineering*, 4th ed., sec. 6.3, in the time domain), with
t' = t c0 / L and w' = pi sqrt(m^2 + n^2)::

    Hz = cos(m pi x) cos(n pi y) cos(w' t') / eta0,   Ex = -(n pi / w') cos(m pi x) sin(n pi y) sin(w' t'),
    Ey = (m pi / w') sin(m pi x) cos(n pi y) sin(w' t')

starts from its t = 0 state (an initial condition) and stays in the box by PEC walls (tangential E = 0).
The declaration below is the whole problem: the base class samples, scales, trains and exports.
"""

import math

import numpy as np
import torch

import elecsolver as es


class PecCavityTE(es.Problem):
    """TE_mn mode of a 1 m x 1 m PEC cavity (TEz: Ex, Ey, Hz) against its closed form."""

    name = "pec-cavity-te"
    defaults = {"mode": {"m": 1, "n": 1}, "window": {"t_end": 1.0},   # t_end in units of T = L / c0
                "output": {"nx": 41, "ny": 41, "nt": 21}, "network": {"width": 48, "depth": 3, "output_gain": 1.0},
                "training": {"steps": 1500, "lr": 3e-3, "lr_final": 1e-4}}
    presets = {"quick": {}, "ci": {"training": {"steps": 300}}}

    def setup(self):
        out, t_end = self.config["output"], self.config["window"]["t_end"] * self.scales.time
        self.domain = es.TimeDomain(es.Rectangle([0, 0], [1, 1]), 0.0, t_end)
        self.pde = es.MaxwellTEz()
        self.conditions = [es.PEC(weight=10.0), es.Initial(self.exact, weight=10.0)]
        self.output = es.GridSites({"x": np.linspace(0, 1, out["nx"]), "y": np.linspace(0, 1, out["ny"])})
        self.times = np.linspace(0.0, t_end, out["nt"])

    def exact(self, x, y, t):
        a, b = math.pi * self.config["mode"]["m"], math.pi * self.config["mode"]["n"]
        w, tt = math.hypot(a, b), t / self.scales.time
        return {"Ex": -(b / w) * torch.cos(a * x) * torch.sin(b * y) * torch.sin(w * tt),
                "Ey": (a / w) * torch.sin(a * x) * torch.cos(b * y) * torch.sin(w * tt),
                "Hz": torch.cos(a * x) * torch.cos(b * y) * torch.cos(w * tt) / es.ETA0}


if __name__ == "__main__":
    es.main(PecCavityTE)
