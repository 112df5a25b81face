"""The point-source family's inversion with its Adam search in float32 against float64 (the polish is float64 in
both), interleaved, on one short family run.

    python benchmarks/inversion_search.py [--out benchmarks/inversion_search.json]

Trains ``maxwell-point-source-family`` for 30 steps of its ``ci`` preset (the network of every preset but
``full``), then inverts the family's own Hz traces at the 4 probes of examples/point_source_family.py and the run's
41 output times, for 6 configurations drawn in the box's middle, with each search precision in turn (the order
alternating), and writes the wall times per inversion (median, min, max) and the worst relative parameter error.
"""

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import elecsolver as es
from elecsolver.cli import main

PROBES = np.array([[0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]])  # m


def run(out: Path) -> dict:
    code = main(["run", "maxwell-point-source-family", "--preset", "ci", "--steps", "30", "--out", str(out), "--quiet",
                 "--set", "output.png=false", "--set", "output.nx=21", "--set", "output.ny=21"])
    if code != 0:
        raise SystemExit("the training failed")
    model = es.load(out)
    times = model.problem.times
    rng = np.random.default_rng(1)
    res: dict = {"float32": [], "float64": []}
    for i in range(6):
        truth = {"x0": rng.uniform(0.35, 0.65), "y0": rng.uniform(0.35, 0.65), "f": rng.uniform(0.85e9, 1.15e9)}
        hz = model.probe(PROBES, times, truth)["Hz"]
        for dtype in ("float32", "float64") if i % 2 == 0 else ("float64", "float32"):
            got = es.invert(model, PROBES, times, {"Hz": hz}, search_dtype=dtype)
            err = max(abs(got["configuration"][k] - v) / abs(v) for k, v in truth.items())
            res[dtype].append({"wall_s": got["wall_s"], "worst_relative_error": err, "misfit": got["misfit"]})
    summary = {}
    for dtype, rows in res.items():
        w = [r["wall_s"] for r in rows]
        summary[dtype] = {"wall_s_median": statistics.median(w), "wall_s_min": min(w), "wall_s_max": max(w),
                          "worst_relative_error": max(r["worst_relative_error"] for r in rows)}
    return {"benchmark": "inversion_search", "command": "python benchmarks/inversion_search.py",
            "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPU cores",
            "probes": PROBES.tolist(), "times": len(times), "summary": summary, "runs": res}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/inversion_search.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp) / "run")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for dtype, s in result["summary"].items():
        print(f"{dtype} search: median {s['wall_s_median']:.3f} s per inversion ({s['wall_s_min']:.3f}-"
              f"{s['wall_s_max']:.3f}), worst relative error {s['worst_relative_error']:.1e}")
