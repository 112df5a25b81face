"""A trained dielectric-cylinder family against held-out configurations, its queries, and inversions for (eps_r, a)
from 8 receivers beside the exact series inside ``scipy.optimize.least_squares``.  Writes one JSON file.

    elecsolver run dielectric-cylinder-family --preset quick --out out-cylinder
    python benchmarks/cylinder_family.py --run out-cylinder --json cylinder-quick.json

Held-out configurations: the first ``--configs`` (32) points of a scrambled Sobol sequence in (eps_r, a) with the
seed :data:`HELD_OUT_SEED`, mapped to the run's trained box (training draws every point's configuration with other
seeds).  Each is scored against the series (:func:`elecsolver.reference.cylinder.dielectric_cylinder_total`) on the
run's output grid: complex relative L2 of the total field Ez and of the scattered field Ez_s.

Queries: a full output grid and the 8 receivers, each the median of ``--repeats`` after a warm-up, beside the series
on the same sites.

Inversions: ``--inversions`` (20) unknown configurations (the same Sobol sequence, seed + 1); data: the series'
scattered field at 8 receivers on the circle r = 0.9 m, with complex Gaussian noise of ``--noise`` (1 %) of the
data's RMS; :func:`elecsolver.invert` against the series itself in ``scipy.optimize.least_squares`` from the same 8
starts (the best of them).  A success is eps_r within 2 % and a within 2 mm.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.stats import qmc

HELD_OUT_SEED = 20261205
RECEIVERS = 0.9 * np.column_stack([np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)])


def design(box, n: int, seed: int) -> np.ndarray:
    """n configurations [n, 2] (eps_r, a in m) of a scrambled Sobol sequence in the box."""
    u = qmc.Sobol(d=2, scramble=True, seed=seed).random(n)
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


def series_inversion(data: np.ndarray, k0: float, box, starts: np.ndarray) -> dict:
    """(eps_r, a) from the receivers' scattered field by the series in scipy's least squares (trust region
    reflective inside the box), the best of ``starts`` [S, 2] in the box scaled to [0, 1]."""
    from elecsolver.reference.cylinder import dielectric_cylinder_total

    lo, hi = np.array([b[0] for b in box]), np.array([b[1] for b in box])
    x, y = RECEIVERS.T
    inc = np.exp(1j * k0 * x)
    norm = np.sqrt(np.sum(np.abs(data) ** 2))

    def residual(u):
        eps, a = lo + u * (hi - lo)
        d = (dielectric_cylinder_total(x, y, k0, a, eps) - inc - data) / norm
        return np.concatenate([d.real, d.imag])

    t = time.perf_counter()
    best = None
    for s in starts:
        r = optimize.least_squares(residual, s, bounds=(0.0, 1.0), xtol=1e-12, ftol=1e-14)
        if best is None or r.cost < best.cost:
            best = r
    eps, a = lo + best.x * (hi - lo)
    return {"eps_r": float(eps), "a": float(a), "misfit": float(2 * best.cost), "wall_s": time.perf_counter() - t}


def main(argv=None) -> dict:
    import torch

    import elecsolver as es
    from elecsolver.reference.cylinder import dielectric_cylinder_total
    from elecsolver.sampling import derive_seed, unit_samples

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="folder of a finished dielectric-cylinder-family run")
    ap.add_argument("--configs", type=int, default=32, help="held-out configurations (default 32)")
    ap.add_argument("--inversions", type=int, default=20, help="unknown configurations to invert for (default 20)")
    ap.add_argument("--noise", type=float, default=0.01, help="relative noise on the receivers' data (default 0.01)")
    ap.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    ap.add_argument("--no-single", action="store_true", help="do not time a single-configuration solve (the "
                    "break-even)")
    ap.add_argument("--json", help="write every number here")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    model = es.load(args.run)
    problem = model.problem
    box = [(p.lower, p.upper) for p in problem.parameters]
    k0 = problem.config["scattering"]["wavenumber"]
    metrics = json.loads((Path(args.run) / "metrics.json").read_text())

    # held-out accuracy
    rows = []
    for eps, a in design(box, args.configs, HELD_OUT_SEED):
        conf = {"eps_r": float(eps), "a": float(a)}
        configured = model.configured(conf)
        m = configured.metrics(model.fields(conf), configured.reference())["full"]
        rows.append({**conf, "Ez": m["Ez"], "Ez_s": m["Ez_s"]})
        print(f"eps_r = {eps:.3f}, a = {a:.4f} m: Ez {100 * m['Ez']:.2f} %, Ez_s {100 * m['Ez_s']:.2f} %", flush=True)
    summary = {f: {"median": statistics.median(r[f] for r in rows), "worst": max(r[f] for r in rows)}
               for f in ("Ez", "Ez_s")}

    # queries
    conf = {"eps_r": 2.7, "a": 0.22}
    x, y = problem.output.coordinates().T
    query = {"grid_s": timed(lambda: model.fields(conf), args.repeats),
             "receivers_s": timed(lambda: model.at(RECEIVERS, conf), args.repeats),
             "series_grid_s": timed(lambda: dielectric_cylinder_total(x, y, k0, 0.22, 2.7), args.repeats),
             "series_receivers_s": timed(lambda: dielectric_cylinder_total(*RECEIVERS.T, k0, 0.22, 2.7),
                                         args.repeats),
             "grid_sites": int(x.size)}

    # inversions
    rng = np.random.default_rng(0)
    starts = unit_samples(8, 2, "sobol", derive_seed(0, "invert"))
    inversions = []
    for eps, a in design(box, args.inversions, HELD_OUT_SEED + 1):
        clean = dielectric_cylinder_total(*RECEIVERS.T, k0, a, eps) - np.exp(1j * k0 * RECEIVERS[:, 0])
        sd = args.noise * np.sqrt(np.mean(np.abs(clean) ** 2) / 2)
        data = clean + sd * (rng.standard_normal(8) + 1j * rng.standard_normal(8))
        found = es.invert(model, RECEIVERS, None, {"Ez_s": data})
        c = found["configuration"]
        base = series_inversion(data, k0, box, starts)
        row = {"truth": {"eps_r": float(eps), "a": float(a)}, "family": {**c, "misfit": found["misfit"],
                                                                      "wall_s": found["wall_s"]},
               "series": base}
        for who in ("family", "series"):
            r = row[who]
            r["ok"] = bool(abs(r["eps_r"] - eps) <= 0.02 * eps and abs(r["a"] - a) <= 2e-3)
        inversions.append(row)
        print(f"invert eps_r = {eps:.3f}, a = {a:.4f}: family {c['eps_r']:.3f}, {c['a']:.4f} ({found['wall_s']:.2f} s)"
              f"; series {base['eps_r']:.3f}, {base['a']:.4f} ({base['wall_s']:.2f} s)", flush=True)
    inv = {who: {"within_target": sum(r[who]["ok"] for r in inversions), "of": len(inversions),
                 "median_wall_s": statistics.median(r[who]["wall_s"] for r in inversions)}
           for who in ("family", "series")}

    # break-even against one single-configuration solve per configuration (the ci preset: the same features and
    # points, one least-squares solve, the trainer's set-up included)
    breakeven = None
    if not args.no_single:
        from elecsolver.problems import get_problem_class

        from elecsolver.trainer import Trainer

        cls = get_problem_class(problem.name)
        t = time.perf_counter()
        Trainer(cls(cls.preset_config("ci")), progress=False).train()
        single_s = time.perf_counter() - t
        train_s = float(metrics.get("wall_s") or 0.0)
        breakeven = {"single_solve_s": single_s, "train_s": train_s}
        for key in ("grid_s", "receivers_s"):
            q = query[key][0]
            breakeven[key.replace("_s", "_queries")] = None if q >= single_s else int(train_s // (single_s - q)) + 1
        print(json.dumps({"break_even": breakeven}), flush=True)

    out = {"benchmark": "cylinder_family", "date": datetime.date.today().isoformat(),
           "command": "python benchmarks/cylinder_family.py " + " ".join(argv if argv is not None else []),
           "run": str(args.run), "threads": torch.get_num_threads(),
           "training": {"steps": problem.config["training"]["steps"], "wall_s": metrics.get("wall_s"),
                        "sampling": {k: problem.config["sampling"].get(k) for k in
                                     ("parameters", "snapshots", "nodes", "interior", "cylinder", "pml_end")},
                        "width": problem.config["network"]["width"],
                        "at_configuration": metrics.get("rel_l2", {})},
           "break_even": breakeven,
           "held_out": {"seed": HELD_OUT_SEED, "summary": summary, "configs": rows},
           "query": query, "inversion": {"summary": inv, "noise": args.noise, "cases": inversions}}
    print(json.dumps({"held_out": summary, "query": query, "inversion": inv}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
