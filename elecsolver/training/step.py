"""One optimizer step: backward, the gradient-sync hook from outside, a gradient check, the optimizer.

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
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch

from .optim import make_optimizer, make_schedule

__all__ = ["Step"]


class Step:
    """Backward, sync, check and update for a list of parameters.

    Parameters
    ----------
    params : list of Parameter
    options : TrainingOptions
    loss_fn : callable
        ``loss_fn() -> Tensor [n_terms]``: this rank's share of each loss term.
    sync_gradients : callable
        ``sync_gradients(params)``: gradients summed over ranks, in place.
    all_reduce_sum : callable
        Sums a tensor over ranks (for the reported loss and the L-BFGS closure).
    check_gradients : callable, optional
        ``check_gradients(params) -> bool``; False skips the update.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], options, loss_fn: Callable[[], torch.Tensor],
                 sync_gradients: Callable, all_reduce_sum: Callable, check_gradients: Callable | None = None):
        self.params, self.options, self.loss_fn = list(params), options, loss_fn
        self.sync, self.all_reduce_sum, self.check = sync_gradients, all_reduce_sum, check_gradients
        self.compiled = bool(options.compile)
        self.optimizer = make_optimizer(self.params, options, compiled=self.compiled)
        self.scheduler = make_schedule(self.optimizer, options)
        self.skipped = 0
        self._update = self.optimizer.step
        if self.compiled:
            # Adam's update itself, without the wrappers around it (the scheduler's step counter, the profiler
            # hook and the grad-mode switch with its deliberate graph breaks); it runs under no_grad
            update = inspect.unwrap(type(self.optimizer).step)
            optimizer = self.optimizer
            self._update = torch.compile(lambda: update(optimizer), fullgraph=True)

    def _backward(self) -> torch.Tensor:
        # compiled: gradients are assigned, not accumulated into zeroed buffers (fewer kernels)
        self.optimizer.zero_grad(set_to_none=self.compiled)
        terms = self.loss_fn()
        terms.sum().backward()
        self.sync(self.params)
        return terms

    def __call__(self) -> list[float]:
        """One training step; returns the global loss terms (equal on every rank)."""
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
        return self.all_reduce_sum(terms.detach().clone()).tolist()

    @property
    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
