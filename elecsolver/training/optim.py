"""Optimizers and learning-rate schedules, chosen by name in ``training.optimizer`` / ``training.schedule``.

- "adam": :class:`torch.optim.Adam` (Kingma & Ba, ICLR 2015), one step per training step; its state is
  created with a float64 step counter (compiled and eager runs then agree to round-off: a float32
  counter loses ~1e-5 of 1 - beta2^k in the first steps).
- "lbfgs": :class:`torch.optim.LBFGS` with a strong-Wolfe line search (Nocedal & Wright, *Numerical
  Optimization*, 2nd ed., 2006, alg. 7.5 and sec. 3.1), ``training.lbfgs.max_iter`` inner iterations and
  a history of ``training.lbfgs.history`` per training step, on the points of the current round; also the
  optimizer of the quasi-Newton finish (``training.finish``).
- "least_squares" (:data:`SOLVERS`): no gradient step; every training step solves the output layer by least
  squares on that step's points with the hidden layers held as they are (:meth:`Trainer.least_squares
  <elecsolver.training.trainer.Trainer.least_squares>`), for a linear problem.  From the random initial
  weights this is the random-feature method, the extreme learning machine of Dong & Li (Comput. Methods Appl.
  Mech. Engrg. 387 (2021) 114129): one step is one linear solve, and with features that resolve the field
  (e.g. ``network.init="siren"`` with ``network.first_omega`` a few times the wavenumber times the domain's
  size) it reaches round-off-limited errors on smooth problems (helmholtz-square's ``features`` preset).  The
  learning rate and schedule do not apply; an L-BFGS finish (``training.finish``) may follow.

Schedules map the step k of ``steps`` to a learning-rate factor: "exponential" decays from lr to
lr_final as (lr_final/lr)^(k/steps); "constant" keeps lr.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

__all__ = ["OPTIMIZERS", "SCHEDULES", "SOLVERS", "adam_state", "compile_update", "make_optimizer", "make_schedule"]


def _adam(params, lr, options, compiled: bool) -> torch.optim.Optimizer:
    # compiled: the learning rate is a 0-d tensor that the schedule fills in place (no recompile as it moves); on a
    # GPU it and the step counter live there and the update is "capturable" (what torch.compile traces anyway), so
    # that the compiled update reads no host memory and can be captured as a CUDA graph
    device = params[0].device if params else torch.device("cpu")
    on_gpu = compiled and device.type == "cuda"
    where = device if on_gpu else torch.device("cpu")
    opt = torch.optim.Adam(params, lr=torch.tensor(lr, dtype=torch.float64, device=where) if compiled else lr,
                           capturable=on_gpu)
    adam_state(opt, where)
    return opt


def adam_state(optimizer: torch.optim.Adam, where: torch.device) -> None:
    """Create Adam's state for every parameter of ``optimizer`` now, with a float64 step counter on ``where`` (the
    first moments zero), instead of lazily at the first step with a counter in the default dtype."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p].update(step=torch.tensor(0.0, dtype=torch.float64, device=where),
                                      exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))


def compile_update(optimizer: torch.optim.Optimizer, cuda_graphs: bool = False, kind: type | None = None
                   ) -> Callable[[], None]:
    """The optimizer's update as one ``torch.compile`` graph (``fullgraph=True``): ``update()`` applies one step from
    the ``.grad`` of its parameters; call it under ``torch.no_grad()``.

    What is compiled is the class's ``step`` itself, without the wrappers around it (the scheduler's step counter,
    the profiler hook and the grad-mode switch with its deliberate graph breaks).  A learning rate that is a 0-d
    tensor (:func:`make_optimizer` with ``compiled=True``) is a graph input, so a schedule does not recompile it.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        One whose ``step`` torch.compile can trace whole (Adam; not L-BFGS's closure).
    cuda_graphs : bool
        Compile in mode "reduce-overhead" (a CUDA graph replayed each step).
    kind : type, optional
        The class whose ``step`` to compile (default ``type(optimizer)``; a subclass whose own ``step`` calls the
        compiled update names its base).
    """
    update = inspect.unwrap((kind or type(optimizer)).step)
    return torch.compile(lambda: update(optimizer), fullgraph=True, mode="reduce-overhead" if cuda_graphs else None)


def _lbfgs(params, lr, options, compiled: bool) -> torch.optim.Optimizer:
    # torch's default stopping tolerances (1e-7 on the gradient, 1e-9 on the change) are absolute and stop a
    # PINN's loss of ~1e-6 in training units at its first iteration; these let every iteration run
    return torch.optim.LBFGS(params, lr=lr, max_iter=options.lbfgs["max_iter"], history_size=options.lbfgs["history"],
                             line_search_fn="strong_wolfe", tolerance_grad=1e-15, tolerance_change=1e-16)


OPTIMIZERS: dict[str, Callable] = {"adam": _adam, "lbfgs": _lbfgs}
# training.optimizer names whose step is a linear solve, run by the Trainer itself (no torch optimizer)
SOLVERS = ("least_squares",)

SCHEDULES: dict[str, Callable[[float, int], Callable[[int], float]]] = {
    "exponential": lambda ratio, steps: (lambda k: ratio ** (min(k, steps) / steps)),
    "constant": lambda ratio, steps: (lambda k: 1.0),
}


def make_optimizer(params: list[torch.nn.Parameter], options, compiled: bool = False) -> torch.optim.Optimizer:
    """The optimizer ``options.optimizer`` over ``params`` at learning rate ``options.lr``."""
    return OPTIMIZERS[options.optimizer](params, options.lr, options, compiled)


def make_schedule(optimizer: torch.optim.Optimizer, options) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule ``options.schedule`` over ``options.steps`` steps."""
    rule = SCHEDULES[options.schedule](options.lr_final / options.lr, options.steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, rule)
