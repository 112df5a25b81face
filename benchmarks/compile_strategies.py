"""The compiled training step's speed-up under every parallel strategy, on this machine.

    python benchmarks/compile_strategies.py --runs 3 --steps 8

For each strategy (dp = 2 as the plain reference, tp = 2, pp = 2 with 4 GPipe micro-batches, ZeRO over dp = 2,
recompute over dp = 2, and one process in fp32, bf16 and fp16), eager and ``--compile`` runs alternate (eager,
compiled, eager, ...) because the host is shared and noisy.  Every run is a fresh launch (one thread per rank, gloo
over loopback) of the 2-D point source's ``quick`` network (multiscale, width 64, depth 4) through
``elecsolver.parallel.strategy.apply_parallelism`` and the Trainer (the worker of ``benchmarks/parallel.py``): its
``--warmup`` steps include the compilation, then ``--steps`` steps are timed, and the run's median step is kept.
The table gives the median over runs with the spread (min-max) and the speed-up as the ratio of the medians;
``--json`` writes the raw numbers (default ``benchmarks/compile_strategies.json``), which docs/parallel.md quotes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import cpu_model

STRATEGIES = {
    "dp=2": (2, {}),
    "tp=2": (2, {"tp": 2}),
    "pp=2 gpipe x4": (2, {"pp": 2, "microbatches": 4, "schedule": "gpipe"}),
    "dp=2 zero": (2, {"zero": True}),
    "dp=2 recompute": (2, {"recompute": True}),
    "1 rank fp32": (1, {}),
    "1 rank bf16": (1, {"precision": "bf16"}),
    "1 rank fp16": (1, {"precision": "fp16"}),
}


def _parallel_bench():
    """benchmarks/parallel.py as a module (its name would clash with the package ``parallel``)."""
    spec = importlib.util.spec_from_file_location("bench_parallel", HERE / "parallel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def recompute_memory(bench, points: int) -> dict:
    """The peak of torch's CPU allocations in one step (``elecsolver.parallel.profiling.peak_allocated_mib``), one
    process, ``points`` interior points: eager and compiled, each without and with recompute (a compiled graph's
    partitioner already recomputes some of what eager saves, so recompute saves less there)."""
    sampling = {"interior": points, "source": points // 4, "boundary": points // 5, "initial": points // 5}
    out = {"interior_points": points}
    print(f"\n| peak allocated MiB ({points} interior points, 1 rank) | plain | recompute | ratio |\n|---|---|---|---|")
    for tag, comp in (("eager", False), ("compiled", True)):
        mib = {}
        for rc in (False, True):
            r = bench.run(1, {"steps": 1, "warmup": 2, "memory": True, "parallel": {"recompute": rc},
                              "config": {"sampling": sampling, "training": {"dtype": "float32", "compile": comp}}})
            mib["recompute" if rc else "plain"] = r["peak_alloc_mib"]
        out[tag] = {**mib, "ratio": mib["recompute"] / mib["plain"]}
        print(f"| {tag} | {mib['plain']:.0f} | {mib['recompute']:.0f} | {out[tag]['ratio']:.2f} |", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="launches per variant (default 3)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per launch (default 8)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps, compilation included (default 2)")
    ap.add_argument("--only", nargs="*", choices=list(STRATEGIES), help="these strategies only")
    ap.add_argument("--json", default=str(HERE / "compile_strategies.json"))
    ap.add_argument("--memory-only", action="store_true",
                    help="only the recompute memory section, added to the JSON file's strategies")
    ap.add_argument("--memory-points", type=int, default=8000, help="interior points of the memory section")
    a = ap.parse_args(argv)
    bench = _parallel_bench()
    if a.memory_only:
        out = json.loads(Path(a.json).read_text())
        out["recompute_memory"] = recompute_memory(bench, a.memory_points)
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {a.json}")
        return 0
    base = {"steps": a.steps, "warmup": a.warmup, "config": {"training": {"dtype": "float32"}}}
    raw: dict = {}
    print(f"# benchmarks/compile_strategies.py on {cpu_model()}, {os.cpu_count()} cores; medians of {a.runs} "
          f"interleaved launches (min-max), {a.steps} timed steps after {a.warmup}\n")
    print("| strategy | ranks | eager ms/step | compiled ms/step | speed-up |\n|---|---|---|---|---|")
    for name in a.only or list(STRATEGIES):
        world, par = STRATEGIES[name]
        runs = {"eager": [], "compiled": []}
        for _ in range(a.runs):
            for tag, comp in (("eager", False), ("compiled", True)):
                opts = {**base, "parallel": par,
                        "config": {"training": {**base["config"]["training"], "compile": comp}}}
                runs[tag].append(bench.run(world, opts)["step_s"])
        e, c = (sorted(runs[k]) for k in ("eager", "compiled"))
        me, mc = statistics.median(e), statistics.median(c)
        raw[name] = {"ranks": world, "parallel": par, "eager_s": runs["eager"], "compiled_s": runs["compiled"],
                     "eager_median_s": me, "compiled_median_s": mc, "speedup": me / mc}
        print(f"| {name} | {world} | {me*1e3:.1f} ({e[0]*1e3:.1f}-{e[-1]*1e3:.1f}) | {mc*1e3:.1f} "
              f"({c[0]*1e3:.1f}-{c[-1]*1e3:.1f}) | {me / mc:.2f}x |", flush=True)
    out = {"benchmark": "benchmarks/compile_strategies.py", "cpu": cpu_model(), "cores": os.cpu_count(),
           "problem": "maxwell-point-source-2d quick (float32)", "runs": a.runs, "steps": a.steps,
           "warmup": a.warmup, "strategies": raw, "recompute_memory": recompute_memory(bench, a.memory_points)}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
