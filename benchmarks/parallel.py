"""Parallel strategies on this machine: weak scaling, tensor-parallel memory, recompute memory and time, bf16 vs fp32,
and the compute/communication split of each strategy.

    python benchmarks/parallel.py --runs 3 --steps 10

Every measurement is a fresh process (one thread per rank, gloo over loopback for several ranks) that builds the
2-D point source (its ``quick`` network: multiscale, width 64, depth 4, three scales) through
``elecsolver.parallel.strategy.apply_parallelism`` and the Trainer, takes ``--warmup`` steps, then times
``--steps`` steps.  Runs of the variants being compared are interleaved (a, b, a, b, ...) because the host is
shared and noisy; the tables give the median over runs and the spread (min-max), and ratios of medians.

- weak scaling: N interior points per rank, world 1 against world 2 (2N points); efficiency = t(1) / t(2);
- tp memory: parameter and Adam-state elements held by one rank, tp=2 against tp=1;
- recompute: the peak of torch's CPU allocations during one step (profiler memory events,
  ``elecsolver.parallel.profiling.peak_allocated_mib``), the resident high-water mark above the start for
  comparison (``resource.getrusage``; it undercounts when malloc reuses what the start-up left resident), and the
  step time, on and off;
- bf16 against fp32: step time (autocast on the value channel of every matmul);
- the compute / communication split (torch.profiler self times) of dp=2, tp=2 and pp=2.
Per-rank sampling time in the local sampling mode: ``benchmarks/sampling_scale.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model

WORKER = r"""
import json, resource, statistics, sys, time
import torch
from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
from elecsolver.parallel.strategy import apply_parallelism
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D
from elecsolver.config import merge
from elecsolver.trainer import Trainer

opts = json.loads(sys.argv[1])
comm, info, dev = init_data_parallel("cpu")
torch.set_num_threads(1)
cfg = merge(MaxwellPointSource2D.preset_config("quick"), opts.get("config", {}))
problem = MaxwellPointSource2D(cfg)
model, ctx = apply_parallelism(problem, comm, dev, opts.get("parallel"))
trainer = Trainer(problem, model, ctx, progress=False)
n_param = sum(p.numel() for p in trainer.params)
trainer.batches()  # the first round's points exist before the baseline
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux: the high-water mark before any step
for _ in range(opts["warmup"]):
    trainer.train_step()
times = []
for _ in range(opts["steps"]):
    t0 = time.perf_counter()
    trainer.train_step()
    times.append(time.perf_counter() - t0)
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
opt_state = sum(t.numel() for s in trainer.optimizer.state.values() for t in s.values()
                if torch.is_tensor(t) and t.dim() > 0)
out = {"step_s": statistics.median(times), "n_param": n_param, "n_opt_state": opt_state,
       "peak_above_start_mib": (rss1 - rss0) / 1024}
if opts.get("memory"):
    from elecsolver.parallel.profiling import peak_allocated_mib
    out["peak_alloc_mib"] = peak_allocated_mib(trainer.train_step)
if opts.get("profile"):
    from elecsolver.parallel.profiling import split_times
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            trainer.train_step()
    c, m = split_times(prof)
    out.update(compute_s=c / 3, communication_s=m / 3)
if info.rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
shutdown()
"""

def run(world: int, options: dict, timeout: float = 1200) -> dict:
    """One measurement on ``world`` ranks; rank 0's result."""
    from socket import socket

    with socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(WORKER)
        script = f.name
    procs = []
    for rank in range(world):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, script, json.dumps(options)], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    texts = [p.communicate(timeout=timeout)[0] for p in procs]
    os.unlink(script)
    for p, t in zip(procs, texts):
        if p.returncode != 0:
            raise RuntimeError(t[-3000:])
    line = next(x for x in texts[0].splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def interleaved(variants: dict, runs: int) -> dict:
    """variant name -> (world, options); every variant run ``runs`` times, interleaved."""
    out = {k: [] for k in variants}
    for _ in range(runs):
        for k, (world, o) in variants.items():
            out[k].append(run(world, o))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--points", type=int, default=2000, help="interior points per rank (weak scaling)")
    ap.add_argument("--only", nargs="*", help="sections: weak tp recompute bf16 split")
    ap.add_argument("--json", help="write the raw results here")
    a = ap.parse_args()
    base = {"steps": a.steps, "warmup": a.warmup}
    sections = set(a.only or ["weak", "tp", "recompute", "bf16", "split"])
    print(f"# benchmarks/parallel.py on {cpu_model()}, {os.cpu_count()} cores; medians of {a.runs} interleaved runs "
          f"(min-max), {a.steps} timed steps after {a.warmup}\n")
    raw: dict = {}

    def sampling(n):
        return {"config": {"sampling": {"interior": n, "source": n // 4, "boundary": n // 5, "initial": n // 5}}}

    if "weak" in sections:
        r = interleaved({"1 rank": (1, {**base, **sampling(a.points)}),
                         "2 ranks": (2, {**base, **sampling(2 * a.points)})}, a.runs)
        raw["weak"] = r
        t1, t2 = (med([x["step_s"] for x in r[k]]) for k in ("1 rank", "2 ranks"))
        print("## Weak scaling (one thread per rank)\n\n| ranks | interior points | ms per step |\n|---|---|---|")
        print(f"| 1 | {a.points} | {t1[0]*1e3:.1f} ({t1[1]*1e3:.1f}-{t1[2]*1e3:.1f}) |")
        print(f"| 2 | {2 * a.points} | {t2[0]*1e3:.1f} ({t2[1]*1e3:.1f}-{t2[2]*1e3:.1f}) |")
        print(f"\nefficiency t(1)/t(2) = {t1[0] / t2[0]:.1%}\n")
    if "tp" in sections:
        one = run(1, {**base, "steps": 1})
        two = run(2, {**base, "steps": 1, "parallel": {"tp": 2}})
        raw["tp"] = {"tp1": one, "tp2": two}
        m1 = one["n_param"] + one["n_opt_state"]
        m2 = two["n_param"] + two["n_opt_state"]
        print("## Tensor parallel: per-rank parameter and Adam-state elements\n\n| tp | parameters | Adam state | "
              "total | ratio |\n|---|---|---|---|---|")
        print(f"| 1 | {one['n_param']} | {one['n_opt_state']} | {m1} | 1 |")
        print(f"| 2 | {two['n_param']} | {two['n_opt_state']} | {m2} | {m2 / m1:.3f} |\n")
    if "recompute" in sections:
        big = {**base, **sampling(4 * a.points), "memory": True}
        r = interleaved({"off": (1, big), "on": (1, {**big, "parallel": {"recompute": True}})}, a.runs)
        raw["recompute"] = r
        print(f"## Recompute ({4 * a.points} interior points, one process)\n\n| recompute | peak allocated MiB | "
              "resident peak above start MiB | ms per step |\n|---|---|---|---|")
        for k in ("off", "on"):
            m = med([x["peak_alloc_mib"] for x in r[k]])
            q = med([x["peak_above_start_mib"] for x in r[k]])
            t = med([x["step_s"] for x in r[k]])
            print(f"| {k} | {m[0]:.0f} ({m[1]:.0f}-{m[2]:.0f}) | {q[0]:.0f} ({q[1]:.0f}-{q[2]:.0f}) | "
                  f"{t[0]*1e3:.1f} ({t[1]*1e3:.1f}-{t[2]*1e3:.1f}) |")
        mo, mf = (med([x["peak_alloc_mib"] for x in r[k]])[0] for k in ("on", "off"))
        to, tf = (med([x["step_s"] for x in r[k]])[0] for k in ("on", "off"))
        print(f"\nmemory ratio {mo / max(mf, 1e-9):.2f}, time ratio {to / tf:.2f}\n")
    if "bf16" in sections:
        cfg = {**base, **sampling(a.points), "config": {**sampling(a.points)["config"],
                                                       "training": {"dtype": "float32"}}}
        r = interleaved({"fp32": (1, cfg), "bf16": (1, {**cfg, "parallel": {"precision": "bf16"}})}, a.runs)
        raw["bf16"] = r
        t32, t16 = (med([x["step_s"] for x in r[k]]) for k in ("fp32", "bf16"))
        print("## bf16 against fp32 (one process, float32 master weights)\n\n| precision | ms per step |\n|---|---|")
        print(f"| fp32 | {t32[0]*1e3:.1f} ({t32[1]*1e3:.1f}-{t32[2]*1e3:.1f}) |")
        print(f"| bf16 | {t16[0]*1e3:.1f} ({t16[1]*1e3:.1f}-{t16[2]*1e3:.1f}) |")
        print(f"\ntime ratio bf16/fp32 = {t16[0] / t32[0]:.2f}\n")
    if "split" in sections:
        prof = {**base, **sampling(a.points), "profile": True, "steps": 1}
        r = {k: run(2, {**prof, "parallel": p}) for k, p in
             (("dp=2", {}), ("tp=2", {"tp": 2}), ("pp=2 (1F1B, 4 micro-batches)", {"pp": 2, "microbatches": 4}),
              ("dp=2 + ZeRO", {"zero": True}))}
        raw["split"] = r
        print("## Compute / communication split (rank 0, torch.profiler self times, per step)\n\n| strategy | "
              "compute ms | communication ms | communication share |\n|---|---|---|---|")
        for k, x in r.items():
            c, m = x["compute_s"], x["communication_s"]
            print(f"| {k} | {c*1e3:.1f} | {m*1e3:.1f} | {m / (c + m):.1%} |")
        print()
    if a.json:
        Path(a.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
