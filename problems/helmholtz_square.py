"""``helmholtz-square``: DeepXDE's 2D Dirichlet Helmholtz demo, read as a TMz PEC-cavity field.

    -(d2/dx2 + d2/dy2) Ez - k0^2 Ez = k0^2 sin(k0 x) sin(k0 y)   on [0, a]^2 (m),   Ez = 0 on the edges,

k0 = 4 pi rad/m, a = 1 m; exact solution Ez = sin(k0 x) sin(k0 y) (V/m), which vanishes on the edges when
k0 a is a multiple of pi: other values of physics.wavenumber and physics.side are refused.  Ez is the field of a TMz
problem and Ez = 0 its PEC wall condition (tangential E vanishes).  DeepXDE's configuration
(``examples/pinn_forward/Helmholtz_Dirichlet_2d.py`` of DeepXDE; Lu, Meng, Mao & Karniadakis, SIAM Rev. 63
(2021) 208): 10 collocation points per wavelength, n = int(a / (lambda / 10)) points per side, n^2 interior
and 4n boundary points (the residual is also taken at the boundary points, ``sampling.pde_on_boundary``),
3 hidden layers of 150 with sin activation, Glorot-uniform weights, Adam at 1e-3 for 5000 steps.  The
hard-constraint variant (default) is Ez = x (a - x) y (a - y) N(x, y) (a :class:`~elecsolver.networks.HardDirichlet`
head, unnormalised as in DeepXDE), so only the PDE residual is trained; ``--preset soft`` puts the boundary
points in the loss with weight 100 instead.  The Laplacian travels as one summed jet channel.  ``--preset
features`` is the random-feature method instead of gradient training: 300 sin features kept as initialised and
one least-squares solve of the output layer (``training.optimizer = "least_squares"``; Dong & Li, Comput. Methods
Appl. Mech. Engrg. 387 (2021) 114129).

Error: relative L2 over the 101 x 101 grid of the square (edges included) against the exact solution.
The problem is O(1) in SI units, so the scales are L = 1 m and E0 = 1 V/m.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import elecsolver as es
from elecsolver.networks import HardDirichlet
from elecsolver.training.options import physical_memory

__all__ = ["HelmholtzSquare"]


class HelmholtzSquare(es.Problem):
    """2D Dirichlet Helmholtz problem on a square (DeepXDE's demo); see the module docstring.

    Configuration keys
    ------------------
    physics.wavenumber : wavenumber k0 (rad/m); k0 times the side must be a multiple of pi
    physics.side : side a of the square [0, a]^2 (m)
    network.hard_constraint : Ez = 0 on the edges imposed by the head (false: a boundary loss term of weight 100)
    network.normalise_hard : divide the hard-constraint factor by the squared side (false: x (a - x) y (a - y) as
        DeepXDE writes it)
    sampling.points_per_wavelength : collocation points per wavelength along each side (DeepXDE's 10)
    """

    name = "helmholtz-square"
    defaults = {
        "physics": {"wavenumber": 4 * math.pi, "side": 1.0},
        "output": {"n": 101},
        "network": {"width": 150, "depth": 3, "activation": "sin", "init": "glorot", "output_gain": 1.0,
                    "input_scaling": False, "hard_constraint": True, "normalise_hard": False},
        "sampling": {"points_per_wavelength": 10, "resample_every": 1_000_000_000, "pde_on_boundary": True},
        "training": {"steps": 5000, "lr": 1e-3, "lr_final": 1e-3, "log_every": 500, "checkpoint_every": 1000},
    }
    presets = {
        # hard-constraint variant, 2000 steps at a constant learning rate of 3e-3 (DeepXDE's 1e-3 reaches
        # only ~6 % in 2000 steps, 2e-3 up to 5 % for some seeds)
        "ci": {"training": {"steps": 2000, "lr": 3e-3, "lr_final": 3e-3, "log_every": 250, "checkpoint_every": 1000}},
        "quick": {},  # DeepXDE's demo as it is: 5000 steps
        "soft": {"network": {"hard_constraint": False}},  # the soft-constraint variant (boundary weight 100)
        # random features: one hidden layer of 300 sin features with first-layer frequencies up to 15 rad/m (SIREN
        # bound first_omega / 2 inputs; k0 = 12.6 rad/m), and one step that solves the output layer by least
        # squares in float64 (training.optimizer = "least_squares"; Dong & Li 2021's extreme learning machine):
        # about a second, Ez ~4e-10 (the measurement log in CHANGELOG.md, "helmholtz-square by random features")
        "features": {"network": {"width": 300, "depth": 1, "init": "siren", "first_omega": 30.0},
                     "training": {"dtype": "float64", "optimizer": "least_squares", "steps": 1, "log_every": 1,
                                  "checkpoint_every": 1, "least_squares": {"every": 0, "ridge": 0.0}}},
        # the 1e-4 target: ci's 2000 Adam steps in float64, one least-squares solve of the output layer,
        # then 800 L-BFGS steps on the same points (seed 0: 5.5e-4 after the first 100, 9.5e-5 after 500, 4.0e-5)
        "long": {"training": {"dtype": "float64", "steps": 2000, "lr": 3e-3, "lr_final": 3e-3, "log_every": 100,
                              "checkpoint_every": 1000, "finish": {"optimizer": "lbfgs", "steps": 800, "lr": 1.0},
                              "least_squares": {"every": 0, "ridge": 1e-6, "before_finish": True}}},
    }
    # ci: measured 0.8-1.9 % over seeds 0-4 (README); long: 4.0e-5 (seed 0), held to 1e-4 (a slow test)
    # features: 4.4e-10 / 4.1e-10 / 2.9e-10 / 2.5e-10 / 3.6e-10 over seeds 0-4
    bounds = {"ci": {"full": {"Ez": 0.05}}, "long": {"full": {"Ez": 1e-4}}, "features": {"full": {"Ez": 1e-6}}}

    def setup(self):
        c = self.config
        k0, side, n = c["physics"]["wavenumber"], c["physics"]["side"], self.grid_size()
        if not (k0 > 0 and side > 0 and c["output"]["n"] >= 2 and n >= 2):
            raise es.ConfigError("physics.wavenumber and physics.side must be positive, output.n >= 2, and "
                                 "sampling.points_per_wavelength must give >= 2 points per side")
        m = k0 * side / math.pi
        if abs(m - round(m)) > 1e-9 * max(1.0, m):  # the exact solution vanishes on the edges only then
            raise es.ConfigError(f"physics.wavenumber x physics.side = {k0 * side:.6g} must be a multiple of pi: the "
                                 "exact solution sin(k0 x) sin(k0 y) vanishes on the edges x, y = side only then; e.g. "
                                 f"physics.wavenumber = {(r := max(1, round(m)))} * pi / physics.side = {r * math.pi / side:.10g}")
        if n * n * 2 * 8 > physical_memory():
            raise es.ConfigError(f"physics.side, physics.wavenumber and sampling.points_per_wavelength give {n} points "
                                 f"per side, {n * n:.3g} in all, more than this machine holds; give smaller values")
        self.domain = es.Rectangle([0.0, 0.0], [side, side])
        self.pde = es.Helmholtz(k0, source=lambda x, y: k0**2 * self.exact(x, y)["Ez"], field="Ez")
        self.interior_points = n * n
        hard = c["network"]["hard_constraint"]  # weight 0: no loss term, but its points anchor the PDE cloud
        self.conditions = [es.Dirichlet(weight=0.0 if hard else 100.0, name="boundary", points=4 * n)]
        if hard:
            self.heads = [HardDirichlet([0.0, 0.0], [side, side], normalise=c["network"]["normalise_hard"])]
        axis = np.linspace(0.0, side, c["output"]["n"])
        self.output = es.GridSites({"x": axis, "y": axis})

    def grid_size(self) -> int:
        """Collocation points per side, n = int(a / (lambda / points_per_wavelength)) (DeepXDE's rule)."""
        k0, ppw = self.config["physics"]["wavenumber"], self.config["sampling"]["points_per_wavelength"]
        return int(self.config["physics"]["side"] / (2 * math.pi / k0 / ppw)) if k0 > 0 and ppw > 0 else 0

    def exact(self, x, y):
        k0 = self.config["physics"]["wavenumber"]
        return {"Ez": torch.sin(k0 * x) * torch.sin(k0 * y)}
