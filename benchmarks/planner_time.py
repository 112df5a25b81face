"""The planner's step-time model against measurement under 2-rank plans (dp, ZeRO, tp, pp with both schedules,
recompute), and the collectives' latency and bandwidth it needs.

    python benchmarks/planner_time.py [--json benchmarks/planner_time.json]

1. Two ranks (torchrun-style variables, gloo, one thread each) all-reduce float32 tensors of 1 KiB to 4 MiB, 20 times
   each; the medians fit alpha + beta b (Hockney).
2. ``planner.calibrate_time`` measures the compute rate, the fixed cost of a step and recompute's factor on one
   process.
3. Every plan trains 2 warm-up steps and ``--steps`` timed steps on 2 ranks; rank 0's median step is the plan's.
   The launches are repeated ``--repeats`` times, the plans interleaved within each; the median is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _common import launch_ranks

PLANS = [
    {"dp": 2}, {"dp": 2, "zero": True}, {"dp": 1, "tp": 2}, {"dp": 1, "tp": 2, "recompute": True},
    {"dp": 1, "pp": 2, "microbatches": 4, "schedule": "1f1b"}, {"dp": 1, "pp": 2, "microbatches": 4, "schedule": "gpipe"},
    {"dp": 1, "pp": 2, "microbatches": 2, "schedule": "1f1b"},
]
SIZES = [2**8, 2**12, 2**16, 2**20]  # float32 elements: 1 KiB to 4 MiB


def _problem():
    from elecsolver.problems import get_problem_class

    cls = get_problem_class("maxwell-point-source-2d")
    cfg = cls.preset_config("quick")
    cfg["training"]["steps"] = 1000
    return cls(cfg)


def worker(mode: str, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown

    comm, info, dev = init_data_parallel("cpu")
    torch.set_num_threads(1)
    if mode == "collectives":
        for n in SIZES:
            t = torch.ones(n)
            times = []
            for _ in range(22):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                times.append(time.perf_counter() - t0)
            print(json.dumps({"bytes": 4 * n, "s": statistics.median(times[2:])}), flush=True)
    else:
        from elecsolver.parallel.planner import time_steps
        from elecsolver.parallel.strategy import apply_parallelism

        from elecsolver.trainer import Trainer

        for plan in PLANS:
            problem = _problem()
            model, ctx = apply_parallelism(problem, comm, dev, plan)
            trainer = Trainer(problem, model, ctx, progress=False)
            trainer.batches()
            for _ in range(2):
                trainer.train_step()
            times = time_steps(trainer, steps)
            print(json.dumps({"plan": plan, "rank": info.rank, "s": statistics.median(times)}), flush=True)
    shutdown()


def _launch(mode: str, steps: int) -> list[dict]:
    """Rank 0's rows of a 2-rank launch of this script's worker."""
    return launch_ranks([sys.executable, __file__, "--worker", mode, "--steps", str(steps)])[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="benchmarks/planner_time.json")
    ap.add_argument("--steps", type=int, default=15, help="timed steps a plan a launch (default 15)")
    ap.add_argument("--repeats", type=int, default=3, help="launches (default 3); the median is reported")
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    from elecsolver.parallel.planner import Plan, calibrate_time, feasibility

    torch.set_num_threads(1)
    coll = _launch("collectives", 0)
    b = np.array([r["bytes"] for r in coll], dtype=float)
    t = np.array([r["s"] for r in coll])
    beta, alpha = np.polyfit(b, t, 1)
    alpha = max(float(alpha), float(t.min()) / 2)
    problem = _problem()
    coeffs = calibrate_time(problem, alpha, max(float(beta), 0.0))
    runs = [{json.dumps(r["plan"], sort_keys=True): r["s"] for r in _launch("plans", args.steps)}
            for _ in range(args.repeats)]
    rows = []
    for plan in PLANS:
        full = Plan(**{"dp": 1, **plan})
        predicted = feasibility(problem, 2, [full], time_coefficients=coeffs)[0].step_s
        each = sorted(run[json.dumps(plan, sort_keys=True)] for run in runs)
        m = statistics.median(each)
        rows.append({"plan": full.flags(), "predicted_s": predicted, "measured_s": m, "measured_runs_s": each,
                     "ratio": predicted / m})
        print(f"{full.flags():<55} predicted {predicted * 1e3:7.1f} ms, measured {m * 1e3:7.1f} ms "
              f"(runs {', '.join(f'{x * 1e3:.1f}' for x in each)}), ratio {predicted / m:.3f}")
    order_p = [r["plan"] for r in sorted(rows, key=lambda r: r["predicted_s"])]
    order_m = [r["plan"] for r in sorted(rows, key=lambda r: r["measured_s"])]
    result = {"benchmark": "benchmarks/planner_time.py", "problem": problem.name, "preset": "quick",
              "machine": f"{os.cpu_count()} CPU cores, 2 ranks, gloo, one thread each", "repeats": args.repeats,
              "collectives": {"alpha_s": alpha, "beta_s_per_byte": float(beta), "all_reduce": coll},
              "coefficients": {"s_per_mac": coeffs.s_per_mac, "global_s": coeffs.global_s,
                               "microbatch_s": coeffs.microbatch_s, "recompute_factor": coeffs.recompute_factor},
              "plans": rows, "worst_relative_error": max(abs(r["ratio"] - 1) for r in rows),
              "fastest_predicted": order_p[0], "fastest_measured": order_m[0]}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"alpha {alpha * 1e6:.1f} us, beta {beta * 1e9:.3f} ns/B; worst relative error "
          f"{result['worst_relative_error']:.1%}; fastest predicted {order_p[0]}, measured {order_m[0]}; "
          f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        worker(sys.argv[i + 1], int(sys.argv[sys.argv.index("--steps") + 1]))
    else:
        sys.exit(main())
