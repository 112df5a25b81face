"""``--profile``: the split of step time between compute and communication, per rank, with torch.profiler.

The first few training steps run under :class:`torch.profiler.profile` (CPU activities, and CUDA where present).
An operator counts as communication when it is a ``torch.distributed`` collective or point-to-point operation
(``c10d::`` ops, gloo/NCCL work, ``send``/``recv``, ``broadcast``, ``all_reduce``, ``all_gather``,
``reduce_scatter``); everything else is compute.  Times are operators' *self* times (no double counting of
nested operators), summed per step; the remainder of the wall time (Python, the loop) is reported as "other".
Every rank measures itself; the writer prints every rank's line (the lines are gathered with one small
all-reduce), so that an imbalance between ranks or stages shows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time

import torch

__all__ = ["COMMUNICATION_MARKERS", "allocations", "is_communication", "peak_allocated_mib", "profile_steps",
           "quiet_profile", "split_times", "step_peak_mib"]

log = logging.getLogger(__name__)

COMMUNICATION_MARKERS = ("c10d", "gloo", "nccl", "allreduce", "all_reduce", "allgather", "all_gather", "broadcast",
                         "reduce_scatter", "send", "recv", "barrier", "alltoall")


def is_communication(name: str) -> bool:
    """Whether a profiler event name is a torch.distributed operation."""
    n = name.lower()
    return any(m in n for m in COMMUNICATION_MARKERS)


@contextlib.contextmanager
def _stderr_silenced():
    """File descriptor 2 to /dev/null inside the block (what C++ code writes there included), restored after."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextlib.contextmanager
def quiet_profile(**kwargs):
    """:class:`torch.profiler.profile` (``kwargs`` are its arguments) without the lines that its C++ side (Kineto)
    writes to stderr when it starts and stops (``USDT: ... profiler_start``), which no setting turns off: stderr is
    silenced around the start and the stop only, not while the profiled code runs."""
    from torch.profiler import profile

    prof = profile(**kwargs)
    with _stderr_silenced():
        prof.start()
    try:
        yield prof
    finally:
        with _stderr_silenced():
            prof.stop()


def split_times(prof) -> tuple[float, float]:
    """(compute, communication) self CPU time in seconds of a finished ``torch.profiler.profile``."""
    compute = comm = 0.0
    for e in prof.key_averages():
        t = e.self_cpu_time_total * 1e-6
        if is_communication(e.key):
            comm += t
        else:
            compute += t
    return compute, comm


def allocations(fn) -> tuple:
    """``(fn(), peak, end)``: the peak of the bytes held by torch's CPU allocator while ``fn()`` runs and the bytes
    still held when it returns, both above what was held at its start, in MiB (:func:`peak_allocated_mib`).

    Raises
    ------
    RuntimeError
        If this torch build's profiler records no memory events.
    """
    from torch.profiler import ProfilerActivity

    with quiet_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    if not events:
        raise RuntimeError("torch.profiler recorded no memory events: this torch build cannot measure peak memory")
    held = peak = 0
    for _, nbytes in events:
        held += nbytes
        peak = max(peak, held)
    return out, peak / 2**20, held / 2**20


def peak_allocated_mib(fn) -> float:
    """Peak of the bytes held by torch's CPU allocator while ``fn()`` runs, above what was held at its start, in MiB.

    Counted from the allocation and free events that :class:`torch.profiler.profile` records with
    ``profile_memory=True`` (summed in time order; the peak of the running sum).  Unlike the process's resident
    high-water mark (``getrusage``), this does not depend on what earlier work left resident in malloc's free
    lists, nor on how a sandboxed kernel reports ``ru_maxrss``; it counts tensors only, not Python objects.

    Raises
    ------
    RuntimeError
        If this torch build's profiler records no memory events.
    """
    return allocations(fn)[1]


def step_peak_mib(step, tries: int = 4) -> float:
    """Peak of torch's CPU allocations during one training step in steady state, above what the step starts with,
    in MiB: ``step()`` is run ``tries`` times, each under :func:`allocations`, and the first run whose allocations
    and frees balance (nothing left held at its end) gives the peak; if none balances, the smallest peak.

    Why several runs: the profiler records a free only on a thread that it profiles.  A tensor handed to a
    ``torch.distributed`` collective is also held by the backend's work object (gloo's worker thread); when that
    thread drops the last reference, after the caller has dropped its own, the free goes unrecorded and the tensor
    counts as held for the rest of the run.  Which thread frees last is a race, so such a run reads high by the
    tensor's size and leaves it held at its end.  A missed free can only raise the running sum, so a balanced run,
    or else the lowest, is the one to trust.  Measure a warmed-up trainer: its first step allocates the optimizer's
    state and does not balance.

    Collective when ``step`` is: every rank runs ``step`` exactly ``tries`` times, whatever its own runs read.

    Raises
    ------
    ValueError
        If ``tries`` is below 1.
    RuntimeError
        If this torch build's profiler records no memory events.
    """
    if tries < 1:
        raise ValueError(f"tries must be at least 1, got {tries}")
    runs = [allocations(step)[1:] for _ in range(tries)]
    balanced = [peak for peak, end in runs if end <= 0.0]
    return balanced[0] if balanced else min(peak for peak, _ in runs)


def profile_steps(trainer, stop_after: int | None = None, steps: int = 3) -> dict:
    """Train the next ``steps`` steps (at most up to ``stop_after`` or the end) under the profiler, print the
    split on the writer rank and return this rank's numbers (seconds per step).

    Collective: every rank calls it.
    """
    end = trainer.options.steps if stop_after is None else min(stop_after, trainer.options.steps)
    n = max(0, min(steps, end - trainer.step))
    if n == 0:
        return {}
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    t0 = time.perf_counter()
    with quiet_profile(activities=activities) as prof:
        for _ in range(n):  # the steps alone: no logging, evaluation or checkpoint inside the measurement
            trainer.train_step()
    wall = (time.perf_counter() - t0) / n
    trainer.wall_s += wall * n
    compute, comm = (t / n for t in split_times(prof))
    mine = {"wall_s": wall, "compute_s": compute, "communication_s": comm, "other_s": max(0.0, wall - compute - comm)}
    ctx = trainer.ctx
    mesh = ctx.extra.get("mesh")
    world = mesh.world if mesh is not None else 1
    rank = mesh.rank if mesh is not None else 0
    table = torch.zeros(world, 4, dtype=torch.float64)
    table[rank] = torch.tensor([mine[k] for k in ("wall_s", "compute_s", "communication_s", "other_s")])
    if mesh is not None:
        mesh.all_reduce_sum(table, axis="world")
    if ctx.is_writer:
        strategy = ctx.extra.get("layout", {"dp": ctx.world, "tp": 1, "pp": 1})
        lines = [f"profile of {n} steps ({', '.join(f'{k}={v}' for k, v in strategy.items())}): per step"]
        for r in range(world):
            w, c, m, o = table[r].tolist()
            lines.append(f"  rank {r}: wall {w * 1e3:8.1f} ms = compute {c * 1e3:8.1f} ms ({c / w:5.1%}) + "
                         f"communication {m * 1e3:8.1f} ms ({m / w:5.1%}) + other {o * 1e3:7.1f} ms")
        print("\n".join(lines), flush=True)
    return mine
