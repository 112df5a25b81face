"""Shared fixtures: a per-session reference cache and helpers to run the CLI in a subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Keep reference solutions of this test session in one cache (computed once per session)."""
    path = os.environ.get("ELECSOLVER_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    old = os.environ.get("ELECSOLVER_CACHE")
    os.environ["ELECSOLVER_CACHE"] = path
    yield path
    if old is None:
        os.environ.pop("ELECSOLVER_CACHE", None)
    else:
        os.environ["ELECSOLVER_CACHE"] = old


# a CLI run that is checked through fields.h5/metrics.json/checkpoints only: no PNG snapshots (5-9 s a run)
NO_PNG = ("--set", "output.png=false")
# the 2-D point source's output grid cut from 101 x 101 x 41 to 21 x 21 x 6 (each progress log evaluates it)
SMALL_GRID = ("--set", "output.nx=21", "--set", "output.ny=21", "--set", "output.nt=6", "--set", "output.early_frames=3")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    """Run ``elecsolver`` as a new process; returns the CompletedProcess (text output)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if env is None or k not in env:
            full_env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "elecsolver.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_main(*args: str, cwd: Path | None = None):
    """Run ``elecsolver ARGS`` in this process (no interpreter start-up: for bad input, refused before any
    training); returns a CompletedProcess with the exit code and the captured text, as :func:`run_cli` does."""
    import contextlib
    import io

    from elecsolver.cli import main

    out, err, old = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's own refusals
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(["elecsolver", *args], code, out.getvalue(), err.getvalue())


def assert_jets_equal_autograd(problem, net, rel: float, seed: int = 4, device: str = "cpu") -> None:
    """Every loss term of ``problem`` has the same residual through jets and through nested autograd, within
    ``rel`` of the largest residual (float64 network ``net``, on ``device`` with the points)."""
    import torch

    from elecsolver.training.loss import constraint_residual

    for c in problem.constraints():
        cloud = c.sample(seed, 1.0)
        pts = torch.as_tensor(cloud.points, device=device)
        nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals, device=device)
        r_jet = constraint_residual(net, c, pts, nrm, problem.inputs, problem.outputs, "jet").detach()
        r_ad = constraint_residual(net, c, pts, nrm, problem.inputs, problem.outputs, "autograd").detach()
        assert float((r_jet - r_ad).abs().max()) <= rel * float(r_ad.abs().max()), c.name
