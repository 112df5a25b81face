"""One rank of the failure tests (run as a subprocess by test_failure.py, or under mpirun).

Usage: python failure_worker.py ELECSOLVER_ARGS...   (the arguments of ``elecsolver``, e.g. ``run PROBLEM ...``)

It runs the real command line (``elecsolver.cli.main``, so the composition in ``cli.train``) with the
trainer's ``train_step`` wrapped to fail on one rank, chosen by environment variables:

- ``FAIL_RANK`` (default: none, no failure) and ``FAIL_STEP`` (default 3): the rank and the 1-based step;
- ``FAIL_MODE``: ``raise`` (a RuntimeError "injected failure in step N on rank K"), ``kill`` (SIGKILL to
  itself), or ``exit`` (``os._exit(3)``, a process that vanishes without Python's teardown).

The failure happens when the rank enters the step (after printing ``failure_worker: rank K fails (MODE) in step N at
UNIX_TIME`` to stderr), so the other ranks are in (or about to enter) that step's gradient all-reduce.
"""

import os
import signal
import sys
import time

from elecsolver.cli import main
from elecsolver.parallel.launch import discover
from elecsolver.training.trainer import Trainer


def _inject() -> None:
    rank = os.environ.get("FAIL_RANK")
    if rank is None or int(rank) != discover().rank:
        return
    step, mode = int(os.environ.get("FAIL_STEP", "3")), os.environ.get("FAIL_MODE", "raise")
    plain = Trainer.train_step

    def train_step(self):
        if self.step + 1 == step:
            print(f"failure_worker: rank {rank} fails ({mode}) in step {step} at {time.time():.3f}", file=sys.stderr,
                  flush=True)
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif mode == "exit":
                os._exit(3)
            raise RuntimeError(f"injected failure in step {step} on rank {rank}")
        return plain(self)

    Trainer.train_step = train_step


if __name__ == "__main__":
    _inject()
    sys.exit(main(sys.argv[1:]))
