"""Helpers shared by the benchmark scripts (imported as a sibling module: run them as scripts)."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess

__all__ = ["cpu_model", "fmt", "launch_ranks"]


def launch_ranks(cmd: list[str], world: int = 2, timeout: float = 1200) -> list[list[dict]]:
    """Run ``cmd`` as ``world`` ranks with torchrun-style variables (MASTER_ADDR/PORT on this host, one thread
    each) and return, per rank, the JSON objects it printed one a line.

    Raises
    ------
    RuntimeError
        With a rank's stderr, if it exits non-zero.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        env = dict(os.environ, OMP_NUM_THREADS="1", RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        if p.returncode:
            raise RuntimeError(err)
        rows.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
    return rows


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt(x, spec: str, missing: str = "n/a") -> str:
    """``format(x, spec)``, or ``missing`` for None."""
    return missing if x is None else format(x, spec)
