"""Which parallel plans a problem can run on N ranks, and why the others cannot.

A *plan* is one choice of (dp, tp, pp, micro-batches, schedule, ZeRO, recompute, precision) for a world size.
:func:`candidate_plans` lists every plan of a world size; :func:`feasibility` tries each against a problem without
starting a process group, and gives the reason a plan cannot run:

- ``capability``: two things it turns on do not combine (the one table, :mod:`elecsolver.capabilities`, read with
  the problem's training block);
- ``divisibility``: the network does not split that way: tp does not divide a hidden width, or the body has fewer
  layers than pp stages (the very sharding and cutting code the run uses, on a copy of the network);
- ``points``: a loss term has fewer points on a data-parallel rank than the pipeline has micro-batches.

This is the search space and its constraints; the memory and time models that rank the feasible plans are not
built yet, so :func:`feasibility` orders plans as :func:`candidate_plans` does, not by speed.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import asdict, dataclass

import torch

from elecsolver.capabilities import active, refusal

__all__ = ["Plan", "PlanCheck", "candidate_plans", "feasibility"]

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Plan:
    """One parallel layout and its options (the fields of :class:`~elecsolver.parallel.ParallelOptions`)."""

    dp: int
    tp: int = 1
    pp: int = 1
    microbatches: int = 1
    schedule: str = "1f1b"
    zero: bool = False
    recompute: bool = False
    precision: str = "fp32"

    def options(self) -> dict:
        """As ``ParallelOptions(**plan.options())`` takes them."""
        d = asdict(self)
        if self.pp == 1:
            d["microbatches"] = None
        return d

    def flags(self) -> str:
        """The command line that runs it, e.g. ``--dp 2 --tp 2 --zero``."""
        out = [f"--dp {self.dp}", f"--tp {self.tp}", f"--pp {self.pp}"]
        if self.pp > 1:
            out += [f"--microbatches {self.microbatches}", f"--schedule {self.schedule}"]
        out += [f for f, on in (("--zero", self.zero), ("--recompute", self.recompute)) if on]
        if self.precision != "fp32":
            out.append(f"--precision {self.precision}")
        return " ".join(out)


@dataclass(frozen=True)
class PlanCheck:
    """A plan and whether it can run: ``reason`` is None, or (kind, one line) with kind "capability",
    "divisibility" or "points"."""

    plan: Plan
    reason: tuple[str, str] | None

    @property
    def ok(self) -> bool:
        return self.reason is None


def _factorisations(world: int) -> list[tuple[int, int, int]]:
    """Every (dp, tp, pp) with dp tp pp = world, dp outermost in the order."""
    out = []
    for tp in range(1, world + 1):
        for pp in range(1, world // tp + 1):
            if world % (tp * pp) == 0:
                out.append((world // (tp * pp), tp, pp))
    return sorted(out, key=lambda s: (-s[0], s[1], s[2]))


def candidate_plans(world: int, microbatch_factors: tuple[int, ...] = (1, 2, 4)) -> list[Plan]:
    """Every plan for ``world`` ranks: each factorisation dp tp pp = world; with pp > 1, micro-batches pp times
    ``microbatch_factors`` and both schedules; ZeRO where dp > 1; recompute off and on; each precision.

    Raises
    ------
    ValueError
        If ``world`` is not a positive integer.
    """
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        raise ValueError(f"the world size must be a positive integer, got {world!r}")
    plans = []
    for dp, tp, pp in _factorisations(world):
        pipes = [(pp * f, s) for f in microbatch_factors for s in ("1f1b", "gpipe")] if pp > 1 else [(1, "1f1b")]
        for (m, schedule), zero, recompute, precision in itertools.product(
                pipes, (False, True) if dp > 1 else (False,), (False, True), PRECISIONS):
            plans.append(Plan(dp, tp, pp, m, schedule, zero, recompute, precision))
    return plans


class _StubMesh:
    """What tensor-parallel sharding reads of a mesh (its tp size and index), without a process group."""

    def __init__(self, tp: int):
        self.tp = tp

    def size(self, axis: str) -> int:
        return self.tp if axis == "tp" else 1

    def index(self, axis: str) -> int:
        return 0

    def group(self, axis: str):
        return None


def _split_reason(model, tp: int, pp: int) -> str | None:
    """Why the network cannot be cut into pp stages with each stage's layers sharded tp ways (None if it can)."""
    from .pipeline import split_network
    from .tensor_parallel import apply_tensor_parallel

    try:
        stages = [split_network(copy.deepcopy(model), pp, k) for k in range(pp)] if pp > 1 else [copy.deepcopy(model)]
        if tp > 1:
            for stage in stages:
                apply_tensor_parallel(stage, _StubMesh(tp))
    except ValueError as exc:
        return str(exc).splitlines()[0]
    return None


def feasibility(problem, world: int, plans: list[Plan] | None = None) -> list[PlanCheck]:
    """Check every plan (default :func:`candidate_plans` of ``world``) against ``problem``.

    Parameters
    ----------
    problem : Problem
        Its network is built once (on the CPU, from ``training.seed``) and split on copies; its loss terms are
        sampled once for their point counts, assumed shared evenly over the data-parallel ranks.
    world : int
        Ranks.

    Returns
    -------
    list of PlanCheck
        In the order of ``plans``.
    """
    from elecsolver.training.trainer import build_model

    plans = candidate_plans(world) if plans is None else plans
    model = build_model(problem, torch.device("cpu"))
    counts = {c.name: len(problem.sample(c.name, seed=problem.training.seed).points)
              for c in problem.constraints()}
    splits: dict[tuple[int, int], str | None] = {}
    out = []
    for plan in plans:
        why = refusal(active(parallel=plan.options(), training=problem.training, problem=problem))
        reason = ("capability", why) if why else None
        if reason is None:
            key = (plan.tp, plan.pp)
            if key not in splits:
                splits[key] = _split_reason(model, plan.tp, plan.pp)
            if splits[key]:
                reason = ("divisibility", splits[key])
        if reason is None and plan.pp > 1:
            short = {n: c // plan.dp for n, c in counts.items() if 0 < c // plan.dp < plan.microbatches}
            if short:
                names = ", ".join(f"{n!r} ({k})" for n, k in short.items())
                reason = ("points", f"loss terms with fewer points on a data-parallel rank than the {plan.microbatches}"
                                    f" micro-batches: {names}")
        out.append(PlanCheck(plan, reason))
    return out
