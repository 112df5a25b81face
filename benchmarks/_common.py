"""Helpers shared by the benchmark scripts (imported as a sibling module: run them as scripts)."""

from __future__ import annotations

import platform

__all__ = ["cpu_model", "fmt", "launch_ranks"]


def launch_ranks(cmd: list[str], world: int = 2, timeout: float = 1200) -> list[list[dict]]:
    """Run ``cmd`` as ``world`` ranks on this host, one thread each, and return, per rank, the JSON objects it
    printed one a line (:func:`elecsolver.parallel.calibration.spawn_local`).

    Raises
    ------
    RuntimeError
        With a rank's stderr, if it exits non-zero.
    """
    from elecsolver.parallel.calibration import spawn_local

    return spawn_local(cmd, world, timeout=timeout, threads=1)


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
