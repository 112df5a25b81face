"""One rank of the parallel-strategy equality tests (run as subprocesses by test_parallel.py).

Usage: python parallel_worker.py OUT_PREFIX OPTIONS_JSON
OPTIONS_JSON: {"parallel": {...ParallelOptions fields}, "steps": 5, "accumulate": 1, "hard_initial": false,
"shard_sizes": {...}, "interior": 97, "device": "cpu", "family": false}.  Rank and world come from torchrun-style variables; none: one process.

The rank trains the small point source through the Trainer under the strategy and saves, in
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
    prefix, options = sys.argv[1], json.loads(sys.argv[2])
    comm, info, dev = init_data_parallel(options.get("device", "cpu"))
    torch.set_num_threads(1)
    problem = small_problem(hard_initial=options.get("hard_initial", False))
    cfg = problem.config
    cfg["training"]["accumulate"] = options.get("accumulate", 1)
    cfg["training"]["optimizer"] = options.get("optimizer", "adam")
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
    warnings: list[str] = []
    if options.get("same_points"):  # every rank keeps the whole cloud: the symptom the loss-share check catches
        import logging

        from elecsolver.training.points import Points

        Points.shard = lambda self, cloud, sizes=None: (np.arange(len(cloud)), cloud)

        class Keep(logging.Handler):
            def emit(self, record):
                if record.levelno >= logging.WARNING:
                    warnings.append(record.getMessage())

        logging.getLogger("elecsolver").addHandler(Keep())
        cfg["training"]["log_every"] = 1
    model, ctx = apply_parallelism(problem, comm, dev, options.get("parallel"))
    trainer = Trainer(problem, model, ctx, device=str(dev), shard_sizes=options.get("shard_sizes") or None,
                      progress=False)
    steps = options.get("steps", 5)
    if options.get("same_points"):
        trainer.train(stop_after=2)
        np.savez(f"{prefix}.rank{info.rank}.npz", warnings=np.array("\n".join(warnings)))
        shutdown()
        return
    loss1, terms1 = trainer.train_step()
    grads = named(trainer.model, ctx, grad=True)
    for _ in range(steps - 1):
        trainer.train_step()
    params = named(trainer.model, ctx, grad=False)
    arrays = {"loss": np.array(loss1), "terms": np.array(terms1)}
    arrays.update({f"g:{k}": v for k, v in grads.items()})
    arrays.update({f"p:{k}": v for k, v in params.items()})
    np.savez(f"{prefix}.rank{info.rank}.npz", **arrays)
    shutdown()


if __name__ == "__main__":
    main()
