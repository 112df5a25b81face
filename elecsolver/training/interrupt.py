"""Stopping a run on a signal: finish the step, agree on it over the ranks, checkpoint, exit with 128 + signal.

A scheduler that preempts a job (SLURM's ``--signal=TERM@60``, a cloud spot instance) or a user's Ctrl-C sends a
signal; the run should end at a step boundary with a checkpoint that ``--resume`` continues bit for bit, not with
a traceback through torch internals.  While :func:`stop_requests` is active:

- the first SIGINT, SIGTERM or SIGUSR1 only records the request (the handler does nothing else);
- the training loop (:meth:`elecsolver.training.trainer.Trainer.train`) looks at the request after each step; over
  several ranks it takes the maximum of every rank's request at fixed steps (:data:`CHECK_EVERY`), so that a
  signal that reached one rank only stops all of them at the same step; it then writes the checkpoint (atomic)
  and raises :class:`Interrupted`;
- a second signal ends the process at once with exit code 128 + signal, leaving the previous checkpoint as it was
  (checkpoints are written under a temporary name and renamed, :mod:`elecsolver.io.atomic`).

Exit codes follow the shell's convention: 130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1.  SIGUSR1 is there for
``mpirun``: Open MPI forwards it to every rank unchanged, whereas a SIGTERM or SIGINT sent to ``mpirun`` itself makes
it kill the ranks within about half a second (docs/parallel.md, "Preemption and signals").
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

__all__ = ["CHECK_EVERY", "SIGNALS", "Interrupted", "pending", "request", "stop_requests"]

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
CHECK_EVERY = 5  # steps between the ranks' agreements on a stop (several ranks; one process looks every step)

_requested = 0


class Interrupted(Exception):
    """The run stopped on a signal after step ``step`` and wrote its checkpoint.

    Attributes
    ----------
    step : int
        The last step done (every rank stopped after it).
    signum : int
        The signal (the first one any rank received).
    exit_code : int
        128 + signum: 130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1.
    """

    def __init__(self, step: int, signum: int, total: int | None = None):
        self.step, self.signum, self.total = step, signum, total
        self.exit_code = 128 + signum
        of = f" of {total}" if total is not None else ""
        super().__init__(f"interrupted by {signal.Signals(signum).name} at step {step}{of}; the checkpoint is "
                         "written: run the same command with --resume to continue")


def pending() -> int:
    """The signal number of a pending stop request, or 0."""
    return _requested


def request(signum: int) -> None:
    """Record a stop request as the first signal would (for callers that stop a run from code)."""
    global _requested
    _requested = _requested or int(signum)


def _handler(signum, frame) -> None:
    global _requested
    if _requested:  # the second signal: out at once; the last complete checkpoint stays as it is
        os.write(2, f"elecsolver: {signal.Signals(signum).name} again: exiting at once; the last checkpoint is "
                    "kept\n".encode())
        os._exit(128 + signum)
    _requested = signum


@contextlib.contextmanager
def stop_requests() -> Iterator[None]:
    """Record SIGINT, SIGTERM and SIGUSR1 as stop requests inside the block (main thread only; elsewhere it does
    nothing) and restore the previous handlers after it.  A request left pending when the block ends is dropped."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    _requested = 0
    for s in SIGNALS:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _requested = 0
