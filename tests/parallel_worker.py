"""One rank of the parallel-strategy equality tests (run as subprocesses by test_parallel.py).

Usage: python parallel_worker.py CASES_JSON
CASES_JSON: a list of {"prefix": OUT_PREFIX, "options": OPTIONS}, trained one after the other in this process (one
launch for all the cases of a module that share a world size: the process group is joined once, each case builds
its own device mesh).  OPTIONS: {"parallel": {...ParallelOptions fields}, "steps": 5, "accumulate": 1,
"hard_initial": false, "shard_sizes": {...}, "interior": 97, "device": "cpu", "family": false, "only": [terms],
"same_points": false, "compile": false, "dtype": "float64", "balance": false}; the npz also holds the loss of every step
("losses") and, compiled, the number of graphs and graph breaks.  Rank and world come from torchrun-style
variables; none: one process.

For each case the rank trains the small point source through the Trainer under the strategy and saves, in
OUT_PREFIX.rank<r>.npz, the loss of step 1, the gradients of step 1 and the parameters after the last step,
each under the full network's parameter names (tensor-parallel shards gathered; a pipeline stage holds its own
layers under their full names), so that the test can merge ranks and compare with one process.
"""

import json
import sys

import numpy as np
import torch
from dp_worker import small_problem
from elecsolver.parallel.data_parallel import init_data_parallel, shutdown
from elecsolver.parallel.strategy import apply_parallelism

from elecsolver.config import merge
from elecsolver.trainer import Trainer


def named(model, ctx, grad: bool) -> dict:
    mesh = ctx.extra.get("mesh")
    if mesh is not None and mesh.tp > 1:
        from elecsolver.parallel.tensor_parallel import gather_tensor_parallel

        model = gather_tensor_parallel(model, mesh, grad=grad)
    out = {}
    for name, p in model.named_parameters():
        t = p.grad if grad else p
        out[name] = (torch.zeros_like(p) if t is None else t).detach().cpu().numpy().copy()
    return out


def main() -> None:
    cases = json.loads(sys.argv[1])
    comm, info, dev = init_data_parallel(cases[0]["options"].get("device", "cpu"))
    torch.set_num_threads(1)
    for case in cases:
        run_case(case["prefix"], case["options"], comm, info, dev)
    shutdown()


def run_case(prefix: str, options: dict, comm, info, dev) -> None:
    problem = small_problem(hard_initial=options.get("hard_initial", False))
    cfg = problem.config
    cfg["training"]["accumulate"] = options.get("accumulate", 1)
    cfg["training"]["optimizer"] = options.get("optimizer", "adam")
    cfg["training"]["compile"] = options.get("compile", False)
    if options.get("balance"):  # loss balancing every 2 steps
        cfg["training"]["balance"] = {"every": 2, "alpha": 0.5}
    if "dtype" in options:
        cfg["training"]["dtype"] = options["dtype"]
    if "interior" in options:
        cfg["sampling"]["interior"] = options["interior"]
    cls = type(problem)
    if options.get("family"):  # the same small set-up, with the source's position and frequency as inputs
        from elecsolver.problems.maxwell_point_source_family import MaxwellPointSourceFamily as cls

        cfg = merge(cls.preset_config("ci"), {k: v for k, v in cfg.items() if k in ("network", "sampling", "training")})
    problem = cls(cfg)
    if "only" in options:  # keep only these loss terms (e.g. a derivative-only loss)
        keep, full = options["only"], problem.constraints
        problem.constraints = lambda: [c for c in full() if c.name in keep]
    if options.get("same_points"):
        same_points(problem, comm, dev, options, prefix, info)
        return
    model, ctx = apply_parallelism(problem, comm, dev, options.get("parallel"))
    trainer = Trainer(problem, model, ctx, device=str(dev), shard_sizes=options.get("shard_sizes") or None,
                      progress=False)
    steps = options.get("steps", 5)
    loss1, terms1 = trainer.train_step()
    grads = named(trainer.model, ctx, grad=True)
    losses = [loss1] + [trainer.train_step()[0] for _ in range(steps - 1)]
    params = named(trainer.model, ctx, grad=False)
    arrays = {"loss": np.array(loss1), "terms": np.array(terms1), "losses": np.array(losses)}
    if options.get("compile"):  # what torch.compile made of it (counted over this process's cases so far)
        from torch._dynamo.utils import counters

        arrays["graphs"] = np.array(counters["stats"]["unique_graphs"])
        arrays["graph_breaks"] = np.array(sum(counters["graph_break"].values()))
    arrays.update({f"g:{k}": v for k, v in grads.items()})
    arrays.update({f"p:{k}": v for k, v in params.items()})
    np.savez(f"{prefix}.rank{info.rank}.npz", **arrays)


def same_points(problem, comm, dev, options, prefix, info) -> None:
    """Every rank keeps the whole cloud (the symptom the loss-share check catches): the warnings of 2 steps."""
    import logging

    from elecsolver.training.points import Points

    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    shard, keep, logger = Points.shard, Keep(), logging.getLogger("elecsolver")
    Points.shard = lambda self, cloud, sizes=None: (np.arange(len(cloud)), cloud)
    logger.addHandler(keep)
    try:
        cfg = problem.config
        cfg["training"]["log_every"] = 1
        problem = type(problem)(cfg)
        model, ctx = apply_parallelism(problem, comm, dev, options.get("parallel"))
        Trainer(problem, model, ctx, device=str(dev), progress=False).train(stop_after=2)
    finally:
        Points.shard = shard
        logger.removeHandler(keep)
    np.savez(f"{prefix}.rank{info.rank}.npz", warnings=np.array("\n".join(warnings)))


if __name__ == "__main__":
    main()
