"""Per-rank sampling time of one round, exact against local sharding, at 1, 2, 4, ... data-parallel ranks.

    OMP_NUM_THREADS=1 python benchmarks/sampling_scale.py                  # 16 x the quick preset's counts
    OMP_NUM_THREADS=1 python benchmarks/sampling_scale.py --scale 64 --worlds 1 2 4 8 --repeats 7

The constraints are those of ``maxwell-point-source-2d`` (a box x time interior, a disc region around the
source intersected with the box, the box's lateral boundary; the initial values are hard), with the quick
preset's point counts times ``--scale`` (16: 131 072 + 32 768 + 16 384 points per round).  For each rank
count W (simulated in one process: rank 0's work) and mode (``sampling.shard``), one timing is the wall time
of ``Points.at`` for a new sampling round: every constraint's batch of rank 0, as tensors.  ``exact``: rank 0
draws every global cloud and keeps its recursive-bisection shard (O(N)); ``local``: rank 0 draws only its
own equal-measure part (O(N / W)).  Timings are interleaved (repetition by repetition, every W and mode in
turn) because the host is shared and noisy; the table gives the median, the spread (min-max), the points
rank 0 holds and the median relative to the same mode at one rank.  ``first`` is the first round of freshly
built constraints (one-off costs, cached for the rest of a run: the disc region's Monte-Carlo measure in
both modes; in local mode also its reference cloud and the part boxes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elecsolver.training.options import SamplingOptions
from elecsolver.training.points import Points
from problems.maxwell_point_source_2d import MaxwellPointSource2D

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model


def problem(scale: int) -> MaxwellPointSource2D:
    cfg = MaxwellPointSource2D.preset_config("quick")
    smp = cfg["sampling"]
    for key in ("interior", "source", "boundary", "initial"):
        smp[key] = int(smp[key]) * scale
    return MaxwellPointSource2D(cfg)


def points(p, constraints, shard: str, world: int) -> Points:
    opts = SamplingOptions.from_config({"sampling": {**p.config["sampling"], "shard": shard}})
    spatial = [k for k, name in enumerate(p.inputs) if name != "t"]
    return Points(constraints, opts, p.training.seed, p.training.steps, 0, world, spatial, torch.float32,
                  torch.device("cpu"))


def one_round(pts: Points, round_: int) -> tuple[float, int]:
    """Seconds for rank 0's batches of sampling round ``round_``, and the points it holds."""
    t0 = time.perf_counter()
    batches = pts.at(round_ * pts.sampling.resample_every)
    return time.perf_counter() - t0, sum(b.points.shape[0] for b in batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=16, help="times the quick preset's point counts")
    ap.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)

    p = problem(args.scale)
    constraints = p.constraints()
    modes = ("exact", "local")
    first = {}
    for w in args.worlds:  # one-off set-up: the first round of fresh constraints (fresh caches)
        for m in modes:
            first[w, m], _ = one_round(points(p, p.constraints(), m, w), 0)
    cases = {(w, m): points(p, constraints, m, w) for w in args.worlds for m in modes}
    for pts in cases.values():  # warm-up round (allocations, caches)
        one_round(pts, 0)
    counts = {b.constraint.name: b.n_global for b in cases[args.worlds[0], "exact"].batches}
    times: dict = {k: [] for k in cases}
    held = {}
    for rep in range(1, args.repeats + 1):
        for key, pts in cases.items():
            t, n = one_round(pts, rep)
            times[key].append(t)
            held[key] = n

    print(f"maxwell-point-source-2d constraints, per round: {counts} ({sum(counts.values())} points); "
          f"{args.repeats} interleaved repetitions; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"torch threads 1; {cpu_model()}")
    print(f"{'ranks':>5} {'mode':>6} {'rank-0 points':>13} {'median ms':>10} {'min-max ms':>17} {'vs 1 rank':>9} "
          f"{'first ms':>9}")
    for w in args.worlds:
        for m in modes:
            med = statistics.median(times[w, m])
            base = statistics.median(times[args.worlds[0], m])
            spread = f"{1e3 * min(times[w, m]):.1f}-{1e3 * max(times[w, m]):.1f}"
            print(f"{w:5d} {m:>6} {held[w, m]:13d} {1e3 * med:10.1f} {spread:>17} {med / base:9.2f} "
                  f"{1e3 * first[w, m]:9.1f}")


if __name__ == "__main__":
    main()
