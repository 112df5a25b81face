"""TensorBoard logging of a run (``training.tensorboard = true``): on the writer rank, into ``OUT/tb``.

At every logged step (``training.log_every``) the row that goes into ``convergence.csv`` goes to TensorBoard too,
one scalar per column (``loss``, ``loss_<term>``, ``lr``, ``weight_<term>``, ``rel_l2_<field>``, ``wall_s``; tags as
the columns are named), at the same global step, and the fields at the last output time, one image per field.  Read
it with ``tensorboard --logdir OUT/tb``.  The writer is :class:`torch.utils.tensorboard.SummaryWriter` (the
``tensorboard`` package: ``pip install elecsolver[tensorboard]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ConfigError

__all__ = ["TensorBoardLog", "field_image"]


def field_image(values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray | None:
    """An RGB image ``[H, W, 3]`` uint8 of one field snapshot ``values`` (``(ny, nx)``; of ``(nz, ny, nx)`` the
    middle z plane; a complex field's real part), y up, on a diverging colour map symmetric about zero (white 0);
    sites outside the domain (``mask`` False) grey.  None for a 1-D field (no image)."""
    import matplotlib

    v = np.asarray(values)
    v = v.real if np.iscomplexobj(v) else v
    m = None if mask is None else np.asarray(mask, bool)
    if v.ndim == 3:
        v = v[v.shape[0] // 2]
        m = None if m is None else m[m.shape[0] // 2]
    if v.ndim != 2:
        return None
    v = np.where(m, v, 0.0) if m is not None else v
    peak = float(np.max(np.abs(v))) or 1.0
    rgb = matplotlib.colormaps["RdBu_r"](0.5 + 0.5 * v / peak)[..., :3]
    if m is not None:
        rgb[~m] = 0.6
    return (255 * rgb[::-1]).astype(np.uint8)  # row 0 is the top: the largest y


class TensorBoardLog:
    """Scalars and field images of a run in ``folder`` (created), as TensorBoard event files.

    Raises
    ------
    ConfigError
        If the ``tensorboard`` package is not installed (the message says what to install).
    """

    def __init__(self, folder: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch raises it when the tensorboard package is missing
            raise ConfigError("training.tensorboard = true needs the tensorboard package: pip install tensorboard "
                              "(or elecsolver[tensorboard]); or set training.tensorboard = false") from None
        self.writer = SummaryWriter(log_dir=str(folder))

    def scalars(self, row: dict) -> None:
        """Every numeric column of a ``convergence.csv`` row but ``step``, at ``row["step"]``."""
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)):
                self.writer.add_scalar(key, float(value), step)

    def images(self, fields, step: int) -> None:
        """One image per field of the FieldSet ``fields``: the last time (a static field as it is)."""
        for name in fields.names:
            values = fields.fields[name]
            image = field_image(values if fields.static else values[-1], fields.mask)
            if image is not None:
                self.writer.add_image(f"fields/{name}", image, int(step), dataformats="HWC")

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
