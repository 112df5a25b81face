"""Scripting a new problem: a TE_mn standing wave in a PEC square cavity.

    python examples/pec_cavity_te.py --steps 1500 --out out-cavity

A :class:`elecsolver.problem.Problem` subclass declares its inputs and fields, its configuration,
its constraints (a sampler and a residual each), its network, an output grid and a reference;
the trainer, the operators and the exporters do the rest.  Here everything is nondimensional with
L = 1 m (the cavity side), T = L/c0, E0 = 1 V/m, H0 = E0/eta0, and the reference is the closed form

    Hz = cos(m pi x) cos(n pi y) cos(w t),  Ex = -(n pi/w) cos(m pi x) sin(n pi y) sin(w t),
    Ey = (m pi/w) sin(m pi x) cos(n pi y) sin(w t),  w = pi sqrt(m^2 + n^2)

(Pozar, *Microwave Engineering*, 4th ed., sec. 6.3, in the time domain), started from its t = 0
state and kept in the box by PEC walls (tangential E = 0).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from scipy import constants

from elecsolver.export import export_run
from elecsolver.networks import build_network
from elecsolver.problem import Constraint, Problem, relative_l2
from elecsolver.sampling import PointCloud, derive_seed, unit_samples
from elecsolver.trainer import Trainer

ETA0 = math.sqrt(constants.mu_0 / constants.epsilon_0)


class PecCavityTE(Problem):
    name = "pec-cavity-te"
    inputs = ("x", "y", "t")
    outputs = ("Ex", "Ey", "Hz")
    units: ClassVar[dict[str, str]] = {"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Ey": "V/m", "Hz": "A/m"}
    presets: ClassVar[dict[str, dict]] = {"default": {}}
    default_preset = "default"

    @classmethod
    def default_config(cls) -> dict:
        return {
            "mode": {"m": 1, "n": 1},
            "window": {"t_end": 1.0},                       # in units of T = L / c0
            "output": {"nx": 41, "ny": 41, "nt": 21},
            "network": {"width": 48, "depth": 3, "activation": "tanh"},
            "sampling": {"method": "sobol", "interior": 2000, "wall": 400, "initial": 400, "resample_every": 100},
            "training": {"steps": 1500, "seed": 0, "dtype": "float32", "lr": 3e-3, "lr_final": 1e-4,
                         "log_every": 250, "checkpoint_every": 500, "derivatives": "jet"},
        }

    def scales(self):
        return {"length_m": 1.0, "time_s": 1.0 / constants.c, "E0_V_per_m": 1.0, "H0_A_per_m": 1.0 / ETA0}

    # residuals -------------------------------------------------------------------------
    @staticmethod
    def maxwell(f, points, normals=None):
        return torch.stack([f.d("Ex", "t") - f.d("Hz", "y"),
                            f.d("Ey", "t") + f.d("Hz", "x"),
                            f.d("Hz", "t") - (f.d("Ex", "y") - f.d("Ey", "x"))], 1)

    @staticmethod
    def pec(f, points, normals):
        """Tangential E = E.tau = -n_y Ex + n_x Ey vanishes on the walls."""
        return (-normals[:, 1] * f["Ex"] + normals[:, 0] * f["Ey"]).unsqueeze(1)

    def initial(self, f, points, normals=None):
        m, n = self.config["mode"]["m"], self.config["mode"]["n"]
        hz0 = torch.cos(m * math.pi * points[:, 0]) * torch.cos(n * math.pi * points[:, 1])
        return torch.stack([f["Ex"], f["Ey"], f["Hz"] - hz0], 1)

    # samplers (nondimensional, float64) ---------------------------------------------------
    def _interior(self, seed, progress=1.0):
        u = unit_samples(self.config["sampling"]["interior"], 3, self.config["sampling"]["method"], seed)
        return PointCloud(u * [1.0, 1.0, self.config["window"]["t_end"]])

    def _walls(self, seed, progress=1.0):
        k = self.config["sampling"]["wall"]
        u = unit_samples(k, 2, self.config["sampling"]["method"], seed)
        side = np.floor(u[:, 0] * 4).astype(int)             # 0: y=0, 1: x=1, 2: y=1, 3: x=0
        s = u[:, 0] * 4 - side
        x = np.choose(side, [s, np.ones(k), 1 - s, np.zeros(k)])
        y = np.choose(side, [np.zeros(k), s, np.ones(k), 1 - s])
        normals = np.array([[0, -1], [1, 0], [0, 1], [-1, 0]], float)[side]
        return PointCloud(np.stack([x, y, u[:, 1] * self.config["window"]["t_end"]], 1), normals)

    def _initial(self, seed, progress=1.0):
        u = unit_samples(self.config["sampling"]["initial"], 2, self.config["sampling"]["method"], seed)
        return PointCloud(np.concatenate([u, np.zeros((len(u), 1))], 1))

    def constraints(self):
        def seeded(fn, label):
            return lambda seed, progress=1.0: fn(derive_seed(seed, label), progress)

        return [Constraint("pde", seeded(self._interior, "pde"), self.maxwell, ("x", "y", "t")),
                Constraint("wall", seeded(self._walls, "wall"), self.pec, (), 10.0),
                Constraint("initial", seeded(self._initial, "initial"), self.initial, (), 10.0)]

    def build_network(self):
        net = self.config["network"]
        return build_network("mlp", 3, 3, [0, 0, 0], [1, 1, self.config["window"]["t_end"]],
                             width=net["width"], depth=net["depth"], activation=net["activation"], output_gain=1.0)

    # output grid and reference --------------------------------------------------------------
    def output_coords(self):
        o, s = self.config["output"], self.scales()
        return {"x": np.linspace(0, 1, o["nx"]), "y": np.linspace(0, 1, o["ny"]),
                "t": np.linspace(0, self.config["window"]["t_end"], o["nt"]) * s["time_s"]}

    def grid_points(self, frames=None):
        c, s = self.output_coords(), self.scales()
        tt, yy, xx = np.meshgrid(c["t"][:frames] / s["time_s"], c["y"], c["x"], indexing="ij")
        return np.stack([xx.ravel(), yy.ravel(), tt.ravel()], 1)

    def to_si(self, values):
        o, s = self.config["output"], self.scales()
        shape = (-1, o["ny"], o["nx"])
        return {"Ex": values[:, 0].reshape(shape), "Ey": values[:, 1].reshape(shape),
                "Hz": values[:, 2].reshape(shape) * s["H0_A_per_m"]}

    def reference(self, cache_dir=None):
        m, n = self.config["mode"]["m"], self.config["mode"]["n"]
        w = math.pi * math.hypot(m, n)
        p = self.grid_points()
        x, y, t = p[:, 0], p[:, 1], p[:, 2]
        a, b = m * math.pi, n * math.pi
        u = np.stack([-(b / w) * np.cos(a * x) * np.sin(b * y) * np.sin(w * t),
                      (a / w) * np.sin(a * x) * np.cos(b * y) * np.sin(w * t),
                      np.cos(a * x) * np.cos(b * y) * np.cos(w * t)], 1)
        return self.to_si(u)

    def metrics(self, fields, reference):
        return {"full": {k: relative_l2(fields[k], reference[k]) for k in self.outputs}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--out", default="out-cavity")
    args = parser.parse_args(argv)
    problem = PecCavityTE()
    problem.config["training"]["steps"] = args.steps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reference = problem.reference()
    trainer = Trainer(problem, out_dir=out, reference=reference)
    trainer.train()
    metrics = export_run(trainer, reference, out, "default")
    print(json.dumps(metrics["rel_l2"]))
    return metrics


if __name__ == "__main__":
    main()
