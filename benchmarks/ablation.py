"""Ablation of the training levers on the main job: each lever alone on top of a preset, at about the same wall time.

    python benchmarks/ablation.py --preset ci --seeds 0 1 2 --jobs 2 --out /tmp/ablation

Each lever is a list of ``--set`` overrides of ``elecsolver run maxwell-point-source-2d --preset P``; its step
count is scaled by the lever's cost per step relative to the plain preset (``COST``, measured on the 2-core CPU,
e.g. a second time slab costs two passes of the network and one more without gradients), so that every row
trains for about the same wall time.  Runs go ``--jobs`` at a time, each on one thread
(``OMP_NUM_THREADS=1``), the levers interleaved over the seeds; the table gives per field the median over the
seeds and the range, for the early (t <= 2.4 ns) and the full (0-4 ns) window, and the median training wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FIELDS = ("Ex", "Ey", "Hz")

# lever -> overrides; the finish's L-BFGS steps each take up to lbfgs.max_iter (20) evaluations
LEVERS = {
    "Adam (preset)": [],
    "+ L-BFGS finish": ["training.finish.optimizer=lbfgs", "training.finish.steps=FINISH"],
    "+ loss balancing": ["training.balance.every=50"],
    "+ RAD": ["sampling.rad_every=100"],
    "+ RAR": ["sampling.rar_every=100", "sampling.rar_add=256"],
    "+ 2 time slabs": ["training.slabs=2"],
}
# wall time per step relative to the plain preset (the slabs: slab 1 costs about 2x; RAD/RAR: scoring a pool)
COST = {"+ 2 time slabs": 1.5, "+ loss balancing": 1.1, "+ RAD": 1.1, "+ RAR": 1.1}


def command(preset: str, steps: int, lever: str, seed: int, out: Path, finish: int) -> list[str]:
    sets = [s.replace("FINISH", str(finish)) for s in LEVERS[lever]]
    cmd = [sys.executable, "-m", "elecsolver.cli", "run", "maxwell-point-source-2d", "--preset", preset, "--quiet",
           "--seed", str(seed), "--steps", str(steps), "--out", str(out)]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="ci")
    ap.add_argument("--steps", type=int, default=500, help="the plain preset's steps (the wall-time budget)")
    ap.add_argument("--finish", type=int, default=10, help="L-BFGS finish steps (replacing their cost in Adam steps)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--levers", nargs="+", default=list(LEVERS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/ablation"))
    a = ap.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    jobs = []
    for seed in a.seeds:
        for lever in a.levers:
            steps = int(round(a.steps / COST.get(lever, 1.0)))
            if lever == "+ L-BFGS finish":  # one L-BFGS step ~ lbfgs.max_iter Adam steps of the same points
                steps = max(1, a.steps - 20 * a.finish)
            out = a.out / f"{lever.strip('+ ').replace(' ', '_').replace('(', '').replace(')', '')}-s{seed}"
            jobs.append((lever, seed, out, command(a.preset, steps, lever, seed, out, a.finish)))
    running: list[tuple] = []
    done = []
    while jobs or running:
        while jobs and len(running) < a.jobs:
            lever, seed, out, cmd = jobs.pop(0)
            if not (out / "metrics.json").exists():
                running.append((lever, seed, out, subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                                                   stderr=subprocess.PIPE, text=True)))
            else:
                done.append((lever, seed, out))
        for item in list(running):
            if item[3].poll() is not None:
                running.remove(item)
                if item[3].returncode != 0:
                    print(f"{item[0]} seed {item[1]} failed: {item[3].stderr.read()[-500:]}", file=sys.stderr)
                else:
                    done.append(item[:3])
        if running:
            time.sleep(1.0)
    print(f"| lever ({a.preset}, {a.steps}-step budget, seeds {a.seeds}) | wall (s) | early Ex / Ey / Hz "
          "(median, range) | full Ex / Ey / Hz (median, range) |")
    print("|---|---|---|---|")
    for lever in a.levers:
        ms = [json.loads((out / "metrics.json").read_text()) for lv, _, out in done if lv == lever]
        if not ms:
            continue

        def cell(window):
            parts = []
            for k in FIELDS:
                v = np.array([100 * m["rel_l2"][window][k] for m in ms])
                parts.append(f"{np.median(v):.1f} ({v.min():.1f}-{v.max():.1f})")
            return " / ".join(parts)

        wall = np.median([m["wall_s"] for m in ms])
        print(f"| {lever} | {wall:.0f} | {cell('early')} | {cell('full')} | {len(ms)} seeds")


if __name__ == "__main__":
    main()
