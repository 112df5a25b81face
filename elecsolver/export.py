"""Write a finished run: fields.h5 + fields.xdmf, metrics.json, PNG snapshots (rank 0 only)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from . import __version__
from .io.hdf5 import write_fields
from .io.snapshots import write_snapshots
from .trainer import Trainer

__all__ = ["export_run", "write_json_atomic"]

log = logging.getLogger(__name__)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as indented JSON under a temporary name, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_run(trainer: Trainer, reference: dict[str, np.ndarray], out_dir: str | os.PathLike,
               preset: str | None) -> dict:
    """Evaluate the trained network on the output grid and write every output file.

    Parameters
    ----------
    trainer : Trainer
        A trained model with its problem.
    reference : dict
        Reference fields on the output grid (SI, each [nt, ny, nx]).
    out_dir : path
        Existing folder; receives fields.h5, fields.xdmf, metrics.json and PNG snapshots.
    preset : str or None
        Name recorded in metrics.json.

    Returns
    -------
    dict
        The metrics written to metrics.json: problem, preset, steps, wall_s (training wall time in
        s), points_per_s (collocation points per second of training), rel_l2 {window: {field}}.
    """
    problem, out = trainer.problem, Path(out_dir)
    fields = trainer.predict()
    metrics = {
        "problem": problem.name,
        "preset": preset,
        "steps": trainer.step,
        "wall_s": trainer.wall_s,
        "points_per_s": trainer.points_processed / trainer.wall_s if trainer.wall_s > 0 else 0.0,
        "rel_l2": problem.metrics(fields, reference),
        "package_version": __version__,
        "world_size": trainer.comm.world,
        "dtype": trainer.cfg["dtype"],
        "device": str(trainer.device),
    }
    coords = problem.output_coords()
    write_fields(out / "fields.h5", coords=coords, fields=fields, reference=reference, units=problem.units,
                 attrs={"problem": problem.name, "config": problem.config, "scales": problem.scales(),
                        "metrics": metrics})
    write_snapshots(out, x=coords["x"], y=coords["y"], t=coords.get("t"), fields=fields, reference=reference,
                    units=problem.units)
    write_json_atomic(out / "metrics.json", metrics)
    log.info("wrote %s", ", ".join(str(out / n) for n in ("fields.h5", "fields.xdmf", "metrics.json")))
    return metrics
