"""The planner's search: its time for world sizes 2 to 64, and its choices on the shipped GPU descriptions for the
main job's ``full`` preset and for ``maxwell-cavity-3d`` at 10^7 points a step.

    python benchmarks/planner_search.py [--json benchmarks/planner_search.json]

Search time: ``feasibility`` with a machine description (every plan of the world size checked for capability,
divisibility, points and memory, and timed by the model) then ``ranked``, on one thread; the first search of a
process (cold: the network built, the points sampled, the jets traced) and the median of ``--repeats`` further
ones (warm). The choices are computed, not measured: the GPU descriptions are not measured (docs/parallel.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

WORLDS = (2, 4, 8, 16, 32, 64)
SCENARIOS = [  # (label, problem, preset, --set, points a step or None, machine, world)
    ("maxwell-point-source-2d full", "maxwell-point-source-2d", "full", [], None, "h100-8x-nvlink", 8),
    ("maxwell-point-source-2d full", "maxwell-point-source-2d", "full", [], None, "h100-64x-infiniband", 64),
    ("maxwell-point-source-2d full, training.compile=false", "maxwell-point-source-2d", "full",
     ["training.compile=false", "training.cuda_graphs=false"], None, "h100-8x-nvlink", 8),
    ("maxwell-point-source-2d full, training.compile=false", "maxwell-point-source-2d", "full",
     ["training.compile=false", "training.cuda_graphs=false"], None, "h100-64x-infiniband", 64),
    ("maxwell-cavity-3d full", "maxwell-cavity-3d", "full", [], 10**7, "h100-8x-nvlink", 8),
    ("maxwell-cavity-3d full", "maxwell-cavity-3d", "full", [], 10**7, "h100-64x-infiniband", 64),
]


def _problem(name, preset, sets):
    from elecsolver.problems import get_problem_class

    from elecsolver.config import apply_overrides

    cls = get_problem_class(name)
    return cls(apply_overrides(cls.preset_config(preset), sets))


def _total_points(problem) -> int:
    return sum(len(problem.sample(c.name, seed=problem.training.seed).points) for c in problem.constraints())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="benchmarks/planner_search.json")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import torch
    from elecsolver.parallel.machine import load_machine
    from elecsolver.parallel.planner import feasibility, ranked

    torch.set_num_threads(1)
    machine = load_machine("h100-64x-infiniband")
    problem = _problem("maxwell-cavity-3d", "full", [])
    search = []
    for world in WORLDS:
        t0 = time.perf_counter()
        checks = feasibility(problem, world, machine=machine)
        ranked(checks)
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ranked(feasibility(problem, world, machine=machine))
            warm.append(time.perf_counter() - t0)
        search.append({"world": world, "plans": len(checks), "cold_s": cold, "warm_median_s": statistics.median(warm),
                       "warm_s": warm})
        print(f"world {world:3d}: {len(checks):5d} plans, cold {cold:.3f} s, warm median "
              f"{statistics.median(warm):.3f} s (spread {min(warm):.3f}-{max(warm):.3f})")
    choices = []
    for label, name, preset, sets, points, mname, world in SCENARIOS:
        problem = _problem(name, preset, sets)
        m = load_machine(mname)
        total = _total_points(problem)
        scale = points / total if points else 1.0
        checks = feasibility(problem, world, machine=m, points_scale=scale)
        order = [c for c in ranked(checks) if c.plan.precision == "fp32"]  # precision is not modelled: fp32 rows
        kinds = Counter(c.reason[0] for c in checks if not c.ok)
        examples = {}
        for c in sorted(checks, key=lambda c: c.plan.precision != "fp32"):  # an fp32 example where there is one
            if not c.ok and c.reason[0] not in examples:
                examples[c.reason[0]] = {"plan": c.plan.flags(), "reason": c.reason[1]}
        row = {"scenario": label, "machine": mname, "machine_name": m.name, "measured": m.measured, "world": world,
               "points_a_step": int(round(total * scale)), "plans": len(checks),
               "can_run": sum(c.ok for c in checks), "rejected": dict(kinds), "examples": examples,
               "top": [{"plan": c.plan.flags(), "step_ms": c.step_s * 1e3, "memory_mib": c.memory_mib}
                       for c in order[:3]]}
        choices.append(row)
        best = row["top"][0] if row["top"] else None
        print(f"{label} on {mname} ({world} ranks): {row['can_run']} of {row['plans']} can run; best "
              f"{best['plan'] if best else 'none'}" + (f" {best['step_ms']:.3g} ms, {best['memory_mib']:.4g} MiB"
                                                       if best else ""))
    result = {"benchmark": "benchmarks/planner_search.py", "threads": 1, "repeats": args.repeats,
              "search_problem": "maxwell-cavity-3d full", "search_machine": "h100-64x-infiniband", "search": search,
              "max_warm_s": max(r["warm_median_s"] for r in search), "max_cold_s": max(r["cold_s"] for r in search),
              "choices": choices}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"slowest search: cold {result['max_cold_s']:.3f} s, warm {result['max_warm_s']:.3f} s; wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
