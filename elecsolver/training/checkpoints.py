"""Checkpoints: reading one back, and refusing one that does not belong to the run (another package version,
configuration or parallel layout).  :meth:`Trainer.save_checkpoint <elecsolver.training.trainer.Trainer.
save_checkpoint>` writes them."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from .context import RunContext

__all__ = ["RESUME_PARALLEL_KEYS", "ResumeError", "check_parallel", "config_differences", "parallel_differences",
           "read_checkpoint"]


class ResumeError(ValueError):
    """A checkpoint that does not belong to this run (other configuration or package version)."""


def read_checkpoint(path: Path) -> dict:
    """The state in a checkpoint file, on the host (random-number states must stay CPU tensors).

    Raises
    ------
    ResumeError
        If the file is truncated, corrupted or not a checkpoint of this package (the message names the file).
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError, AttributeError, KeyError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ResumeError(f"--resume: cannot read the checkpoint {path} ({reason}): it is truncated or corrupted; "
                          "start a fresh run (or restore the file)") from None
    if not (isinstance(state, dict) and {"package_version", "config", "model", "step"} <= state.keys()):
        raise ResumeError(f"--resume: {path} is not an elecsolver checkpoint; start a fresh run")
    return state


# the parallel options a resume must keep: the model's split (tp, pp), how the points are shared (dp) and cut
# (microbatches), and what the optimizer state and loss scaler hold (zero, precision); schedule and recompute change
# neither the numbers nor the state
RESUME_PARALLEL_KEYS = ("dp", "tp", "pp", "microbatches", "zero", "precision")


def parallel_differences(state: dict, ctx: RunContext) -> list[str]:
    """Each of :data:`RESUME_PARALLEL_KEYS` on which the checkpoint ``state`` and the run's context differ, as
    ``"zero False -> True"`` (none when either lacks the options)."""
    mine, theirs = ctx.extra.get("parallel"), state.get("parallel")
    if mine is None or theirs is None:
        return []
    return [f"{k} {theirs.get(k)!r} -> {mine.get(k)!r}" for k in RESUME_PARALLEL_KEYS if theirs.get(k) != mine.get(k)]


def check_parallel(state: dict, ctx: RunContext) -> None:
    """Refuse to resume a checkpoint written under other parallel options (:data:`RESUME_PARALLEL_KEYS`); those of
    the run are in ``ctx.extra["parallel"]`` (``elecsolver.parallel.apply_parallelism``), the checkpoint's under
    "parallel" (absent from a run built without it: then only the layout is compared).

    Raises
    ------
    ResumeError
        Naming each option that differs, with both values.
    """
    diff = parallel_differences(state, ctx)
    if diff:
        raise ResumeError(f"--resume: the checkpoint was written under other parallel options ({', '.join(diff)}); "
                          "resume with the same [parallel] section or flags (its OUT/config.toml has them)")
    shards = [(lay or {}).get("tp", 1) * 100 + (lay or {}).get("pp", 1) for lay in (state.get("layout"),
                                                                                   ctx.extra.get("layout"))]
    if shards[0] != shards[1]:  # a checkpoint holds one shard of a model split differently
        raise ResumeError(f"--resume: the checkpoint was written with the parallel layout {state.get('layout')}, "
                          f"this run has {ctx.extra.get('layout')}; resume with the same --tp and --pp")


def config_differences(a, b, prefix: str = "") -> list[str]:
    """The dotted keys on which two configurations (nested dicts) differ, sorted."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += config_differences(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]
