"""One rank of the data-parallel equality tests (run as a subprocess by test_data_parallel.py).

Usage: python dp_worker.py OUT_DIR STEPS CASES_JSON
CASES_JSON: a list of {"tag": name, "sizes": SHARD_SIZES, "options": OPTIONS}; every case trains in this one
process (one launch per test module: the process group is joined once), and rank 0 writes OUT_DIR/<tag>.npz.
OPTIONS: {"rar": true} turns on adaptive refinement every 2 steps; {"weights": true} gives the
interior points unequal weights (the measure each stands for); {"compile": true} runs the compiled
training step; {"rad": true} redistributes the points every 2 steps (RAD); {"finish": true} ends with
an L-BFGS finish; {"balance": true} balances the loss terms every 2 steps;
{"least_squares": true} solves the output layer every 2 steps; {"solve": true} makes every step such a solve
(``training.optimizer = "least_squares"``); {"slabs": true} trains the window in two
time slabs of 3 steps each (the run stops 2 steps into the second).
Rank and world come from torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT);
none: one process.  Rank 0 saves the loss curve and the final parameters.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from elecsolver.parallel.data_parallel import apply_data_parallel, init_data_parallel, shutdown
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D

from elecsolver.config import merge
from elecsolver.trainer import Trainer, build_model

SMALL = {
    "network": {"kind": "multiscale", "width": 16, "depth": 2, "scales": [1.0, 4.0]},
    "sampling": {"interior": 97, "source": 31, "boundary": 23, "initial": 13, "resample_every": 3},
    "training": {"dtype": "float64", "lr": 1e-3, "seed": 3, "log_every": 1, "checkpoint_every": 1000},
}


def small_problem(hard_initial: bool = False, rar: bool = False, weights: bool = False,
                  compile: bool = False, rad: bool = False, finish: bool = False,
                  balance: bool = False, least_squares: bool = False, slabs: bool = False,
                  solve: bool = False) -> MaxwellPointSource2D:
    cfg = merge(MaxwellPointSource2D.preset_config("ci"), SMALL)
    cfg["network"]["hard_initial"] = hard_initial
    cfg["training"]["compile"] = compile
    if rar:
        cfg["sampling"].update(rar_every=2, rar_pool=41, rar_add=7, rar_constraints=["pde", "boundary"])
    if rad:
        cfg["sampling"].update(rad_every=2, rad_candidates=3, rad_constraints=["pde", "boundary"])
    if balance:
        cfg["training"]["balance"] = {"every": 2, "alpha": 0.5}
    if least_squares:
        cfg["training"]["least_squares"] = {"every": 2, "ridge": 1e-6}
    if solve:
        cfg["training"].update(optimizer="least_squares", least_squares={"every": 0, "ridge": 1e-6})
    if slabs:
        cfg["training"].update(steps=6, slabs=2)
    if finish:  # 3 Adam steps, then 2 L-BFGS steps of 4 iterations on the points of step 2
        cfg["training"].update(steps=3, finish={"optimizer": "lbfgs", "steps": 2, "lr": 1.0},
                               lbfgs={"history": 5, "max_iter": 4})
    return (WeightedPointSource if weights else MaxwellPointSource2D)(cfg)


class WeightedPointSource(MaxwellPointSource2D):
    """The point source with unequal weights on the interior points (any positive measure per point)."""

    def constraints(self):
        out = super().constraints()
        pde = out[0]
        plain = pde.sample

        def weighted(seed, progress=1.0):
            cloud = plain(seed, progress)
            cloud.weights = 0.5 + cloud.points[:, 0] ** 2
            return cloud

        pde.sample = weighted
        return out


def main() -> None:
    out, steps, cases = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    comm, info, _ = init_data_parallel("cpu")
    torch.set_num_threads(1)
    for case in cases:
        run_case(comm, info, out / f"{case['tag']}.npz", steps, case.get("sizes") or {}, case.get("options") or {})
    shutdown()


def run_case(comm, info, out: Path, steps: int, sizes: dict, options: dict) -> None:
    problem = small_problem(**options)
    model = build_model(problem)
    context = apply_data_parallel(model, comm)  # the gradient-sync hook the trainer is driven through
    params0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()
    trainer = Trainer(problem, model, context, shard_sizes=sizes or None, progress=False)
    trainer.train(stop_after=steps)  # the loop of a real run (adaptive refinement included)
    losses = [row["loss"] for row in trainer.history]
    local = {name: int(p.shape[0]) for name, p, _ in trainer.batches()}
    if info.rank == 0:
        params = torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()]).numpy()
        np.savez(out, losses=np.array(losses), params=params, params0=params0, local=json.dumps(local))


if __name__ == "__main__":
    main()
