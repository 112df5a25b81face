"""On-disk cache of reference solutions, keyed by a hash of what determines them.

A reference is computed once per (configuration, package version) and stored as an ``.npz`` file
under ``$ELECSOLVER_CACHE`` (default ``~/.cache/elecsolver``), written to a temporary name and
renamed, so a reader never sees half a file.  Only one rank computes and writes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .._version import __version__
from ..config import config_hash
from ..io.atomic import atomic_path

__all__ = ["cache_dir", "cached_arrays"]

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The cache folder: ``$ELECSOLVER_CACHE`` or ``~/.cache/elecsolver``."""
    return Path(os.environ.get("ELECSOLVER_CACHE", Path.home() / ".cache" / "elecsolver"))


def cached_arrays(kind: str, key: dict, compute: Callable[[], dict[str, np.ndarray]],
                  directory: Path | None = None) -> dict[str, np.ndarray]:
    """Load the arrays stored for ``key`` or compute, store and return them.

    Parameters
    ----------
    kind : str
        A label that becomes part of the file name (e.g. "fdtd-te").
    key : dict
        JSON-serialisable description of everything the result depends on; the package version
        is added to it.
    compute : callable
        Returns a dict of numpy arrays.
    directory : Path, optional
        Defaults to :func:`cache_dir`.
    """
    directory = Path(directory) if directory is not None else cache_dir()
    path = directory / f"{kind}-{config_hash({'key': key, 'version': __version__})}.npz"
    if path.exists():
        try:
            with np.load(path) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:  # a damaged cache entry is recomputed, not trusted
            log.warning("ignoring unreadable cache entry %s (%s)", path, exc)
    log.info("computing %s reference (cached afterwards in %s)", kind, path)
    arrays = compute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    except OSError as exc:
        log.warning("could not cache the reference in %s (%s); continuing without", directory, exc)
    return arrays
