"""The shared configuration blocks (``training``, ``sampling``, ``network``) as typed, validated options.

Every problem's configuration holds these three blocks (a problem changes their defaults in its
``defaults``) next to its own sections.  They are validated here, once, with the choices taken from
the modules that own them (optimizers and schedules from :mod:`elecsolver.training.optim`, sampling
methods from :mod:`elecsolver.sampling`, network kinds and activations from :mod:`elecsolver.networks`).
The trainer reads these objects, never the dict.
"""

from __future__ import annotations

import math
import os
from dataclasses import MISSING, dataclass, fields
from typing import ClassVar

from ..capabilities import active, check
from ..config import ConfigError

__all__ = ["BASE_CONFIG", "SHARD_MODES", "NetworkOptions", "SamplingOptions", "TrainingOptions"]

MAX_STEPS = 10**9
MAX_LR = 1e3
MAX_ACCUMULATE = 1024
MAX_OMEGA = 1e6  # network.first_omega: beyond it the first layer's initial weights leave float32's range


def physical_memory() -> int:
    """This machine's memory in bytes (1 TiB where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**40

SHARD_MODES = ("exact", "local")  # sampling.shard, see SamplingOptions
FINISHERS = ("none", "lbfgs")  # training.finish.optimizer: the quasi-Newton finish after the main steps

BASE_CONFIG: dict = {
    "network": {"kind": "mlp", "width": 64, "depth": 4, "activation": "tanh", "init": "auto", "output_gain": 0.1,
                "first_omega": 1.0, "scales": [1.0, 2.0, 4.0], "fourier_features": 0, "fourier_scale": 1.0,
                "input_scaling": True, "parameter_scale": 1.0, "hard_initial": False, "hard_pec": False},
    "sampling": {"method": "sobol", "interior": 2000, "boundary": 400, "initial": 400, "resample_every": 100,
                 "pde_on_boundary": False, "time_ramp": 0.0, "time_ramp_start": 1.0,
                 "rar_every": 0, "rar_pool": 8192, "rar_add": 256, "rar_constraints": ["pde"],
                 "rad_every": 0, "rad_k": 1.0, "rad_c": 1.0, "rad_candidates": 4, "rad_constraints": ["pde"],
                 "shard": "exact", "parameters": "box", "snapshots": 6, "nodes": 16},
    "training": {"steps": 2000, "seed": 0, "dtype": "float32", "optimizer": "adam", "lr": 1e-3, "lr_final": 1e-4,
                 "schedule": "exponential", "lbfgs": {"history": 50, "max_iter": 20},
                 "finish": {"optimizer": "none", "steps": 0, "lr": 1.0}, "balance": {"every": 0, "alpha": 0.9},
                 "least_squares": {"every": 0, "ridge": None, "before_finish": False}, "slabs": 1, "slab_share": None,
                 "log_every": 250, "checkpoint_every": 500, "derivatives": "jet", "compile": False, "cuda_graphs": False,
                 "accumulate": 1, "init_from": None, "tensorboard": False},
    # every problem's output block holds its own sites (counts such as nx, nt) and this switch
    "output": {"png": True},
}


def _block(config: dict, name: str) -> dict:
    try:
        block = config[name]
    except (KeyError, TypeError):
        raise ConfigError(f"the configuration has no {name!r} block") from None
    return block


def _build(cls, config: dict, name: str):
    block = _block(config, name)
    known = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = sorted(required - set(block))
    if missing:
        raise ConfigError(f"{name} block lacks {missing}")
    unknown = sorted(set(block) - known)
    if unknown and not cls.OPEN:  # refused, never dropped: a misspelt key would otherwise change nothing, silently
        raise ConfigError(f"unknown key {name}.{unknown[0]}; the {name} block has {', '.join(sorted(known))}")
    return cls(**{k: block[k] for k in known if k in block})  # a key with a default may be absent (older configs)


def _at_least(block: str, key: str, value, low) -> None:
    if not value >= low:
        raise ConfigError(f"{block}.{key} must be >= {low}, got {value}")


@dataclass(frozen=True)
class TrainingOptions:
    """The ``training`` block: steps, seed, dtype, optimizer and schedule by name, logging, derivatives,
    ``accumulate``: micro-steps per step (gradient accumulation over row blocks of every batch; the same step
    as one pass, in the memory of one block), and ``finish``: a quasi-Newton finish of ``finish.steps`` L-BFGS
    steps (strong-Wolfe line search, ``lbfgs.max_iter`` iterations each, learning rate ``finish.lr``) after the
    ``steps`` of ``optimizer``, on the points of the last round held fixed (see :class:`Trainer`), and
    ``balance``: loss-term weights from gradient norms, recomputed every ``balance.every`` steps (see
    :meth:`Trainer.balance`), and ``least_squares``: the output layer solved by least squares every
    ``least_squares.every`` steps and/or once at the switch to the finish (``least_squares.before_finish``; see
    :mod:`elecsolver.training.least_squares`), and ``slabs``: the time window
    split into that many equal slabs trained in order, ``steps / slabs`` steps (and a finish) each, every slab
    warm-started from the last and starting exactly from its final field (see
    :mod:`elecsolver.training.slabs`), and ``slab_share``: the shares of ``steps`` the slabs get, in order
    (``null``: equal; e.g. ``[0.6, 0.4]``: 60 % of the steps to the first of two slabs), and ``cuda_graphs``: with
    ``compile`` on a CUDA device, the compiled loss-and-gradient graph and Adam's update are also captured as CUDA
    graphs (``torch.compile`` mode "reduce-overhead"), so that a step is a few graph replays instead of hundreds of
    kernel launches; it has no effect on a CPU (see :mod:`elecsolver.training.step`), and ``init_from``: the folder
    of a finished run whose network (the same shape) the training starts from (``--init-from``; fine-tuning)."""

    steps: int
    seed: int
    dtype: str
    optimizer: str
    lr: float
    lr_final: float
    schedule: str
    lbfgs: dict
    log_every: int
    checkpoint_every: int
    derivatives: str
    compile: bool
    accumulate: int
    finish: dict = None  # {"optimizer": "none" | "lbfgs", "steps": int, "lr": float}; see Trainer
    balance: dict = None  # {"every": int (0: off), "alpha": float in [0, 1)}; see Trainer.balance
    least_squares: dict = None  # {"every": int (0: off), "ridge": float >= 0}; see Trainer.least_squares
    slabs: int = 1  # time slabs trained in order (1: the whole window at once); see elecsolver.training.slabs
    slab_share: list = None  # the shares of ``steps`` per slab (positive numbers, normalised); None: equal
    cuda_graphs: bool = False  # with compile on a GPU: capture the compiled graphs as CUDA graphs
    init_from: str | None = None  # the folder of a finished run whose network is the starting point
    tensorboard: bool = False  # also log to OUT/tb (TensorBoard event files): scalars and field images

    OPEN: ClassVar[bool] = False  # every key of the block is a field: another key is refused

    @property
    def compile_mode(self) -> str | None:
        """The ``torch.compile`` mode of the compiled step on a CUDA device: "reduce-overhead" (CUDA graphs) with
        ``cuda_graphs``, else None (the default mode)."""
        return "reduce-overhead" if self.cuda_graphs else None

    @property
    def solves_output_layer(self) -> bool:
        """Whether the run solves the output layer by least squares at all (``least_squares.every`` or
        ``before_finish``, or ``optimizer = "least_squares"``)."""
        ls = self.least_squares or {}
        return bool(ls.get("every") or ls.get("before_finish") or self.optimizer == "least_squares")

    @property
    def finish_steps(self) -> int:
        """Quasi-Newton steps after the ``steps`` of ``optimizer`` (0 without a finish)."""
        f = self.finish or {}
        return int(f.get("steps", 0)) if f.get("optimizer", "none") != "none" else 0

    @property
    def total_steps(self) -> int:
        """``steps`` plus the finish's (one finish per time slab)."""
        return self.steps + self.slabs * self.finish_steps

    def slab_steps(self) -> list[int]:
        """The main steps of each time slab: ``steps`` split as evenly as integers allow, the remainder to the
        last slabs; with ``slab_share``, in those proportions (rounded down, the remainder one step each to the
        slabs with the largest fractions lost, at least one step a slab)."""
        n = self.slabs
        if self.slab_share is None:
            return [self.steps // n + (1 if k >= n - self.steps % n else 0) for k in range(n)]
        spare = self.steps - n  # every slab gets one step, the rest by share
        exact = [spare * w / sum(self.slab_share) for w in self.slab_share]
        out = [1 + int(e) for e in exact]
        for k in sorted(range(n), key=lambda k: int(exact[k]) - exact[k])[:self.steps - sum(out)]:
            out[k] += 1
        return out

    @classmethod
    def from_config(cls, config: dict) -> TrainingOptions:
        """Validated options from ``config["training"]``.

        Raises
        ------
        ConfigError
            Naming the first bad entry and what to use instead.
        """
        from .optim import OPTIMIZERS, SCHEDULES, SOLVERS

        o = _build(cls, config, "training")
        _at_least("training", "steps", o.steps, 1)
        if o.steps > MAX_STEPS:  # 10^9 steps of a millisecond are eleven days: a typo, not a run
            raise ConfigError(f"training.steps = {o.steps} is beyond {MAX_STEPS:.0e}; give the steps the run should "
                              "take (a run can be stopped with --stop-after and continued with --resume)")
        for key in ("log_every", "checkpoint_every", "accumulate"):
            _at_least("training", key, getattr(o, key), 1)
        if o.accumulate > MAX_ACCUMULATE:
            raise ConfigError(f"training.accumulate = {o.accumulate} micro-steps a step is beyond {MAX_ACCUMULATE}; "
                              "a few (2-16) cut the memory of a step as far as it goes")
        if o.dtype not in ("float32", "float64"):
            raise ConfigError(f"training.dtype must be 'float32' or 'float64', got {o.dtype!r}")
        if o.derivatives not in ("jet", "autograd"):
            raise ConfigError(f"training.derivatives must be 'jet' or 'autograd', got {o.derivatives!r}")
        if o.optimizer not in OPTIMIZERS and o.optimizer not in SOLVERS:
            raise ConfigError(f"training.optimizer must be one of {sorted(OPTIMIZERS) + list(SOLVERS)}, got "
                              f"{o.optimizer!r}")
        if o.schedule not in SCHEDULES:
            raise ConfigError(f"training.schedule must be one of {sorted(SCHEDULES)}, got {o.schedule!r}")
        if not 0 <= o.seed < 2**32:  # numpy's and torch's generators both take it
            raise ConfigError(f"training.seed = {o.seed} must be in [0, 2^32 - 1]")
        for key in ("lr", "lr_final"):
            if getattr(o, key) > MAX_LR:  # Adam moves each weight by about lr a step: beyond this nothing trains
                raise ConfigError(f"training.{key} = {getattr(o, key)} is beyond {MAX_LR:g}; typical values are "
                                  "1e-4 to 1e-2 for Adam and 1 for L-BFGS")
        if not (o.lr > 0 and o.lr_final > 0):
            bad = "training.lr" if not o.lr > 0 else "training.lr_final"
            raise ConfigError(f"{bad} = {getattr(o, bad.split('.')[1])} must be positive (training.lr and "
                              "training.lr_final both)")
        for key in ("history", "max_iter"):
            if not (isinstance(o.lbfgs.get(key), int) and o.lbfgs[key] >= 1):
                raise ConfigError(f"training.lbfgs.{key} must be an integer >= 1, got {o.lbfgs.get(key)!r}")
        finish = o.finish if o.finish is not None else {"optimizer": "none", "steps": 0, "lr": 1.0}
        if not isinstance(finish, dict) or set(finish) - {"optimizer", "steps", "lr"}:
            raise ConfigError(f"training.finish must be {{'optimizer': 'none' or 'lbfgs', 'steps': N, 'lr': x}}, got "
                              f"{finish!r}")
        finish = {"optimizer": "none", "steps": 0, "lr": 1.0, **finish}
        if finish["optimizer"] not in FINISHERS:
            raise ConfigError(f"training.finish.optimizer must be one of {list(FINISHERS)}, got "
                              f"{finish['optimizer']!r}")
        if not (isinstance(finish["steps"], int) and not isinstance(finish["steps"], bool) and finish["steps"] >= 0):
            raise ConfigError(f"training.finish.steps must be an integer >= 0, got {finish['steps']!r}")
        if not (isinstance(finish["lr"], (int, float)) and not isinstance(finish["lr"], bool) and finish["lr"] > 0):
            raise ConfigError(f"training.finish.lr must be a number > 0, got {finish['lr']!r}")
        if (finish["optimizer"] == "none") != (finish["steps"] == 0):
            raise ConfigError(f"training.finish needs both an optimizer and steps > 0 (or neither), got optimizer="
                              f"{finish['optimizer']!r}, steps={finish['steps']!r}: e.g. --set "
                              "training.finish.optimizer=lbfgs --set training.finish.steps=200")
        object.__setattr__(o, "finish", finish)
        balance = {"every": 0, "alpha": 0.9, **(o.balance or {})}
        if set(balance) != {"every", "alpha"}:
            raise ConfigError(f"training.balance must be {{'every': K, 'alpha': a}}, got {o.balance!r}")
        if not (isinstance(balance["every"], int) and not isinstance(balance["every"], bool) and balance["every"] >= 0):
            raise ConfigError(f"training.balance.every must be an integer >= 0 (0: off), got {balance['every']!r}")
        if not (isinstance(balance["alpha"], (int, float)) and not isinstance(balance["alpha"], bool)
                and 0 <= balance["alpha"] < 1):
            raise ConfigError(f"training.balance.alpha must be a number in [0, 1), got {balance['alpha']!r}")
        object.__setattr__(o, "balance", balance)
        ls = {"every": 0, "ridge": None, "before_finish": False, **(o.least_squares or {})}
        if ls["ridge"] is None:  # solves between gradient steps keep the layer bounded; a solve alone wants none
            ls["ridge"] = 0.0 if o.optimizer == "least_squares" else 1e-6
        if set(ls) != {"every", "ridge", "before_finish"}:
            raise ConfigError(f"training.least_squares must be {{'every': K, 'ridge': r, 'before_finish': false}}, "
                              f"got {o.least_squares!r}")
        if not (isinstance(ls["every"], int) and not isinstance(ls["every"], bool) and ls["every"] >= 0):
            raise ConfigError(f"training.least_squares.every must be an integer >= 0 (0: off), got {ls['every']!r}")
        if not (isinstance(ls["ridge"], (int, float)) and not isinstance(ls["ridge"], bool) and 0 <= ls["ridge"] <= 1):
            # relative to the mean squared column of the system: beyond 1 the damping, not the loss, sets the layer
            raise ConfigError(f"training.least_squares.ridge must be a number in [0, 1] (relative Tikhonov damping; "
                              f"the default is 1e-6), got {ls['ridge']!r}")
        if not isinstance(ls["before_finish"], bool):
            raise ConfigError("training.least_squares.before_finish must be true or false, got "
                              f"{ls['before_finish']!r}")
        if ls["before_finish"] and not o.finish_steps:
            raise ConfigError("training.least_squares.before_finish solves the output layer once before the "
                              "quasi-Newton finish, but there is none: set training.finish.optimizer=lbfgs and "
                              "training.finish.steps=N, or least_squares.before_finish=false")
        object.__setattr__(o, "least_squares", ls)
        if not (isinstance(o.slabs, int) and not isinstance(o.slabs, bool) and 1 <= o.slabs <= o.steps):
            raise ConfigError(f"training.slabs must be an integer in [1, training.steps={o.steps}] (at least one "
                              f"step a slab; 1: the whole time window at once), got {o.slabs!r}: give more --steps or "
                              "--set training.slabs=1")
        share = o.slab_share
        if share is not None:
            what = (f"training.slab_share must be null (equal slabs) or a list of training.slabs={o.slabs} finite "
                    f"positive numbers (the shares of the steps the slabs get, in order, in any units: [2, 1] gives "
                    f"the first slab two thirds), got {share!r}")
            if not isinstance(share, (list, tuple)):
                raise ConfigError(f"{what}: not a list")
            if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
                       for w in share):
                raise ConfigError(f"{what}: every share must be a finite number > 0")
            if len(share) != o.slabs:
                raise ConfigError(f"{what}: {len(share)} shares for {o.slabs} slab(s); set training.slabs="
                                  f"{len(share)} or give {o.slabs} shares")
            object.__setattr__(o, "slab_share", [float(w) for w in share])
        if o.init_from is not None and not (isinstance(o.init_from, str) and o.init_from):
            raise ConfigError(f"training.init_from must be the folder of a finished run (a path), got {o.init_from!r}")
        if not isinstance(o.cuda_graphs, bool):
            raise ConfigError(f"training.cuda_graphs must be true or false, got {o.cuda_graphs!r}")
        if o.cuda_graphs and not o.compile:
            raise ConfigError("training.cuda_graphs captures the compiled step as CUDA graphs, but training.compile "
                              "is off; add --compile (or --set training.compile=true), or set training.cuda_graphs="
                              "false")
        check(active(training=o))  # what the block's own features do not combine with (elecsolver.capabilities)
        return o


@dataclass(frozen=True)
class SamplingOptions:
    """The ``sampling`` block: method, points per round, resampling, curriculum, adaptive refinement (RAR),
    residual-based adaptive distribution (RAD: ``rad_every``, ``rad_k``, ``rad_c``, ``rad_candidates``,
    ``rad_constraints``; see :mod:`elecsolver.training.points`), and
    ``shard``: how the data-parallel ranks get their points, ``"exact"`` (every rank draws the global cloud and
    keeps its spatial shard: O(N) per rank, the same points at any rank count) or ``"local"`` (every rank draws
    only its own equal-measure part of each domain, boundary or initial set: O(N / world) per rank, the same
    distribution and global counts; no RAR), see :mod:`elecsolver.training.points`, and ``parameters``: for a
    problem with parameter inputs (:class:`elecsolver.axes.Parameter`), ``"box"`` (every point draws its own
    configuration from the trained box), ``"fixed"`` (every point at the problem's configuration: one
    configuration trained with the family's network, e.g. fine-tuning) or ``"nodes"`` (a least-squares family:
    the output layer solved at ``snapshots`` Chebyshev nodes per parameter, then in the span of those solutions at
    ``nodes`` nodes per parameter, and interpolated between them; :mod:`elecsolver.training.nodes`)."""

    method: str
    interior: int
    boundary: int
    initial: int
    resample_every: int
    pde_on_boundary: bool
    time_ramp: float
    time_ramp_start: float
    rar_every: int
    rar_pool: int
    rar_add: int
    rar_constraints: list
    rad_every: int = 0
    rad_k: float = 1.0
    rad_c: float = 1.0
    rad_candidates: int = 4
    rad_constraints: list = ("pde",)
    shard: str = "exact"
    parameters: str = "box"
    snapshots: int = 6
    nodes: int = 16

    OPEN: ClassVar[bool] = True  # also the point counts of the problem's own constraints (read by the problem)

    @classmethod
    def from_config(cls, config: dict) -> SamplingOptions:
        """Validated options from ``config["sampling"]`` (every integer entry is a point count >= 0).

        Raises
        ------
        ConfigError
            Naming the first bad entry.
        """
        from ..sampling import METHODS

        o = _build(cls, config, "sampling")
        if o.method not in METHODS:
            raise ConfigError(f"sampling.method must be one of {list(METHODS)}, got {o.method!r}")
        for key, value in _block(config, "sampling").items():
            if isinstance(value, int) and not isinstance(value, bool) and key not in ("snapshots", "nodes"):
                _at_least("sampling", key, value, 0)
        _at_least("sampling", "resample_every", o.resample_every, 1)
        for key in ("rar_constraints", "rad_constraints"):
            names = getattr(o, key)
            if not (isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)):
                raise ConfigError(f"sampling.{key} must be a list of loss-term names such as [\"pde\"], got {names!r}")
        _at_least("sampling", "rar_pool", o.rar_pool, 1)
        if not (o.time_ramp >= 0 and 0 < o.time_ramp_start <= 1):
            raise ConfigError("sampling.time_ramp must be >= 0 and sampling.time_ramp_start in (0, 1]")
        if o.parameters not in ("box", "fixed", "nodes"):
            raise ConfigError(f"sampling.parameters must be 'box' (each point its own configuration from the trained "
                              f"box), 'fixed' (every point at the configuration) or 'nodes' (least-squares solves at "
                              f"Chebyshev nodes of the box, interpolated), got {o.parameters!r}")
        for key in ("snapshots", "nodes"):
            v = getattr(o, key)
            if not (isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= 64):
                raise ConfigError(f"sampling.{key} must be an integer in [2, 64] (Chebyshev nodes per parameter), "
                                  f"got {v!r}")
        if o.shard not in SHARD_MODES:
            raise ConfigError(f"sampling.shard must be one of {list(SHARD_MODES)}, got {o.shard!r}")
        if not (isinstance(o.rad_k, (int, float)) and not isinstance(o.rad_k, bool) and o.rad_k >= 0
                and isinstance(o.rad_c, (int, float)) and not isinstance(o.rad_c, bool) and o.rad_c >= 0):
            raise ConfigError(f"sampling.rad_k and sampling.rad_c must be numbers >= 0 (the density is "
                              f"|r|^k / mean(|r|^k) + c), got rad_k={o.rad_k!r}, rad_c={o.rad_c!r}")
        _at_least("sampling", "rad_candidates", o.rad_candidates, 1)
        if o.shard == "local" and o.rad_every > 0:
            raise ConfigError("sampling.shard='local' does not support residual-based redistribution "
                              "(sampling.rad_every > 0: its candidates are scored over the global cloud); set "
                              "sampling.rad_every=0 or sampling.shard='exact'")
        if o.shard == "local" and o.rar_every > 0:
            raise ConfigError("sampling.shard='local' does not support adaptive refinement (sampling.rar_every > 0: "
                              "its pool is scored over the global cloud); set sampling.rar_every=0 or "
                              "sampling.shard='exact'")
        return o


@dataclass(frozen=True)
class NetworkOptions:
    """The ``network`` block: kind, width, depth, activation, initialisation, input features, hard constraints
    (``hard_initial``: the initial values through the head; ``hard_pec``: PEC walls of an axis-aligned box)."""

    kind: str
    width: int
    depth: int
    activation: str
    init: str
    output_gain: float
    first_omega: float
    scales: list
    fourier_features: int
    fourier_scale: float
    input_scaling: bool
    parameter_scale: float
    hard_initial: bool
    hard_pec: bool

    OPEN: ClassVar[bool] = True  # also a problem's own network keys (e.g. a near-field head, read by the problem)

    @classmethod
    def from_config(cls, config: dict) -> NetworkOptions:
        """Validated options from ``config["network"]``.

        Raises
        ------
        ConfigError
            Naming the first bad entry.
        """
        from ..networks import ACTIVATIONS, BODIES, INITS

        o = _build(cls, config, "network")
        if o.kind not in BODIES:
            raise ConfigError(f"network.kind must be one of {sorted(BODIES)}, got {o.kind!r}")
        if o.activation not in ACTIVATIONS:
            raise ConfigError(f"network.activation must be one of {sorted(ACTIVATIONS)}, got {o.activation!r}")
        if o.init not in INITS:
            raise ConfigError(f"network.init must be one of {list(INITS)}, got {o.init!r}")
        _at_least("network", "width", o.width, 1)
        _at_least("network", "depth", o.depth, 1)
        _at_least("network", "fourier_features", o.fourier_features, 0)
        for key in ("width", "depth", "fourier_features"):  # beyond any memory; keeps the estimate below finite
            if getattr(o, key) > 10**9:
                raise ConfigError(f"network.{key} = {getattr(o, key):.3g} is beyond any machine's memory; "
                                  f"give a network.{key} of at most 10^9 (e.g. the default)")
        # hidden-layer and Fourier-feature weights; with gradients and Adam's state 4 copies
        weights = o.width * o.width * o.depth + o.fourier_features * (o.width + 4)
        if weights * 4 * 8 > physical_memory():
            raise ConfigError(f"network.width = {o.width}, network.depth = {o.depth} and network.fourier_features = "
                              f"{o.fourier_features} make {weights:.3g} weights, "
                              f"{weights * 32 / 2**30:.3g} GiB with their gradients and Adam's state, more than this "
                              f"machine's {physical_memory() / 2**30:.3g} GiB; give a smaller network.width")
        _at_least("network", "fourier_features", o.fourier_features, 0)
        if not o.scales or not all(isinstance(s, (int, float)) and s > 0 for s in o.scales):
            raise ConfigError(f"network.scales must be a non-empty list of positive numbers, got {o.scales}")
        if not o.fourier_scale > 0:
            raise ConfigError(f"network.fourier_scale must be positive, got {o.fourier_scale}")
        ps = o.parameter_scale
        if isinstance(ps, bool) or not isinstance(ps, (int, float)) or not (math.isfinite(ps) and 0 < ps <= 1e3):
            raise ConfigError(f"network.parameter_scale must be a number in (0, 1000] (the half width each parameter "
                              f"input is scaled to; 1 as the space axes, below 1 for a field smooth in the parameters),"
                              f" got {ps!r}")
        om = o.first_omega
        if isinstance(om, bool) or not isinstance(om, (int, float)) or not (math.isfinite(om) and 0 < om <= MAX_OMEGA):
            raise ConfigError(f"network.first_omega must be a number in (0, {MAX_OMEGA:g}] (the first layer's frequency "
                              f"factor; 1-200 are usual), got {om!r}")
        return o
