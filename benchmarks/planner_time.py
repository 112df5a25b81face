"""The planner's models against measurement: every plan that can run at fp32 on ``--world`` ranks (dp, ZeRO, tp, pp
with both schedules and pp, 2 pp and 4 pp micro-batches, each with and without recompute), predicted step time and
peak memory beside the measured ones, with the machine description they are predicted with.

    python benchmarks/planner_time.py [--world 2] [--problem maxwell-point-source-2d --preset quick]
                                      [--json benchmarks/planner_time.json] [--write-machine FILE]

1. ``elecsolver.parallel.calibration.measure_machine`` with ``--world`` processes (gloo, one thread each): the
   collectives' alpha and beta from all-reduces of 1 KiB to 4 MiB and their wait after computing, then each process
   measures the step rates while the others do (:func:`~elecsolver.parallel.planner.calibrate_time`), they time a
   two-stage pipeline with 2 and 8 micro-batches (the micro-batch cost is fitted to it), and the activation
   coefficients.
2. Every plan trains 2 warm-up steps and ``--steps`` timed steps; rank 0's median step is the plan's time; then one
   more step's peak allocation (``step_peak_mib``; with tp, the first of 4 steps whose allocations and frees
   balance) plus the parameters and optimizer state it holds is each rank's memory, the largest rank's the plan's.
   A launch gives its plans to fresh processes 20 at a time (torch's profiler leaks memory on a pipeline's
   stages), and each process first trains its first plan once untimed (its first steps pay its own warm-up).
3. Steps 1 and 2 are repeated ``--repeats`` times, interleaved (a calibration, a launch of every plan, a
   calibration, ...), so that the calibration sees the host's load as the plans do; each launch starts a further
   1 / ``--repeats`` of the way round the list of plans, so that no plan always runs first; the predictions use
   the median of the calibrations' coefficients (``--write-machine`` writes that description: the shipped
   ``cpu-2core`` is written so), the measured times and memory are the medians of the launches.
4. For comparison, the same rates measured by one process alone.
5. Rank correlation (Spearman) of predicted and measured time, the median absolute relative error, and how far the
   fastest predicted plan is from the fastest measured one; the memory's ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from _common import launch_ranks


def _plans(world: int, name: str, preset: str) -> list[dict]:
    """Every plan of ``world`` ranks that the preset can run at fp32, as ParallelOptions fields."""
    from elecsolver.parallel.planner import feasibility

    return [c.plan.options() for c in feasibility(_problem(name, preset), world) if c.ok and c.plan.precision == "fp32"]


def _problem(name: str = "maxwell-point-source-2d", preset: str = "quick"):
    from elecsolver.problems import get_problem_class

    cls = get_problem_class(name)
    cfg = cls.preset_config(preset)
    cfg["training"]["steps"] = 1000
    return cls(cfg)


def _return_freed_heap() -> None:
    """glibc's ``malloc_trim(0)``: hand the heap that the profiler's events freed back to the system, so that a
    launch of many plans does not grow by it (no-op without glibc)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def worker(steps: int, world: int, name: str, preset: str, shift: int = 0, first: int = 0,
           count: int | None = None) -> None:
    import torch
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
    from elecsolver.parallel.planner import time_steps
    from elecsolver.parallel.profiling import step_peak_mib
    from elecsolver.parallel.strategy import apply_parallelism

    from elecsolver.trainer import Trainer

    comm, info, dev = init_data_parallel("cpu")
    torch.set_num_threads(1)
    plans = _plans(world, name, preset)
    plans = plans[shift % len(plans):] + plans[:shift % len(plans)]
    plans = plans[first:len(plans) if count is None else first + count]
    for k, plan in enumerate([plans[0]] + plans):  # the first, once more untimed: the process's own warm-up
        problem = _problem(name, preset)
        model, ctx = apply_parallelism(problem, comm, dev, plan)
        trainer = Trainer(problem, model, ctx, progress=False)
        trainer.batches()
        for _ in range(2):
            trainer.train_step()
        if k == 0:
            continue
        times = time_steps(trainer, steps)
        held = sum(p.numel() * p.element_size() for p in model.parameters())
        for state in trainer.optimizer.state.values():
            held += sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t) and t.dim() > 0)
        # tp's all-reduced activations are what a run can miss the free of (step_peak_mib); a dp or pp plan's
        # launches read peaks within about 1 % of each other, and every profiled step leaks memory in torch's
        # profiler on a pipeline's stages (tens of MiB), so they take one run
        mib = step_peak_mib(trainer.train_step, tries=4 if plan["tp"] > 1 else 1) + held / 2**20
        _return_freed_heap()
        print(json.dumps({"plan": plan, "rank": info.rank, "s": statistics.median(times), "mib": mib}), flush=True)
    shutdown()


PLANS_A_PROCESS = 20


def _launch(steps: int, world: int, name: str, preset: str, shift: int = 0) -> dict[str, dict]:
    """Per plan (its JSON): rank 0's median step (s) and the largest rank's memory (MiB), from one launch that
    starts at plan ``shift`` of the list and goes round. The plans go to fresh processes :data:`PLANS_A_PROCESS`
    at a time: every profiled step leaks memory in torch's profiler on a pipeline's stages, which grows with the
    micro-batches, and 58 plans in one process set came near the host's 24 GiB on 4 ranks."""
    n = len(_plans(world, name, preset))
    ranks = []
    for first in range(0, n, PLANS_A_PROCESS):
        ranks += launch_ranks([sys.executable, __file__, "--worker", "--steps", str(steps), "--world", str(world),
                               "--problem", name, "--preset", preset, "--shift", str(shift), "--first", str(first),
                               "--count", str(PLANS_A_PROCESS)], world=world)
    out = {}
    for rows in ranks:
        for r in rows:
            key = json.dumps(r["plan"], sort_keys=True)
            cur = out.setdefault(key, {"s": None, "mib": 0.0})
            if r["rank"] == 0:
                cur["s"] = r["s"]
            cur["mib"] = max(cur["mib"], r["mib"])
    return out


def _median_machine(machines: list):
    """One description whose every measured number is the median of ``machines``' (the same host, measured in
    turn)."""
    import dataclasses

    def med(objs):
        first = objs[0]
        return dataclasses.replace(first, **{f.name: statistics.median(getattr(o, f.name) for o in objs)
                                             for f in dataclasses.fields(first)
                                             if isinstance(getattr(first, f.name), float)})

    link = med([m.intra_node for m in machines])
    return dataclasses.replace(machines[0], compute=med([m.compute for m in machines]),
                               activations=med([m.activations for m in machines]), intra_node=link, inter_node=link)


def _repredict_memory(problem, path: str) -> int:
    """Predict the memory of every plan of the JSON at ``path`` again with the memory model as it is now, from
    activation coefficients measured again on this process (as ``measure_machine`` measures them: allocation
    counts, the same on every run), and rewrite the JSON's memory fields; its measured times and memory stay."""
    import datetime

    from elecsolver.parallel.calibration import measure_activations
    from elecsolver.parallel.planner import Plan, feasibility

    data = json.loads(Path(path).read_text())
    coeffs = measure_activations(problem)
    for row in data["plans"]:
        plan = Plan(**_plan_fields(row["plan"]))
        row["predicted_mib"] = feasibility(problem, data["world"], [plan], coefficients=coeffs)[0].memory_mib
        row["memory_ratio"] = row["predicted_mib"] / row["measured_mib"]
    data["activations"] = {"plain": coeffs.plain, "backward_peak": coeffs.backward_peak,
                           "recompute_peak": coeffs.recompute_peak}
    data["worst_memory_error"] = max(abs(r["memory_ratio"] - 1) for r in data["plans"])
    data["memory_repredicted"] = f"python benchmarks/planner_time.py --repredict-memory, {datetime.date.today()}"
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    print(f"worst memory error {data['worst_memory_error']:.1%}; rewrote {path}")
    return 0


def _plan_fields(flags: str) -> dict:
    """Plan fields from its flags (``Plan.flags()``), e.g. ``--dp 2 --tp 1 --pp 1 --zero``."""
    words, out = flags.split(), {}
    for k, w in enumerate(words):
        if w in ("--zero", "--recompute"):
            out[w[2:]] = True
        elif w.startswith("--") and k + 1 < len(words) and not words[k + 1].startswith("--"):
            v = words[k + 1]
            out[w[2:]] = int(v) if v.isdigit() else v
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="output (default benchmarks/planner_time.json for 2 ranks of the point source's "
                    "quick preset, else benchmarks/planner_time_PROBLEM_WORLD.json)")
    ap.add_argument("--world", type=int, default=2, help="ranks (default 2; beyond the cores they share them)")
    ap.add_argument("--problem", default="maxwell-point-source-2d")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--steps", type=int, default=15, help="timed steps a plan a launch (default 15)")
    ap.add_argument("--repeats", type=int, default=3, help="launches (default 3); the median is reported")
    ap.add_argument("--write-machine", metavar="FILE", help="also write the measured machine description here")
    ap.add_argument("--repredict-memory", action="store_true",
                    help="re-apply the memory model to the plans of the JSON already written (--json), keeping its "
                         "measurements; the activation coefficients are measured again on this process")
    args = ap.parse_args(argv)
    default = (args.world, args.problem, args.preset) == (2, "maxwell-point-source-2d", "quick")
    args.json = args.json or ("benchmarks/planner_time.json" if default
                              else f"benchmarks/planner_time_{args.problem}_{args.world}.json")
    import torch
    from elecsolver.parallel.calibration import measure_machine
    from elecsolver.parallel.planner import Plan, calibrate_time, feasibility
    from scipy.stats import spearmanr

    torch.set_num_threads(1)
    problem = _problem(args.problem, args.preset)
    if args.repredict_memory:
        return _repredict_memory(problem, args.json)
    plans = _plans(args.world, args.problem, args.preset)
    machines, runs = [], []
    for k in range(args.repeats):
        machines.append(measure_machine(problem, args.world))
        print(f"# launch {k + 1} of {args.repeats}: {len(plans)} plans", flush=True)
        runs.append(_launch(args.steps, args.world, args.problem, args.preset, k * len(plans) // args.repeats))
    machine = _median_machine(machines)
    if args.write_machine:
        Path(args.write_machine).write_text(machine.to_toml())
    alone = calibrate_time(problem, machine.compute.alpha_s, machine.compute.beta_s_per_byte)
    rows = []
    for plan in plans:
        full = Plan(**{**plan, "microbatches": plan["microbatches"] or 1})
        check = feasibility(problem, args.world, [full], machine=machine)[0]
        predicted = check.step_s
        predicted_alone = feasibility(problem, args.world, [full], time_coefficients=alone)[0].step_s
        key = json.dumps(plan, sort_keys=True)
        each = sorted(run[key]["s"] for run in runs)
        mibs = sorted(run[key]["mib"] for run in runs)
        m, mem = statistics.median(each), statistics.median(mibs)
        rows.append({"plan": full.flags(), "predicted_s": predicted, "measured_s": m, "measured_runs_s": each,
                     "ratio": predicted / m, "predicted_one_process_s": predicted_alone,
                     "ratio_one_process": predicted_alone / m, "predicted_mib": check.memory_mib,
                     "measured_mib": mem, "measured_runs_mib": mibs, "memory_ratio": check.memory_mib / mem})
        print(f"{full.flags():<62} predicted {predicted * 1e3:7.1f} ms, measured {m * 1e3:7.1f} ms "
              f"(runs {', '.join(f'{x * 1e3:.1f}' for x in each)}), ratio {predicted / m:.3f} "
              f"(one-process calibration {predicted_alone / m:.3f}); memory {check.memory_mib:.1f} / {mem:.1f} MiB "
              f"= {check.memory_mib / mem:.3f}")
    order_p = sorted(rows, key=lambda r: r["predicted_s"])
    order_m = sorted(rows, key=lambda r: r["measured_s"])
    rho = float(spearmanr([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows]).statistic)
    rho_alone = float(spearmanr([r["predicted_one_process_s"] for r in rows],
                                [r["measured_s"] for r in rows]).statistic)
    c = machine.compute
    result = {"benchmark": "benchmarks/planner_time.py", "problem": problem.name, "preset": args.preset,
              "world": args.world,
              "machine": f"{os.cpu_count()} CPU cores, {args.world} ranks, gloo, one thread each", "repeats": args.repeats,
              "steps": args.steps,
              "collectives": {"alpha_s": c.alpha_s, "beta_s_per_byte": c.beta_s_per_byte, "wait_s": c.wait_s},
              "calibrations": [{"alpha_s": m.compute.alpha_s, "wait_s": m.compute.wait_s,
                                "s_per_mac": m.compute.s_per_mac, "global_s": m.compute.global_s,
                                "microbatch_s": m.compute.microbatch_s} for m in machines],
              "coefficients": {"s_per_mac": c.s_per_mac, "s_per_point": c.s_per_point, "global_s": c.global_s,
                               "microbatch_s": c.microbatch_s, "recompute_factor": c.recompute_factor,
                               "measured": f"{args.world} processes at once"},
              "activations": {"plain": machine.activations.plain, "backward_peak": machine.activations.backward_peak,
                              "recompute_peak": machine.activations.recompute_peak},
              "coefficients_one_process": {"s_per_mac": alone.s_per_mac, "s_per_point": alone.s_per_point,
                                           "global_s": alone.global_s,
                                           "microbatch_s": alone.microbatch_s,
                                           "recompute_factor": alone.recompute_factor},
              "plans": rows, "spearman": rho, "spearman_one_process": rho_alone,
              "median_abs_error": statistics.median(abs(r["ratio"] - 1) for r in rows),
              "median_abs_error_one_process": statistics.median(abs(r["ratio_one_process"] - 1) for r in rows),
              "worst_relative_error": max(abs(r["ratio"] - 1) for r in rows),
              "fastest_predicted": order_p[0]["plan"], "fastest_measured": order_m[0]["plan"],
              "choice_over_best": order_p[0]["measured_s"] / order_m[0]["measured_s"],
              "worst_memory_error": max(abs(r["memory_ratio"] - 1) for r in rows)}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"alpha {c.alpha_s * 1e6:.1f} us, wait {c.wait_s * 1e6:.0f} us, beta {c.beta_s_per_byte * 1e9:.3f} ns/B; "
          f"Spearman {rho:.3f} (one-process calibration {rho_alone:.3f}); median |error| {result['median_abs_error']:.1%} "
          f"({result['median_abs_error_one_process']:.1%}); the fastest predicted, {order_p[0]['plan']}, measures "
          f"{result['choice_over_best']:.3f}x the fastest measured, {order_m[0]['plan']}; worst memory error "
          f"{result['worst_memory_error']:.1%}; wrote {args.json}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        def arg(name):
            return sys.argv[sys.argv.index(name) + 1]

        worker(int(arg("--steps")), int(arg("--world")), arg("--problem"), arg("--preset"), int(arg("--shift")),
               int(arg("--first")), int(arg("--count")))
    else:
        sys.exit(main())
