"""The planner's step-time model against measurement: every plan that can run on 2 ranks at fp32 (dp, ZeRO, tp, pp
with both schedules and 2, 4 and 8 micro-batches, each with and without recompute), and the machine description it
is predicted with.

    python benchmarks/planner_time.py [--json benchmarks/planner_time.json] [--write-machine FILE]

1. ``elecsolver.parallel.calibration.measure_machine`` with 2 processes (gloo, one thread each): the collectives'
   alpha and beta from all-reduces of 1 KiB to 4 MiB, then each process measures the step rates while the other
   does (:func:`~elecsolver.parallel.planner.calibrate_time`); ``--write-machine`` writes the description (the
   shipped ``cpu-2core`` is written so).
2. For comparison, the same rates measured by one process alone (the calibration before).
3. Every plan trains 2 warm-up steps and ``--steps`` timed steps on 2 ranks; rank 0's median step is the plan's.
   The launches are repeated ``--repeats`` times, the plans interleaved within each; the median is reported.
4. Rank correlation (Spearman) of predicted and measured, the median absolute relative error, and how far the
   fastest predicted plan is from the fastest measured one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from _common import launch_ranks


def _plans() -> list[dict]:
    """Every plan of 2 ranks that the quick preset can run at fp32, as ParallelOptions fields."""
    from elecsolver.parallel.planner import feasibility

    return [c.plan.options() for c in feasibility(_problem(), 2) if c.ok and c.plan.precision == "fp32"]


def _problem():
    from elecsolver.problems import get_problem_class

    cls = get_problem_class("maxwell-point-source-2d")
    cfg = cls.preset_config("quick")
    cfg["training"]["steps"] = 1000
    return cls(cfg)


def worker(steps: int) -> None:
    import torch
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown

    comm, info, dev = init_data_parallel("cpu")
    torch.set_num_threads(1)
    from elecsolver.parallel.planner import time_steps
    from elecsolver.parallel.strategy import apply_parallelism

    from elecsolver.trainer import Trainer

    for plan in _plans():
        problem = _problem()
        model, ctx = apply_parallelism(problem, comm, dev, plan)
        trainer = Trainer(problem, model, ctx, progress=False)
        trainer.batches()
        for _ in range(2):
            trainer.train_step()
        times = time_steps(trainer, steps)
        print(json.dumps({"plan": plan, "rank": info.rank, "s": statistics.median(times)}), flush=True)
    shutdown()


def _launch(steps: int) -> list[dict]:
    """Rank 0's rows of a 2-rank launch of this script's worker."""
    return launch_ranks([sys.executable, __file__, "--worker", "--steps", str(steps)])[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="benchmarks/planner_time.json")
    ap.add_argument("--steps", type=int, default=15, help="timed steps a plan a launch (default 15)")
    ap.add_argument("--repeats", type=int, default=3, help="launches (default 3); the median is reported")
    ap.add_argument("--write-machine", metavar="FILE", help="also write the measured machine description here")
    args = ap.parse_args(argv)
    import torch
    from elecsolver.parallel.calibration import measure_machine
    from elecsolver.parallel.planner import Plan, calibrate_time, feasibility
    from scipy.stats import spearmanr

    torch.set_num_threads(1)
    problem = _problem()
    machine = measure_machine(problem, 2)
    if args.write_machine:
        Path(args.write_machine).write_text(machine.to_toml())
    alone = calibrate_time(problem, machine.compute.alpha_s, machine.compute.beta_s_per_byte)
    plans = _plans()
    runs = [{json.dumps(r["plan"], sort_keys=True): r["s"] for r in _launch(args.steps)}
            for _ in range(args.repeats)]
    rows = []
    for plan in plans:
        full = Plan(**{**plan, "microbatches": plan["microbatches"] or 1})
        predicted = feasibility(problem, 2, [full], machine=machine)[0].step_s
        predicted_alone = feasibility(problem, 2, [full], time_coefficients=alone)[0].step_s
        each = sorted(run[json.dumps(plan, sort_keys=True)] for run in runs)
        m = statistics.median(each)
        rows.append({"plan": full.flags(), "predicted_s": predicted, "measured_s": m, "measured_runs_s": each,
                     "ratio": predicted / m, "predicted_one_process_s": predicted_alone,
                     "ratio_one_process": predicted_alone / m})
        print(f"{full.flags():<62} predicted {predicted * 1e3:7.1f} ms, measured {m * 1e3:7.1f} ms "
              f"(runs {', '.join(f'{x * 1e3:.1f}' for x in each)}), ratio {predicted / m:.3f} "
              f"(one-process calibration {predicted_alone / m:.3f})")
    order_p = sorted(rows, key=lambda r: r["predicted_s"])
    order_m = sorted(rows, key=lambda r: r["measured_s"])
    rho = float(spearmanr([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows]).statistic)
    rho_alone = float(spearmanr([r["predicted_one_process_s"] for r in rows],
                                [r["measured_s"] for r in rows]).statistic)
    c = machine.compute
    result = {"benchmark": "benchmarks/planner_time.py", "problem": problem.name, "preset": "quick",
              "machine": f"{os.cpu_count()} CPU cores, 2 ranks, gloo, one thread each", "repeats": args.repeats,
              "steps": args.steps,
              "collectives": {"alpha_s": c.alpha_s, "beta_s_per_byte": c.beta_s_per_byte},
              "coefficients": {"s_per_mac": c.s_per_mac, "global_s": c.global_s, "microbatch_s": c.microbatch_s,
                               "recompute_factor": c.recompute_factor, "measured": "2 processes at once"},
              "coefficients_one_process": {"s_per_mac": alone.s_per_mac, "global_s": alone.global_s,
                                           "microbatch_s": alone.microbatch_s,
                                           "recompute_factor": alone.recompute_factor},
              "plans": rows, "spearman": rho, "spearman_one_process": rho_alone,
              "median_abs_error": statistics.median(abs(r["ratio"] - 1) for r in rows),
              "median_abs_error_one_process": statistics.median(abs(r["ratio_one_process"] - 1) for r in rows),
              "worst_relative_error": max(abs(r["ratio"] - 1) for r in rows),
              "fastest_predicted": order_p[0]["plan"], "fastest_measured": order_m[0]["plan"],
              "choice_over_best": order_p[0]["measured_s"] / order_m[0]["measured_s"]}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"alpha {c.alpha_s * 1e6:.1f} us, beta {c.beta_s_per_byte * 1e9:.3f} ns/B; Spearman {rho:.3f} (one-process "
          f"calibration {rho_alone:.3f}); median |error| {result['median_abs_error']:.1%} "
          f"({result['median_abs_error_one_process']:.1%}); the fastest predicted, {order_p[0]['plan']}, measures "
          f"{result['choice_over_best']:.3f}x the fastest measured, {order_m[0]['plan']}; wrote {args.json}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(int(sys.argv[sys.argv.index("--steps") + 1]))
    else:
        sys.exit(main())
