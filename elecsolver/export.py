"""Write a finished run (writer rank only): fields.h5 + fields.xdmf, metrics.json, PNG snapshots (unless
``output.png = false``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ._version import __version__
from .fields import write
from .io.atomic import write_json

__all__ = ["export_run", "writes_png"]

log = logging.getLogger(__name__)


def writes_png(config: dict) -> bool:
    """Whether a run of ``config`` writes PNG snapshots: its ``output.png`` (default true)."""
    return bool((config.get("output") or {}).get("png", True))


def export_run(trainer, reference, out_dir: str | os.PathLike, preset: str | None) -> dict:
    """Evaluate the trained network on the output sites and write every output file.

    Parameters
    ----------
    trainer : Trainer
        A trained model with its problem.
    reference : FieldSet or None
        Reference fields on the output sites (SI).
    out_dir : path
        Existing folder; receives fields.h5, fields.xdmf, metrics.json and, unless the configuration's
        ``output.png`` is false, PNG snapshots.
    preset : str or None
        Name recorded in metrics.json.

    Returns
    -------
    dict
        The metrics written to metrics.json: problem, preset, steps, wall_s (training wall time in s),
        points_per_s (collocation points per second of training), rel_l2 {window: {field: error}} (empty
        without a reference), world_size (all ranks), parallel (the strategy's options, empty for data
        parallelism alone), for complex fields time_convention (e.g. "exp(-i omega t)"), and for a family of
        configurations the configuration exported, {parameter: {value, unit, key, range}}.
    """
    problem, out = trainer.problem, Path(out_dir)
    fields = trainer.predict()
    metrics = {
        "problem": problem.name,
        "preset": preset,
        "steps": trainer.step,
        "wall_s": trainer.wall_s,
        "points_per_s": trainer.points_processed / trainer.wall_s if trainer.wall_s > 0 else 0.0,
        "rel_l2": problem.metrics(fields, reference) if reference is not None else {},
        "package_version": __version__,
        "world_size": trainer.ctx.world * trainer.ctx.model_parallel,
        "parallel": trainer.ctx.extra.get("parallel", {}),
        "dtype": trainer.options.dtype,
        "device": str(trainer.device),
    }
    if problem.parameters:  # a family: the configuration exported and scored
        metrics["configuration"] = problem.parameter_record()
    attrs = {"problem": problem.name, "config": problem.config, "scales": problem.scales.as_dict(), "metrics": metrics}
    if problem.time_convention:  # a time-harmonic problem's complex fields: the phasor convention
        attrs["time_convention"] = problem.time_convention
        metrics["time_convention"] = problem.time_convention
    write(fields, out / "fields.h5", reference=reference, attrs=attrs)
    if writes_png(problem.config):
        write(fields, out, reference=reference, format="png")
    write_json(out / "metrics.json", metrics)
    log.info("wrote %s", ", ".join(str(out / n) for n in ("fields.h5", "fields.xdmf", "metrics.json")))
    return metrics
