"""The training loop: points -> loss -> step, with every training feature a callback of the loop.

:class:`Trainer` composes the parts (:mod:`~elecsolver.training.points`, :mod:`~elecsolver.training.loss`,
:mod:`~elecsolver.training.step`) for a problem and a model that ``elecsolver.parallel`` may already have
transformed, with a :class:`~elecsolver.training.context.RunContext` that says how to talk to the other
ranks.  Without a model it builds the problem's network (seeded from ``training.seed``); without a
context it is one process, and refuses to start when a launcher started several (every rank would
silently train its own copy): use :func:`elecsolver.train` there.  The time slabs, the finish, the loss balancing,
the least-squares solves, RAR / RAD, the log, the checkpoint and the progress bar are callbacks of its loop
(:mod:`elecsolver.training.callbacks`).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import random
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .. import capabilities
from .._version import __version__
from ..config import ConfigError
from ..io.atomic import atomic_path
from ..problem import Problem
from .callbacks import (
    Balance,
    Callback,
    Checkpoint,
    Finish,
    LeastSquares,
    Log,
    ProgressBar,
    Redistribute,
    Refine,
)
from .checkpoints import (
    ResumeError,
    check_parallel,
    config_differences,
    parallel_differences,
    read_checkpoint,
)
from .context import RunContext, launched_world_size
from .interrupt import CHECK_EVERY, Interrupted, pending
from .loss import constraint_residual, loss_terms
from .points import Points
from .slabs import Slabs
from .step import Step

__all__ = ["ResumeError", "Trainer", "build_model", "default_callbacks", "read_checkpoint"]

log = logging.getLogger("elecsolver.trainer")

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def build_model(problem: Problem, device: str | torch.device = "cpu") -> nn.Module:
    """The problem's network, initialised from ``training.seed``, on ``device`` in ``training.dtype``."""
    torch.manual_seed(problem.training.seed)
    return problem.build_network().to(device=torch.device(device), dtype=DTYPES[problem.training.dtype])


def _with_own(defaults: list[Callback], own) -> list[Callback]:
    """``own`` callbacks after the default ones, before the checkpoint and the progress bar (so that a checkpoint
    holds their state of its step).

    Raises
    ------
    TypeError
        If ``own`` is not a list or tuple of :class:`Callback` instances.
    """
    if not isinstance(own, (list, tuple)) or not all(isinstance(cb, Callback) for cb in own):
        got = own if not isinstance(own, (list, tuple)) else next(cb for cb in own if not isinstance(cb, Callback))
        what = f"the class {got.__name__} (pass an instance: {got.__name__}())" if isinstance(got, type) else \
            f"{type(got).__name__} {got!r:.60}"
        raise TypeError(f"callbacks must be a list of instances of elecsolver.training.callbacks.Callback "
                        f"(subclass it and pass instances); got {what}")
    last = [cb for cb in defaults if isinstance(cb, (Checkpoint, ProgressBar))]
    return [*(cb for cb in defaults if cb not in last), *own, *last]


def default_callbacks(problem: Problem, progress: bool = True) -> list[Callback]:
    """The callbacks ``problem``'s configuration turns on, in the loop's order: time slabs, the finish, balancing,
    least squares, RAR, RAD, the log, the checkpoint, the progress bar (``progress`` False: none shown).

    Raises
    ------
    ConfigError
        From a callback that does not fit the problem (time slabs on a problem without time).
    """
    kinds = (Slabs, Finish, Balance, LeastSquares, Refine, Redistribute, Log, Checkpoint)
    out: list[Callback] = [Slabs(problem) if kind is Slabs else kind() for kind in kinds if kind.wanted(problem)]
    out.append(ProgressBar(progress))
    return out


class Trainer:
    """Train a problem's network on its constraints.

    ``step``, ``wall_s`` (s), ``points_processed`` and ``history`` count over the whole run.  With more than one
    time slab (``training.slabs``) the run is trained slab by slab (:class:`~elecsolver.training.slabs.Slabs`):
    ``segment_step``, ``segment_options``, ``model``, ``constraints`` and the points are then the current slab's.

    Parameters
    ----------
    problem : Problem
    model : nn.Module, optional
        The network (possibly transformed by ``elecsolver.parallel``); default :func:`build_model`, whose
        parameters are then broadcast from rank 0.
    context : RunContext, optional
        Rank, world and collectives (default: one process).
    comm : communicator, optional
        Shortcut for ``context=RunContext.from_comm(comm)``.
    device : str
        "cpu" or "cuda[:k]".
    out_dir : path, optional
        Where the checkpoint and ``convergence.csv`` go (the writer rank writes; the folder is made at the first
        write); None: nowhere.
    reference : FieldSet, optional
        Reference fields on the problem's output sites, for the errors logged during training.
    shard_sizes : dict, optional
        Constraint name -> points per rank, to force an uneven split (tests).
    progress : bool
        Show a progress bar on the writer rank when stderr is a terminal (logs to a file or pipe get the log lines).
    check_gradients : callable, optional
        ``check_gradients(params) -> bool``, the loss-scale check of :class:`~elecsolver.training.step.Step`.
    callbacks : list of Callback, optional
        Hooks of one's own (instances of :class:`~elecsolver.training.callbacks.Callback`), run after the ones the
        configuration turns on (:func:`default_callbacks`) but before the checkpoint and the progress bar, so that
        a checkpoint holds their state of its step; each one's state is saved under its class name (``Name#1``,
        ``Name#2`` for further instances of one class).

    Raises
    ------
    ConfigError
        If a launcher started several ranks but no context was given, or the context's strategy, the training
        block and the problem turn on capabilities that do not combine (:mod:`elecsolver.capabilities`), or a
        callback does not fit the problem (time slabs without time).
    TypeError
        If ``callbacks`` is not a list of Callback instances.
    """

    SYNC_EVERY = 50  # on a GPU, steps between reads of the loss (see train)

    def __init__(self, problem: Problem, model: nn.Module | None = None, context: RunContext | None = None, *,
                 comm=None, device: str = "cpu", out_dir: str | os.PathLike | None = None, reference=None,
                 shard_sizes: dict[str, list[int]] | None = None, progress: bool = True, check_gradients=None,
                 callbacks: tuple[Callback, ...] | list[Callback] = ()):
        self.problem, self.options = problem, problem.training
        self.ctx = context if context is not None else RunContext.from_comm(comm)
        # what the strategy, the training block and the problem turn on must combine (elecsolver.capabilities)
        capabilities.check(self.ctx.capabilities | capabilities.active(training=problem.training, problem=problem))
        launched = launched_world_size()
        if self.ctx.world * self.ctx.model_parallel == 1 and launched > 1 and not self.ctx.solo:
            raise ConfigError(f"this process is one of {launched} ranks started by a launcher (mpirun, torchrun or "
                              "srun), but the Trainer has no data-parallel context, so every rank would train its own "
                              "copy; use elecsolver.train(problem) (it takes callbacks=[...] too), or run one process")
        if self.options.compile and torch.device(device).type == "cpu" and not cxx_compiler():
            raise ConfigError("training.compile (--compile, or a preset that sets it, such as the point source's "
                              "ci) runs torch.compile, which on the CPU needs a C++ compiler, and none was found "
                              "($CXX, g++, c++ or clang++); install one (tools/setup.sh does, as root) or run "
                              "eager with --set training.compile=false")
        self.device, self.dtype = torch.device(device), DTYPES[self.options.dtype]
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.reference = reference
        self.callbacks = _with_own(default_callbacks(problem, progress), callbacks)
        self._shard_sizes, self._check_gradients = shard_sizes, check_gradients
        if model is None:
            model = build_model(problem, self.device)
            self.ctx.broadcast_model(model)  # identical start on every rank
        self.model = model
        if self.options.init_from:
            self._init_from(self.options.init_from)
        self.step, self.wall_s, self.points_processed, self.step_offset = 0, 0.0, 0, 0
        self.history: list[dict] = []
        self.should_stop = False  # set by a callback to end the train call after this step (see train)
        self._saved_step = -1  # the step the last checkpoint was written at
        segment = problem
        for cb in self.callbacks:
            segment, model = cb.first_segment(self, segment, model)
        self.start_segment(segment, model)

    def start_segment(self, problem: Problem, model: nn.Module) -> None:
        """Build what trains the next segment of the run from step :attr:`step` on: ``problem`` (the whole run's,
        or a time slab's copy, whose ``training.steps`` are the segment's) and its network; its constraints, points,
        loss and optimizer step, its balancing weights at 1.  Called by the constructor, and by a callback that
        moves the run to its next segment (:class:`~elecsolver.training.slabs.Slabs`).

        Raises
        ------
        ConfigError
            For a residual that cannot be evaluated, a pipeline whose micro-batches do not fit the points, or a
            step that torch.compile cannot compile.
        """
        self.segment_options = problem.training
        self.step_offset = self.step
        self.model = model
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.constraints = problem.constraints()
        spatial = [k for k, axis in enumerate(problem.axes) if axis.kind == "space"]  # shards are cut along space
        self.points = Points(self.constraints, problem.sampling, self.options.seed, self.segment_options.steps,
                             self.ctx.rank, self.ctx.world, spatial, self.dtype, self.device, self._shard_sizes)
        self._terms_fn = self._terms
        graphs = False
        if self.options.compile:
            graphs = self.options.cuda_graphs and self.device.type == "cuda"
            mode = self.options.compile_mode if graphs else None
            if self.options.cuda_graphs and not graphs and self.step == 0:
                log.info("training.cuda_graphs has no effect on %s: the step is compiled without CUDA graphs",
                         self.device)
            self._terms_fn = torch.compile(self._terms, fullgraph=True, mode=mode)
        # the gradient-norm weights of the loss terms (training.balance), 1 until the first balance; a copy on the
        # training device multiplies the terms
        self.balance_weights = torch.ones(len(self.constraints), dtype=torch.float64)
        self._device_weights = self.balance_weights.to(device=self.device, dtype=self.dtype)
        if self.options.balance["every"]:
            plain = self._terms_fn
            self._terms_fn = lambda batches: plain(batches) * self._device_weights
        # the quasi-Newton finish evaluates the loss many times a step (its line search): under CUDA graphs it runs
        # eager, since each evaluation would record a new graph
        self._finish_terms_fn = self._terms_fn
        if graphs:
            self._finish_terms_fn = (lambda batches: self._terms(batches) * self._device_weights) \
                if self.options.balance["every"] else self._terms
        ctx = self.ctx
        forward_backward = None
        if ctx.make_forward_backward is not None:
            forward_backward = ctx.make_forward_backward(self.constraints, problem.inputs, problem.outputs,
                                                         self.options.derivatives, compiled=self.options.compile)
        if self.options.optimizer == "least_squares":
            self.stepper = _SolveStep(self)
        else:
            self.stepper = Step(self.params, self.segment_options, self._terms_fn, self._batches_now,
                                ctx.sync_gradients, ctx.all_reduce_sum, self._check_gradients,
                                forward_backward=forward_backward, make_optimizer=ctx.make_optimizer,
                                loss_scaler=ctx.loss_scaler, autocast=ctx.autocast,
                                optimizer_state_dict=ctx.optimizer_state_dict)
        self.main_stepper = self.stepper
        self._forward_backward = forward_backward
        self._eval_model: nn.Module | None = None
        check = getattr(forward_backward, "check_batches", None)
        if check is not None:  # e.g. a pipeline's micro-batches against the points: refuse before training
            try:
                check(self._batches_now())
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        self.check_residuals()
        if self.options.compile:
            if forward_backward is None:
                self._compile_now(self._terms_fn if not self.options.balance["every"] else plain)
            else:  # a pipeline: one collective pass at scale 0 compiles every stage's parts (the gradients are zeroed)
                self._compile_now(lambda batches: forward_backward(batches, 0.0))
                for q in self.params:
                    q.grad = None

    @property
    def segment_step(self) -> int:
        """Steps done in the current segment (the run, or the time slab being trained)."""
        return self.step - self.step_offset

    def callback(self, kind: type) -> Callback | None:
        """The trainer's callback of class ``kind`` (the first), or None."""
        return next((cb for cb in self.callbacks if isinstance(cb, kind)), None)

    def _compile_now(self, compiled) -> None:
        """Compile the loss terms on this rank's points now, before anything is written, so that a problem whose
        step torch.compile cannot compile is one line instead of a traceback at the first step (the graphs are
        cached: the first step does not compile again).

        Raises
        ------
        ConfigError
            If torch.compile fails (names training.compile and the way to run eager).
        """
        t0 = time.perf_counter()
        log.info("compiling the training step with torch.compile (a few seconds to minutes; training.compile)")
        try:
            compiled(self._batches_now())
        except torch._dynamo.exc.TorchDynamoException as exc:
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip() and "raised:" not in ln),
                         type(exc).__name__)
            raise ConfigError(f"training.compile: torch.compile cannot compile {self.problem.name}'s training step "
                              f"({first[:160]}); run eager with --set training.compile=false") from None
        log.info("compiled the loss in %.1f s (its backward and the optimizer's update compile in the first step)",
                 time.perf_counter() - t0)

    def _init_from(self, folder: str) -> None:
        """Start from the network of the finished run in ``folder`` (``training.init_from``); every rank reads the
        same file, so every rank starts alike.

        Raises
        ------
        ConfigError
            For a folder without a finished run, a network of another shape, or a split network (tp / pp).
        """
        from ..query import load_network_state

        try:
            state = load_network_state(self.problem, folder)
        except ConfigError as exc:
            raise ConfigError(f"training.init_from (--init-from) = {folder}: {exc}") from None
        try:
            self.model.load_state_dict(state)
        except RuntimeError as exc:
            raise ConfigError(f"--init-from {folder}: {str(exc).splitlines()[0]}") from None
        log.info("network initialised from %s", folder)

    def check_residuals(self, n: int = 4) -> None:
        """Evaluate every loss term's residual on a few of its points, so that a residual of the wrong shape or
        one reading an undeclared derivative fails here, in one line, before anything is trained or written.

        Raises
        ------
        ConfigError
            Naming the loss term and what to fix.
        """
        p = self.problem
        model = self.ctx.check_model if self.ctx.check_model is not None else self.model
        for c in self.constraints:
            if self.problem.sampling.shard == "local":  # this rank's part only: no rank draws the global cloud
                from ..sampling import local_part

                with local_part(self.ctx.rank, self.ctx.world):
                    cloud = c.sample(0, 0.0)
            else:
                cloud = c.sample(0, 0.0)
            pts, nrm = self.points.tensor(cloud.points[:n]), self.points.tensor(
                None if cloud.normals is None else cloud.normals[:n])
            if pts.shape[0] == 0:
                continue
            try:
                constraint_residual(model, c, pts, nrm, p.inputs, p.outputs, self.options.derivatives)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None

    # loss balancing ---------------------------------------------------------------------------
    def balance(self) -> list[float]:
        """Recompute the loss-term weights from gradient norms; collective; returns the new weights.

        With L_i the i-th term's mean squared residual and w_i its declared weight, the loss is
        sum_i lambda_i w_i L_i.  Every ``training.balance.every`` steps (Wang, Teng & Perdikaris, SIAM J. Sci.
        Comput. 43 (2021) A3055, alg. 1, in the gradient-norm form of Wang et al., "An expert's guide to
        training physics-informed neural networks", 2023, eq. 12)::

            lambda_hat_i = sum_j |grad L_j| / |grad L_i|,     lambda_i <- alpha lambda_i + (1 - alpha) lambda_hat_i

        (alpha = ``training.balance.alpha``; the gradients are those of the global terms, summed over the
        data-parallel ranks, so every rank gets the same weights; under tensor or pipeline parallelism they are
        taken on the gathered one-device copy of the network, a collective, and a pipeline schedule gets the
        weights for the terms it forms).  Each term's gradient norm is then w_i times
        a common value: the declared weights set the terms' relative pull, the balancing removes their scale.
        A term with w_i = 0 or a zero gradient keeps its lambda.
        """
        alpha = self.options.balance["alpha"]
        model, params = self.model, self.params
        if self.ctx.gather_model is not None:  # tensor / pipeline parallel: the norms on a one-device copy
            model = self.ctx.gather_model(self.model)  # collective
            params = [q for q in model.parameters() if q.requires_grad]
        p = self.problem
        terms = loss_terms(model, params, self.constraints, self._batches_now(), p.inputs, p.outputs,
                           self.options.derivatives)
        norms = torch.zeros(len(self.constraints), dtype=torch.float64)
        for i, c in enumerate(self.constraints):
            if c.weight == 0:
                continue
            grads = torch.autograd.grad(terms[i], params, retain_graph=i + 1 < len(self.constraints),
                                        allow_unused=True)
            flat = torch.cat([(g if g is not None else torch.zeros_like(q)).reshape(-1).to(torch.float64)
                              for g, q in zip(grads, params)])
            self.ctx.all_reduce_sum(flat)
            norms[i] = flat.norm() / abs(c.weight)
        live = norms > 0
        if bool(live.any()):
            new = torch.where(live, norms[live].sum() / torch.where(live, norms, 1.0), self.balance_weights)
            self.balance_weights = alpha * self.balance_weights + (1 - alpha) * new
        self._push_balance_weights()
        log.info("step %d: loss weights %s", self.step,
                 {c.name: round(float(w), 4) for c, w in zip(self.constraints, self.balance_weights)})
        return self.balance_weights.tolist()

    def _push_balance_weights(self) -> None:
        """Copy the loss-term weights to the training device, and hand them to a pipeline schedule, which forms the
        loss terms itself."""
        self._device_weights = self.balance_weights.to(device=self.device, dtype=self.dtype)
        target = getattr(self._forward_backward, "pipeline", self._forward_backward)
        if target is not None and hasattr(target, "term_weights"):
            target.term_weights = self.balance_weights.tolist()

    def least_squares(self) -> dict[str, float]:
        """Solve the output layer for the minimum of the loss on the current points with the hidden layers fixed
        (see :mod:`elecsolver.training.least_squares`); collective; returns the loss before and after."""
        from .least_squares import solve_output_layer
        from .nodes import node_head, placed, solve_nodes

        p = self.problem
        if node_head(self.model) is not None:  # a family solved at nodes of its box (sampling.parameters = nodes)
            out = solve_nodes(self)
            log.info("step %d: least-squares family: %d snapshots, a reduced space of %d, %d interpolation nodes; "
                     "worst loss at a node %.6g", self.step, out["snapshots"], out["unknowns"], out["nodes"],
                     out["loss_after"])
            return out
        weights = [c.weight * float(lam) for c, lam in zip(self.constraints, self.balance_weights)]
        out = solve_output_layer(self.model, self.constraints, placed(p, self._batches_now()), weights, p.inputs,
                                 p.outputs,
                                 self.options.derivatives, self.ctx.all_reduce_sum, self.ctx.rank, self.ctx.world,
                                 self.options.least_squares["ridge"])
        log.info("step %d: least-squares output layer (%d unknowns): loss on this round's points after the "
                 "step's update %.6g -> %.6g", self.step,
                 out["unknowns"], out["loss_before"], out["loss_after"])
        return out

    # the quasi-Newton finish -------------------------------------------------------------------
    @property
    def in_finish(self) -> bool:
        """Whether the run is in its quasi-Newton finish (steps >= ``training.steps``)."""
        return self.stepper is not self.main_stepper

    # compatibility views ---------------------------------------------------------------------
    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.stepper.optimizer

    @property
    def comm(self) -> RunContext:
        return self.ctx

    # loss -------------------------------------------------------------------------------------
    def loss_terms(self) -> torch.Tensor:
        """This rank's share of every weighted loss term at the current step, [n_constraints]."""
        return self._terms_fn(self._batches_now())

    def _batches_now(self) -> list[tuple]:
        step = min(self.segment_step, self.segment_options.steps - 1)  # the finish holds the last round's points
        return [(b.points, b.normals, b.weights, b.denom_t if self.options.compile else max(b.denom, 1e-300))
                for b in self.points.at(step)]

    def _terms(self, batches: list) -> torch.Tensor:
        p = self.problem
        return loss_terms(self.model, self.params, self.constraints, batches, p.inputs, p.outputs,
                          self.options.derivatives)

    def residual(self, name: str, points: torch.Tensor, normals: torch.Tensor | None = None) -> torch.Tensor:
        """The residual [n, m] of loss term ``name`` at training-unit ``points`` [n, d]: a public seam.

        Raises
        ------
        KeyError
            For an unknown term.
        """
        c = next((c for c in self.constraints if c.name == name), None)
        if c is None:
            raise KeyError(f"no loss term {name!r}; the terms are {[c.name for c in self.constraints]}")
        p = self.problem
        return constraint_residual(self.model, c, points, normals, p.inputs, p.outputs, self.options.derivatives)

    def batches(self) -> list[tuple[str, torch.Tensor, int]]:
        """This rank's points per constraint at the current step: (name, local points [n, d], global count)."""
        return [(b.constraint.name, b.points, b.n_global) for b in self.points.at(self.segment_step)]

    # one step ----------------------------------------------------------------------------------
    def train_step(self) -> tuple[float, list[float]]:
        """One optimizer step; returns the global loss and its terms (equal on every rank)."""
        values = self.step_terms().tolist()
        return float(sum(values)), values

    def step_terms(self) -> torch.Tensor:
        """One optimizer step; the global loss terms [n_terms] on the training device, not waited for."""
        stepper = self.stepper
        values = stepper.run() if hasattr(stepper, "run") else torch.as_tensor(stepper(), dtype=torch.float64)
        self.points_processed += sum(b.n_global for b in self.points.batches)
        self.step += 1
        return values

    def refine(self) -> dict[str, int]:
        """One adaptive-refinement round (see :mod:`elecsolver.training.points`)."""
        added = self.points.refine(self.segment_step, self._residual_score, self.ctx.all_reduce_sum)
        log.info("step %d: adaptive refinement added %s", self.step, added)
        return added

    def redistribute(self) -> dict[str, int]:
        """One residual-based redistribution round (RAD, see :mod:`elecsolver.training.points`)."""
        drawn = self.points.redistribute(self.segment_step, self._residual_score, self.ctx.all_reduce_sum)
        log.info("step %d: residual-based redistribution drew %s", self.step, drawn)
        return drawn

    def _residual_score(self, c, pts, nrm):
        p = self.problem
        return constraint_residual(self.model, c, pts, nrm, p.inputs, p.outputs, self.options.derivatives) \
            .pow(2).sum(1)

    # evaluation --------------------------------------------------------------------------------
    def gather(self) -> nn.Module:
        """Collective (every rank calls it): make :attr:`eval_model` an ordinary one-device network equal to the
        trained model now (the model itself unless ``parallel/`` sharded or split it)."""
        self._eval_model = self.ctx.gather_model(self.model) if self.ctx.gather_model is not None else None
        return self.eval_model

    @property
    def eval_model(self) -> nn.Module:
        """The network that :meth:`predict` evaluates: the model, or its gathered copy (see :meth:`gather`)."""
        return self._eval_model if self._eval_model is not None else self.model

    @torch.no_grad()
    def predict(self, times: np.ndarray | None = None, chunk: int = 65536):
        """The network's fields on the problem's output sites (at ``times``, default all), SI, as a FieldSet.

        Under tensor or pipeline parallelism call :meth:`gather` on every rank first."""
        from ..evaluation import evaluate_fieldset

        return evaluate_fieldset(self.eval_model, self.problem, times, self.device, self.dtype, chunk)

    # loop ---------------------------------------------------------------------------------------
    def advance(self) -> tuple[float, list[float]]:
        """One step of the training schedule, as :meth:`train` runs it: the switch to the quasi-Newton finish
        (after a least-squares solve, with ``training.least_squares.before_finish``), the loss balancing and the
        least-squares solves due before the step, the optimizer step, then the adaptive refinement (RAR) and
        redistribution (RAD) due after it.  Collective under data parallelism.  For loops of one's own (a benchmark
        timing every step) that must train as ``train`` does.

        Returns
        -------
        (loss, terms) : (float, list of float)
            What :meth:`train_step` returns: the global loss and its terms in the order of ``constraints``, each
            with its declared weight and its balancing weight applied (the loss is their sum).

        Raises
        ------
        RuntimeError
            When the run has already done all its steps (``training.steps`` plus the finish's).
        """
        values = self.advance_terms().tolist()
        return float(sum(values)), values

    def advance_terms(self) -> torch.Tensor:
        """:meth:`advance`, returning the global loss terms as a tensor on the training device (not waited for)."""
        total = self.options.total_steps
        if self.step >= total:
            raise RuntimeError(f"the run has done all its {total} steps (training.steps plus the finish's); nothing "
                               "to advance")
        for cb in self.callbacks:
            cb.before_step(self)
        terms = self.step_terms()
        for cb in self.callbacks:
            cb.after_step(self)
        return terms

    def train(self, stop_after: int | None = None) -> None:
        """Train up to ``training.steps`` plus the finish's (or up to step ``stop_after``, then checkpoint and
        return), running the callbacks (:mod:`elecsolver.training.callbacks`) around every step.

        On a CPU the loss is read back after every step; on a GPU only every :attr:`SYNC_EVERY` steps and where a
        callback asks (log and checkpoint steps), so that the host queues the next steps while the device works (a
        non-finite loss is then reported at the first such step after it).  The wall time counts to the end of the
        device's work, without the callbacks' reads.

        A callback ends the call early by setting :attr:`should_stop` in any of its hooks (``on_read`` sees the
        loss): the loop then writes the checkpoint and returns after the current step (``--resume`` would continue
        the run).  Over several ranks it does so where it looks for a stop request (below), if any rank asked: a
        request on one rank alone stops them all, at the same step.

        A stop request (SIGINT, SIGTERM or SIGUSR1 under :func:`elecsolver.training.interrupt.stop_requests`) ends
        the loop after the current step: one process looks after every step; several ranks agree every
        :data:`~elecsolver.training.interrupt.CHECK_EVERY` steps (every :attr:`SYNC_EVERY` on a GPU) through the
        context's ``stop_vote``, so that all stop at the same step.  The checkpoint is then written.

        Raises
        ------
        FloatingPointError
            If the loss stops being finite (the message says to lower training.lr).
        TypeError
            If a callback's state cannot be pickled into the checkpoint (before any step).
        Interrupted
            After a stop request, once the checkpoint is written (``exit_code`` 128 + signal).
        """
        total = self.options.total_steps
        end = total if stop_after is None else min(stop_after, total)
        sync_every = self.SYNC_EVERY if self.device.type == "cuda" else 1
        vote = self.ctx.stop_vote
        check_every = 1 if vote is None else (self.SYNC_EVERY if self.device.type == "cuda" else CHECK_EVERY)
        self._check_callback_states()  # a state that cannot be saved fails now, not at the first checkpoint
        for cb in self.callbacks:
            cb.on_train_start(self, end)
        try:
            t0 = time.perf_counter()
            while self.step < end:
                values = self.advance_terms()
                read = self.step % sync_every == 0 or any(cb.wants_read(self, end) for cb in self.callbacks)
                if read:
                    terms = values.tolist()  # waits for the device
                    self.wall_s += time.perf_counter() - t0
                    loss = float(sum(terms))
                    if not math.isfinite(loss):
                        where = f"at step {self.step}" if sync_every == 1 else \
                            f"by step {self.step} (read back every {sync_every} steps on a GPU)"
                        raise FloatingPointError(f"the loss became {loss} {where}; lower training.lr")
                    for cb in self.callbacks:
                        cb.on_read(self, loss, terms, end)
                    t0 = time.perf_counter()
                if self.step % check_every:
                    continue
                # a signal (any rank's) or a callback's should_stop (every rank's: a rank alone must not leave the
                # others waiting in a collective), agreed over the ranks in one vote: 2 x signal + should_stop
                if vote is None:
                    signum, stop = pending(), self.should_stop
                else:
                    agreed = vote(2 * pending() + int(self.should_stop))
                    signum, stop = agreed // 2, bool(agreed % 2)
                if not (signum or stop):
                    continue
                if not read:
                    values.tolist()  # waits for the device
                    self.wall_s += time.perf_counter() - t0
                self.should_stop = False
                if self._saved_step != self.step:
                    self.save_checkpoint()
                if signum:
                    raise Interrupted(self.step, signum)
                log.info("step %d: a callback stopped the training (trainer.should_stop)", self.step)
                return
        finally:
            for cb in self.callbacks:
                cb.on_train_end(self)

    # checkpoints ----------------------------------------------------------------------------------
    def _callback_keys(self) -> list[str]:
        """Each callback's key in the checkpoint: its class name, with ``#k`` for the k-th further instance."""
        keys, seen = [], {}
        for cb in self.callbacks:
            name = type(cb).__name__
            keys.append(name if name not in seen else f"{name}#{seen[name]}")
            seen[name] = seen.get(name, 0) + 1
        return keys

    def _check_callback_states(self) -> None:
        """Check that every callback's ``state_dict`` pickles (what torch.save needs), before training.

        Raises
        ------
        TypeError
            Naming the callback whose state does not pickle.
        """
        for cb in self.callbacks:
            try:
                pickle.dumps(cb.state_dict(self))
            except Exception as exc:  # noqa: BLE001 - any pickling failure, reported with the callback's name
                raise TypeError(f"callback {type(cb).__name__}: its state_dict() cannot be saved in the checkpoint "
                                f"({type(exc).__name__}: {exc}); return numbers, strings, lists, dicts or tensors") \
                    from None

    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.out_dir is None else self.out_dir / self.ctx.checkpoint_name

    def state_dict(self) -> dict:
        """Everything a resume needs to continue bit for bit."""
        return {
            "package_version": __version__, "problem": self.problem.name, "config": self.problem.config,
            "world": self.ctx.world, "layout": self.ctx.extra.get("layout"), "parallel": self.ctx.extra.get("parallel"),
            "step": self.step, "step_offset": self.step_offset, "model": self.model.state_dict(),
            **self.stepper.state_dict(), "balance_weights": self.balance_weights.clone(),
            "points": self.points.state_dict(),
            "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "python_rng": random.getstate(),
            "wall_s": self.wall_s, "points_processed": self.points_processed, "history": self.history,
            "callbacks": dict(zip(self._callback_keys(), (cb.state_dict(self) for cb in self.callbacks))),
        }

    def save_checkpoint(self) -> None:
        """Write the checkpoint atomically into ``out_dir`` (``checkpoint.pt``; under tensor or pipeline parallelism
        one file per shard, named by the context).  Collective when the optimizer state is sharded."""
        if self.checkpoint_path is None:
            return
        if self.ctx.optimizer_state_dict is not None:
            state = self.state_dict()  # every rank: the sharded optimizer consolidates
        elif not self.ctx.checkpoint_writer:
            return
        else:
            state = self.state_dict()
        if self.ctx.checkpoint_writer:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with atomic_path(self.checkpoint_path) as tmp:
                torch.save(state, tmp)
        self._saved_step = self.step

    def load_checkpoint(self, path: str | os.PathLike | None = None) -> None:
        """Continue from a checkpoint written by :meth:`save_checkpoint`.

        Raises
        ------
        ResumeError
            If there is no checkpoint, or it was written by another package version or with another
            configuration (the differing keys are named).
        """
        path = Path(path) if path is not None else self.checkpoint_path
        if path is not None and not path.exists() and (path.parent / "checkpoint.pt").exists():
            # this shard's file is missing but the run's first is there: most likely a layout other than the one it
            # was written with, which that file names
            check_parallel(read_checkpoint(path.parent / "checkpoint.pt"), self.ctx)
        if path is None or not path.exists():
            raise ResumeError(f"--resume: no checkpoint at {path}; run without --resume to start fresh")
        # on the host: the random-number states must stay CPU tensors; parameters and optimizer state are copied to
        # their devices by load_state_dict
        state = read_checkpoint(path)
        if state["package_version"] != __version__:
            raise ResumeError(f"--resume: the checkpoint was written by elecsolver {state['package_version']}, "
                              f"this is {__version__}; start a fresh run")
        if state["config"] != self.problem.config or state["problem"] != self.problem.name:
            diff = config_differences(state["config"], self.problem.config)
            more = parallel_differences(state, self.ctx)
            raise ResumeError(f"--resume: the configuration differs from the checkpoint's in {', '.join(diff)}"
                              + (f", and the parallel options too ({', '.join(more)})" if more else "")
                              + "; use the same preset, --steps, --seed, --dtype, --set values and parallel options "
                              "(the run's OUT/config.toml holds them all)")
        check_parallel(state, self.ctx)
        saved = state.get("callbacks", {})
        for cb, key in zip(self.callbacks, self._callback_keys()):  # in order: a slab's network before its weights
            cb.load_state_dict(self, saved.get(key))
        self.model.load_state_dict(state["model"])
        if "balance_weights" in state:
            self.balance_weights.copy_(state["balance_weights"])
            self._push_balance_weights()
        self.stepper.load_state_dict(state)
        self.points.load_state_dict(state["points"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.step, self.step_offset, self.wall_s = state["step"], state["step_offset"], state["wall_s"]
        self.points_processed, self.history = state["points_processed"], state["history"]
        self._eval_model = None


class _SolveStep:
    """The step of ``training.optimizer = "least_squares"``: the output layer solved by least squares on the step's
    points (:meth:`Trainer.least_squares`, collective), no gradient step; the interface of
    :class:`~elecsolver.training.step.Step` (returns the global loss terms after the solve)."""

    optimizer = None
    skipped = 0
    lr = 0.0  # no learning rate: logged as 0

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.local_terms: torch.Tensor | None = None

    def __call__(self) -> list[float]:
        tr = self.trainer
        tr.least_squares()
        terms = tr._terms_fn(tr._batches_now()).detach()
        self.local_terms = terms.clone()
        return tr.ctx.all_reduce_sum(terms.clone()).tolist()

    def state_dict(self) -> dict:
        return {"optimizer": None, "scheduler": None, "skipped": 0}

    def load_state_dict(self, state: dict) -> None:
        pass


def cxx_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU code generation would use: ``$CXX`` if set, else the first of g++, c++,
    clang++ on the PATH; None if there is none."""
    import shutil

    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or None
    return next((path for name in ("g++", "c++", "clang++") if (path := shutil.which(name))), None)
