"""``maxwell-point-source-2d``: a 2D TEz Gaussian point source in vacuum (MindSpore Elec's setting).

Equations (SI), TEz convention (fields Ex, Ey, Hz)::

    eps0 dEx/dt = dHz/dy
    eps0 dEy/dt = -dHz/dx
    mu0  dHz/dt = dEx/dy - dEy/dx + J(x, y, t)

with J = A g(t) s(x, y) in V/m^2, g(t) = exp(-((t - t0)/tau)^2), tau = sqrt(2.3)/(pi f), t0 = 3.65 tau,
s = exp(-r^2 / (2 sigma^2)) / (2 pi sigma^2).  The +J sign follows MindSpore Elec; in the
textbook convention (Taflove & Hagness, 3rd ed., eq. 3.9) J = -M_z, a magnetic current density.
Zero initial fields, unbounded medium; the window [0, 1] m x [0, 1] m x [0, 4 ns] is computed.

Nondimensionalisation: x' = x/L, t' = t c0/L, E' = E/E0, H' = H eta0/E0, so that the equations
become dEx'/dt' = dHz'/dy', dEy'/dt' = -dHz'/dx', dHz'/dt' = dEx'/dy' - dEy'/dx' + J L/E0.
L is the window's larger side; E0 = 0.0718 A/sigma is the peak of the quasi-static near field
|E_phi| = A (1 - exp(-r^2/(2 sigma^2))) / (2 pi r) of the source (maximum at r = 1.585 sigma).

Free space is imitated by training on the window padded by ``absorbing.padding`` metres on every
side, with the first-order Silver-Mueller condition (Silver & Mueller; Jin, *Theory and
Computation of Electromagnetic Fields*, 2nd ed., eq. 10.1.12) on the outer edge:
n x E = eta0 n x (n x H) for an outgoing wave, in 2D TEz E.tau = eta0 Hz with tau = z x n.
Its reflections arrive late and weak in the window (the padding delays them).

Reference: a Yee FDTD solution (:mod:`elecsolver.reference.fdtd`), cached per configuration.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import torch
from scipy import constants

from elecsolver.config import ConfigError
from elecsolver.networks import HardInitialCondition, build_network
from elecsolver.operators import Fields
from elecsolver.problem import Constraint, Problem, relative_l2
from elecsolver.reference.cache import cached_arrays
from elecsolver.sampling import PointCloud, derive_seed, unit_samples

from ._near_field import QuasiStaticNearField

__all__ = ["MaxwellPointSource2D", "near_field_scale"]

C0 = constants.c
EPS0 = constants.epsilon_0
MU0 = constants.mu_0
ETA0 = math.sqrt(MU0 / EPS0)


def near_field_scale(amplitude: float, sigma: float) -> float:
    """Peak quasi-static |E| (V/m) of a Gaussian magnetic line current of strength ``amplitude`` (V).

    max_r A (1 - exp(-r^2/(2 sigma^2))) / (2 pi r) = 0.0718 A / sigma (at r = 1.585 sigma), from
    Faraday's law around a circle of radius r (curl E = -M in the quasi-static limit).
    """
    u = np.linspace(0.05, 6.0, 20001)
    return float(amplitude / (2 * math.pi * sigma) * np.max((1 - np.exp(-u**2 / 2)) / u))


class MaxwellPointSource2D(Problem):
    """2D TEz Gaussian point source in vacuum; see the module docstring for equations and scales."""

    name = "maxwell-point-source-2d"
    inputs = ("x", "y", "t")
    outputs = ("Ex", "Ey", "Hz")
    units: ClassVar[dict[str, str]] = {"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Ey": "V/m", "Hz": "A/m"}
    default_preset = "quick"
    presets: ClassVar[dict[str, dict]] = {
        # under a minute on 2 CPU cores
        "ci": {
            "network": {"width": 48, "depth": 3},
            "sampling": {"interior": 3000, "source": 800, "boundary": 400, "initial": 400,
                         "resample_every": 50, "time_ramp": 0.8, "time_ramp_start": 0.3},
            "training": {"steps": 500, "lr": 4e-3, "log_every": 100, "checkpoint_every": 100},
        },
        # the default: at most 15 minutes on 2 CPU cores
        "quick": {
            "training": {"steps": 2400},
        },
        # tuned for accuracy on a GPU
        "full": {
            "network": {"width": 128, "depth": 5},
            "sampling": {"interior": 65536, "source": 16384, "boundary": 8192, "initial": 8192,
                         "resample_every": 500},
            "training": {"steps": 60000, "lr": 1e-3, "log_every": 1000, "checkpoint_every": 5000},
        },
    }

    @classmethod
    def default_config(cls) -> dict:
        return {
            "source": {"amplitude": 1.0, "frequency": 1.0e9, "sigma": 7.5e-3, "x0": 0.4975, "y0": 0.4975},
            "window": {"x": [0.0, 1.0], "y": [0.0, 1.0], "t": [0.0, 4.0e-9]},
            "output": {"nx": 101, "ny": 101, "nt": 41, "early_frames": 25},
            "absorbing": {"padding": 0.1},
            "network": {"kind": "multiscale", "width": 64, "depth": 4, "activation": "sin",
                        "scales": [1.0, 4.0, 16.0], "first_omega": 1.0, "hard_initial": True,
                        "near_field": True, "near_field_radius": 0.05},
            "sampling": {"method": "sobol", "interior": 8192, "source": 2048, "source_radius": 5.0,
                         "boundary": 1024, "initial": 1024, "resample_every": 100,
                         "time_ramp": 0.5, "time_ramp_start": 0.4,
                         "rar_every": 0, "rar_pool": 8192, "rar_add": 256, "rar_constraints": ["pde"]},
            "loss": {"pde": 1.0, "source": 1.0, "boundary": 1.0, "initial": 10.0},
            "training": {"steps": 3000, "seed": 0, "dtype": "float32", "lr": 1e-3, "lr_final": 1e-4,
                         "log_every": 250, "checkpoint_every": 500, "derivatives": "jet",
                         "compile": False},
        }

    # configuration --------------------------------------------------------------------
    def validate(self) -> None:
        c = self.config
        src, win = c["source"], c["window"]
        for key in ("amplitude", "frequency", "sigma"):
            if not src[key] > 0:
                raise ConfigError(f"source.{key} must be positive, got {src[key]}")
        for axis in ("x", "y", "t"):
            lo_hi = win[axis]
            if len(lo_hi) != 2 or not lo_hi[1] > lo_hi[0]:
                raise ConfigError(f"window.{axis} must be [lower, upper] with upper > lower, got {lo_hi}")
        if win["t"][0] != 0.0:
            raise ConfigError("window.t must start at 0 (zero initial fields at t = 0)")
        for key in ("nx", "ny", "nt"):
            if c["output"][key] < 2:
                raise ConfigError(f"output.{key} must be >= 2, got {c['output'][key]}")
        if not 1 <= c["output"]["early_frames"] <= c["output"]["nt"]:
            raise ConfigError(f"output.early_frames must be in [1, output.nt], got {c['output']['early_frames']}")
        if c["network"]["near_field_radius"] <= 0:
            raise ConfigError(f"network.near_field_radius must be positive (m), got {c['network']['near_field_radius']}")
        if c["absorbing"]["padding"] < 0:
            raise ConfigError(f"absorbing.padding must be >= 0 m, got {c['absorbing']['padding']}")
        if not (c["sampling"]["time_ramp"] >= 0 and 0 < c["sampling"]["time_ramp_start"] <= 1):
            raise ConfigError("sampling.time_ramp must be >= 0 and sampling.time_ramp_start in (0, 1]")
        smp = c["sampling"]
        if smp["rar_every"] < 0 or smp["rar_pool"] < 1 or smp["rar_add"] < 0:
            raise ConfigError("sampling.rar_every and sampling.rar_add must be >= 0, sampling.rar_pool >= 1")
        unknown = sorted(set(smp["rar_constraints"]) - {"pde", "source", "boundary", "initial"})
        if unknown:
            raise ConfigError(f"sampling.rar_constraints names unknown constraints {unknown}; "
                              "choose from pde, source, boundary, initial")
        for key in ("interior", "source", "boundary", "initial", "resample_every"):
            if c["sampling"][key] < (1 if key == "resample_every" else 0):
                raise ConfigError(f"sampling.{key} must be >= {1 if key == 'resample_every' else 0}")
        self.validate_training()

    # scales and geometry ----------------------------------------------------------------
    def scales(self) -> dict[str, float]:
        win, src = self.config["window"], self.config["source"]
        length = max(win["x"][1] - win["x"][0], win["y"][1] - win["y"][0])
        e0 = near_field_scale(src["amplitude"], src["sigma"])
        return {"length_m": length, "time_s": length / C0, "E0_V_per_m": e0, "H0_A_per_m": e0 / ETA0}

    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        """Nondimensional training box (padded window x time): lower, upper, each [3]."""
        s, win, pad = self.scales(), self.config["window"], self.config["absorbing"]["padding"]
        lo = np.array([win["x"][0] - pad, win["y"][0] - pad, 0.0])
        hi = np.array([win["x"][1] + pad, win["y"][1] + pad, win["t"][1]])
        unit = np.array([s["length_m"], s["length_m"], s["time_s"]])
        return lo / unit, hi / unit

    def source_term(self, points: torch.Tensor) -> torch.Tensor:
        """Nondimensional source J L / E0 at nondimensional points [N, 3] -> [N]."""
        s, src = self.scales(), self.config["source"]
        f = src["frequency"]
        tau = math.sqrt(2.3) / (math.pi * f)
        t0 = 3.65 * tau
        x = points[:, 0] * s["length_m"]
        y = points[:, 1] * s["length_m"]
        t = points[:, 2] * s["time_s"]
        sig = src["sigma"]
        r2 = (x - src["x0"]) ** 2 + (y - src["y0"]) ** 2
        shape = torch.exp(-r2 / (2 * sig**2)) / (2 * math.pi * sig**2)
        g = torch.exp(-(((t - t0) / tau) ** 2))
        return src["amplitude"] * g * shape * (s["length_m"] / s["E0_V_per_m"])

    # constraints ----------------------------------------------------------------------
    def maxwell_residual(self, f: Fields, points: torch.Tensor, normals=None) -> torch.Tensor:
        """Nondimensional TEz residuals [N, 3] (the three equations of the module docstring)."""
        r_ex = f.d("Ex", "t") - f.d("Hz", "y")
        r_ey = f.d("Ey", "t") + f.d("Hz", "x")
        r_hz = f.d("Hz", "t") - (f.d("Ex", "y") - f.d("Ey", "x")) - self.source_term(points)
        return torch.stack([r_ex, r_ey, r_hz], dim=1)

    @staticmethod
    def silver_mueller_residual(f: Fields, points: torch.Tensor, normals: torch.Tensor) -> torch.Tensor:
        """First-order absorbing condition E'.tau - Hz' = 0, tau = z x n = (-n_y, n_x); [N, 1]."""
        e_tau = -normals[:, 1] * f["Ex"] + normals[:, 0] * f["Ey"]
        return (e_tau - f["Hz"]).unsqueeze(1)

    @staticmethod
    def initial_residual(f: Fields, points: torch.Tensor, normals=None) -> torch.Tensor:
        """Zero initial fields: the values themselves, [N, 3]."""
        return f.values

    def _time_fraction(self, progress: float) -> float:
        """Fraction of the time window sampled at this point of training (causal curriculum).

        The window [0, f T] grows linearly from f = time_ramp_start to 1 over the first
        ``time_ramp`` of the training steps, so early times are fitted before later ones (the
        causality argument of Wang, Sankaran & Perdikaris, CMAME 421 (2024) 116813, applied to
        sampling); time_ramp = 0 samples the whole window from the start.
        """
        smp = self.config["sampling"]
        if smp["time_ramp"] <= 0:
            return 1.0
        return min(1.0, smp["time_ramp_start"] + (1 - smp["time_ramp_start"]) * progress / smp["time_ramp"])

    def _box_at(self, progress: float) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._box()
        hi = hi.copy()
        hi[2] = lo[2] + (hi[2] - lo[2]) * self._time_fraction(progress)
        return lo, hi

    def _sample_interior(self, n: int, seed: int, progress: float = 1.0) -> PointCloud:
        lo, hi = self._box_at(progress)
        u = unit_samples(n, 3, self.config["sampling"]["method"], seed)
        return PointCloud(lo + u * (hi - lo))

    def _sample_source(self, n: int, seed: int, progress: float = 1.0) -> PointCloud:
        """Uniform in a disc of radius source_radius * sigma around the source, uniform in t."""
        lo, hi = self._box_at(progress)
        s, src = self.scales(), self.config["source"]
        u = unit_samples(n, 3, self.config["sampling"]["method"], seed)
        radius = self.config["sampling"]["source_radius"] * src["sigma"] / s["length_m"]
        r = radius * np.sqrt(u[:, 0])
        phi = 2 * math.pi * u[:, 1]
        x = src["x0"] / s["length_m"] + r * np.cos(phi)
        y = src["y0"] / s["length_m"] + r * np.sin(phi)
        pts = np.stack([x, y, lo[2] + u[:, 2] * (hi[2] - lo[2])], axis=1)
        inside = np.all((pts >= lo) & (pts <= hi), axis=1)
        return PointCloud(pts[inside])

    def _sample_boundary(self, n: int, seed: int, progress: float = 1.0) -> PointCloud:
        """Uniform in arc length on the padded box's edge and in t, with outward normals."""
        lo, hi = self._box_at(progress)
        wx, wy = hi[0] - lo[0], hi[1] - lo[1]
        u = unit_samples(n, 2, self.config["sampling"]["method"], seed)
        s = u[:, 0] * 2 * (wx + wy)
        pts = np.zeros((n, 3))
        nrm = np.zeros((n, 2))
        edges = [  # (length, start point, direction, normal)
            (wx, (lo[0], lo[1]), (1, 0), (0, -1)),
            (wy, (hi[0], lo[1]), (0, 1), (1, 0)),
            (wx, (hi[0], hi[1]), (-1, 0), (0, 1)),
            (wy, (lo[0], hi[1]), (0, -1), (-1, 0)),
        ]
        start = 0.0
        for length, p0, d, nr in edges:
            sel = (s >= start) & (s < start + length)
            a = s[sel] - start
            pts[sel, 0] = p0[0] + a * d[0]
            pts[sel, 1] = p0[1] + a * d[1]
            nrm[sel] = nr
            start += length
        pts[:, 2] = lo[2] + u[:, 1] * (hi[2] - lo[2])
        return PointCloud(pts, nrm)

    def _sample_initial(self, n: int, seed: int, progress: float = 1.0) -> PointCloud:
        lo, hi = self._box()
        u = unit_samples(n, 2, self.config["sampling"]["method"], seed)
        xy = lo[:2] + u * (hi[:2] - lo[:2])
        return PointCloud(np.concatenate([xy, np.full((n, 1), lo[2])], axis=1))

    def constraints(self) -> list[Constraint]:
        smp, w = self.config["sampling"], self.config["loss"]

        def sampler(method, n, label):
            return lambda seed, progress=1.0: method(n, derive_seed(seed, label), progress)

        out = [
            Constraint("pde", sampler(self._sample_interior, smp["interior"], "pde"), self.maxwell_residual,
                       ("x", "y", "t"), w["pde"]),
            Constraint("source", sampler(self._sample_source, smp["source"], "source"), self.maxwell_residual,
                       ("x", "y", "t"), w["source"]),
            Constraint("boundary", sampler(self._sample_boundary, smp["boundary"], "boundary"),
                       self.silver_mueller_residual, (), w["boundary"]),
        ]
        if not self.config["network"]["hard_initial"]:
            out.append(Constraint("initial", sampler(self._sample_initial, smp["initial"], "initial"),
                                  self.initial_residual, (), w["initial"]))
        return [c for c in out if smp[{"pde": "interior"}.get(c.name, c.name)] > 0]

    def build_network(self) -> torch.nn.Module:
        net_cfg = dict(self.config["network"])
        hard, kind = net_cfg.pop("hard_initial"), net_cfg.pop("kind")
        near, radius = net_cfg.pop("near_field"), net_cfg.pop("near_field_radius")
        lo, hi = self._box()
        net = build_network(kind, 3, 3, lo.tolist(), hi.tolist(), **net_cfg)
        if hard:
            net = HardInitialCondition(net, t_column=2, t_start=0.0, span=float(hi[2]))
        if near:
            s, src = self.scales(), self.config["source"]
            tau = math.sqrt(2.3) / (math.pi * src["frequency"])
            net = QuasiStaticNearField(
                net, amplitude=src["amplitude"] / (s["E0_V_per_m"] * s["length_m"]),
                x0=src["x0"] / s["length_m"], y0=src["y0"] / s["length_m"], sigma=src["sigma"] / s["length_m"],
                radius=radius / s["length_m"], t0=3.65 * tau / s["time_s"], tau=tau / s["time_s"])
        return net

    # output grid, reference and metrics ---------------------------------------------------
    def output_coords(self) -> dict[str, np.ndarray]:
        win, out = self.config["window"], self.config["output"]
        return {
            "x": np.linspace(win["x"][0], win["x"][1], out["nx"]),
            "y": np.linspace(win["y"][0], win["y"][1], out["ny"]),
            "t": np.linspace(win["t"][0], win["t"][1], out["nt"]),
        }

    def grid_points(self, frames: int | None = None) -> np.ndarray:
        c, s = self.output_coords(), self.scales()
        t = c["t"][:frames] if frames is not None else c["t"]
        tt, yy, xx = np.meshgrid(t, c["y"], c["x"], indexing="ij")
        return np.stack([xx.ravel() / s["length_m"], yy.ravel() / s["length_m"], tt.ravel() / s["time_s"]], 1)

    def to_si(self, values: np.ndarray) -> dict[str, np.ndarray]:
        s, out = self.scales(), self.config["output"]
        shape = (-1, out["ny"], out["nx"])
        return {
            "Ex": values[:, 0].reshape(shape) * s["E0_V_per_m"],
            "Ey": values[:, 1].reshape(shape) * s["E0_V_per_m"],
            "Hz": values[:, 2].reshape(shape) * s["H0_A_per_m"],
        }

    def reference(self, cache_dir=None) -> dict[str, np.ndarray]:
        from elecsolver.reference.fdtd import solve_te_point_source

        src, coords = self.config["source"], self.output_coords()
        key = {"problem": self.name, "source": src, "window": self.config["window"],
               "output": {k: self.config["output"][k] for k in ("nx", "ny", "nt")}}

        def compute():
            return solve_te_point_source(amplitude=src["amplitude"], frequency=src["frequency"],
                                         sigma=src["sigma"], x0=src["x0"], y0=src["y0"],
                                         x=coords["x"], y=coords["y"], t=coords["t"])

        return cached_arrays("fdtd-te", key, compute, cache_dir)

    def metrics(self, fields: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict:
        early = self.config["output"]["early_frames"]
        return {
            "early": {k: relative_l2(fields[k][:early], reference[k][:early]) for k in self.outputs},
            "full": {k: relative_l2(fields[k], reference[k]) for k in self.outputs},
        }

    def progress_metrics(self, fields, reference) -> dict:
        early = self.config["output"]["early_frames"]
        return {f"early_{k}": relative_l2(fields[k][:early], reference[k][:early]) for k in self.outputs}

    def progress_frames(self) -> int | None:
        return self.config["output"]["early_frames"]
