"""Wall time per training step of the shipped problems, this tree against another checkout (before/after).

    python benchmarks/step_time.py --other /tmp/old --runs 5 --steps 200 --threads 2

Each run is a fresh process that builds the problem's preset, takes ``--warmup`` steps, then times
``--steps`` steps (``time.perf_counter`` around ``train_step``) and reports the median ms per step.  Runs
of the two trees are interleaved (this, other, this, other, ...) because the host is shared and noisy;
the summary gives per tree the median over runs and the spread (min-max), and the ratio of medians.
``--other`` is a checkout of an earlier commit (e.g. ``git worktree add /tmp/old <commit>``); it is put
first on PYTHONPATH for its runs, so its own ``elecsolver`` (and top-level ``problems`` before the
redesign) is imported.  Without ``--other`` only this tree is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, statistics, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
if sys.argv[6] == "this":
    from elecsolver.problems import get_problem_class
else:  # an earlier tree: before the redesign problems/ was a top-level package
    try:
        from problems import get_problem_class
    except ImportError:
        from elecsolver.problems import get_problem_class
from elecsolver.trainer import Trainer
name, preset, steps, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[5])
cls = get_problem_class(name)
problem = cls(cls.preset_config(preset))
tr = Trainer(problem, progress=False)
for _ in range(warmup):
    tr.train_step()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    tr.train_step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"ms": 1e3 * statistics.median(times)}))
"""

CASES = [("maxwell-point-source-2d", "ci"), ("maxwell-point-source-2d", "quick"), ("helmholtz-square", "quick")]


def _one(tree: Path, name: str, preset: str, args) -> float:
    env = dict(os.environ)
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", WORKER, name, preset, str(args.steps), str(args.threads),
                           str(args.warmup), "this" if tree == ROOT else "other"], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])["ms"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--other", type=Path, help="checkout of another commit to compare with")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, help="write every measurement here")
    args = p.parse_args(argv)
    trees = {"this": ROOT} | ({"other": args.other.resolve()} if args.other else {})
    results: dict = {f"{n}/{pr}": {t: [] for t in trees} for n, pr in CASES}
    for run in range(args.runs):
        for name, preset in CASES:
            for tag, tree in trees.items():
                ms = _one(tree, name, preset, args)
                results[f"{name}/{preset}"][tag].append(ms)
                print(f"run {run}: {name} {preset} {tag}: {ms:.2f} ms/step", flush=True)
    print("\ncase: median ms/step [min-max] per tree" + (", ratio this/other" if args.other else ""))
    for case, per in results.items():
        med = {t: statistics.median(v) for t, v in per.items()}
        text = ", ".join(f"{t} {med[t]:.2f} [{min(v):.2f}-{max(v):.2f}]" for t, v in per.items())
        if args.other:
            text += f", ratio {med['this'] / med['other']:.3f}"
        print(f"{case}: {text}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
