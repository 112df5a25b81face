"""Problem definition: what a PINN run needs to know about the physics.

A problem declares its inputs and field components (names and SI units), its nondimensional
scales, its constraints (where points are sampled and what residual vanishes there), its network,
the output grid, and a reference solution to measure against.  The trainer and the command line
work with any subclass of :class:`Problem`; ``problems/`` holds the shipped ones.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from .config import ConfigError, merge
from .operators import Fields
from .sampling import PointCloud

__all__ = ["Constraint", "Problem", "relative_l2"]


@dataclass
class Constraint:
    """One loss term: a point cloud and the residual that must vanish on it.

    Attributes
    ----------
    name : str
        Label used in logs and for per-constraint shard sizes ("pde", "boundary", ...).
    sample : callable
        ``sample(seed, progress) -> PointCloud``: the global cloud (all ranks), nondimensional,
        float64; ``progress`` in [0, 1] is the fraction of training done (for curricula).
    residual : callable
        ``residual(fields, points, normals) -> Tensor [N, m]``: m residual components per point.
    wrt : tuple of str
        Inputs whose first derivatives ``residual`` reads (empty: values only).
    weight : float
        Term weight in the loss.
    second : tuple of (str, str)
        Input pairs whose second derivatives ``residual`` reads with ``Fields.d2`` (e.g. the
        mixed pairs of grad-div); passed to :func:`elecsolver.operators.evaluate`.
    laplacian : dict str -> float, optional
        Weights of one summed Laplacian channel that ``residual`` reads with ``Fields.lap``
        (e.g. {"x": 1, "y": 1}); one channel whatever the number of inputs.
    """

    name: str
    sample: Callable[[int, float], PointCloud]
    residual: Callable[[Fields, torch.Tensor, torch.Tensor | None], torch.Tensor]
    wrt: tuple[str, ...] = ()
    weight: float = 1.0
    second: tuple[tuple[str, str], ...] = ()
    laplacian: dict[str, float] | None = None


def relative_l2(pred: np.ndarray, ref: np.ndarray) -> float:
    """Relative L2 error ||pred - ref||_2 / ||ref||_2 over all entries (inf if ref is zero)."""
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(pred - ref))
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


class Problem:
    """Base class of a PINN problem.  Subclasses set the class attributes and override the hooks.

    Class attributes
    ----------------
    name : str
        Registry name, e.g. "maxwell-point-source-2d".
    inputs, outputs : tuple of str
        Input columns (e.g. ("x", "y", "t")) and field components (e.g. ("Ex", "Ey", "Hz")).
    units : dict
        SI unit of every input and output name.
    presets : dict
        Preset name -> nested changes to :meth:`default_config`.
    default_preset : str
    """

    name = "problem"
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    units: ClassVar[dict[str, str]] = {}
    presets: ClassVar[dict[str, dict]] = {}
    default_preset = "quick"

    def __init__(self, config: dict | None = None):
        self.config = copy.deepcopy(config) if config is not None else self.default_config()

    @classmethod
    def default_config(cls) -> dict:
        """The full configuration with every key a user can ``--set``."""
        raise NotImplementedError

    @classmethod
    def preset_config(cls, preset: str | None = None) -> dict:
        """Default configuration with a preset's changes applied.

        Raises
        ------
        ConfigError
            For an unknown preset.
        """
        preset = preset or cls.default_preset
        if preset not in cls.presets:
            raise ConfigError(f"unknown preset {preset!r} for {cls.name}; choose one of {sorted(cls.presets)}")
        return merge(cls.default_config(), cls.presets[preset])

    # hooks ------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ConfigError if the configuration is not physically meaningful."""

    def validate_training(self) -> None:
        """Check the ``training`` block every problem shares (steps, dtype, derivatives, lr, lr_final,
        and log_every / checkpoint_every where present).

        Raises
        ------
        ConfigError
            Naming the first bad entry.
        """
        tr = self.config["training"]
        if tr["steps"] < 1:
            raise ConfigError(f"training.steps must be >= 1, got {tr['steps']}")
        if tr["dtype"] not in ("float32", "float64"):
            raise ConfigError(f"training.dtype must be 'float32' or 'float64', got {tr['dtype']!r}")
        if tr["derivatives"] not in ("jet", "autograd"):
            raise ConfigError(f"training.derivatives must be 'jet' or 'autograd', got {tr['derivatives']!r}")
        if not (tr["lr"] > 0 and tr["lr_final"] > 0):
            raise ConfigError("training.lr and training.lr_final must be positive")
        for key in ("log_every", "checkpoint_every"):
            if key in tr and tr[key] < 1:
                raise ConfigError(f"training.{key} must be >= 1, got {tr[key]}")

    def scales(self) -> dict[str, float]:
        """Nondimensional scales (SI), written into every output."""
        raise NotImplementedError

    def constraints(self) -> list[Constraint]:
        raise NotImplementedError

    def build_network(self) -> nn.Module:
        raise NotImplementedError

    def output_coords(self) -> dict[str, np.ndarray]:
        """Output grid axes in SI units, e.g. {"x": [nx], "y": [ny], "t": [nt]}."""
        raise NotImplementedError

    def grid_points(self) -> np.ndarray:
        """Nondimensional network inputs at every output grid point, float64 [nt*ny*nx, d]."""
        raise NotImplementedError

    def to_si(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """Network outputs [M, c] (nondimensional) -> SI arrays shaped like the output grid."""
        raise NotImplementedError

    def reference(self, cache_dir=None) -> dict[str, np.ndarray]:
        """Reference fields on the output grid, SI, each [nt, ny, nx]."""
        raise NotImplementedError

    def metrics(self, fields: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict:
        """Error metrics of ``fields`` against ``reference``."""
        raise NotImplementedError

    def progress_metrics(self, fields: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict[str, float]:
        """The metrics logged during training, flat {label: value}; default: :meth:`metrics` flattened
        ({"full": {"Ex": e}} becomes {"full_Ex": e})."""
        flat: dict[str, float] = {}

        def walk(prefix: str, node) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(f"{prefix}_{k}" if prefix else str(k), v)
            else:
                flat[prefix] = float(node)

        walk("", self.metrics(fields, reference))
        return flat

    def progress_frames(self) -> int | None:
        """Number of leading time frames to evaluate during training (None: all)."""
        return None
