"""One optimizer step: forward and backward, the gradient-sync hook from outside, a gradient check, the optimizer.

The forward and backward is ``forward_backward(batches, scale)``: by default the loss terms of this rank's
batches, in ``training.accumulate`` micro-steps (gradient accumulation: each constraint's points cut into k
row blocks, each block's terms already divided by the global denominators, so the accumulated gradient is
that of the whole batch; the peak memory is that of one block), under the ``autocast`` context if one is
given, times the loss scale.  ``elecsolver.parallel`` may replace it (a pipeline schedule).

The hook ``sync_gradients(params)`` is supplied by the caller (``elecsolver.parallel`` for data
parallelism; the identity on one process), so a model that ``parallel/`` has transformed (sharded,
split into stages) is stepped here unchanged.  ``check_gradients(params) -> bool`` is the place of a
loss-scale check: when it returns False the update is skipped (every rank must return the same).

Compiled mode (``training.compile``, Adam only): the loss terms (network, jets, residuals, weighted sums)
are one ``torch.compile`` graph with ``fullgraph=True`` (a graph break is an error, not a silent slow
path), its backward compiled with it (AOTAutograd), and Adam's update a second compiled function.  The
learning rate is a 0-d tensor that the schedule updates in place and the points and denominators are
graph inputs, so neither a moving learning rate nor resampling recompiles (a change of the number of
points per rank does, once, after which the point dimension is dynamic).  Gradient sync stays eager
between the two.  L-BFGS runs its strong-Wolfe line search on a closure that recomputes the global loss
and the synced gradients, so every rank takes the same iterates.

CUDA graphs (``training.cuda_graphs``, with ``compile`` on a CUDA device): both compiled functions use
``torch.compile``'s mode "reduce-overhead", which records each graph's kernels once as a CUDA graph and then
replays it (the points are copied into the graph's input buffers; parameters and Adam's state, which live at
fixed addresses, are not), and every step begins with ``torch.compiler.cudagraph_mark_step_begin()``.  A replay
overwrites the outputs of the previous one, so nothing here keeps a compiled output past its step (the terms are
cloned).  Adam's learning rate and step counter are then tensors on the GPU (:func:`~elecsolver.training.optim.
make_optimizer`), so that the update reads no host memory.

:meth:`Step.run` returns the step's global loss terms as a tensor on the training device without waiting for
the device; :meth:`Step.__call__` returns them as Python floats (a synchronisation).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import torch

from .optim import compile_update, make_optimizer, make_schedule

__all__ = ["Step"]


class Step:
    """Forward and backward, sync, check and update for a list of parameters.

    Parameters
    ----------
    params : list of Parameter
    options : TrainingOptions
    terms_fn : callable
        ``terms_fn(batches) -> Tensor [n_terms]``: this rank's share of each loss term on ``batches``.
    batches_fn : callable
        ``batches_fn() -> list`` of (points [n, d], normals or None, weights [n] or None, denominator), the
        batches of the current step, one per loss term.
    sync_gradients : callable
        ``sync_gradients(params)``: gradients summed over ranks, in place.
    all_reduce_sum : callable
        Sums a tensor over ranks (for the reported loss and the L-BFGS closure).
    check_gradients : callable, optional
        ``check_gradients(params) -> bool``; False skips the update.
    forward_backward : callable, optional
        ``forward_backward(batches, scale) -> Tensor [n_terms]`` (detached local terms, gradients accumulated);
        default: :meth:`accumulated`.
    make_optimizer : callable, optional
        ``make_optimizer(params, options, compiled) -> Optimizer`` instead of the one ``options`` names.
    loss_scaler : object, optional
        Dynamic loss scaling (see :class:`~elecsolver.training.context.RunContext`); its ``check`` replaces
        ``check_gradients``.
    autocast : callable, optional
        ``autocast() -> context manager`` around the forward.
    optimizer_state_dict : callable, optional
        Collective ``optimizer_state_dict(optimizer) -> dict or None`` for checkpoints.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], options, terms_fn: Callable, batches_fn: Callable,
                 sync_gradients: Callable, all_reduce_sum: Callable, check_gradients: Callable | None = None, *,
                 forward_backward: Callable | None = None, make_optimizer: Callable | None = None,
                 loss_scaler=None, autocast: Callable | None = None, optimizer_state_dict: Callable | None = None):
        self.params, self.options = list(params), options
        self.terms_fn, self.batches_fn = terms_fn, batches_fn
        self.sync, self.all_reduce_sum = sync_gradients, all_reduce_sum
        self.scaler = loss_scaler
        self.check = loss_scaler.check if loss_scaler is not None else check_gradients
        self.autocast = autocast or contextlib.nullcontext
        self.forward_backward = forward_backward or self.accumulated
        self._optimizer_state_dict = optimizer_state_dict
        self.compiled = bool(options.compile)
        params_device = self.params[0].device if self.params else torch.device("cpu")
        self.cuda_graphs = self.compiled and bool(getattr(options, "cuda_graphs", False)) and \
            params_device.type == "cuda"
        self.optimizer = (make_optimizer or _make_optimizer)(self.params, options, self.compiled)
        self.scheduler = make_schedule(self.optimizer, options)
        self.skipped = 0
        self.local_terms: torch.Tensor | None = None
        self._update = self.optimizer.step
        # an optimizer that compiles its own parts (a sharded one: the local update between its collectives) says so
        if self.compiled and not getattr(self.optimizer, "compiles_itself", False):
            self._update = compile_update(self.optimizer, self.cuda_graphs)  # run under no_grad

    def accumulated(self, batches: list, scale: float = 1.0) -> torch.Tensor:
        """The default forward and backward: ``training.accumulate`` micro-steps over row blocks of every
        batch; returns the detached local terms [n_terms] (the same as one pass, to round-off)."""
        k = getattr(self.options, "accumulate", 1)
        total = None
        for j in range(k):
            part = batches if k == 1 else [_rows(b, j, k) for b in batches]
            with self.autocast():
                terms = self.terms_fn(part)
            loss = terms.sum()
            (loss * scale if scale != 1.0 else loss).backward()
            # a copy: under CUDA graphs the next micro-step's replay overwrites the compiled output
            total = terms.detach().clone() if total is None else total + terms.detach()
        return total.to(torch.float64) if total.dtype in (torch.float16, torch.bfloat16) else total

    def _backward(self) -> torch.Tensor:
        # compiled: gradients are assigned, not accumulated into zeroed buffers (fewer kernels)
        self.optimizer.zero_grad(set_to_none=self.compiled)
        scale = float(self.scaler.scale) if self.scaler is not None else 1.0
        terms = self.forward_backward(self.batches_fn(), scale)
        self.sync(self.params)
        return terms

    def __call__(self) -> list[float]:
        """One training step; returns the global loss terms (equal on every rank) as Python floats."""
        return self.run().tolist()

    def run(self) -> torch.Tensor:
        """One training step; returns the global loss terms [n_terms] (equal on every rank) as a tensor on the
        training device, without waiting for the device to finish the step."""
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        if self.options.optimizer == "lbfgs":
            box: dict = {}

            def closure():
                terms = self._backward()
                box["terms"] = terms
                return self.all_reduce_sum(terms.detach().sum().clone())

            self.optimizer.step(closure)
            terms = box["terms"]
        else:
            terms = self._backward()
            if self.check is None or self.check(self.params):
                with torch.no_grad():
                    self._update()
            else:
                self.skipped += 1
            self.optimizer._opt_called = True  # what the scheduler's step wrapper records (compiled mode bypasses it)
        self.scheduler.step()
        self.local_terms = terms.detach().clone()  # this rank's share, before the sum over ranks
        return self.all_reduce_sum(terms.detach().clone())

    @property
    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def state_dict(self) -> dict:
        """The optimizer, schedule and loss-scale state (collective when the optimizer is sharded: call it on
        every rank; the optimizer entry is None on ranks that do not write the checkpoint)."""
        opt = self._optimizer_state_dict(self.optimizer) if self._optimizer_state_dict else self.optimizer.state_dict()
        out = {"optimizer": opt, "scheduler": self.scheduler.state_dict(), "skipped": self.skipped}
        if self.scaler is not None:
            out["loss_scaler"] = self.scaler.state_dict()
        return out

    def load_state_dict(self, state: dict) -> None:
        # Optimizer.load_state_dict replaces a tensor learning rate (the one the compiled update and the schedule hold)
        # and, for a capturable Adam, casts the step counters to float32: keep the tensor, copy the value into it, and
        # keep the counters in the dtype they were made in (float64, see elecsolver.training.optim)
        lrs = [g["lr"] for g in self.optimizer.param_groups]
        steps = {id(p): s["step"].dtype for p, s in self.optimizer.state.items()
                 if isinstance(s.get("step"), torch.Tensor)}
        self.optimizer.load_state_dict(state["optimizer"])
        for g, lr in zip(self.optimizer.param_groups, lrs):
            if isinstance(lr, torch.Tensor):
                lr.copy_(torch.as_tensor(g["lr"]))
                g["lr"] = lr
        for p, s in self.optimizer.state.items():
            if isinstance(s.get("step"), torch.Tensor) and id(p) in steps:
                s["step"] = s["step"].to(steps[id(p)])
        self.scheduler.load_state_dict(state["scheduler"])
        self.skipped = state.get("skipped", 0)
        if self.scaler is not None and "loss_scaler" in state:
            self.scaler.load_state_dict(state["loss_scaler"])


def _rows(batch: tuple, j: int, k: int) -> tuple:
    """Row block j of k of a batch (points, normals, weights, denominator); the denominator stays global."""
    pts, nrm, w, denom = batch

    def cut(t):
        return None if t is None else torch.tensor_split(t, k, dim=0)[j]

    return cut(pts), cut(nrm), cut(w), denom


def _make_optimizer(params, options, compiled):
    return make_optimizer(params, options, compiled=compiled)
