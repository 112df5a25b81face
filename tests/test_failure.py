"""A rank that fails ends the whole run: within 60 s every other rank exits non-zero and names the failed rank and
its error, and the failed rank shows its own error (elecsolver.parallel.failure).  And a clean run leaves no
process-group thread behind, the cause of the abort at exit ("terminate called without an active exception").

The runs are 2-rank ``elecsolver run`` commands with a tiny point cloud, started with torchrun-style variables
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or under mpirun; ``failure_worker.py`` makes one rank raise or be
killed at a chosen step.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import free_port

HERE = Path(__file__).resolve().parent
WORKER = HERE / "failure_worker.py"
MPIRUN = shutil.which("mpirun", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
TINY = ["--preset", "ci", "--steps", "5", "--quiet",
        "--set", "sampling.interior=64", "--set", "sampling.source=16", "--set", "sampling.boundary=16",
        "--set", "sampling.initial=16", "--set", "output.nx=11", "--set", "output.ny=11",
        "--set", "output.nt=5", "--set", "output.early_frames=3"]
BOUND_S = 60.0


def _env(extra: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "FAIL_RANK",
              "FAIL_STEP", "FAIL_MODE", "SLOW_REFERENCE"):
        env.pop(k, None)
    env.update(extra)
    return env


def _launch(args: list[str], extra: dict, world: int = 2, timeout: float = 240.0):
    """Start ``world`` ranks of the worker; returns [(exit code, output, exit time)] per rank (time.time())."""
    port, procs, files = free_port(), [], []
    for rank in range(world):
        env = _env(dict(extra, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                        LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
        f = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed below, after the process ends)
        files.append(f)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env, stdout=f,
                                      stderr=subprocess.STDOUT, text=True))
    codes, ends = [None] * world, [None] * world
    deadline = time.monotonic() + timeout
    while any(c is None for c in codes) and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if codes[i] is None and p.poll() is not None:
                codes[i], ends[i] = p.returncode, time.time()
        time.sleep(0.05)
    hung = [i for i, c in enumerate(codes) if c is None]
    for i in hung:
        procs[i].kill()
        procs[i].wait()
    out = []
    for i, f in enumerate(files):
        f.seek(0)
        out.append((codes[i], f.read(), ends[i]))
        f.close()
    assert not hung, f"ranks {hung} still running after {timeout} s:\n" + _show(out)
    return out


def _show(results) -> str:
    return "\n".join(f"----- rank {i} (exit {c}) -----\n{text[-4000:]}" for i, (c, text, _) in enumerate(results))


def _failed_at(text: str) -> float:
    m = re.search(r"failure_worker: rank \d+ fails \(\w+\) in step \d+ at ([0-9.]+)", text)
    assert m, text[-3000:]
    return float(m.group(1))


def _cli(tmp_path: Path) -> list[str]:
    return ["run", "maxwell-point-source-2d", *TINY, "--out", str(tmp_path / "out")]


def test_rank_raising_in_step_3_stops_every_rank(tmp_path):
    res = _launch(_cli(tmp_path), {"FAIL_RANK": "1", "FAIL_STEP": "3", "FAIL_MODE": "raise"})
    report = _show(res)
    assert all(code != 0 for code, _, _ in res), report
    t0 = _failed_at(res[1][1])
    assert max(end for _, _, end in res) - t0 < BOUND_S, report
    assert "RuntimeError: injected failure in step 3 on rank 1" in res[1][1], report  # its own traceback
    assert "rank 1 failed: RuntimeError: injected failure in step 3 on rank 1" in res[0][1], report


def test_rank_killed_in_step_3_stops_every_rank(tmp_path):
    res = _launch(_cli(tmp_path), {"FAIL_RANK": "1", "FAIL_STEP": "3", "FAIL_MODE": "kill"})
    report = _show(res)
    assert res[1][0] == -signal.SIGKILL, report
    assert res[0][0] != 0, report
    t0 = _failed_at(res[1][1])
    assert res[0][2] - t0 < BOUND_S, report
    assert "rank 1 failed: died without reporting an error" in res[0][1], report


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are listed from /proc (Linux)")
def test_no_process_group_thread_outlives_shutdown():
    """The abort at exit: torch.optim imports torch._dynamo, which imports torch.distributed.nn.functional, whose
    default arguments bind the world group when imported after it exists; destroy_process_group() then left the
    group's gloo threads running into the interpreter's teardown, where one aborted the process (SIGABRT)."""
    res = _launch(["threads"], {}, timeout=120)
    report = _show(res)
    assert [code for code, _, _ in res] == [0, 0], report
    for _, text, _ in res:
        assert "threads after shutdown: []" in text, report
        assert "terminate called" not in text, report


# -------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_rank_failing_while_rank_0_computes_the_reference(tmp_path):
    """Rank 0 is alone in a long computation (not in a collective) when rank 1 fails: the watchdog stops it
    (without it, rank 0 learnt of the failure only at its next collective, after the reference)."""
    res = _launch(_cli(tmp_path), {"FAIL_RANK": "1", "FAIL_STEP": "0", "FAIL_MODE": "raise", "SLOW_REFERENCE": "300"})
    report = _show(res)
    assert all(code != 0 for code, _, _ in res), report
    t0 = _failed_at(res[1][1])
    assert res[0][2] - t0 < BOUND_S, report
    assert "rank 0: stopping: rank 1 failed: RuntimeError: injected failure in step 0 on rank 1" in res[0][1], report


@pytest.mark.slow
def test_rank_killed_while_rank_0_computes_the_reference_is_found_by_its_heartbeat(tmp_path):
    res = _launch(_cli(tmp_path), {"FAIL_RANK": "1", "FAIL_STEP": "0", "FAIL_MODE": "kill", "SLOW_REFERENCE": "300",
                                   "ELECSOLVER_HEARTBEAT_TIMEOUT": "5"})
    report = _show(res)
    assert res[1][0] == -signal.SIGKILL and res[0][0] != 0, report
    assert res[0][2] - _failed_at(res[1][1]) < 20, report
    assert "rank 1 failed: stopped responding: no heartbeat for 5 s" in res[0][1], report


@pytest.mark.slow
def test_rank_0_killed_while_others_wait(tmp_path):
    """Rank 0 hosts the store: the others, waiting at a collective, find it gone."""
    res = _launch(_cli(tmp_path), {"FAIL_RANK": "0", "FAIL_STEP": "0", "FAIL_MODE": "kill", "SLOW_REFERENCE": "300"})
    report = _show(res)
    assert res[0][0] == -signal.SIGKILL and res[1][0] != 0, report
    assert res[1][2] - _failed_at(res[0][1]) < BOUND_S, report
    assert "rank 0 failed: died" in res[1][1], report


@pytest.mark.slow
@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_under_mpirun_a_failing_rank_ends_the_job(tmp_path, mode):
    env = _env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "FAIL_RANK": "1",
                "FAIL_STEP": "3", "FAIL_MODE": mode})
    p = subprocess.run([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, str(WORKER), *_cli(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    text = p.stdout + p.stderr
    end = time.time()
    assert p.returncode != 0, text
    assert end - _failed_at(text) < BOUND_S, text
    if mode == "raise":
        assert "RuntimeError: injected failure in step 3 on rank 1" in text, text
    else:  # mpirun ends the job when a rank dies, and says so
        assert "rank 1" in text and ("signal 9" in text or "rank 1 failed" in text), text


@pytest.mark.slow
def test_consecutive_clean_two_rank_runs_exit_0(tmp_path):
    """A few clean 2-rank CLI runs (benchmarks/exit_codes.py runs 50): every rank exits 0, nothing aborts."""
    p = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "exit_codes.py"), "--runs", "5", "--keep",
                        str(tmp_path / "logs")], env=_env({}), capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


# the watchdog's logic, in one process: two watchdogs over one TCP store -------------------------------------
@pytest.fixture
def pair():
    import datetime

    import torch.distributed as dist
    from elecsolver.parallel.failure import Watchdog

    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=10), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, None, False, datetime.timedelta(seconds=10))
    made = []

    def make(rank, store, **kw):
        w = Watchdog(store, rank, 2, store_host=0, interval=0.2, grace=0.5, **kw)
        w._closing.set()  # in a test process: never end the process, only record what was found
        w.start()
        made.append(w)
        return w

    yield server, client, make
    for w in sorted(made, key=lambda w: -w.rank):  # the store host last, once the other has left
        w.retire()
        w.close()


def test_watchdog_names_a_recorded_failure(pair):
    from elecsolver.parallel.failure import RankFailure

    server, client, make = pair
    w0, w1 = make(0, server, heartbeat_timeout=100), make(1, client, heartbeat_timeout=100)
    w1.retire(ValueError("bad input on rank 1\nsecond line"))
    failure = w0.explain(wait=5)
    assert isinstance(failure, RankFailure) and failure.rank == 1
    assert str(failure) == "rank 1 failed: ValueError: bad input on rank 1"


def test_watchdog_finds_a_silent_rank_by_heartbeat(pair):
    server, client, make = pair
    w0, w1 = make(0, server, heartbeat_timeout=1.0), make(1, client, heartbeat_timeout=1.0)
    w1.stop()  # rank 1's heartbeat stops, without a goodbye (as a rank that hangs or whose machine went down)
    deadline = time.monotonic() + 10
    while w0.failure is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert w0.failure is not None and w0.failure.rank == 1, w0.failure
    assert "stopped responding" in w0.failure.reason


def test_watchdog_names_a_rank_that_died_when_a_collective_fails(pair):
    server, client, make = pair
    w0, w1 = make(0, server, heartbeat_timeout=100), make(1, client, heartbeat_timeout=100)
    w1.stop()
    failure = w0.explain(wait=5)
    assert failure is not None and failure.rank == 1 and "died without reporting an error" in failure.reason


def test_a_rank_that_left_is_not_taken_for_dead(pair):
    server, client, make = pair
    w0, w1 = make(0, server, heartbeat_timeout=0.6), make(1, client, heartbeat_timeout=0.6)
    w1.retire()  # a clean goodbye
    assert w0.explain(wait=2) is None
    time.sleep(1.5)
    assert w0.failure is None
