"""Run under ``mpirun -n 2`` by tests/test_callbacks.py: es.train with a callback that asks to stop on rank 0 only,
after step 3; prints each rank's last step, and the step its checkpoint holds."""

from __future__ import annotations

import json
import sys

import torch
from dp_worker import small_problem

import elecsolver as es
from elecsolver.training.callbacks import Callback


class StopOnRankZero(Callback):
    def on_read(self, trainer, loss, terms, end):
        if trainer.ctx.rank == 0 and trainer.step == 3:
            trainer.should_stop = True

    def on_train_end(self, trainer):
        print(json.dumps({"rank": trainer.ctx.rank, "step": trainer.step}), flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    p = small_problem()
    p.config["training"].update(steps=12, log_every=1)
    p.config["output"].update(png=False, nx=11, ny=11, nt=3, early_frames=2)
    es.train(type(p)(p.config), out=sys.argv[1], quiet=True, callbacks=[StopOnRankZero()])
