"""A trained family of point sources against held-out configurations, and where it breaks even with one solve per
configuration.  Writes one JSON file.

    elecsolver run maxwell-point-source-family --preset quick --out out-family      # train (its wall time is in
                                                                                   # out-family/metrics.json)
    python benchmarks/family.py --run out-family --json family-quick.json

Held-out configurations: the first ``--configs`` (32) points of a scrambled Sobol sequence in (x0, y0, f) with the
seed :data:`HELD_OUT_SEED`, mapped to the run's trained box.  Training draws every point's configuration from the
box with other seeds, so none of these is a training configuration.  Each is scored against the package's FDTD
(cached) on the run's output grid and windows (relative L2 per field, early and full window).

Reported: median and worst error per field and window; the run's training wall time and its error at its own
configuration against steps (its ``convergence.csv``); the time of a query of a full output grid (101 x 101 x 41)
and of one probe time trace (4 probes x 41 times), each the median of ``--repeats`` after a warm-up; the
inversion of 20 unknown configurations from 4 probe traces of Hz with 1 % noise (the FDTD's fields at the probes,
computed for each unknown; noise relative to the traces' RMS), and its wall time per inversion; beside it, for the
first ``--fdtd-inversions`` unknowns, the FDTD itself inside ``scipy.optimize.least_squares`` from the same starts
(:func:`fdtd_inversion`).

Break-even, per kind of query: the family's training plus N queries costs less than N solves of one configuration
once N > T_train / (t_solve - t_query), for two solvers: (a) ``quick`` of the single-configuration problem
(``--quick-s``, default its recorded 544 s on this 2-core host), (b) the package's FDTD at the coarsest cell size
of ``--fdtd-dx-mm`` whose full-window error (against a 1.25 mm FDTD, ``benchmarks/time_to_accuracy_fdtd.json``)
is at most the family's median, timed here (median of ``--repeats``).  Where t_query >= t_solve the solver stays
ahead for every N.

Step time: the family's quick step per collocation point against the single configuration's (the same network,
points and schedule), alternating in one process (:func:`step_time_ratio`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from scipy.stats import qmc

HERE = Path(__file__).resolve().parent
HELD_OUT_SEED = 20261204
PROBES = np.array([[0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]])
FIELDS = ("Ex", "Ey", "Hz")


def held_out(box: list[tuple[float, float]], n: int) -> np.ndarray:
    """The held-out configurations [n, 3] in SI (x0, y0, f)."""
    u = qmc.Sobol(d=len(box), scramble=True, seed=HELD_OUT_SEED).random(n)
    lo, hi = np.array([b[0] for b in box]), np.array([b[1] for b in box])
    return lo + u * (hi - lo)


def timed(fn, repeats: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times) - min(times)


def fdtd_inversion(traces: np.ndarray, problem, box, names, dx: float, starts: int = 8) -> dict:
    """The FDTD baseline of an inversion: ``scipy.optimize.least_squares`` (trust region reflective, bounded to the
    box, finite-difference Jacobian) on the probe traces computed by the package's FDTD at cell size ``dx``, from
    each of the same ``starts`` Sobol points as :func:`elecsolver.invert`; the best fit."""
    from scipy.optimize import least_squares

    from elecsolver.reference.fdtd import solve_te_point_source
    from elecsolver.sampling import derive_seed, unit_samples

    src = problem.config["source"]
    px, py = np.unique(PROBES[:, 0]), np.unique(PROBES[:, 1])
    lo, hi = np.array([b[0] for b in box]), np.array([b[1] for b in box])
    norm = np.sqrt(np.sum(traces**2))

    def residual(u):
        c = dict(zip(names, lo + u * (hi - lo)))
        hz = np.asarray(solve_te_point_source(amplitude=src["amplitude"], frequency=c["f"], sigma=src["sigma"],
                                              x0=c["x0"], y0=c["y0"], x=px, y=py, t=problem.times, dx=dx)["Hz"])
        model = np.stack([hz[:, np.searchsorted(py, b), np.searchsorted(px, a)] for a, b in PROBES])
        return ((model - traces) / norm).ravel()

    t0 = time.perf_counter()
    best, solves = None, 0
    for u0 in unit_samples(starts, len(names), "sobol", derive_seed(0, "invert")):
        fit = least_squares(residual, u0, bounds=(0.0, 1.0), diff_step=1e-3, max_nfev=60)
        solves += fit.nfev + (fit.njev or 0) * len(names)  # finite-difference Jacobians: one solve per parameter
        if best is None or fit.cost < best.cost:
            best = fit
    found = dict(zip(names, map(float, lo + best.x * (hi - lo))))
    return {"found": found, "misfit": float(2 * best.cost), "wall_s": time.perf_counter() - t0, "fdtd_solves": solves}


def step_time_ratio(rounds: int, steps: int) -> dict:
    """ms per step of the family's quick preset and of the single configuration's (the same network, points and
    schedule; the family adds 3 input columns and draws a configuration per point), each timed over ``steps`` steps
    after 20 warm-up steps, alternating ``rounds`` times in one process; the ratio of the medians (per point: both
    use the same number of points)."""
    import torch

    from elecsolver.problems import get_problem_class
    from elecsolver.trainer import Trainer

    times: dict[str, list[float]] = {"single": [], "family": []}
    trainers = {}
    for name, key in (("maxwell-point-source-2d", "single"), ("maxwell-point-source-family", "family")):
        cls = get_problem_class(name)
        trainers[key] = Trainer(cls(cls.preset_config("quick")), progress=False)
        for _ in range(20):
            trainers[key].advance()
    for _ in range(rounds):
        for key, tr in trainers.items():
            t = time.perf_counter()
            for _ in range(steps):
                tr.advance()
            times[key].append(1e3 * (time.perf_counter() - t) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    points = {k: sum(b.n_global for b in tr.points.batches) for k, tr in trainers.items()}
    return {"ms_per_step": times, "median_ms": med, "points_per_step": points, "threads": torch.get_num_threads(),
            "ratio_per_point": (med["family"] / points["family"]) / (med["single"] / points["single"])}


def main(argv=None) -> dict:
    import elecsolver as es
    from elecsolver.reference.fdtd import solve_te_point_source

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="folder of a finished maxwell-point-source-family run (needed but with "
                    "--step-time-only)")
    ap.add_argument("--step-time-only", action="store_true",
                    help="only the step-time comparison (no run needed), written to --json")
    ap.add_argument("--configs", type=int, default=32, help="held-out configurations (default 32)")
    ap.add_argument("--inversions", type=int, default=20, help="unknown configurations to invert for (default 20)")
    ap.add_argument("--noise", type=float, default=0.01, help="relative noise on the probe traces (default 0.01)")
    ap.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    ap.add_argument("--quick-s", type=float, default=544.0,
                    help="wall time of the single-configuration quick preset, s (default: its recorded 544 s)")
    ap.add_argument("--fdtd-dx-mm", nargs="+", type=float, default=[20.0, 10.0, 5.0, 2.5])
    ap.add_argument("--fdtd-inversions", type=int, default=5,
                    help="unknowns also inverted with the FDTD inside scipy.optimize (default 5; 0: skip)")
    ap.add_argument("--fdtd-inversion-dx-mm", type=float, default=10.0, help="the baseline's FDTD cell size (mm)")
    ap.add_argument("--step-time-rounds", type=int, default=5,
                    help="alternating rounds of the step-time comparison (default 5; 0: skip)")
    ap.add_argument("--step-time-steps", type=int, default=200, help="steps per round (default 200)")
    ap.add_argument("--json", help="write every number here")
    args = ap.parse_args(argv)
    if args.step_time_only:
        import torch

        torch.set_num_threads(1)
        import sys

        out = {"benchmark": "benchmarks/family.py --step-time-only", "date": time.strftime("%Y-%m-%d"),
               "command": "python benchmarks/family.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPU cores",
               "step_time": step_time_ratio(args.step_time_rounds, args.step_time_steps)}
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"family / single step time per point: {out['step_time']['ratio_per_point']:.3f}")
        return out
    if not args.run:
        ap.error("--run is required (or give --step-time-only)")
    model = es.load(args.run)
    problem = model.problem
    names = [p.name for p in problem.parameters]
    box = [(p.lower, p.upper) for p in problem.parameters]
    run_metrics = json.loads((Path(args.run) / "metrics.json").read_text())
    out: dict = {"benchmark": "benchmarks/family.py", "run": str(args.run), "problem": problem.name,
                 "preset": run_metrics.get("preset"), "steps": run_metrics.get("steps"),
                 "train_wall_s": run_metrics.get("wall_s"), "box": dict(zip(names, box)),
                 "date": datetime.date.today().isoformat()}

    # held-out errors -------------------------------------------------------------------------------------
    rows = []
    for conf in held_out(box, args.configs):
        c = dict(zip(names, map(float, conf)))
        fields = model.fields(c)
        ref = model.reference(c)
        rows.append({"configuration": c, "rel_l2": problem.metrics(fields, ref)})
        print(json.dumps(rows[-1]), flush=True)
    out["held_out"] = rows
    summary = {}
    for window in rows[0]["rel_l2"]:
        summary[window] = {k: {"median": statistics.median(r["rel_l2"][window][k] for r in rows),
                               "worst": max(r["rel_l2"][window][k] for r in rows)} for k in FIELDS}
    out["summary"] = summary
    median_full = max(summary["full"][k]["median"] for k in FIELDS)

    # training curve at the run's configuration -------------------------------------------------------------
    conv = Path(args.run) / "convergence.csv"
    if conv.is_file():
        import csv

        with open(conv) as f:
            out["convergence"] = [{k: float(v) for k, v in row.items() if v and (k in ("step", "wall_s") or
                                                                                 k.startswith("rel_l2"))}
                                  for row in csv.DictReader(f)]

    # query times -------------------------------------------------------------------------------------------------
    conf0 = dict(zip(names, map(float, held_out(box, 1)[0])))
    grid_s, grid_spread = timed(lambda: model.fields(conf0), args.repeats)
    probe_s, probe_spread = timed(lambda: model.probe(PROBES, problem.times, conf0), args.repeats)
    out["query"] = {"grid_s": grid_s, "grid_spread_s": grid_spread, "probe_s": probe_s, "probe_spread_s": probe_spread,
                    "grid_points": int(problem.output_points().shape[0]), "probe_points": PROBES.shape[0] *
                    len(problem.times)}

    # inversion ---------------------------------------------------------------------------------------------------
    rng = np.random.default_rng(HELD_OUT_SEED)
    unknown = held_out(box, args.configs + args.inversions)[args.configs:]
    x = problem.output.axes["x"]
    src = problem.config["source"]
    inv = []
    for conf in unknown:
        c = dict(zip(names, map(float, conf)))
        px, py = np.unique(PROBES[:, 0]), np.unique(PROBES[:, 1])  # the probes are the nodes of a 2 x 2 grid
        ref = solve_te_point_source(amplitude=src["amplitude"], frequency=c["f"], sigma=src["sigma"], x0=c["x0"],
                                    y0=c["y0"], x=px, y=py, t=problem.times)
        hz = np.asarray(ref["Hz"])  # [nt, ny, nx]
        traces = np.stack([hz[:, np.searchsorted(py, b), np.searchsorted(px, a)] for a, b in PROBES])
        traces = traces + args.noise * np.sqrt(np.mean(traces**2)) * rng.standard_normal(traces.shape)
        res = es.invert(model, PROBES, problem.times, {"Hz": traces})
        got = res["configuration"]
        inv.append({"truth": c, "found": {k: got[k] for k in names}, "misfit": res["misfit"], "wall_s": res["wall_s"],
                    "traces": traces,
                    "position_error_m": float(np.hypot(got["x0"] - c["x0"], got["y0"] - c["y0"])),
                    "frequency_error": abs(got["f"] - c["f"]) / c["f"]})
        print(json.dumps({k: v for k, v in inv[-1].items() if k != "traces"}), flush=True)
    ok = [r for r in inv if r["position_error_m"] <= 5e-3 and r["frequency_error"] <= 0.01]
    fdtd_inv = []
    for k, r in enumerate(inv[: args.fdtd_inversions]):
        fdtd_inv.append(fdtd_inversion(r["traces"], problem, box, names, args.fdtd_inversion_dx_mm * 1e-3))
        fdtd_inv[-1].update(truth=r["truth"], position_error_m=float(np.hypot(
            fdtd_inv[-1]["found"]["x0"] - r["truth"]["x0"], fdtd_inv[-1]["found"]["y0"] - r["truth"]["y0"])),
            frequency_error=abs(fdtd_inv[-1]["found"]["f"] - r["truth"]["f"]) / r["truth"]["f"])
        print(json.dumps(fdtd_inv[-1]), flush=True)
    for r in inv:
        r.pop("traces")
    out["inversion"] = {"noise": args.noise, "probes": PROBES.tolist(), "runs": inv, "within_5mm_and_1pct": len(ok),
                        "of": len(inv), "wall_s_median": statistics.median(r["wall_s"] for r in inv) if inv else None,
                        "fdtd_baseline": {"dx_mm": args.fdtd_inversion_dx_mm, "runs": fdtd_inv,
                                          "wall_s_median": statistics.median(r["wall_s"] for r in fdtd_inv)
                                          if fdtd_inv else None}}

    # step time per point against the same network without parameter inputs -------------------------------------
    if args.step_time_rounds:
        out["step_time"] = step_time_ratio(args.step_time_rounds, args.step_time_steps)
        print(json.dumps(out["step_time"]), flush=True)

    # break-even --------------------------------------------------------------------------------------------------
    table = json.loads((HERE / "time_to_accuracy_fdtd.json").read_text())["fdtd"]
    err_of = {round(r["dx_mm"], 6): max(r["full"].values()) for r in table}
    matching = [dx for dx in sorted(args.fdtd_dx_mm, reverse=True) if err_of.get(round(dx, 6), 1.0) <= median_full]
    fdtd = None
    if matching:
        dx = matching[0]
        n = int(round(1.0 / max(dx * 1e-3, x[1] - x[0]))) + 1
        nodes = np.linspace(0.0, 1.0, n)
        s, spread = timed(lambda: solve_te_point_source(amplitude=src["amplitude"], frequency=conf0["f"],
                                                        sigma=src["sigma"], x0=conf0["x0"], y0=conf0["y0"], x=nodes,
                                                        y=nodes, t=problem.times, dx=dx * 1e-3), args.repeats)
        fdtd = {"dx_mm": dx, "full_error": err_of[round(dx, 6)], "solve_s": s, "solve_spread_s": spread}
    train = out["train_wall_s"] or 0.0

    def breakeven(solve_s, query_s):
        return None if query_s >= solve_s else int(np.ceil(train / (solve_s - query_s)))

    out["break_even"] = {
        "family_median_full_error": median_full,
        "quick": {"solve_s": args.quick_s, "grid_queries": breakeven(args.quick_s, grid_s),
                  "probe_queries": breakeven(args.quick_s, probe_s)},
        "fdtd": None if fdtd is None else {**fdtd, "grid_queries": breakeven(fdtd["solve_s"], grid_s),
                                           "probe_queries": breakeven(fdtd["solve_s"], probe_s)},
        "note": "None: the solver stays ahead for every number of queries" }
    print(json.dumps({k: out[k] for k in ("summary", "query", "break_even")}, indent=1), flush=True)
    print(json.dumps({k: v for k, v in out["inversion"].items() if k != "runs"}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
