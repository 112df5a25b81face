"""Time slabs: the time window split into slabs trained in order (``training.slabs``).

A PINN trained on the whole window at once must fit the late field before the early one is right, the
failure that causal training addresses (Wang, Sankaran & Perdikaris, CMAME 421 (2024) 116813; its loss
weights are patented and not used here).  Time marching by slabs is the older remedy (Wight & Zhao,
Commun. Comput. Phys. 29 (2021) 930, "time-marching"; Mattey & Ghosh, CMAME 390 (2022) 114474, "bc-PINN"):
the window [t_0, t_n] is cut at t_0 < t_1 < ... < t_n, and slab k trains on [t_k, t_{k+1}] only, starting
exactly from the state slab k - 1 ended in.

Slab k's network is (:class:`SlabNetwork`)::

    u_k(x, t) = u_{k-1}(x, t_k) + M_k(x, t) - M_k(x, t_k),

with u_{k-1} the previous slabs' network, frozen, and M_k a copy of the problem's own network (body and
heads) warm-started from M_{k-1}.  At t = t_k the last two terms cancel, so u_k(x, t_k) = u_{k-1}(x, t_k)
for every x and every weight: the slab boundary continues the previous slab's field exactly (a hard initial
condition), for any network, head or PDE.  At the start of slab k, M_k = M_{k-1} and u_k equals u_{k-1}
everywhere (the previous slab's network continued into the new slab), so nothing is lost at the switch.
Evaluated on plain tensors (output, logging) the network is piecewise: points with t < t_k go to u_{k-1}.
Derivatives travel as jets (:mod:`elecsolver.jets`): u_{k-1}(x, t_k) and M_k(x, t_k) take the input jet with
t held at t_k (its t-derivative channels zero), so a residual still needs one first-order backward.

Slab k costs two passes of M_k with gradients and 2k - 1 passes without (the frozen slabs at t_k), so a
few slabs are cheap; each has ``training.steps / slabs`` steps of its own schedule (and, with
``training.finish``, its own finish) on points drawn in its slab only (``sampling.time_ramp`` then ramps
within the slab).  The initial-value term, if the problem has a soft one, is trained in the first slab only.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from ..capabilities import active, check
from ..config import ConfigError
from ..geometry import TimeDomain
from ..jets import Jet
from ..networks import at_time

__all__ = ["SlabNetwork", "SlabTrainer", "slab_bounds", "slab_problem"]

log = logging.getLogger("elecsolver.trainer")


class SlabNetwork(nn.Module):
    """u(x, t) = previous(x, t_start) + current(x, t) - current(x, t_start) for t >= t_start; previous(x, t) before.

    Parameters
    ----------
    current : nn.Module
        The slab's trainable network M (inputs in training units, [N, d] or a jet -> [N, c]).
    previous : nn.Module
        The network of the earlier slabs; its parameters are frozen here (``requires_grad=False``).
    t_column : int
        Column of t in the inputs.
    t_start : float
        The slab's start time, training units.

    Shapes: ``forward(x)``: a jet (training: every point is taken to lie in this slab or after it) or a
    tensor [N, d] (evaluation: piecewise by t) -> the same kind, c output channels.
    """

    def __init__(self, current: nn.Module, previous: nn.Module, t_column: int, t_start: float):
        super().__init__()
        for p in previous.parameters():
            p.requires_grad_(False)
        self.current, self.previous = current, previous
        self.t_column, self.t_start = int(t_column), float(t_start)

    def forward(self, x):
        if isinstance(x, Jet):
            return self._late(x)
        late = x[:, self.t_column] >= self.t_start
        out = None
        for mask, fn in ((late, self._late), (~late, self.previous)):
            if bool(mask.any()):
                part = fn(x[mask])
                if out is None:
                    out = part.new_zeros((x.shape[0], part.shape[1]))
                out[mask] = part
        return out if out is not None else self.current(x)

    def _late(self, x):  # the slab's formula, for tensors and jets alike
        xs = at_time(x, self.t_column, self.t_start)
        return self.previous(xs) + self.current(x) - self.current(xs)

    def extra_repr(self) -> str:
        return f"t_column={self.t_column}, t_start={self.t_start}"


def slab_bounds(problem) -> list[float]:
    """The slab boundaries t_0 < ... < t_n (s): ``training.slabs`` equal parts of the problem's time interval."""
    n, t0, t1 = problem.training.slabs, problem.domain.t0, problem.domain.t1
    return [t0 + (t1 - t0) * k / n for k in range(n + 1)]


def slab_problem(problem, k: int):
    """A shallow copy of ``problem`` that trains slab k only: its time interval [t_k, t_{k+1}], that slab's main
    steps (one slab), and no initial-value term after the first slab (the slab network carries the state)."""
    bounds = slab_bounds(problem)
    p = copy.copy(problem)
    p.domain = TimeDomain(problem.space_domain, bounds[k], bounds[k + 1])
    p.training = replace(problem.training, steps=problem.training.slab_steps()[k], slabs=1)
    if k > 0:
        p.conditions = [c for c in problem.conditions if c.where != "initial"]
    return p


class SlabTrainer:
    """Train a time-dependent problem slab by slab (``training.slabs`` > 1); the interface of :class:`Trainer`
    that a run uses (``train``, ``step``, ``wall_s``, ``history``, ``predict``, checkpoints).

    Each slab has a :class:`Trainer` of its own on :func:`slab_problem`; ``step`` counts over all slabs (the
    main steps, plus one finish per slab), ``convergence.csv`` has one row sequence, and the checkpoint
    (``checkpoint.pt``, the slab's trainer's, with the slab number and every earlier slab's weights inside
    the model) resumes in the slab it was written in.

    Parameters
    ----------
    problem, model, context, **kwargs
        As :class:`Trainer`.

    Raises
    ------
    ConfigError
        For a problem without time, and with tensor or pipeline parallelism, ZeRO or mixed precision (the
        slab network wraps a one-device network).
    """

    def __init__(self, problem, model=None, context=None, **kwargs):
        from .context import RunContext
        from .trainer import build_model

        if not problem.time_dependent:
            raise ConfigError(f"training.slabs={problem.training.slabs} needs a time-dependent problem; "
                              f"{problem.name} has no time: set training.slabs=1")
        ctx = context if context is not None else RunContext.from_comm(kwargs.pop("comm", None))
        check(ctx.capabilities | active(training=problem.training, problem=problem))  # elecsolver.capabilities
        self.problem, self.ctx, self.kwargs = problem, ctx, kwargs
        self.options = problem.training
        self.bounds = slab_bounds(problem)
        self.t_column = problem.inputs.index("t")
        device = kwargs.get("device", "cpu")
        if model is None:
            model = build_model(problem, device)
            ctx.broadcast_model(model)  # identical start on every rank
        self.base = model
        self.history: list[dict] = []
        self.offsets = {"step": 0, "wall_s": 0.0, "points": 0}
        self.slab = -1
        self._start(0, model)

    # slabs --------------------------------------------------------------------------------------
    def _t_units(self, k: int) -> float:
        return self.bounds[k] / self.problem.scales.time

    def _slab_model(self, k: int, previous: nn.Module) -> nn.Module:
        """Slab k's network on ``previous`` (the frozen network of slabs < k), its M warm-started from theirs."""
        last = previous.current if isinstance(previous, SlabNetwork) else previous
        current = copy.deepcopy(last)
        for p in current.parameters():
            p.requires_grad_(True)
        return SlabNetwork(current, previous, self.t_column, self._t_units(k))

    def _start(self, k: int, model: nn.Module) -> None:
        from .trainer import Trainer

        self.slab = k
        self.trainer = Trainer(slab_problem(self.problem, k), model, self.ctx, **self.kwargs)
        self.trainer.history = self.history
        self.trainer.step_offset, self.trainer.wall_offset = self.offsets["step"], self.offsets["wall_s"]
        self.trainer.extra_state = {"slab": k, "slab_offsets": dict(self.offsets)}

    def _advance(self) -> None:
        tr = self.trainer
        self.offsets = {"step": self.offsets["step"] + tr.step, "wall_s": self.offsets["wall_s"] + tr.wall_s,
                        "points": self.offsets["points"] + tr.points_processed}
        self._start(self.slab + 1, self._slab_model(self.slab + 1, tr.model))

    # the Trainer interface ----------------------------------------------------------------------
    @property
    def step(self) -> int:
        """Steps done over all slabs."""
        return self.offsets["step"] + self.trainer.step

    @property
    def wall_s(self) -> float:
        return self.offsets["wall_s"] + self.trainer.wall_s

    @property
    def points_processed(self) -> int:
        return self.offsets["points"] + self.trainer.points_processed

    def train(self, stop_after: int | None = None) -> None:
        """Train the remaining slabs in order (or up to global step ``stop_after``, then checkpoint and return).

        Raises
        ------
        FloatingPointError
            As :meth:`Trainer.train`.
        """
        n = len(self.bounds) - 1
        while True:
            local = None if stop_after is None else stop_after - self.offsets["step"]
            if local is not None and local <= self.trainer.step:
                return
            t, k = self.bounds, self.slab
            # logged here, not when the slab's trainer is built: the CLI opens the rank log file in between
            log.info("time slab %d of %d: t in [%.4g, %.4g] s, %d steps%s", k + 1, n, t[k], t[k + 1],
                     self.trainer.options.total_steps,
                     f", from step {self.trainer.step}" if self.trainer.step else "")
            self.trainer.train(stop_after=local)
            if self.trainer.step < self.trainer.options.total_steps or self.slab == n - 1:
                return
            self._advance()

    def advance(self) -> tuple[float, list[float]]:
        """One step of the schedule (see :meth:`Trainer.advance`) in the current slab, moving on to the next slab
        first when the current one has done its steps.

        Raises
        ------
        RuntimeError
            After the last slab's last step.
        """
        if self.trainer.step >= self.trainer.options.total_steps:
            if self.slab == len(self.bounds) - 2:
                raise RuntimeError("every time slab has done its steps")
            self._advance()
        return self.trainer.advance()

    def load_checkpoint(self, path=None) -> None:
        """Continue from the checkpoint of the slab it was written in (see :meth:`Trainer.load_checkpoint`).

        Raises
        ------
        ResumeError
            As :meth:`Trainer.load_checkpoint`, and for a checkpoint written without time slabs.
        """
        from .trainer import ResumeError, read_checkpoint

        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.exists():
            raise ResumeError(f"--resume: no checkpoint at {path}; run without --resume to start fresh")
        state = read_checkpoint(path)  # as Trainer.load_checkpoint
        k = state.get("slab")
        if k is None or not (0 <= k < len(self.bounds) - 1):
            raise ResumeError(f"--resume: the checkpoint at {path} was not written by a run with training.slabs="
                              f"{len(self.bounds) - 1}; use the same configuration or start a fresh run")
        model = self.base
        for j in range(1, k + 1):  # the structure of slab k's network; the weights come from the checkpoint
            model = self._slab_model(j, model)
        self.offsets = dict(state["slab_offsets"])
        self._start(k, model)
        self.trainer.load_checkpoint(path)
        self.history = self.trainer.history
        n = len(self.bounds) - 1
        if self.trainer.step >= self.trainer.options.total_steps and k < n - 1:
            self._advance()  # written at the end of slab k: continue with the next

    def __getattr__(self, name):
        # everything else is the current slab's trainer's: model (the network of the slabs so far, piecewise in t on
        # tensors), predict (its problem copy has the same output sites and times), gather, checkpoints, ...
        if name == "trainer":
            raise AttributeError(name)
        return getattr(self.trainer, name)
