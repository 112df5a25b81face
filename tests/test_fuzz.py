"""A fuzzed configuration: for every registered problem, one key of its resolved ``smoke`` configuration (``ci``
shrunk to a few steps on tiny clouds) set to a wrong type, NaN, inf, a negative, zero, a huge value or an empty
list.  Each case either trains and writes a complete output, or exits 2 with one line naming the key and leaves
nothing written, or (a value that makes the training diverge, such as a huge learning rate) exits 1 with the one
line "the loss became nan at step N; lower training.lr": never a traceback, a hang (a time limit per case) or a half-written folder.

Each case runs ``elecsolver.cli.main`` in a process forked from a fork server that imported the package once (a
fresh process per case, a fraction of a second to start), with its memory capped, so that a value that would
allocate without bound or loop for hours fails the case instead of the test session.  The default suite runs
``FUZZ_CASES`` cases; the ``slow`` mark runs more.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from elecsolver.problems import REGISTRY, get_problem_class

FUZZ_CASES = int(os.environ.get("ELECSOLVER_FUZZ_CASES", "40"))  # the slow mark runs 1000
PARALLEL = max(1, min(4, len(os.sched_getaffinity(0))))
CASE_TIMEOUT_S = 120
MEMORY_LIMIT = 8 * 2**30
PROBLEMS = sorted(REGISTRY)

BAD_VALUES = st.one_of(
    st.sampled_from(["abc", "", [], {}, [1, "x"], True, False, None]),  # wrong types and empty lists
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.sampled_from([0, 0.0, -1, -1.0, -0.5, -1e6]),  # zeros and negatives
    st.sampled_from([1e12, 10**12, 1e300, 2**62]),  # huge
)


def _leaves(config: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.extend(_leaves(v, key + "."))
        elif not isinstance(v, dict):
            out.append(key)
    return out


KEYS = {name: _leaves(get_problem_class(name).preset_config("smoke")) for name in PROBLEMS}


def _case(argv: list[str], log: str) -> None:  # in the forked child
    import resource

    import torch

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    torch.set_num_threads(1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from elecsolver.cli import main

    code = main(argv)
    os._exit(code)


@pytest.fixture(scope="module")
def fork_server():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "elecsolver", "elecsolver.cli", "elecsolver.problems",
                                "elecsolver.training.trainer", "elecsolver.export"])
    return ctx


def _start(ctx, tmp: Path, name: str, key: str, value):
    out, log = tmp / "out", tmp / "log.txt"
    argv = ["run", name, "--preset", "smoke", "--quiet", "--set", f"{key}={json.dumps(value)}", "--out", str(out)]
    p = ctx.Process(target=_case, args=(argv, str(log)))
    p.start()
    return p, time.monotonic()


def _verdict(p, tmp: Path, key: str) -> str | None:
    """What went wrong with a finished case, or None if it behaved."""
    out, log = tmp / "out", tmp / "log.txt"
    text = log.read_text() if log.exists() else ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if "Traceback" in text:
        return f"traceback (exit {p.exitcode}): {text[-1500:]}"
    if p.exitcode == 2:
        errors = [ln for ln in lines if ln.startswith("elecsolver: error: ")]
        if len(errors) != 1:
            return f"exit 2 without one error line: {text[-800:]}"
        if key not in errors[0] and key.split(".")[-1] not in errors[0]:
            return f"the message does not name {key}: {errors[0]}"
        if out.exists():
            return f"exit 2 but {out} was written: {sorted(p.name for p in out.iterdir())}"
        return None
    if p.exitcode == 1 and len(lines) == 1 and lines[0].startswith("elecsolver: error: the loss became"):
        return None  # a value that makes the training diverge (a huge learning rate): one line, exit 1
    if p.exitcode == 0:
        missing = [f for f in ("fields.h5", "fields.xdmf", "metrics.json", "convergence.csv", "checkpoint.pt")
                   if not (out / f).is_file()]
        if missing:
            return f"exit 0 but {missing} missing"
        leftovers = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
        if leftovers:
            return f"exit 0 with temporary files left: {leftovers}"
        json.loads((out / "metrics.json").read_text())
        return None
    return f"exit {p.exitcode}: {text[-800:]}"


def _draw_cases(cases: int, n: int) -> list[tuple[str, str, object]]:
    """``cases`` (problem, key, value) triples drawn by hypothesis from seed ``n`` (reproducible)."""
    drawn: list[tuple[str, str, object]] = []

    @seed(n)
    @settings(max_examples=cases, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data):
        name = data.draw(st.sampled_from(PROBLEMS), label="problem")
        key = data.draw(st.sampled_from(KEYS[name]), label="key")
        drawn.append((name, key, data.draw(BAD_VALUES, label="value")))

    draw()
    return drawn


def _run(fork_server, tmp_path_factory, cases: int, n: int):
    """Run the drawn cases, one process per core at a time (each process uses one thread)."""
    pending, running, failures = list(_draw_cases(cases, n)), [], []
    while pending or running:
        while pending and len(running) < PARALLEL:
            name, key, value = pending.pop(0)
            tmp = tmp_path_factory.mktemp("fuzz")
            running.append((*_start(fork_server, tmp, name, key, value), tmp, name, key, value))
        time.sleep(0.02)
        done = [r for r in running if not r[0].is_alive() or time.monotonic() - r[1] > CASE_TIMEOUT_S]
        for r in done:
            running.remove(r)
            p, started, tmp, name, key, value = r
            if p.is_alive():
                p.kill()
                p.join()
                problem = f"hung (over {CASE_TIMEOUT_S} s)"
            else:
                problem = _verdict(p, tmp, key)
            if problem is not None:
                failures.append(f"{name} --set {key}={json.dumps(value)}: {problem}")
    assert not failures, f"{len(failures)} of {cases} cases misbehaved:\n" + "\n".join(failures)


def test_fuzzed_configurations_run_or_are_refused_in_one_line(fork_server, tmp_path_factory):
    _run(fork_server, tmp_path_factory, FUZZ_CASES, 0)


@pytest.mark.slow
def test_more_fuzzed_configurations(fork_server, tmp_path_factory):
    _run(fork_server, tmp_path_factory, 1000, 1)
