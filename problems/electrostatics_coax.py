"""``electrostatics-coax``: the potential between the conductors of a coaxial line, against its closed form.

In the annulus a < r < b (m; defaults a = 1 mm, b = 3.5 mm, vacuum), Laplace's equation for the potential V
(volts) with the inner conductor at V0 and the outer one grounded (Jackson, *Classical Electrodynamics*, 3rd
ed., 1999, sec. 1.7 and problem 1.6; Pozar, *Microwave Engineering*, 4th ed., 2012, sec. 2.2)::

    -lap V = 0  for a < r < b,     V = V0 at r = a,     V = 0 at r = b,
    V(r) = V0 ln(b / r) / ln(b / a),     E_r = -dV/dr = V0 / (r ln(b / a))   [V/m].

The domain is ``Disk(b, name="outer") - Disk(a, name="inner")``: its boundary tags are "outer:circle" and
"inner:circle" (normals on the inner circle point into the hole, out of the annulus), one
:class:`~elecsolver.physics.Dirichlet` condition on each.  Scales: L = b, E0 = V0 / b, so that V' = V / V0 and
x' = x / b are O(1).  Output: V on a Cartesian grid over [-b, b]^2 (sites outside the annulus are masked
out of the metrics; the reference there is the conductors' potential, V0 inside, 0 outside).  E_r is not
an output: a problem's outputs are its PDE's fields (see the README).
"""

from __future__ import annotations

import math

import numpy as np
import torch

import elecsolver as es

__all__ = ["ElectrostaticsCoax"]


class ElectrostaticsCoax(es.Problem):
    """Potential V between the conductors of a coaxial line (Laplace, Dirichlet); see the module docstring.

    Configuration keys
    ------------------
    coax.a : radius of the inner conductor
    coax.b : inner radius of the outer conductor
    coax.V0 : potential of the inner conductor (the outer one is grounded)
    """

    name = "electrostatics-coax"
    defaults = {
        "coax": {"a": 1.0e-3, "b": 3.5e-3, "V0": 1.0},
        "output": {"n": 101},
        "network": {"width": 32, "depth": 3, "activation": "tanh", "output_gain": 1.0},
        "sampling": {"interior": 1000, "inner": 200, "outer": 400},
        "training": {"steps": 3000, "lr": 3e-3, "lr_final": 1e-4, "log_every": 250, "checkpoint_every": 1000},
    }
    presets = {
        "ci": {"training": {"steps": 1000}},  # 8-12 s of training on one (shared) CPU core
        "quick": {},  # the default: 26 s, 0.29 %
        "full": {"network": {"width": 64, "depth": 4},  # GPU preset, not measured
                 "sampling": {"interior": 16384, "inner": 2048, "outer": 4096},
                 "training": {"steps": 20000, "lr_final": 1e-5, "log_every": 1000, "checkpoint_every": 5000}},
    }
    bounds = {"ci": {"full": {"V": 0.016}}}  # measured 1.05 / 0.89 / 0.76 % (seeds 0 / 1 / 2)

    def setup(self):
        c = self.config["coax"]
        a, b, v0, n = c["a"], c["b"], c["V0"], self.config["output"]["n"]
        if not (0 < a < b and v0 != 0 and n >= 2):
            raise es.ConfigError(f"need 0 < coax.a < coax.b (m) and coax.V0 != 0 (V), output.n >= 2; got "
                                 f"a={a!r}, b={b!r}, V0={v0!r}, n={n!r}")
        self.domain = es.Disk([0.0, 0.0], b, name="outer") - es.Disk([0.0, 0.0], a, name="inner")
        self.pde = es.Laplace(field="V", unit="V")
        self.conditions = [es.Dirichlet(on="inner:circle", value=v0, name="inner", weight=10.0),
                           es.Dirichlet(on="outer:circle", value=0.0, name="outer", weight=10.0)]
        self.scales = es.Scales(length=b, E0=abs(v0) / b)
        axis = np.linspace(-b, b, n)
        self.output = es.GridSites({"x": axis, "y": axis})

    def exact(self, x, y):
        """V (volts) at the SI coordinates (m), tensors [N]; the conductors' potentials outside a < r < b
        (Jackson sec. 1.7)."""
        c = self.config["coax"]
        r = torch.clamp(torch.sqrt(x**2 + y**2), c["a"], c["b"])  # the conductors' potentials outside a < r < b
        return {"V": c["V0"] * torch.log(c["b"] / r) / math.log(c["b"] / c["a"])}

    def field_er(self, x, y):
        """E_r = V0 / (r ln(b/a)) in V/m, the closed-form radial field (for users; not an output)."""
        c = self.config["coax"]
        return c["V0"] / (torch.sqrt(x**2 + y**2) * math.log(c["b"] / c["a"]))
