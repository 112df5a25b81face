"""What combines with what: one table of the parallel transforms and training features of a run.

Every parallel transform (``--tp``, ``--pp``, ``--zero``, ``--recompute``, ``--precision``, ``--compile``,
``--cuda-graphs``) and every training feature that some of them do not support (the L-BFGS optimizer, the
least-squares output layer, the L-BFGS finish, time slabs, gradient accumulation, ``--init-from``, subdomains, the
hard PEC head, nested-autograd derivatives) is a *capability*: a name, how the user turns it on, and the
capabilities it does not combine with, each with the reason and what to change. Data parallelism, balancing,
RAR/RAD, the hard initial head and the float64 dtype combine with everything and are not listed.

:func:`refusal` checks a set of active capabilities against the table and returns the first clash as one line (or
None); :func:`check` raises it. The table is read by everything that refuses a combination:
``ParallelOptions.validate`` (the strategy and the training block, before any rank waits for another),
``TrainingOptions.from_config`` (the training block alone), the trainers (what the run's context and problem add)
and ``Problem.hard_pec``; docs/parallel.md prints it (``tools/gen_docs.py``). A refusal reads::

    --zero does not combine with training.optimizer='lbfgs' (ZeRO shards Adam's state); drop --zero, or use adam
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .config import ConfigError

__all__ = ["CAPABILITIES", "Capability", "active", "check", "combinations", "refusal"]


@dataclass(frozen=True)
class Capability:
    """One parallel transform or training feature.

    Attributes
    ----------
    name : str
        Short name (the key of :data:`CAPABILITIES`).
    label : str
        How the user turns it on (a flag or a configuration key), as refusals print it.
    kind : {"parallel", "training", "problem"}
        What declares it: the parallel strategy, the training block or the problem.
    refuses : dict
        ``{other name: (reason, what to change)}``: the capabilities it does not combine with.
    """

    name: str
    label: str
    kind: str
    refuses: dict[str, tuple[str, str]] = field(default_factory=dict)


def _each(names: Iterable[str], reason: str, fix: str) -> dict[str, tuple[str, str]]:
    return {n: (reason, fix) for n in names}


_MODEL_PARALLEL = ("tp", "pp")
_MIXED = ("bf16", "fp16")
_LS_FIX = "set training.least_squares.every=0 and before_finish=false (and training.optimizer not 'least_squares')"

#: The table, in the order refusals are looked for (the first clash found is the one reported).
CAPABILITIES: dict[str, Capability] = {c.name: c for c in (
    Capability("tp", "--tp", "parallel", _each(_MIXED, "the sharded layers do not keep the derivative channels in "
                                                      "float32 yet", "use --precision fp32 with --tp")),
    Capability("pp", "--pp", "parallel"),
    Capability("zero", "--zero", "parallel"),
    Capability("recompute", "--recompute", "parallel"),
    Capability("bf16", "--precision bf16", "parallel"),
    Capability("fp16", "--precision fp16", "parallel"),
    Capability("compile", "training.compile (--compile)", "training", {
        "autograd": ("torch.compile traces no double backward (nested autograd); it needs jet derivatives",
                     "drop one of the two"),
        "lbfgs": ("L-BFGS's strong-Wolfe line search branches on loss values in Python, which torch.compile does "
                  "not trace into one graph", "run without --compile"),
        "ls_solver": ("a least-squares step is a linear solve, not a gradient step to compile",
                      "run without --compile"),
    }),
    Capability("cuda_graphs", "training.cuda_graphs (--cuda-graphs)", "training", {
        "tp": ("tp's all-reduces are inside the compiled graph, and a CUDA graph cannot capture gloo's host-staged "
               "collectives (capturing NCCL's is not verified on a GPU)", "drop --cuda-graphs and keep --compile"),
        "pp": ("a stage's compute is compiled between eager sends and receives, which a CUDA graph cannot hold",
               "drop --cuda-graphs and keep --compile"),
    }),
    Capability("autograd", "training.derivatives='autograd'", "training", _each(
        ("tp", "pp", "recompute"), "nested autograd is a double backward, which sharded, staged and recomputed "
        "layers do not carry; they need jet derivatives", "use training.derivatives='jet'")),
    Capability("lbfgs", "training.optimizer='lbfgs'", "training", {
        "zero": ("ZeRO shards Adam's state", "drop --zero, or use adam"),
        "fp16": ("fp16 scales the loss, which the L-BFGS line search does not support",
                 "use --precision bf16 or fp32"),
    }),
    Capability("ls_solver", "training.optimizer='least_squares'", "training", {
        "zero": ("ZeRO shards Adam's state", "drop --zero"),
        "fp16": ("fp16 scales the loss, which the least-squares solve does not support",
                 "use --precision bf16 or fp32"),
    }),
    Capability("least_squares", "a least-squares solve of the output layer (training.least_squares, or "
               "training.optimizer='least_squares')", "training", {
        "subdomains": ("their level-set features take reverse-mode derivatives inside the network, which the "
                       "solve's forward-mode Jacobian cannot pass through", _LS_FIX),
        **_each(("tp", "pp", "zero"), "each rank must hold the whole output layer", _LS_FIX),
    }),
    Capability("finish", "training.finish (the L-BFGS finish)", "training", {
        **_each(_MODEL_PARALLEL, "L-BFGS's inner products would see one shard of the parameters",
                "set training.finish.steps=0 or run without that option"),
        "zero": ("a sharded optimizer state", "set training.finish.steps=0 or run without --zero"),
        **_each(_MIXED, "the line search needs the loss in the training dtype",
                "set training.finish.steps=0 or use --precision fp32"),
    }),
    Capability("slabs", "training.slabs > 1", "training", {
        **_each(("tp", "pp", "zero", *_MIXED), "a slab's network wraps a one-device network",
                "use data parallelism alone or set training.slabs=1"),
        "least_squares": ("the solve needs the network's last layer, which a slab's network holds twice",
                          "set training.slabs=1, or least_squares.every=0 / before_finish=false and an optimizer "
                          "such as 'adam'"),
    }),
    Capability("accumulate", "training.accumulate > 1 (--accumulate)", "training", {
        "pp": ("the pipeline already accumulates over its micro-batches", "use --microbatches instead"),
    }),
    Capability("init_from", "training.init_from (--init-from)", "training", _each(
        _MODEL_PARALLEL, "it loads a whole network, not a shard or a stage", "train the start on one model replica "
        "(data parallelism alone)")),
    Capability("subdomains", "subdomains", "problem"),
    Capability("hard_pec", "network.hard_pec", "problem", {
        "subdomains": ("the PEC head acts on one copy of the fields", "set network.hard_pec=false"),
    }),
)}


def _clash(a: str, b: str) -> tuple[str, str, str, str] | None:
    """The declared refusal between ``a`` and ``b``, either way round: (declaring, other, reason, fix)."""
    for x, y in ((a, b), (b, a)):
        got = CAPABILITIES[x].refuses.get(y)
        if got is not None:
            return x, y, *got
    return None


def refusal(names: Iterable[str]) -> str | None:
    """The first clash among the capabilities ``names`` as one line, or None when they all combine.

    Parameters
    ----------
    names : iterable of str
        Active capabilities (keys of :data:`CAPABILITIES`; unknown names raise KeyError).

    Returns
    -------
    str or None
        ``"<label> does not combine with <label> (<reason>); <what to change>"``.
    """
    on = set(names)
    unknown = sorted(on - set(CAPABILITIES))
    if unknown:
        raise KeyError(f"unknown capabilities {unknown}; the table has {list(CAPABILITIES)}")
    order = [n for n in CAPABILITIES if n in on]
    for name in order:
        for other in CAPABILITIES[name].refuses:
            if other in on:
                x, y, reason, fix = _clash(name, other)
                return f"{CAPABILITIES[x].label} does not combine with {CAPABILITIES[y].label} ({reason}); {fix}"
    return None


def check(names: Iterable[str]) -> None:
    """Raise :func:`refusal`'s line, if any, as a :class:`~elecsolver.config.ConfigError`."""
    why = refusal(names)
    if why is not None:
        raise ConfigError(why)


def active(parallel=None, training=None, problem=None) -> set[str]:
    """The capabilities a strategy, a training block and a problem turn on (each optional).

    Parameters
    ----------
    parallel : ParallelOptions or dict, optional
        Read: ``tp``, ``pp``, ``zero``, ``recompute``, ``precision``.
    training : TrainingOptions, optional
    problem : Problem, optional
        Read: ``subdomains`` and ``network.hard_pec``.
    """
    on: set[str] = set()
    if parallel is not None:
        get = parallel.get if isinstance(parallel, dict) else lambda k, d=None: getattr(parallel, k, d)
        on |= {n for n, flag in (("tp", (get("tp", 1) or 1) > 1), ("pp", (get("pp", 1) or 1) > 1),
                                 ("zero", bool(get("zero", False))), ("recompute", bool(get("recompute", False))))
               if flag}
        if get("precision", "fp32") in _MIXED:
            on.add(get("precision"))
    if training is not None:
        t = training
        flags = (("compile", t.compile), ("cuda_graphs", t.cuda_graphs), ("autograd", t.derivatives == "autograd"),
                 ("lbfgs", t.optimizer == "lbfgs"),
                 ("ls_solver", t.optimizer == "least_squares"), ("least_squares", t.solves_output_layer),
                 ("finish", bool(t.finish_steps)), ("slabs", isinstance(t.slabs, int) and t.slabs > 1),
                 ("accumulate", t.accumulate > 1), ("init_from", bool(t.init_from)))
        on |= {n for n, flag in flags if flag}
    if problem is not None:
        if problem.subdomains:
            on.add("subdomains")
        if problem.network.hard_pec:
            on.add("hard_pec")
    return on


def combinations() -> list[tuple[str, str, str, str]]:
    """Every declared refusal as (label, other label, reason, what to change), in the table's order."""
    return [(c.label, CAPABILITIES[o].label, reason, fix) for c in CAPABILITIES.values()
            for o, (reason, fix) in c.refuses.items()]
