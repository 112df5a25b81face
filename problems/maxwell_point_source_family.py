"""``maxwell-point-source-family``: the main job for a family of sources, one network for all of them.

The problem of :mod:`.maxwell_point_source_2d` (2D TEz, a Gaussian magnetic line source of width sigma = 7.5 mm in
vacuum, the window [0, 1] m x [0, 1] m x [0, 4 ns]) with the source's position and centre frequency as inputs of
the network (:class:`elecsolver.Parameter`):

    x0 in family.source.x0 = [0.3, 0.7] m,   y0 in family.source.y0 = [0.3, 0.7] m,
    f in family.source.frequency = [0.8, 1.2] GHz,

so that the network maps (x, y, t, x0, y0, f) to (Ex, Ey, Hz) and one training answers every configuration of the
box.  Every collocation point draws its own configuration (a scrambled Sobol draw in the box, independent of the
space-time draw); the dense source disc follows each point's source; the padding of each side is the largest any
configuration of the box needs (:meth:`MaxwellPointSource2D.paddings_for` at the box's corners); the near-field head
reads (x0, y0, f) from the inputs.  The jets carry derivatives along x, y and t only.

The configuration a run exports and scores, and a query evaluates, is ``source.x0``, ``source.y0`` and
``source.frequency`` (the main job's keys and defaults): ``elecsolver query OUT --set source.x0=0.42``.  A value
outside the trained box is refused unless extrapolation is asked for.  ``sampling.parameters = "fixed"`` trains the
family's network at that one configuration (fine-tuning, ``--init-from``), which may lie outside the box.

Reference: the package's Yee FDTD per configuration (:mod:`elecsolver.reference.fdtd`), cached.
"""

from __future__ import annotations

import itertools

import numpy as np

import elecsolver as es
from elecsolver.sampling import PointCloud

from .maxwell_point_source_2d import MaxwellPointSource2D

__all__ = ["MaxwellPointSourceFamily"]

# the family's parameters: (name, unit, configuration key under "source")
PARAMETERS = (("x0", "m", "x0"), ("y0", "m", "y0"), ("f", "Hz", "frequency"))


class MaxwellPointSourceFamily(MaxwellPointSource2D):
    """The point source with (x0, y0, f) as network inputs; see the module docstring."""

    name = "maxwell-point-source-family"
    defaults = {**MaxwellPointSource2D.defaults,
                "family": {"source": {"x0": [0.3, 0.7], "y0": [0.3, 0.7], "frequency": [0.8e9, 1.2e9]}}}
    presets = {
        # under a minute and a half on 2 CPU cores: the ci network and points, the early window
        "ci": {"absorbing": {"padding": 0.1, "per_side": False}, "network": {"near_field_hz": False},
               "sampling": {"interior": 375, "source": 100, "boundary": 50, "initial": 50},
               "training": {"steps": 3300, "log_every": 250, "checkpoint_every": 500,
                            "balance": {"every": 225, "alpha": 0.9}}},
        # at most 30 minutes on 2 CPU cores: the main job's quick recipe for twice its steps
        "quick": {"training": {"steps": 40000, "log_every": 4000, "checkpoint_every": 4000}},
        # at most 2 hours: 3x quick's steps (the main job's error fell as steps^-0.56)
        "long": {"training": {"steps": 120000, "log_every": 10000, "checkpoint_every": 10000}},
        "full": {"sampling": {"interior": 6000, "source": 1600, "boundary": 800, "initial": 800},
                 "training": {"steps": 300000, "log_every": 20000, "checkpoint_every": 20000,
                              "balance": {"every": 2000, "alpha": 0.9}, "compile": True, "cuda_graphs": True}},
    }
    # ci, seed 0: early 25.9 / 26.2 / 41.1 % at the main job's configuration (its single-configuration ci: 8.6 / 8.9 /
    # 13.7 %); bounds ~1.35x
    bounds = {"ci": {"early": {"Ex": 0.35, "Ey": 0.35, "Hz": 0.55}}}

    def setup(self):
        c = self.config
        src, box = c["source"], c["family"]["source"]
        self.check_window()
        self.parameters = []
        for name, unit, key in PARAMETERS:
            rng = box.get(key)
            if not (isinstance(rng, (list, tuple)) and len(rng) == 2):
                raise es.ConfigError(f"family.source.{key} must be the trained range [lower, upper], got {rng!r}")
            self.parameters.append(es.Parameter(name, rng[0], rng[1], unit=unit, key=f"source.{key}"))
        p_x0, p_y0, p_f = self.parameters
        for p, axis in ((p_x0, "x"), (p_y0, "y")):
            for end in (p.lower, p.upper):
                self.check_in_window(f"family.source.{axis}0", axis, end)
        if p_f.lower <= 0:
            raise es.ConfigError(f"family.source.frequency must be a range of positive frequencies, got "
                                 f"[{p_f.lower:g}, {p_f.upper:g}] Hz")
        self.pulse = es.GaussianPulse(p_f)
        profile = es.GaussianProfile((p_x0, p_y0), src["sigma"])
        corners = [self.paddings_for(x0, y0, f) for x0, y0, f in
                   itertools.product((p_x0.lower, p_x0.upper), (p_y0.lower, p_y0.upper), (p_f.lower, p_f.upper))]
        numbers = all(isinstance(src[k], (int, float)) and not isinstance(src[k], bool) for k in ("x0", "y0",
                                                                                                 "frequency"))
        if self.sampling.parameters == "fixed" and numbers:  # one configuration, maybe outside the box: its padding
            corners.append(self.paddings_for(src["x0"], src["y0"], src["frequency"]))
        padding = tuple(max(side) for side in zip(*corners))  # the widest any configuration of the box needs
        self.declare(profile, padding, (0.5 * (p_x0.lower + p_x0.upper), 0.5 * (p_y0.lower + p_y0.upper)))
        if c["network"]["near_field"]:
            self.heads = [self.near_field(columns={"x0": 3, "y0": 4, "f": 5})]

    def constraints(self):
        """The main job's terms; the source disc's points lie around each point's own source."""
        out = super().constraints()
        for c in out:
            if c.name == "source":
                c.sample = self._source_disc(self._count("source", "interior"))
        return out

    def _source_disc(self, n: int):
        """Sampler of the dense disc: offsets in a disc of :meth:`source_disc_radius` about the origin and times
        in the sampled window, moved to each point's source (x0, y0) of its configuration."""
        disc = es.Disk((0.0, 0.0), self.source_disc_radius())

        def sample(seed, progress=1.0):
            cloud = self._time_window(disc, progress).sample_interior(n, self.sampling.method, seed)
            pts = self.training_units(cloud.points)
            params = self.parameter_columns(pts.shape[0], seed)
            pts[:, :2] += params[:, :2]  # x0 / L, y0 / L
            return PointCloud(np.concatenate([pts, params], axis=1), cloud.normals, cloud.weights)

        return sample

    def check(self):
        from elecsolver.reference.fdtd import plan_te_point_source

        src, (x, y), t = self.config["source"], self.output.axes.values(), self.times
        conf = self.configuration
        p_x0, p_y0, p_f = self.parameters
        # the reference of the configuration, and of the box's hardest corner (its highest frequency)
        for f, x0, y0 in ((conf["f"], conf["x0"], conf["y0"]), (p_f.upper, p_x0.lower, p_y0.lower)):
            try:
                plan_te_point_source(frequency=f, sigma=src["sigma"], x0=x0, y0=y0, x=x, y=y, t=t)
            except ValueError as exc:
                raise es.ConfigError(f"no FDTD reference for a source at ({x0:g}, {y0:g}) m, {f:g} Hz, sigma "
                                     f"{src['sigma']:g} m: {exc}; choose lower frequencies or a wider source") from None

    def reference(self):
        """The FDTD fields of the configuration (:attr:`configuration`: x0, y0 in m, f in Hz), cached."""
        from elecsolver.reference.cache import cached_arrays
        from elecsolver.reference.fdtd import solve_te_point_source

        src, (x, y), t = self.config["source"], self.output.axes.values(), self.times
        conf = self.configuration
        source = {"amplitude": src["amplitude"], "sigma": src["sigma"], "x0": conf["x0"], "y0": conf["y0"],
                  "frequency": conf["f"]}
        # the single problem's cache key: the same configuration shares its reference with maxwell-point-source-2d
        key = {"problem": MaxwellPointSource2D.name, "source": {k: source[k] for k in src},
               "window": self.config["window"], "output": {k: self.config["output"][k] for k in ("nx", "ny", "nt")}}

        def compute():
            return solve_te_point_source(amplitude=source["amplitude"], frequency=source["frequency"],
                                         sigma=source["sigma"], x0=source["x0"], y0=source["y0"], x=x, y=y, t=t)

        ref = cached_arrays("fdtd-te", key, compute)
        return es.FieldSet(self.output, {k: ref[k] for k in self.outputs}, self.units, times=self.times)
