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

from torch import nn

from ..config import ConfigError
from ..geometry import TimeDomain
from ..jets import Jet
from ..networks import at_time
from .callbacks import Callback
from .checkpoints import ResumeError

__all__ = ["SlabNetwork", "Slabs", "slab_bounds", "slab_problem"]

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


class Slabs(Callback):
    """Train a time-dependent problem slab by slab (``training.slabs`` > 1): a callback of the trainer's loop.

    The run starts on slab 0 (:func:`slab_problem` and the problem's network); when a slab has done its steps
    (its main steps, plus its finish), the next step starts the next slab: the trainer's segment is rebuilt
    (:meth:`~elecsolver.training.trainer.Trainer.start_segment`) on that slab's problem and network
    (:class:`SlabNetwork` on the network trained so far, frozen), with a schedule, points and balancing weights of
    its own.  The trainer's ``step``, ``wall_s``, ``points_processed`` and ``history`` count over all slabs; the
    checkpoint holds the slab it was written in, whose network (every earlier slab's weights inside) a resume
    rebuilds before loading it.

    Parameters
    ----------
    problem : Problem
        The whole run's problem.

    Attributes
    ----------
    slab : int
        The slab being trained, from 0.
    bounds : list of float
        The slab boundaries t_0 < ... < t_n (s), :func:`slab_bounds`.

    Raises
    ------
    ConfigError
        For a problem without time (and, through :mod:`elecsolver.capabilities`, with tensor or pipeline
        parallelism, ZeRO, mixed precision or least-squares solves: the slab network wraps a one-device network).
    """

    capability = "slabs"

    def __init__(self, problem):
        if not problem.time_dependent:
            raise ConfigError(f"training.slabs={problem.training.slabs} needs a time-dependent problem; "
                              f"{problem.name} has no time: set training.slabs=1")
        self.problem = problem
        self.bounds = slab_bounds(problem)
        self.t_column = problem.inputs.index("t")
        self.slab, self.base = 0, None

    @classmethod
    def wanted(cls, problem) -> bool:
        slabs = problem.training.slabs
        return isinstance(slabs, int) and slabs > 1

    @property
    def n(self) -> int:
        """The number of slabs."""
        return len(self.bounds) - 1

    def _t_units(self, k: int) -> float:
        return self.bounds[k] / self.problem.scales.time

    def slab_model(self, k: int, previous: nn.Module) -> nn.Module:
        """Slab k's network on ``previous`` (the frozen network of slabs < k), its M warm-started from theirs."""
        last = previous.current if isinstance(previous, SlabNetwork) else previous
        current = copy.deepcopy(last)
        for p in current.parameters():
            p.requires_grad_(True)
        return SlabNetwork(current, previous, self.t_column, self._t_units(k))

    def first_segment(self, trainer, problem, model):
        self.base = model
        return slab_problem(self.problem, 0), model

    def _log_slab(self, trainer) -> None:
        t, k = self.bounds, self.slab
        log.info("time slab %d of %d: t in [%.4g, %.4g] s, %d steps%s", k + 1, self.n, t[k], t[k + 1],
                 trainer.segment_options.total_steps,
                 f", from step {trainer.segment_step}" if trainer.segment_step else "")

    def on_train_start(self, trainer, end) -> None:
        # logged here, not when the trainer is built: the CLI opens the rank log file in between
        if trainer.step < end and trainer.segment_step < trainer.segment_options.total_steps:  # else the switch logs
            self._log_slab(trainer)

    def before_step(self, trainer) -> None:
        if trainer.segment_step >= trainer.segment_options.total_steps and self.slab < self.n - 1:
            self.slab += 1
            trainer.start_segment(slab_problem(self.problem, self.slab), self.slab_model(self.slab, trainer.model))
            self._log_slab(trainer)

    def state_dict(self, trainer) -> dict:
        return {"slab": self.slab}

    def load_state_dict(self, trainer, state) -> None:
        k = None if state is None else state.get("slab")
        if k is None or not (0 <= k < self.n):
            raise ResumeError(f"--resume: the checkpoint was not written by a run with training.slabs={self.n}; use "
                              "the same configuration or start a fresh run")
        model = self.base
        for j in range(1, k + 1):  # the structure of slab k's network; the weights come from the checkpoint
            model = self.slab_model(j, model)
        self.slab = k
        trainer.start_segment(slab_problem(self.problem, k), model)
