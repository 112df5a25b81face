"""Test driver: ``python signal_driver.py ARGS...`` runs ``elecsolver ARGS`` and sends this process a real signal
right after training step ``SIG_AT`` (on the rank ``SIG_RANK`` only, when set; twice with ``SIG_TWICE=1``).  The
signal goes through the operating system as a scheduler's or a user's would; only its timing is fixed, so that the
tests know at which step the ranks must stop."""

import os
import signal
import sys

from elecsolver.cli import main
from elecsolver.training import trainer

STEP = int(os.environ["SIG_AT"])
SIGNAL = getattr(signal, os.environ.get("SIG", "SIGTERM"))
_advance = trainer.Trainer.advance_terms


def _advance_then_signal(self):
    out = _advance(self)
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    if self.step == STEP and os.environ.get("SIG_RANK", rank) == rank:
        os.kill(os.getpid(), SIGNAL)
        if os.environ.get("SIG_TWICE") == "1":
            os.kill(os.getpid(), SIGNAL)
    return out


trainer.Trainer.advance_terms = _advance_then_signal
sys.exit(main(sys.argv[1:]))
