"""The training loop's callbacks (elecsolver.training.callbacks): the configuration turns on the callbacks whose
capabilities the capability table checks, in the loop's order; a callback of one's own sees every step and the
same loss values the log writes; one that stops the run leaves a checkpoint from which a resume equals the
uninterrupted run bit for bit, with its own state restored."""

from __future__ import annotations

import pytest
import torch
from dp_worker import small_problem

from elecsolver import capabilities
from elecsolver.trainer import Trainer
from elecsolver.training import callbacks as cb
from elecsolver.training.callbacks import Callback
from elecsolver.training.slabs import Slabs
from elecsolver.training.trainer import default_callbacks


def _params(trainer) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()])


@pytest.mark.parametrize(("options", "kinds"), [
    ({}, [cb.Balance, cb.Log, cb.Checkpoint, cb.ProgressBar]),  # the point source's ci preset balances its terms
    ({"finish": True, "balance": True, "least_squares": True, "rar": True, "rad": True},
     [cb.Finish, cb.Balance, cb.LeastSquares, cb.Refine, cb.Redistribute, cb.Log, cb.Checkpoint, cb.ProgressBar]),
    ({"slabs": True, "finish": True}, [Slabs, cb.Finish, cb.Balance, cb.Log, cb.Checkpoint, cb.ProgressBar]),
])
def test_the_configuration_turns_on_its_callbacks_with_their_capabilities(options, kinds):
    p = small_problem(**options)
    callbacks = default_callbacks(p)
    assert [type(c) for c in callbacks] == kinds
    on = capabilities.active(training=p.training, problem=p)
    declared = {c.capability for c in callbacks} - {None}
    assert declared <= on  # what a callback declares is what the table checks
    assert all(name in capabilities.CAPABILITIES for name in declared)


class Recorder(Callback):
    """Records what the loop shows it, and counts its reads in its checkpointed state."""

    def __init__(self, stop_at: int | None = None):
        self.before, self.after, self.reads, self.rows, self.count = [], [], [], [], 0
        self.stop_at = stop_at

    def before_step(self, trainer):
        self.before.append((trainer.step, trainer.segment_step))

    def after_step(self, trainer):
        self.after.append(trainer.step)

    def on_read(self, trainer, loss, terms, end):
        self.count += 1
        self.reads.append((trainer.step, loss, sum(terms)))
        self.rows.append(dict(trainer.history[-1]))  # the log callback ran first: this step's row is there
        if trainer.step == self.stop_at:
            trainer.should_stop = True

    def state_dict(self, trainer):
        return {"count": self.count}

    def load_state_dict(self, trainer, state):
        self.count = state["count"]


def test_a_callback_of_ones_own_sees_every_step_and_the_logged_loss():
    p = small_problem(slabs=True)  # 6 steps in two slabs of 3, a row every step
    rec = Recorder()
    tr = Trainer(p, progress=False, callbacks=[rec])
    tr.train()
    assert rec.before == [(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2)]  # the second slab starts at step 3
    assert rec.after == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in rec.rows] == [s for s, _, _ in rec.reads] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in rec.rows] == [loss for _, loss, _ in rec.reads]  # exactly the logged value
    assert all(loss == total for _, loss, total in rec.reads)
    assert tr.callbacks[-1] is rec


def test_a_callback_stops_the_run_and_a_resume_equals_the_uninterrupted_run(tmp_path):
    whole = Trainer(small_problem(finish=True), progress=False)  # 3 Adam steps, 2 L-BFGS steps
    whole.train()
    (tmp_path / "run").mkdir()
    first = Recorder(stop_at=4)  # inside the finish
    tr = Trainer(small_problem(finish=True), progress=False, out_dir=tmp_path / "run", callbacks=[first])
    tr.train()
    assert tr.step == 4 and tr.in_finish and first.count == 4 and not tr.should_stop
    second = Recorder()
    resumed = Trainer(small_problem(finish=True), progress=False, out_dir=tmp_path / "run", callbacks=[second])
    resumed.load_checkpoint()
    assert resumed.step == 4 and resumed.in_finish and second.count == 4  # its own state, from the checkpoint
    resumed.train()
    assert resumed.step == 5 and second.count == 5
    assert torch.equal(_params(whole), _params(resumed))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]
