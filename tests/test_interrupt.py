"""Signals and preemption: SIGINT / SIGTERM / SIGUSR1 stop every rank after the same step, write the checkpoint,
print one line and exit with 128 + signal; --resume then gives bit for bit the parameters of an uninterrupted run;
a second signal exits at once and leaves the previous checkpoint intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_main
from test_mpirun import MPIRUN, _finish

from elecsolver.training.interrupt import Interrupted, pending, stop_requests

DRIVER = str(Path(__file__).with_name("signal_driver.py"))
# the smoke preset's clouds (64 points a term) and 11-site output axes, 20 steps: the exactness of a resume does not
# depend on the cloud's size, and interpreter and process-group start-up dominate as it is
RUN = ["run", "maxwell-cavity-2d", "--preset", "smoke", "--steps", "20", "--dtype", "float64", "--quiet",
       "--set", "training.checkpoint_every=5", "--set", "sampling.resample_every=3"]


def _env(**extra) -> dict:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _start(args, env, ranks: int = 1, driver: bool = True) -> subprocess.Popen:
    """The signal driver (or, ``driver=False``, the plain CLI) on ``ranks`` ranks, started in the background."""
    cmd = [sys.executable, DRIVER, *args] if driver else [sys.executable, "-m", "elecsolver.cli", *args]
    if ranks > 1:
        cmd = [MPIRUN, "--oversubscribe", "-n", str(ranks), *cmd]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _driver(args, env, ranks: int = 1):
    return _finish(_start(args, env, ranks))


def _model(path: Path) -> dict:
    return torch.load(path, weights_only=False)


def _same_parameters(a: Path, b: Path) -> bool:
    pa, pb = _model(a)["model"], _model(b)["model"]
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


def _message_lines(stderr: str) -> list[str]:
    """Our lines on stderr (mpirun adds its own banner about a non-zero exit)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("elecsolver")]


def test_interrupted_carries_the_shells_exit_code():
    assert Interrupted(3, signal.SIGINT).exit_code == 130
    assert Interrupted(3, signal.SIGTERM).exit_code == 143
    assert Interrupted(3, signal.SIGUSR1).exit_code == 138
    assert "at step 3" in str(Interrupted(3, signal.SIGTERM)) and "--resume" in str(Interrupted(3, signal.SIGTERM))


def test_stop_requests_record_a_signal_and_restore_the_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with stop_requests():
        assert pending() == 0
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, not fatal
        assert pending() == signal.SIGTERM
    assert pending() == 0 and signal.getsignal(signal.SIGTERM) is before


def test_sigint_stops_after_the_step_and_resume_equals_the_uninterrupted_run(tmp_path):
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    interrupted = _start([*RUN, "--out", str(cut)], _env(SIG_AT="7", SIG="SIGINT"))
    assert run_main(*RUN, "--out", str(straight)).returncode == 0  # meanwhile, in this process
    proc = _finish(interrupted)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == ("elecsolver: interrupted by SIGINT at step 7; the checkpoint is written: run the "
                                   "same command with --resume to continue")
    assert _model(cut / "checkpoint.pt")["step"] == 7 and not (cut / "fields.h5").exists()
    resumed = run_main(*RUN, "--out", str(cut), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert _same_parameters(straight / "checkpoint.pt", cut / "checkpoint.pt")


def test_a_second_signal_exits_at_once_and_keeps_the_last_checkpoint(tmp_path):
    out = tmp_path / "o"
    proc = _driver([*RUN, "--out", str(out)], _env(SIG_AT="7", SIG_TWICE="1"))
    assert proc.returncode == 143
    assert "SIGTERM again: exiting at once" in proc.stderr and "Traceback" not in proc.stderr
    state = _model(out / "checkpoint.pt")  # the one written at step 5, complete
    assert state["step"] == 5
    assert not list(out.glob(".*.tmp"))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_sigterm_on_one_rank_stops_both_at_the_same_step_and_resumes_exactly(tmp_path):
    """The signal reaches rank 1 only (as when a scheduler signals one task): both ranks agree at the next check
    (every 5 steps) and stop at step 10; the resumed 2-rank run equals the uninterrupted one bit for bit."""
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    env = _env()
    two = [MPIRUN, "--oversubscribe", "-n", "2", sys.executable, "-m", "elecsolver.cli"]  # the resume
    # the uninterrupted and the interrupted run side by side
    uninterrupted = _start([*RUN, "--out", str(straight)], env, ranks=2, driver=False)
    proc = _driver([*RUN, "--out", str(cut)], _env(SIG_AT="7", SIG_RANK="1"), ranks=2)
    done = _finish(uninterrupted)
    assert done.returncode == 0, done.stderr
    assert proc.returncode == 143, proc.stdout + proc.stderr
    line = ("elecsolver: interrupted by SIGTERM at step 10; the checkpoint is written: run the same command with "
            "--resume to continue")
    assert _message_lines(proc.stderr) == [line]
    assert "Traceback" not in proc.stderr
    state = _model(cut / "checkpoint.pt")
    assert state["step"] == 10 and state["world"] == 2
    resumed = subprocess.run([*two, *RUN, "--out", str(cut), "--resume"], env=env, capture_output=True, text=True,
                             timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert _same_parameters(straight / "checkpoint.pt", cut / "checkpoint.pt")
