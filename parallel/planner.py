"""Which parallel plans a problem can run on N ranks, and why the others cannot.

A *plan* is one choice of (dp, tp, pp, micro-batches, schedule, ZeRO, recompute, precision) for a world size.
:func:`candidate_plans` lists every plan of a world size; :func:`feasibility` tries each against a problem without
starting a process group, and gives the reason a plan cannot run:

- ``capability``: two things it turns on do not combine (the one table, :mod:`elecsolver.capabilities`, read with
  the problem's training block);
- ``divisibility``: the network does not split that way: tp does not divide a hidden width, or the body has fewer
  layers than pp stages (the very sharding and cutting code the run uses, on a copy of the network);
- ``points``: a loss term has fewer points on a data-parallel rank than the pipeline has micro-batches.

- ``memory``: with a memory per rank and a calibrated memory model, the plan's largest rank is predicted above
  (1 - margin) of it.

The memory model (:func:`predict_stage_mib`) counts parameters, gradients, Adam's two moments (sharded over dp by
ZeRO) and the dp gradient buffer exactly, from the shards the run would hold.  A rank's peak comes during one work
item's backward (an item is one loss term of one micro-batch): the items the schedule still holds
(:func:`backward_windows`: one process and GPipe differentiate the last item first, 1F1B holds pp - stage items;
Narayanan et al., PipeDream-Flush, SOSP 2019, sec. 3) at ``plain`` bytes per point-channel and width unit, plus the
item in hand at ``backward_peak`` bytes per point-channel and unit where its backward starts.  The coefficients
(:class:`MemoryCoefficients`) come from one process's allocations (:func:`calibrate`, :func:`backward_peak`;
:func:`~elecsolver.parallel.profiling.allocations`); ``benchmarks/planner_memory.py`` and
``benchmarks/planner_time.py`` hold the model against every plan's measured peak
(:func:`~elecsolver.parallel.profiling.step_peak_mib`).

The time model (:func:`predict_step_s`, :func:`calibrate_time`) prices the local compute from measured rates per
multiply-add, the collectives and pipeline messages by Hockney's alpha-beta model, and the pipeline bubble of the
chosen schedule; :func:`ranked` orders the plans that can run by it and :func:`best_plan` picks the first
(docs/parallel.md quotes ``benchmarks/planner_time.py``'s comparison with measured steps).
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import torch

from elecsolver.capabilities import active, refusal
from elecsolver.config import ConfigError

__all__ = ["MemoryCoefficients", "Plan", "PlanCheck", "PlanError", "TimeCoefficients", "all_reduce_bytes",
           "backward_peak", "backward_windows", "best_plan", "bubble_fraction", "calibrate", "calibrate_time",
           "candidate_plans", "constrained_plans", "feasibility", "point_channels", "predict_mib", "predict_stage_mib",
           "predict_step_s", "ranked", "state_bytes", "work_items"]

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
    "divisibility", "points" or "memory"; ``memory_mib``: the predicted memory of its largest rank, when a memory
    model was given."""

    plan: Plan
    reason: tuple[str, str] | None
    memory_mib: float | None = None
    step_s: float | None = None

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


def _shards(model, tp: int, pp: int) -> list:
    """The network as tp rank 0 of every pipeline stage holds it (copies; the run's own cutting and sharding).

    Raises
    ------
    ValueError
        If the network cannot be cut into pp stages or a stage's layers sharded tp ways.
    """
    from .pipeline import split_network
    from .tensor_parallel import apply_tensor_parallel

    stages = [split_network(copy.deepcopy(model), pp, k) for k in range(pp)] if pp > 1 else [copy.deepcopy(model)]
    if tp > 1:
        for stage in stages:
            apply_tensor_parallel(stage, _StubMesh(tp))
    return stages


def _layers(module) -> list[tuple[bool, int, int]]:
    """(is a weight layer, input units, output units) of each weight layer and activation of ``module``'s body, in
    order, as this rank holds them: a weight [out, in] has in and out units, a grouped one [G, out, in] G in and G
    out; an activation is elementwise, as wide as the weight layer before it (or, first in a pipeline stage, the
    one after it). A unit is one column per point and jet channel."""
    from elecsolver.networks import Activation

    body = getattr(module, "body", module)
    rows = []
    for layer in body.children():
        w = getattr(layer, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() >= 2:
            rows.append([True, int(w.shape[-1] * (w.shape[0] if w.dim() == 3 else 1)), int(w.numel() // w.shape[-1])])
        elif isinstance(layer, Activation):
            rows.append([False, 0, 0])
    for order in (rows, rows[::-1]):
        width = 0
        for r in order:
            if r[0]:
                width = r[2] if order is rows else r[1]
            elif not r[2]:
                r[1] = r[2] = width
    return [tuple(r) for r in rows]


def _width_units(module) -> int:
    """W: the output units of every weight layer and activation summed (:func:`_layers`): what a forward keeps for
    the backward is each one's output (a linear layer's, one value a unit; an activation's, with its argument's
    value channel), so a pipeline stage that starts with the activation of the previous stage's last layer holds
    its share."""
    return sum(out for _, _, out in _layers(module))


def _block_units(module) -> int:
    """B: the units where the backward starts, whose temporaries set its peak: the widest of the last weight layer's
    input and output and of the activations after it (:func:`_layers`).  The backward's peak comes at its start,
    while all that the forward kept is still held; further back it frees more than it allocates.  Under tensor
    parallelism a stage that ends with a row-parallel layer starts its backward on that layer's sharded input (the
    cavity's network at tp = 2: 32 units, not the 64 of its widest layer)."""
    rows = _layers(module)
    last = max(k for k, (weight, _, _) in enumerate(rows) if weight)
    return max(max(units[1:]) for units in rows[last:])


def _kept_units(module) -> int:
    """What recompute keeps of a work item, in units: each block's output (:func:`_layers`; a block is a weight layer
    and the activations after it, :func:`elecsolver.parallel.recompute.blocks_of`), which the next block takes as its
    input, or the stage sends on or its loss reads; the stage's own input is what it received."""
    rows = _layers(module)
    return sum(out for k, (_, _, out) in enumerate(rows) if k + 1 == len(rows) or rows[k + 1][0])


def _input_units(stage) -> int:
    """The input features of a stage's first weight layer (a grouped layer [G, out, in] counts G in): what a
    pipeline stage after the first receives, per point and jet channel, and holds until its backward."""
    w = next(w for name, w in stage.named_parameters() if name.endswith("weight") and w.dim() >= 2)
    return int(w.shape[-1] * (w.shape[0] if w.dim() == 3 else 1))


def term_sizes(problem) -> dict[str, tuple[int, int]]:
    """Each loss term's (points of one step over all ranks, jet channels: value, first and second derivatives its
    residual reads). The channels follow from the term's derivatives alone: they are read off the seed jet, without
    running the network."""
    from elecsolver.operators import evaluate

    out = {}
    for c in problem.constraints():
        pts = problem.sample(c.name, seed=problem.training.seed).points
        x = torch.as_tensor(pts[:2], dtype=torch.float64)
        f = evaluate(torch.nn.Identity(), x, problem.inputs, problem.inputs, wrt=c.wrt,
                     second=c.second or None, laplacian=c.laplacian)
        out[c.name] = (len(pts), int(f.jet.channels.shape[0]))
    return out


def point_channels(problem) -> int:
    """A: the points of one step summed over the loss terms, each times its jet channels, over all ranks
    (:func:`term_sizes`)."""
    return sum(n * k for n, k in term_sizes(problem).values())


def warm_trainer(problem, recompute: bool = False, context=None):
    """A one-process Trainer for ``problem`` (``--recompute`` as asked) that has taken one step, so that Adam's state
    exists and the next step is a steady one. ``context``: a RunContext to train under (default: one process)."""
    from elecsolver.trainer import Trainer

    from .strategy import apply_parallelism

    model, ctx = apply_parallelism(problem, None, torch.device("cpu"), {"recompute": recompute})
    ctx.solo = True  # one process on purpose, also inside a launched calibration (parallel.calibration)
    trainer = Trainer(problem, model, context if context is not None else ctx, progress=False)
    trainer.batches()
    trainer.train_step()
    return trainer


def time_steps(trainer, steps: int) -> list[float]:
    """Wall seconds of each of the next ``steps`` training steps (``time.perf_counter``)."""
    import time

    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - t0)
    return times


@dataclass(frozen=True)
class MemoryCoefficients:
    """The activation model's measured coefficients, in bytes per point-channel (one point of one jet channel) of a
    float32 work item (a training dtype of b bytes scales them by b / 4).

    Attributes
    ----------
    plain : float
        What a work item's forward holds until its backward, per point-channel and width unit (W: the output units
        of every weight layer and activation of the stage, :func:`_width_units`): 4.50 on
        ``maxwell-point-source-2d``, 4.40 on ``maxwell-cavity-3d`` (a linear layer keeps its output, one float a
        unit; a sine activation its output and its argument's value channel, 1.2-1.25 floats a unit).
    backward_peak : float
        What the backward of one work item allocates above that at its peak, per point-channel and unit where the
        backward starts (B, :func:`_block_units`): the gradients of a layer's jet channels and the activation's
        chain-rule products, which live while that layer is differentiated. 6.97 and 7.06 on the two problems.
    recompute_peak : float
        Under recompute: what the backward of one work item allocates at its peak, per point-channel and unit of B:
        the last block run again (its forward's bytes) and differentiated. What recompute keeps of each work item
        in flight is its blocks' outputs, one value of the training dtype a unit
        (:func:`_kept_units`, of the stage before tensor-parallel sharding, which replicates them), counted
        exactly. 11.0 and 11.1 on the two problems.
    measured_on : str
    """

    plain: float
    backward_peak: float
    recompute_peak: float
    measured_on: str = ""


def calibrate(problem, points_scale: float = 1.0, measure=None) -> MemoryCoefficients:
    """Measure one training step's peak allocation on this process, plain and with recompute, and the backward peak
    of the largest loss term alone (:func:`backward_peak`); fit the coefficients so that :func:`predict_stage_mib`
    gives the two measured peaks on one process.

    One process runs every loss term's forward, then one backward of their sum, which differentiates the terms last
    one first (the autograd engine runs the most recently recorded nodes first), each term's saved tensors freed as
    its backward ends. With the terms' point-channels a_1..a_n, S_j = a_1 + ... + a_j held when term j's backward
    runs, W the width units and B those where the backward starts: the plain peak
    P = max_j (plain W S_j + backward_peak B a_j), and under recompute P_r = max_j (b K S_j + recompute_peak B a_j)
    (b the training dtype's bytes, K the units recompute keeps, :func:`_kept_units`), each solved for its
    coefficient (the smallest of the n candidates: the peak is the largest of the n sums).

    Parameters
    ----------
    problem : Problem
        Its configuration (network, points, dtype) is measured; ``points_scale`` < 1 measures at fewer points (the
        activations are linear in the points: ``benchmarks/planner_memory.py``).
    measure : callable, optional
        ``measure(fn) -> MiB``, default :func:`~elecsolver.parallel.profiling.peak_allocated_mib`.

    Raises
    ------
    RuntimeError
        If this torch build's profiler records no memory events.
    """
    from elecsolver.config import merge

    from .profiling import peak_allocated_mib

    measure = measure or peak_allocated_mib
    cfg = problem.config
    if points_scale != 1.0:
        keys = {"interior", "boundary", "initial"} | {c.name for c in problem.constraints()}
        counts = {k: max(1, int(v * points_scale)) for k, v in cfg["sampling"].items()
                  if isinstance(v, int) and not isinstance(v, bool) and k in keys}
        problem = type(problem)(merge(cfg, {"sampling": counts}))
    dt = 8 if problem.training.dtype == "float64" else 4
    sizes = term_sizes(problem)
    a = [n * k for n, k in sizes.values() if n > 0]
    held = list(itertools.accumulate(a))  # S_j
    peaks = {}
    for recompute in (False, True):
        trainer = warm_trainer(problem, recompute)  # Adam's state exists: the step's peak is activations, gradients
        model = trainer.model
        grads = sum(p.numel() * p.element_size() for p in model.parameters())
        peaks[recompute] = max(0.0, measure(trainer.train_step) * 2**20 - grads) * 4 / dt  # as float32 bytes
        if not recompute:
            w, b, kept = _width_units(model), _block_units(model), _kept_units(model)
            backward = backward_peak(problem, model, sizes)
    plain = max(0.0, min((peaks[False] - backward * b * aj) / (w * sj) for aj, sj in zip(a, held)))
    recompute = max(0.0, min((peaks[True] - 4 * kept * sj) / (b * aj) for aj, sj in zip(a, held)))
    return MemoryCoefficients(plain, backward, recompute, f"{problem.name}, one process")


def backward_peak(problem, model, sizes: dict | None = None) -> float:
    """What the backward of ``problem``'s largest loss term (points x jet channels) allocates at its peak above what
    its forward left held (:func:`~elecsolver.parallel.profiling.allocations`), in float32 bytes per point-channel
    and unit where the backward starts (:func:`_block_units`): the ``backward_peak`` of :class:`MemoryCoefficients`
    (6.97 on ``maxwell-point-source-2d``). The term's residual is squared and summed, as in the loss; ``model`` is the
    one-process network (its gradients are left as they were); ``sizes``: :func:`term_sizes` of ``problem``, if
    already known.

    Raises
    ------
    RuntimeError
        If this torch build's profiler records no memory events (:func:`~elecsolver.parallel.profiling.allocations`).
    """
    from elecsolver.training.loss import constraint_residual

    from .profiling import allocations

    sizes = sizes or term_sizes(problem)
    c = max(problem.constraints(), key=lambda c: sizes[c.name][0] * sizes[c.name][1])
    cloud = problem.sample(c.name, seed=problem.training.seed)
    dtype = next(model.parameters()).dtype
    pts = torch.as_tensor(cloud.points, dtype=dtype)
    nrm = torch.as_tensor(cloud.normals, dtype=dtype) if cloud.normals is not None else None
    params = [p for p in model.parameters() if p.requires_grad]
    loss, _, _ = allocations(lambda: constraint_residual(model, c, pts, nrm, problem.inputs, problem.outputs,
                                                         "jet").pow(2).sum())
    _, extra, _ = allocations(lambda: torch.autograd.grad(loss, params, allow_unused=True))
    per = extra * 2**20 / (sizes[c.name][0] * sizes[c.name][1] * _block_units(model))
    return per * 4 / dtype.itemsize


def state_bytes(stage, plan: Plan, dtype_bytes: int = 4) -> dict[str, float]:
    """The bytes a rank holds for ``stage`` (its shard of the network) besides activations: ``parameters``,
    ``gradients``, ``adam`` (the first and second moments, sharded over dp by ZeRO: 2 / dp of them) and ``dp_buffer``
    (the flat gradient all-reduced over dp > 1, allocated after the backward has freed the activations). A 2-64-64-3
    network (4547 float32 parameters) holds 18188 bytes of parameters, as many of gradients and 36376 of Adam's
    moments."""
    params = sum(p.numel() for p in stage.parameters()) * dtype_bytes
    return {"parameters": params, "gradients": params, "adam": 2 * params / (plan.dp if plan.zero else 1),
            "dp_buffer": params if plan.dp > 1 else 0}


def work_items(plan: Plan, a_terms: Sequence[float]) -> list[float]:
    """The point-channels (points x jet channels) of each work item of one step on a data-parallel rank, in the order
    a pipeline runs them: micro-batch by micro-batch, each loss term with points its own item
    (:class:`~elecsolver.parallel.pipeline.PipelineSchedule`). Without a pipeline every term is one item.
    ``a_terms``: each loss term's point-channels over all ranks. Terms of 6000 and 4000 with 4 micro-batches and
    dp = 1 give 1500, 1000, 1500, 1000, 1500, 1000, 1500, 1000."""
    m = plan.microbatches if plan.pp > 1 else 1
    return [t / m / plan.dp for _ in range(m) for t in a_terms if t > 0]


def backward_windows(plan: Plan, stage: int, a_terms: Sequence[float]) -> list[tuple[float, float]]:
    """For each work item's backward on pipeline stage ``stage``, in the order they run: (the point-channels the
    stage holds then, those of the item), in the units of ``a_terms`` (:func:`work_items`).

    GPipe (and no pipeline: one process's backward of the summed terms differentiates the last term first) runs
    every forward, then the backwards last item first, so item j's backward finds items 1..j held. Under 1F1B
    stage k runs pp - k - 1 warm-up forwards, then a forward and a backward in turn (Narayanan et al., SC 2021,
    sec. 2.2), so item j's backward finds items j..j + pp - k - 1 held. Items 1500 and 1000, four times (4
    micro-batches of terms 6000 and 4000), on stage 0 of pp = 2 under 1F1B: (2500, 1500), (2500, 1000), ...,
    (1000, 1000)."""
    items = work_items(plan, a_terms)
    if plan.pp > 1 and plan.schedule == "1f1b":
        w = plan.pp - stage
        return [(sum(items[j:j + w]), items[j]) for j in range(len(items))]
    return [(sum(items[:j + 1]), items[j]) for j in reversed(range(len(items)))]


def predict_mib(plan: Plan, stages: list, a_global: int, coeffs: MemoryCoefficients, dtype_bytes: int = 4,
                unsharded: list | None = None, a_terms: Sequence[float] | None = None) -> float:
    """The largest rank's memory in MiB for ``plan``: the largest of :func:`predict_stage_mib`."""
    return max(predict_stage_mib(plan, stages, a_global, coeffs, dtype_bytes, unsharded, a_terms))


def predict_stage_mib(plan: Plan, stages: list, a_global: int, coeffs: MemoryCoefficients, dtype_bytes: int = 4,
                      unsharded: list | None = None, a_terms: Sequence[float] | None = None) -> list[float]:
    """The memory in MiB of a rank of each pipeline stage under ``plan`` (one entry a stage).

    A rank holds its stage's parameters, gradients and Adam's two moments (sharded over dp with ZeRO,
    :func:`state_bytes`), and at its peak, during one work item's backward (:func:`backward_windows`):

    - per point-channel of every item held: ``plain`` x W (the stage's width units), or under recompute the blocks'
      outputs, ``dtype_bytes`` x :func:`_kept_units` of the stage before tensor-parallel sharding (``unsharded``,
      the same stages with tp = 1: the cavity's tp = 2 with recompute measures 1.02x of this, and would be 0.77x
      of a count from the sharded widths); on a stage after the first, plus the features it received, one value
      a unit of its input;
    - per point-channel of the item in hand: ``backward_peak`` x B (the units where the stage's backward starts),
      or under recompute ``recompute_peak`` x B; on a stage before the last, plus the gradient it receives for its
      output, one value a unit of the next stage's input.

    The data-parallel gradient buffer is allocated after the backward has freed the activations, so the larger of
    the two counts. ``a_terms``: each loss term's points x jet channels over all ranks (summing to ``a_global``;
    without it, one term). Coefficients are float32 bytes, scaled by ``dtype_bytes`` / 4; mixed precision is
    modelled as fp32 (an upper bound on the value channel)."""
    a_terms = list(a_terms) if a_terms else [a_global]
    scale = a_global / max(sum(a_terms), 1e-300)  # a_terms in the units of a_global
    full = unsharded or stages
    out = []
    for k, stage in enumerate(stages):
        state = state_bytes(stage, plan, dtype_bytes)
        base = state["parameters"] + state["gradients"] + state["adam"]
        received = _input_units(stage) * dtype_bytes if k > 0 else 0
        grad_out = _input_units(stages[k + 1]) * dtype_bytes if k + 1 < len(stages) else 0
        if plan.recompute:
            per_held = dtype_bytes * _kept_units(full[k]) + received
            per_item = grad_out + coeffs.recompute_peak * _block_units(stage) * dtype_bytes / 4
        else:
            per_held = coeffs.plain * _width_units(stage) * dtype_bytes / 4 + received
            per_item = grad_out + coeffs.backward_peak * _block_units(stage) * dtype_bytes / 4
        act = max(per_held * held + per_item * item for held, item in backward_windows(plan, k, a_terms)) * scale
        out.append((base + max(act, state["dp_buffer"])) / 2**20)
    return out


@dataclass(frozen=True)
class TimeCoefficients:
    """The time model's measured rates.

    Attributes
    ----------
    s_per_mac : float
        Seconds per multiply-add of the weight layers per point-channel on one rank (the local compute, which data,
        tensor and pipeline parallelism divide).
    global_s : float
        The part of a step every rank pays whatever dp is (sampling the global cloud, the optimizer, Python).
    microbatch_s : float
        The fixed cost of a pipeline micro-batch on the last stage: each loss term's residual, loss and backward,
        and its receive and send. ``elecsolver plan --calibrate`` fits it to a two-stage pipeline's steps
        (:func:`~elecsolver.parallel.calibration.fit_microbatch_s`); :func:`calibrate_time` on one process measures
        it with gradient accumulation (which runs one backward a micro-batch, a pipeline one a loss term).
    recompute_factor : float
        Recompute's factor on the local compute.
    alpha_s, beta_s_per_byte : float
        One message of b bytes costs alpha + beta b (Hockney's model).
    s_per_point : float
        Seconds per point-channel of the work that does not scale with the weight layers (the inputs' scaling, the
        output heads, the residuals): data parallelism divides it, tensor parallelism repeats it on every rank, the
        last pipeline stage does it. 0 in a description that does not give it.
    wait_s : float
        What a collective a rank blocks on right after computing costs beyond ``alpha_s``
        (:class:`~elecsolver.parallel.machine.Link`); 0 in a description that does not give it.
    """

    s_per_mac: float
    global_s: float
    microbatch_s: float
    recompute_factor: float
    alpha_s: float
    beta_s_per_byte: float
    measured_on: str = ""
    s_per_point: float = 0.0
    wait_s: float = 0.0


def _macs(module) -> int:
    """Multiply-adds of the rank's weight layers per point and jet channel (the local weights' elements)."""
    return sum(int(w.numel()) for name, w in module.named_parameters() if name.endswith("weight") and w.dim() >= 2)


def _tp_widths(module, recompute: bool = False) -> list[int]:
    """The widths of the all-reduces a tp-sharded stage does per micro-batch: a row-parallel layer's output
    (forward; twice with ``recompute``, whose backward runs the forward again) and a column-parallel layer's input
    (its gradient, backward)."""
    from .tensor_parallel import sharded_modules

    out = []
    for m in sharded_modules(module).values():
        w = m.weight
        g = w.shape[0] if w.dim() == 3 else 1
        row = "Row" in type(m).__name__
        out += [int((w.shape[-2] if row else w.shape[-1]) * g)] * (2 if row and recompute else 1)
    return out


def bubble_fraction(pp: int, microbatches: int) -> float:
    """The idle share of a pipeline step: (pp - 1) / (m + pp - 1) of its slots, for GPipe and 1F1B alike (Huang et
    al., GPipe, NeurIPS 2019; Narayanan et al., SC 2021, sec. 2.2): pp = 4 with 8 micro-batches idles 3 of 11."""
    return (pp - 1) / (microbatches + pp - 1)


def all_reduce_bytes(nbytes: float, group: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``nbytes`` over ``group`` ranks: 2 (group - 1) / group of them
    (a reduce-scatter and an all-gather; Thakur, Rabenseifner and Gropp, IJHPCA 19, 2005). ZeRO's reduce-scatter
    plus all-gather of the parameters moves the same volume."""
    return 2 * (group - 1) / group * nbytes if group > 1 else 0.0


def predict_step_s(plan: Plan, stages: list, a_global: int, coeffs: TimeCoefficients, dtype_bytes: int = 4,
                   machine=None, terms: int = 1) -> float:
    """Seconds a training step takes under ``plan`` (the slowest rank).

    Local compute: ``s_per_mac`` x the stage's multiply-adds x its point-channels (A / dp), times the recompute
    factor, and on the last stage ``s_per_point`` x A / dp (not divided by tp); a pipeline of m micro-batches takes m
    micro-batch slots of its slowest stage, each with its two point-to-point messages, and on the last stage the
    fixed cost of a micro-batch (``microbatch_s``: the residual, the loss and the backward of each loss term, which
    run there, and which recompute does not repeat), over 1 - the bubble (:func:`bubble_fraction`) of its m x
    ``terms`` work items (the pipeline fills and drains item by item: each loss term's micro-batch is its own pass);
    tensor parallel: an all-reduce per sharded layer and micro-batch (:func:`all_reduce_bytes` of the
    activation), a row-parallel layer's twice under recompute (the recomputed forward all-reduces again); data
    parallel: one all-reduce of the gradients (ZeRO: a reduce-scatter and an all-gather, the same volume in two
    messages) and one of the loss terms; plus the part every rank pays. Each all-reduce of tp and dp is one a rank
    blocks on after computing (the link's ``wait_s``); a pipeline's receives are posted ahead, and what a stage
    waits for there is the schedule's dependency, which the slots count.

    ``machine`` (:class:`~elecsolver.parallel.machine.Machine`): each axis's messages are priced at the link its
    groups use (between nodes when a group spans two); without it every message is priced at ``coeffs``'
    alpha and beta. A machine with fewer cores than ranks on a node (``cores_per_node``, an oversubscribed CPU host)
    was measured with every rank busy, each at ``cores / ranks`` of a core: a rank that has a core to itself computes
    ``s = ranks / cores`` times faster, and the step is the larger of its span (the above at the compute rates
    divided by s) and its work (every rank's busy time, summed, over the node's cores): the work-span bound
    (Blumofe and Leiserson, J. ACM 46, 1999; Brent, J. ACM 21, 1974). A pipeline's idle stages and a rank waiting
    in a collective leave their cores to the others. The links keep their measured latencies: a message waits for
    its peer to be scheduled, in the run as in the measurement.

    ``terms``: the loss terms with points. Each is its own pass through the network (its jet carries its own
    derivatives), so tp's all-reduces and a pipeline's sends and receives are ``terms`` messages per layer and
    micro-batch, their bytes (``a_global`` sums the terms) split among them."""
    from .machine import Link

    m = plan.microbatches if plan.pp > 1 else 1
    a_rank = a_global / plan.dp
    here = Link(coeffs.alpha_s, coeffs.beta_s_per_byte, coeffs.wait_s)
    links = machine.axis_links(plan.dp, plan.tp, plan.pp) if machine is not None else \
        {"dp": here, "tp": here, "pp": here}
    share = machine.oversubscription if machine is not None else 1.0
    if share > 1:
        coeffs = replace(coeffs, s_per_mac=coeffs.s_per_mac / share, s_per_point=coeffs.s_per_point / share,
                         global_s=coeffs.global_s / share, microbatch_s=coeffs.microbatch_s / share)
    slots, busy = [], []
    for k, stage in enumerate(stages):
        compute = coeffs.s_per_mac * _macs(stage) * a_rank / m
        if plan.recompute:
            compute *= coeffs.recompute_factor
        if k == len(stages) - 1:
            compute += coeffs.s_per_point * a_rank / m
            if plan.pp > 1:  # a micro-batch's fixed cost
                compute += coeffs.microbatch_s
        comm = 0.0
        if plan.tp > 1:
            for width in _tp_widths(stage, plan.recompute):
                comm += links["tp"].seconds(all_reduce_bytes(width * (a_rank / m) * dtype_bytes, plan.tp),
                                            messages=terms, waits=terms)
        if plan.pp > 1:
            boundary = _input_units(stages[k + 1]) if k + 1 < len(stages) else 0
            if boundary:
                comm += links["pp"].seconds(2 * boundary * (a_rank / m) * dtype_bytes, messages=2 * terms)
        slots.append(compute + comm)
        busy.append(m * compute)
    # a pipeline's m busy slots are 1 - bubble of its m + pp - 1
    step = m * max(slots) / (1 - bubble_fraction(plan.pp, m * terms)) if plan.pp > 1 else slots[0]
    if plan.dp > 1:
        grads = max(sum(p.numel() for p in st.parameters()) for st in stages) * dtype_bytes
        step += links["dp"].seconds(all_reduce_bytes(grads, plan.dp), messages=2 if plan.zero else 1,
                                    waits=2 if plan.zero else 1)
        step += links["dp"].seconds(0.0, waits=1)  # the loss terms, a few numbers
    step += coeffs.global_s
    if share > 1:  # the work of every rank (dp x tp of each stage) over the cores
        ranks = plan.dp * plan.tp * plan.pp
        work = plan.dp * plan.tp * sum(busy) + ranks * coeffs.global_s
        step = max(step, work / (machine.cores_per_node * machine.nodes))
    return step


def _median_steps_s(cases: list[tuple], steps: int) -> list[float]:
    """Median seconds of ``steps`` training steps of each case ``(problem, recompute, world)`` on this process,
    the cases' steps taken in turn (one step of each, then the next round), so that a change in the host's load
    falls on all of them alike. ``world`` > 1 trains rank 0's shard of a data-parallel run whose collectives are
    left out (the identity)."""
    import statistics

    from elecsolver.training.context import RunContext

    trainers = [warm_trainer(p, recompute, RunContext(rank=0, world=world, solo=True)) for p, recompute, world in cases]
    times = [[] for _ in trainers]
    for _ in range(steps):
        for trainer, t in zip(trainers, times):
            t.extend(time_steps(trainer, 1))
    return [statistics.median(t) for t in times]


def calibrate_time(problem, alpha_s: float, beta_s_per_byte: float, steps: int = 15) -> TimeCoefficients:
    """Measure the time model's rates on this process from five medians of ``steps`` steps, taken in turn
    (:func:`_median_steps_s`): the configuration as it is (t1), rank 0's half of it under dp = 2 without the
    collectives (t2: the local work L = 2 (t1 - t2) halves, the rest does not), the network at half its width (t3:
    the weight layers' work shrinks by their multiply-adds' ratio r, the per-point work does not: it is
    L - (t1 - t3) / (1 - r)), with ``training.accumulate`` = 4 (three further micro-batches) and with recompute. A
    network without a ``network.width`` entry of at least 4 gets ``s_per_point = 0`` (all local work counted as the
    weight layers'). The collectives' ``alpha_s`` and ``beta_s_per_byte`` come from the machine
    (:func:`elecsolver.parallel.calibration.measure_machine` measures them)."""
    from elecsolver.config import merge
    from elecsolver.training.trainer import build_model

    cases = [(problem, False, 1), (problem, False, 2),
             (type(problem)(merge(problem.config, {"training": {"accumulate": 4}})), False, 1), (problem, True, 1)]
    width = problem.config.get("network", {}).get("width")
    halved = isinstance(width, int) and not isinstance(width, bool) and width >= 4
    if halved:
        half = type(problem)(merge(problem.config, {"network": {"width": width // 2}}))
        cases.append((half, False, 1))
    t1, t2, t_acc, t_rc, *t3 = _median_steps_s(cases, steps)
    local = max(2 * (t1 - t2), 1e-9)
    model = build_model(problem, torch.device("cpu"))
    macs, a = _macs(model), point_channels(problem)
    weights = local
    if halved:
        ratio = _macs(build_model(half, torch.device("cpu"))) / macs
        weights = min(local, max(0.0, (t1 - t3[0]) / (1 - ratio)))
    return TimeCoefficients(s_per_mac=max(weights, 1e-12) / (macs * a), global_s=max(0.0, t1 - local),
                            microbatch_s=max(0.0, (t_acc - t1) / 3),
                            recompute_factor=max(1.0, 1 + (t_rc - t1) / max(weights, 1e-12)), alpha_s=alpha_s,
                            beta_s_per_byte=beta_s_per_byte, measured_on=f"{problem.name}, one process",
                            s_per_point=(local - weights) / a)


def feasibility(problem, world: int, plans: list[Plan] | None = None, memory_mib: float | None = None,
                coefficients: MemoryCoefficients | None = None, margin: float = 0.2,
                time_coefficients: TimeCoefficients | None = None, machine=None,
                points_scale: float = 1.0) -> list[PlanCheck]:
    """Check every plan (default :func:`candidate_plans` of ``world``) against ``problem``.

    Parameters
    ----------
    problem : Problem
        Its network is built once (on the CPU, from ``training.seed``) and split on copies; its loss terms are
        sampled once for their point counts, assumed shared evenly over the data-parallel ranks.
    world : int
        Ranks.
    memory_mib : float, optional
        Memory per rank; with ``coefficients`` (:func:`calibrate`) a plan whose predicted memory exceeds
        ``(1 - margin) memory_mib`` is rejected for "memory".
    coefficients : MemoryCoefficients, optional
        With them every plan that can run gets its predicted memory (``PlanCheck.memory_mib``).
    time_coefficients : TimeCoefficients, optional
        With them every plan that can run gets its predicted step time (``PlanCheck.step_s``).
    machine : Machine, optional
        A machine description (:mod:`elecsolver.parallel.machine`): the defaults of ``memory_mib``,
        ``coefficients`` and ``time_coefficients``, and the links each axis's messages are priced at.
    points_scale : float
        Plan for this many times the configuration's points a step (every loss term's count and the activations
        scale with it; the points are sampled once at the configuration's counts), e.g. 10^7 points without
        sampling them.

    Returns
    -------
    list of PlanCheck
        In the order of ``plans``.
    """
    from elecsolver.training.trainer import build_model

    if isinstance(machine, (str, os.PathLike)):
        from .machine import load_machine

        machine = load_machine(machine)
    if machine is not None:
        memory_mib = machine.memory_per_rank_mib if memory_mib is None else memory_mib
        coefficients = coefficients or machine.activations
        time_coefficients = time_coefficients or machine.compute
    plans = candidate_plans(world) if plans is None else plans
    model = build_model(problem, torch.device("cpu"))
    sizes = term_sizes(problem)
    counts = {name: int(n * points_scale) for name, (n, _) in sizes.items()}
    a_global = sum(n * k for n, k in sizes.values()) * points_scale
    dtype_bytes = 8 if problem.training.dtype == "float64" else 4
    splits: dict[tuple[int, int], list | str] = {}
    out = []
    for plan in plans:
        why = refusal(active(parallel=plan.options(), training=problem.training, problem=problem))
        reason = ("capability", why) if why else None
        key = (plan.tp, plan.pp)
        if reason is None:
            if key not in splits:
                try:
                    splits[key] = _shards(model, plan.tp, plan.pp)
                except ValueError as exc:
                    splits[key] = str(exc).splitlines()[0]
            if isinstance(splits[key], str):
                reason = ("divisibility", splits[key])
        if reason is None and plan.pp > 1:
            short = {n: c // plan.dp for n, c in counts.items() if 0 < c // plan.dp < plan.microbatches}
            if short:
                names = ", ".join(f"{n!r} ({k})" for n, k in short.items())
                reason = ("points", f"loss terms with fewer points on a data-parallel rank than the {plan.microbatches}"
                                    f" micro-batches: {names}")
        mib = None
        if reason is None and coefficients is not None:
            if (1, plan.pp) not in splits:
                splits[(1, plan.pp)] = _shards(model, 1, plan.pp)
            mib = predict_mib(plan, splits[key], a_global, coefficients, dtype_bytes, splits[(1, plan.pp)],
                              [n * k * points_scale for n, k in sizes.values()])
            if memory_mib is not None and mib > (1 - margin) * memory_mib:
                reason = ("memory", f"{mib:.3g} MiB predicted on the largest rank, over {1 - margin:.0%} of "
                                    f"{memory_mib:.4g} MiB")
        step_s = None
        if reason is None and time_coefficients is not None:
            step_s = predict_step_s(plan, splits[key], a_global, time_coefficients, dtype_bytes, machine,
                                    terms=sum(1 for n in counts.values() if n > 0))
        out.append(PlanCheck(plan, reason, mib, step_s))
    return out


class PlanError(ConfigError):
    """No plan satisfies the constraints (the message says which constraints and why the plans fail)."""


_MESH = ("dp", "tp", "pp")


def constrained_plans(world: int, constraints: dict | None = None) -> list[Plan]:
    """:func:`candidate_plans` of ``world`` kept to ``constraints`` (Plan fields a user fixed, e.g. ``{"tp": 2,
    "precision": "bf16"}``): plans with another dp, tp or pp are dropped, and so are plans of one data-parallel rank
    under ``zero = True`` (nothing to shard); any other field is set to the constraint's value (so
    ``microbatches = 6`` is honoured though 6 is not among the candidates).

    Raises
    ------
    PlanError
        For a field that is not a Plan field.
    """
    constraints = {k: v for k, v in (constraints or {}).items() if v is not None}
    unknown = sorted(set(constraints) - set(Plan.__dataclass_fields__))
    if unknown:
        raise PlanError(f"parallel='auto' (--parallel auto) plans only {sorted(Plan.__dataclass_fields__)}; "
                        f"not {unknown}")
    out: dict[Plan, None] = {}
    for plan in candidate_plans(world):
        if any(k in constraints and getattr(plan, k) != constraints[k] for k in _MESH):
            continue
        if constraints.get("zero") and plan.dp == 1:  # ZeRO shards over dp: with one dp rank it shards nothing
            continue
        fixed = {k: v for k, v in constraints.items() if k not in _MESH and (k != "microbatches" or plan.pp > 1)}
        out[replace(plan, **fixed)] = None
    return list(out)


def ranked(checks: list[PlanCheck]) -> list[PlanCheck]:
    """The plans that can run, fastest predicted first (ties kept in their order); every check needs ``step_s``."""
    ok = [c for c in checks if c.ok]
    if any(c.step_s is None for c in ok):
        raise ValueError("ranking needs predicted step times: give feasibility time coefficients or a machine")
    return sorted(ok, key=lambda c: c.step_s)


def best_plan(problem, world: int, machine, constraints: dict | None = None, margin: float = 0.2) -> PlanCheck:
    """The plan with the least predicted step time for ``problem`` on ``world`` ranks of ``machine``, among those
    that keep to ``constraints`` (:func:`constrained_plans`) and fit (1 - margin) of its memory per rank.

    Raises
    ------
    PlanError
        If none does: one line with the constraints and how many plans failed for each reason, and the first
        reason.
    """
    plans = constrained_plans(world, constraints)
    if not plans:
        mesh = {k: constraints[k] for k in _MESH if (constraints or {}).get(k) is not None}
        raise PlanError(f"parallel='auto' (--parallel auto): {', '.join(f'{k} = {v}' for k, v in mesh.items())} does "
                        f"not fit {world} rank(s): dp x tp x pp must equal the ranks; drop or change it")
    checks = feasibility(problem, world, plans, machine=machine, margin=margin)  # it reads a name or path too
    good = ranked(checks)
    if good:
        return good[0]
    from collections import Counter

    kinds = Counter(c.reason[0] for c in checks)
    given = ", ".join(f"{k} = {v}" for k, v in (constraints or {}).items() if v is not None) or "no constraints"
    first = {}
    for c in checks:
        first.setdefault(c.reason[0], c.reason[1])
    counts = ", ".join(f"{n} rejected for {k}" for k, n in sorted(kinds.items()))
    if set(kinds) == {"memory"}:
        raise PlanError(f"parallel='auto' (--parallel auto): every plan for {world} rank(s) is predicted over the "
                        f"memory a rank has ({counts}; e.g. {first['memory']}); use more ranks, fewer points a step "
                        "or a machine with more memory")
    kind = max(kinds, key=kinds.get)
    raise PlanError(f"parallel='auto' (--parallel auto): no plan for {world} rank(s) keeps to {given} ({counts}; "
                    f"e.g. {first[kind]}); drop or change a constraint")
