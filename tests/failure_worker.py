"""One rank of the failure tests (run as a subprocess by test_failure.py, or under mpirun).

Usage: python failure_worker.py ELECSOLVER_ARGS...   (the arguments of ``elecsolver``, e.g. ``run PROBLEM ...``)
       python failure_worker.py threads           (join, build an optimizer, one all-reduce, leave: prints the
                                                   process-group threads left after shutdown(); exit 1 if any)

It runs the real command line (``elecsolver.cli.main``, so the composition in ``cli.train``) with the
trainer's ``step_terms`` wrapped to fail on one rank, chosen by environment variables:

- ``FAIL_RANK`` (default: none, no failure) and ``FAIL_STEP`` (default 3): the rank and the 1-based step; step 0
  means right after the ranks have joined (outside ``train``'s try/finally, before the first collective);
- ``FAIL_MODE``: ``raise`` (a RuntimeError "injected failure in step N on rank K"), ``kill`` (SIGKILL to
  itself), or ``exit`` (``os._exit(3)``, a process that vanishes without Python's teardown).

- ``SLOW_REFERENCE`` (seconds): rank 0's reference solution takes that much longer (the others wait at their
  first collective meanwhile, as they do for a reference of minutes).

The failure happens when the rank enters the step (after printing ``failure_worker: rank K fails (MODE) in step N at
UNIX_TIME`` to stderr), so the other ranks are in (or about to enter) that step's gradient all-reduce.
"""

import os
import signal
import sys
import time

from elecsolver.parallel import data_parallel
from elecsolver.parallel.launch import discover

from elecsolver import cli
from elecsolver.cli import main
from elecsolver.training.trainer import Trainer


def _fail(rank: str, step: int, mode: str) -> None:
    print(f"failure_worker: rank {rank} fails ({mode}) in step {step} at {time.time():.3f}", file=sys.stderr,
          flush=True)
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "exit":
        os._exit(3)
    raise RuntimeError(f"injected failure in step {step} on rank {rank}")


def _inject() -> None:
    delay = float(os.environ.get("SLOW_REFERENCE", "0"))
    if delay > 0:
        plain_load = cli.load_problem_class

        def load_problem_class(name):
            cls = plain_load(name)

            class Slow(cls):
                def reference(self):
                    time.sleep(delay)
                    return super().reference()

            return Slow

        cli.load_problem_class = load_problem_class
    rank = os.environ.get("FAIL_RANK")
    if rank is None or int(rank) != discover().rank:
        return
    step, mode = int(os.environ.get("FAIL_STEP", "3")), os.environ.get("FAIL_MODE", "raise")
    if step == 0:
        plain_init = data_parallel.init_data_parallel

        def init_data_parallel(*args, **kwargs):
            out = plain_init(*args, **kwargs)
            _fail(rank, 0, mode)
            return out

        data_parallel.init_data_parallel = init_data_parallel
        return
    plain = Trainer.step_terms  # the one optimizer step that train() and train_step() both go through

    def step_terms(self):
        if self.step + 1 == step:
            _fail(rank, step, mode)
        return plain(self)

    Trainer.step_terms = step_terms


def threads_after_shutdown() -> int:
    """The abort at exit: no process-group thread may outlive shutdown() (see data_parallel.init_data_parallel)."""
    import torch
    from elecsolver.parallel.failure import gloo_threads

    comm, info, _ = data_parallel.init_data_parallel("cpu")
    model = torch.nn.Linear(3, 3)
    torch.optim.Adam(model.parameters())  # the first optimizer imports torch._dynamo, after the group exists
    captured = "torch.distributed.nn.functional" in sys.modules
    comm.all_reduce_sum(torch.ones(3))
    data_parallel.shutdown()
    left = gloo_threads()
    print(f"rank {info.rank}: torch.distributed.nn.functional imported: {captured}; threads after shutdown: {left}",
          flush=True)
    return 1 if left else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["threads"]:
        sys.exit(threads_after_shutdown())
    _inject()
    sys.exit(main(sys.argv[1:]))
