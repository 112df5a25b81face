"""The planner's memory model against measurement: on one process extrapolated from a smaller network and fewer
points, and per rank under 2-rank plans (dp, ZeRO, tp, pp with both schedules, recompute).

    python benchmarks/planner_memory.py [--json benchmarks/planner_memory.json]

The activation coefficients are calibrated on one process (``elecsolver.parallel.planner.calibrate``, at half the
points); then every plan trains one step on 2 ranks (torchrun-style variables, gloo, one thread each), and each rank
measures the next: the peak of torch's CPU allocations during the step plus what it holds at the step's start (its
parameters and optimizer state). The step is the first of 4 whose allocations and frees balance
(``elecsolver.parallel.profiling.step_peak_mib``). The plan's measured memory is its largest rank's, the median of
``--repeats`` launches; the prediction is ``planner.feasibility(...).memory_mib``. The network is the main job's quick
network (multiscale, width 64) on the quick preset's points.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from _common import launch_ranks

PLANS = [
    {"dp": 2}, {"dp": 2, "zero": True}, {"dp": 1, "tp": 2}, {"dp": 1, "tp": 2, "recompute": True},
    {"dp": 1, "pp": 2, "microbatches": 4, "schedule": "1f1b"}, {"dp": 1, "pp": 2, "microbatches": 4, "schedule": "gpipe"},
]


def _problem():
    from elecsolver.problems import get_problem_class

    cls = get_problem_class("maxwell-point-source-2d")
    cfg = cls.preset_config("quick")
    cfg["training"]["steps"] = 10
    return cls(cfg)


def worker() -> None:
    import torch
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
    from elecsolver.parallel.profiling import step_peak_mib
    from elecsolver.parallel.strategy import apply_parallelism

    from elecsolver.trainer import Trainer

    comm, info, dev = init_data_parallel("cpu")
    torch.set_num_threads(1)
    for plan in PLANS:
        problem = _problem()
        model, ctx = apply_parallelism(problem, comm, dev, plan)
        trainer = Trainer(problem, model, ctx, progress=False)
        trainer.batches()
        trainer.train_step()
        held = sum(p.numel() * p.element_size() for p in model.parameters())
        for state in trainer.optimizer.state.values():
            held += sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t) and t.dim() > 0)
        peak = step_peak_mib(trainer.train_step)
        print(json.dumps({"plan": plan, "rank": info.rank, "mib": peak + held / 2**20}), flush=True)
    shutdown()


def _one_process(calibrate, feasibility, Plan) -> list[dict]:
    """Calibrated at width 32 and half the quick preset's points, the prediction at width 64 and twice the points
    against the measured peak plus the parameters and Adam's moments, plain and with recompute (one process)."""
    from elecsolver.parallel.planner import warm_trainer
    from elecsolver.parallel.profiling import peak_allocated_mib

    from elecsolver.config import merge

    base = _problem()

    def sized(width, scale):
        counts = {k: int(base.config["sampling"][k] * scale) for k in ("interior", "source", "boundary", "initial")}
        return type(base)(merge(base.config, {"network": {"width": width}, "sampling": counts}))

    coeffs = calibrate(sized(32, 0.5))
    target, rows = sized(64, 2.0), []
    for recompute in (False, True):
        predicted = feasibility(target, 1, [Plan(1, recompute=recompute)], coefficients=coeffs)[0].memory_mib
        trainer = warm_trainer(target, recompute)
        held = 3 * sum(q.numel() * q.element_size() for q in trainer.model.parameters()) / 2**20
        measured = peak_allocated_mib(trainer.train_step) + held
        rows.append({"recompute": recompute, "predicted_mib": predicted, "measured_mib": measured,
                     "ratio": predicted / measured})
        print(f"one process, width 64 at 2x the points{' + recompute' if recompute else ''}: predicted "
              f"{predicted:.2f} MiB, measured {measured:.2f} MiB, ratio {predicted / measured:.3f}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="benchmarks/planner_memory.json")
    ap.add_argument("--repeats", type=int, default=3, help="launches of the 2-rank runs; the median is reported")
    args = ap.parse_args(argv)
    import torch
    from elecsolver.parallel.planner import Plan, calibrate, feasibility

    torch.set_num_threads(1)
    one = _one_process(calibrate, feasibility, Plan)
    problem = _problem()
    coeffs = calibrate(problem, points_scale=0.5)
    runs: list[dict[str, float]] = []
    for _ in range(args.repeats):
        measured: dict[str, float] = {}
        for rank_rows in launch_ranks([sys.executable, __file__, "--worker"], timeout=900):
            for r in rank_rows:
                key = json.dumps(r["plan"], sort_keys=True)
                measured[key] = max(measured.get(key, 0.0), r["mib"])  # the plan's largest rank
        runs.append(measured)
    rows = []
    for plan in PLANS:
        full = {"dp": 1, **plan}
        predicted = feasibility(problem, 2, [Plan(**full)], coefficients=coeffs)[0].memory_mib
        each = sorted(run[json.dumps(plan, sort_keys=True)] for run in runs)
        m = statistics.median(each)
        rows.append({"plan": Plan(**full).flags(), "predicted_mib": predicted, "measured_mib": m,
                     "measured_runs_mib": each, "ratio": predicted / m})
        print(f"{rows[-1]['plan']:<55} predicted {predicted:7.2f} MiB, measured {m:7.2f} MiB, ratio {predicted / m:.3f}")
    result = {"benchmark": "benchmarks/planner_memory.py", "problem": problem.name, "preset": "quick",
              "coefficients": {"plain": coeffs.plain, "backward_peak": coeffs.backward_peak,
                               "recompute_peak": coeffs.recompute_peak, "calibrated_at_points": 0.5},
              "machine": f"{os.cpu_count()} CPU cores, 2 ranks, gloo, one thread each", "repeats": args.repeats,
              "one_process": one, "plans": rows,
              "worst_relative_error": max(abs(r["ratio"] - 1) for r in rows)}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"worst relative error {result['worst_relative_error']:.1%}; wrote {args.json}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        sys.exit(main())
