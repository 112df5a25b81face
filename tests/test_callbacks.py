"""The training loop's callbacks (elecsolver.training.callbacks): the configuration turns on the callbacks whose
capabilities the capability table checks, in the loop's order; a callback of one's own sees every step and the
same loss values the log writes; one that stops the run leaves a checkpoint from which a resume equals the
uninterrupted run bit for bit, with its own state restored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    assert tr.callbacks[-3] is rec  # after the defaults, before the checkpoint and the progress bar


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


def test_a_checkpoint_holds_each_callbacks_state_of_its_step(tmp_path):
    """The checkpoint the trainer writes itself (at the end of train(stop_after=...)) is written after the own
    callbacks' on_read, and two instances of one class keep their own states (``Recorder``, ``Recorder#1``); the
    folder is made if missing."""
    out = tmp_path / "not" / "yet"
    a, b = Recorder(), Recorder()
    b.count = 100
    tr = Trainer(small_problem(), progress=False, out_dir=out, callbacks=[a, b])
    tr.train(stop_after=4)
    assert (a.count, b.count) == (4, 104)
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    assert state["callbacks"]["Recorder"] == {"count": 4} and state["callbacks"]["Recorder#1"] == {"count": 104}
    c, d = Recorder(), Recorder()
    resumed = Trainer(small_problem(), progress=False, out_dir=out, callbacks=[c, d])
    resumed.load_checkpoint()
    assert (c.count, d.count) == (4, 104)
    assert [type(cb).__name__ for cb in resumed.callbacks][-4:] == ["Recorder", "Recorder", "Checkpoint",
                                                                    "ProgressBar"]


def test_should_stop_from_any_hook_ends_the_run_after_that_step():
    class StopAfter(Callback):
        def after_step(self, trainer):
            trainer.should_stop = trainer.step == 2

    tr = Trainer(small_problem(), progress=False, callbacks=[StopAfter()])
    tr.train()
    assert tr.step == 2 and not tr.should_stop


class _Unpicklable(Callback):
    def state_dict(self, trainer):
        import threading

        return {"lock": threading.Lock()}


@pytest.mark.parametrize(("callbacks", "words"), [
    (lambda: None, "callbacks must be a list of instances of elecsolver.training.callbacks.Callback"),
    (Recorder(), "got Recorder"),
    ([Recorder], r"got the class Recorder \(pass an instance: Recorder\(\)\)"),
    ([object()], "got object"),
])
def test_bad_callbacks_are_one_clear_error(callbacks, words):
    with pytest.raises(TypeError, match=words):
        Trainer(small_problem(), progress=False, callbacks=callbacks)


def test_a_state_that_cannot_be_saved_fails_before_the_first_step(tmp_path):
    tr = Trainer(small_problem(), progress=False, out_dir=tmp_path, callbacks=[_Unpicklable()])
    with pytest.raises(TypeError, match=r"callback _Unpicklable: its state_dict\(\) cannot be saved in the checkpoint"):
        tr.train()
    assert tr.step == 0 and not (tmp_path / "checkpoint.pt").exists()


MPIRUN = shutil.which("mpirun", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_a_stop_asked_on_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    """Under mpirun -n 2, es.train(callbacks=...) with should_stop set on rank 0 alone after step 3: both ranks
    stop at step 5, where the ranks agree on stop requests (CHECK_EVERY), and the checkpoint holds step 5."""
    from elecsolver.training.interrupt import CHECK_EVERY

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    worker = Path(__file__).resolve().parent / "callback_worker.py"
    proc = subprocess.run([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, str(worker), str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=worker.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = sorted(json.loads(line)["step"] for line in proc.stdout.splitlines() if line.startswith("{"))
    assert CHECK_EVERY == 5 and steps == [5, 5]
    assert torch.load(tmp_path / "out" / "checkpoint.pt", weights_only=False)["step"] == 5
