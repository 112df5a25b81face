"""``elecsolver plan --calibrate``: measure this machine for the planner and write its description.

The ranks of a run share the machine, so its rates are measured with as many processes as the run will have ranks,
started here on this host, all measuring at once (one thread each unless the cores go round):

1. the processes join a gloo group and all-reduce float32 tensors of 1 KiB to 4 MiB, 20 times each after two
   warm-ups and a barrier; the medians' least-squares slope is ``beta`` (Hockney's ``alpha + beta b``) and the
   smallest message's median less its bytes' share is ``alpha`` (the fit's intercept is swamped by the noise of
   the largest messages on a loaded host); then they all-reduce 1 KiB 40 more times, each right after computing
   for 8, 16 or 32 ms (matrix products, no barrier), as a training step's collectives follow its compute: the
   median's excess over the barrier-synchronised one is the link's ``wait_s`` (the time to wake a rank that went
   to sleep in the wait);
2. each then measures the step-time model's rates on its own (:func:`~elecsolver.parallel.planner.calibrate_time`),
   while the others do the same; the medians over the processes are kept;
3. together they train a pipeline of two stages (dp = ranks / 2, GPipe) with 2 and with 8 micro-batches, where the
   problem allows one: the fixed cost of a micro-batch on the last stage (``microbatch_s``) is then the value with
   which the model predicts those two steps best (:func:`fit_microbatch_s`). On one process it is measured with
   gradient accumulation, which runs one backward a micro-batch where a pipeline runs one a loss term, with its
   receive and send (on 2 CPU ranks the fit gave 16 ms against accumulation's 15 ms on the point source, 44 against
   53 ms on the cavity: benchmarks/planner_time*.json);
4. this process measures the activation coefficients (:func:`~elecsolver.parallel.planner.calibrate`).

The description has one node of that many ranks, the cores this process may run on, and the host's memory shared
among them (:class:`~elecsolver.parallel.machine.Machine`).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

__all__ = ["fit_microbatch_s", "host_memory_mib", "measure_activations", "measure_machine", "spawn_local"]

SIZES = (2**8, 2**12, 2**16, 2**20)  # float32 elements: 1 KiB to 4 MiB
PIPELINE_MICROBATCHES = (2, 8)


def spawn_local(cmd: list[str], world: int, timeout: float = 1200, threads: int | None = None) -> list[list[dict]]:
    """Run ``cmd`` as ``world`` ranks on this host (torchrun-style variables: RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE, MASTER_ADDR/PORT) with ``threads`` intra-op threads each (default: the cores shared out, at
    least one) and return, per rank, the JSON objects it printed one a line.

    Raises
    ------
    RuntimeError
        With a failing rank's standard error.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    threads = threads or max(1, (os.cpu_count() or 1) // world)
    procs = []
    for rank in range(world):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    rows = []
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=timeout)
        if p.returncode:
            for q in procs:
                q.kill()
            raise RuntimeError(f"rank {rank} of the calibration failed:\n{err.strip()}")
        rows.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
    return rows


def measure_activations(problem):
    """The memory model's coefficients (:func:`~elecsolver.parallel.planner.calibrate`) measured on this process at
    up to 4000 points a step (the activations are linear in the points). They count allocations, so every run gives
    the same numbers.

    Raises
    ------
    RuntimeError
        If this torch build's profiler records no memory events.
    """
    from .planner import calibrate

    total = sum(len(problem.sample(c.name, seed=problem.training.seed).points) for c in problem.constraints())
    return calibrate(problem, points_scale=min(1.0, 4000 / max(total, 1)))


def host_memory_mib() -> float:
    """This host's memory (MiB): MemTotal of /proc/meminfo, else the page count times the page size."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


def _after_compute_s(samples: int = 40) -> float:
    """Median seconds of a 1 KiB all-reduce entered right after computing for 8, 16 or 32 ms (in turn: the compute
    between a training step's collectives, from a tensor-parallel layer's to a whole data-parallel step's), with no
    barrier before it: the latency those collectives see."""
    import torch
    import torch.distributed as dist

    a = torch.randn(64, 64)
    t = torch.ones(SIZES[0])
    times = []
    for i in range(samples + 2):
        until = time.perf_counter() + (8, 16, 32)[i % 3] * 1e-3
        while time.perf_counter() < until:
            a @ a
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])


def _worker(spec: str, config_path: str, steps: int) -> None:
    import torch
    import torch.distributed as dist

    from elecsolver.cli import load_problem_class

    from .data_parallel import init_data_parallel, shutdown
    from .planner import calibrate_time

    comm, _, dev = init_data_parallel("cpu")
    config = json.loads(Path(config_path).read_text())
    problem = load_problem_class(spec)(config)
    for n in SIZES:
        t = torch.ones(n)
        times = []
        for _ in range(22):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"bytes": 4 * n, "s": statistics.median(times[2:])}), flush=True)
    print(json.dumps({"after_compute_s": _after_compute_s()}), flush=True)
    dist.barrier()
    c = calibrate_time(problem, 0.0, 0.0, steps)  # every rank at once: the rates under a full machine
    print(json.dumps({"s_per_mac": c.s_per_mac, "s_per_point": c.s_per_point, "global_s": c.global_s,
                      "microbatch_s": c.microbatch_s, "recompute_factor": c.recompute_factor}), flush=True)
    dist.barrier()
    print(json.dumps({"pipeline_s": _pipeline_steps_s(problem, comm, dev, steps)}), flush=True)
    shutdown()


def _pipeline_plans(problem, world: int) -> list:
    """The pipelines :func:`_pipeline_steps_s` times: pp = 2 (dp = world / 2) with 2 and 8 micro-batches under
    GPipe, where the planner would run them (an even world, a network of at least two stages, enough points)."""
    from .planner import Plan, feasibility

    if world % 2:
        return []
    plans = [Plan(dp=world // 2, pp=2, microbatches=m, schedule="gpipe") for m in PIPELINE_MICROBATCHES]
    return plans if all(c.ok for c in feasibility(problem, world, plans)) else []


def _pipeline_steps_s(problem, comm, dev, steps: int) -> dict:
    """Median seconds of ``steps`` training steps of each of :func:`_pipeline_plans`, keyed by micro-batches (empty
    where there are none). Collective: every rank calls it."""
    import statistics as st

    import torch.distributed as dist

    from elecsolver.trainer import Trainer

    from .planner import time_steps
    from .strategy import apply_parallelism

    out = {}
    for plan in _pipeline_plans(problem, dist.get_world_size()):
        model, ctx = apply_parallelism(problem, comm, dev, plan.options())
        trainer = Trainer(problem, model, ctx, progress=False)
        trainer.batches()
        time_steps(trainer, 2)  # warm-up
        out[plan.microbatches] = st.median(time_steps(trainer, steps))
    return out


def fit_microbatch_s(problem, machine, measured: dict) -> float:
    """The ``microbatch_s`` (seconds) with which ``machine`` predicts the measured pipeline steps best, in the least
    squares of the relative errors (``scipy.optimize.minimize_scalar``, bounded by 0 and the longest step).

    ``measured``: ``{micro-batches: seconds a step}`` for the plans of :func:`_pipeline_plans` of this problem on the
    machine's ranks.

    Raises
    ------
    KeyError
        If ``measured`` has a micro-batch count that is not among those plans.
    """
    from scipy.optimize import minimize_scalar

    from .planner import feasibility

    world = machine.ranks_per_node * machine.nodes
    plans = {p.microbatches: p for p in _pipeline_plans(problem, world)}

    def loss(x):
        m = replace(machine, compute=replace(machine.compute, microbatch_s=x))
        return sum((feasibility(problem, world, [plans[k]], machine=m)[0].step_s / t - 1) ** 2
                   for k, t in measured.items())

    return float(minimize_scalar(loss, bounds=(0.0, max(measured.values())), method="bounded",
                                 options={"xatol": 1e-5}).x)


def measure_machine(problem, ranks: int, spec: str | None = None, steps: int = 15, progress=print):
    """Measure this host with ``ranks`` processes training ``problem`` (see the module's steps) and return its
    :class:`~elecsolver.parallel.machine.Machine` (``measured = True``).

    Parameters
    ----------
    problem : Problem
        Measured at its configuration; ``spec`` is how a worker loads its class (default: its registered name).
    ranks : int
        Processes measuring at once: the ranks of the runs to plan.
    steps : int
        Timed steps of each rate's median.

    Raises
    ------
    RuntimeError
        If a worker fails (its error attached).
    """
    import numpy as np

    from .machine import Link, Machine
    from .planner import TimeCoefficients

    if not isinstance(ranks, int) or ranks < 2:
        raise ValueError(f"a calibration needs at least 2 ranks (it measures their collectives), got {ranks!r}")
    spec = spec or problem.name
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps(problem.config))
        progress(f"# calibrating with {ranks} processes on this host: collectives, step rates, then a two-stage "
                 "pipeline's micro-batch cost")
        rows = spawn_local([sys.executable, "-m", "elecsolver.parallel.calibration", "--worker", spec, str(cfg),
                            str(steps)], ranks)
    coll = [[r for r in rank_rows if "bytes" in r] for rank_rows in rows]
    b = np.array([r["bytes"] for r in coll[0]], dtype=float)
    t = np.array([statistics.median(c[i]["s"] for c in coll) for i in range(len(b))])  # the median rank's
    beta = max(float(np.polyfit(b, t, 1)[0]), 1e-15)
    alpha = max(float(t[0]) - beta * float(b[0]), float(t[0]) / 2)  # the smallest message: latency, not the fit's
    after = statistics.median(next(r["after_compute_s"] for r in rank_rows if "after_compute_s" in r)
                              for rank_rows in rows)
    wait = max(0.0, after - float(t[0]))
    rates = [next(r for r in rank_rows if "s_per_mac" in r) for rank_rows in rows]
    med = {k: statistics.median(r[k] for r in rates) for k in rates[0]}
    compute = TimeCoefficients(alpha_s=alpha, beta_s_per_byte=beta, wait_s=wait,
                               measured_on=f"{problem.name}, {ranks} processes at once", **med)
    progress("# calibrating the activation memory on this process")
    activations = measure_activations(problem)
    link = Link(compute.alpha_s, compute.beta_s_per_byte, compute.wait_s)
    import platform

    machine = Machine(name=f"{platform.node() or 'this host'}: {os.cpu_count()} CPU cores, {ranks} ranks, gloo",
                      measured=True,
                      source=f"elecsolver plan --calibrate on {problem.name}, {time.strftime('%Y-%m-%d')}",
                      ranks_per_node=ranks, nodes=1, memory_per_rank_mib=host_memory_mib() / ranks, compute=compute,
                      activations=activations, intra_node=link, inter_node=link,
                      cores_per_node=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count())
    pipes = [next((r["pipeline_s"] for r in rank_rows if "pipeline_s" in r), {}) for rank_rows in rows]
    if pipes[0] and all(pipes):  # rank 0's keys are every rank's; the median rank's step
        measured = {int(m): statistics.median(p[m] for p in pipes) for m in pipes[0]}
        machine = replace(machine, compute=replace(compute, microbatch_s=fit_microbatch_s(problem, machine, measured)))
    return machine


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
    _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
