"""Train one problem under every parallel strategy for a few steps and print each loss beside one process's.

    mpirun -n 2 python examples/parallel_strategies.py            # dp=2, tp=2, pp=2 (GPipe, 1F1B), ZeRO, ...
    python examples/parallel_strategies.py                        # the one-rank strategies only
    mpirun -n 4 --oversubscribe python examples/parallel_strategies.py   # adds dp=2 x tp=2, tp=2 x pp=2, ...

Every rank runs every strategy in turn (a strategy that needs more ranks than were started is skipped).  The
network, the seed and the points are the same for all of them, in float64, so the losses agree with the
one-process loss to round-off (the test suite holds them to 1e-10: tests/test_parallel.py).  The small 2-D
point source keeps this to about a minute on a 2-core CPU.
"""

from __future__ import annotations

import argparse

import torch
from elecsolver.parallel import ParallelOptions, apply_parallelism, init_data_parallel, shutdown
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D

import elecsolver as es
from elecsolver.config import merge

SMALL = {"network": {"width": 16, "depth": 2, "scales": [1.0, 4.0]},
         "sampling": {"interior": 400, "source": 80, "boundary": 80, "initial": 80},
         "training": {"dtype": "float64", "lr": 1e-3}}

STRATEGIES = [  # (name, ranks it needs, options)
    ("one process", 1, {}),
    ("recompute", 1, {"recompute": True}),
    ("data parallel dp=2", 2, {"dp": 2}),
    ("dp=2 + ZeRO-1", 2, {"dp": 2, "zero": True}),
    ("tensor parallel tp=2", 2, {"tp": 2}),
    ("pipeline pp=2, GPipe, 4 micro-batches", 2, {"pp": 2, "microbatches": 4, "schedule": "gpipe"}),
    ("pipeline pp=2, 1F1B, 4 micro-batches", 2, {"pp": 2, "microbatches": 4, "schedule": "1f1b"}),
    ("dp=2 x tp=2", 4, {"dp": 2, "tp": 2}),
    ("tp=2 x pp=2", 4, {"tp": 2, "pp": 2, "microbatches": 2}),
    ("dp=2 x pp=2", 4, {"dp": 2, "pp": 2, "microbatches": 2}),
]


def losses(problem, comm, device, options: dict, steps: int) -> list[float]:
    """The global loss of each of ``steps`` steps under ``options`` (every rank of the group calls it; with
    ``comm=None`` one process alone)."""
    model, ctx = apply_parallelism(problem, comm, device, ParallelOptions(**options))
    ctx.solo = comm is None  # the one-process reference, also when a launcher started several ranks
    trainer = es.Trainer(problem, model, ctx, progress=False)
    return [trainer.train_step()[0] for _ in range(steps)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="training steps per strategy (default 3)")
    args = ap.parse_args(argv)
    comm, info, device = init_data_parallel("cpu")
    try:
        problem = MaxwellPointSource2D(merge(MaxwellPointSource2D.preset_config("ci"), SMALL))
        world = info.world
        rows = [("one process", losses(problem, None, device, {}, args.steps))] if info.rank == 0 else []
        for name, needs, opts in STRATEGIES[1:]:
            if needs == world:
                rows.append((name, losses(problem, comm, device, opts, args.steps)))
            elif needs == 1:  # a one-rank strategy under several ranks: data parallel on top
                rows.append((name + f" (dp={world})", losses(problem, comm, device, opts, args.steps)))
        if info.rank == 0:
            ref = rows[0][1]
            print(f"{'strategy':44s} " + " ".join(f"{'step ' + str(k + 1):>22s}" for k in range(args.steps))
                  + "   max rel. diff")
            for name, ls in rows:
                diff = max(abs(a - b) / abs(b) for a, b in zip(ls, ref))
                print(f"{name:44s} " + " ".join(f"{v:22.15e}" for v in ls) + f"   {diff:.1e}")
    finally:
        shutdown()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
