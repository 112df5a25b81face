"""The registry of :class:`~elecsolver.fields.FieldSet` writers; :func:`write` picks one by format or suffix.

Built in (see each module's docstring for the file layout):

========  ==================  ==============================================================
format    suffixes            writes
========  ==================  ==============================================================
hdf5      ``.h5``, ``.hdf5``  ``path`` + XDMF 3 sidecar ``path.with_suffix(".xdmf")``
                              (:mod:`elecsolver.fields.hdf5`, schema version 2)
csv       ``.csv``            one row per (time, site) (:mod:`elecsolver.fields.table`)
png       (none)              snapshots into the *folder* ``path``; pass ``format="png"``
                              (:mod:`elecsolver.fields.png`)
========  ==================  ==============================================================

A writer is a function ``f(fieldset, path, *, reference, attrs) -> list[pathlib.Path]`` that
writes every file through :func:`elecsolver.io.atomic.atomic_path` and validates everything before
writing anything.  :func:`write` checks the common arguments (a FieldSet, a matching reference)
before calling it.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .fieldset import FieldSet, check_matching
from .hdf5 import SUFFIXES as _H5_SUFFIXES
from .hdf5 import read_hdf5, write_hdf5
from .png import write_png
from .table import write_csv

__all__ = ["Writer", "WriterFunction", "read", "register_writer", "registered_writers", "write"]

WriterFunction = Callable[..., list[pathlib.Path]]


@dataclass(frozen=True)
class Writer:
    """A registered writer: its format name, the file suffixes it claims, and the function."""

    name: str
    suffixes: tuple[str, ...]
    function: WriterFunction


_REGISTRY: dict[str, Writer] = {}


def register_writer(name: str, suffixes: Sequence[str], function: WriterFunction, *,
                    replace: bool = False) -> Writer:
    """Register ``function`` as the writer of format ``name`` for paths ending with ``suffixes``.

    Parameters
    ----------
    name : str
        Format name, e.g. ``"vtu"`` (what ``write(..., format=name)`` selects).
    suffixes : sequence of str
        Suffixes with the dot, e.g. ``[".vtu"]`` (matched case-insensitively); may be empty (then
        the format must be named).
    function : callable
        ``function(fieldset, path, *, reference, attrs) -> list[pathlib.Path]``.
    replace : bool, optional
        Allow replacing a writer of the same name.

    Returns
    -------
    Writer
        The registered entry.

    Raises
    ------
    ValueError
        If the name is empty or taken (and not ``replace``), a suffix does not start with ``.`` or
        is claimed by another format, or ``function`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"the format name must be a non-empty str, got {name!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"format {name!r} is already registered; pass replace=True to replace it")
    if not callable(function):
        raise ValueError(f"the writer of {name!r} must be callable, got {type(function).__name__}")
    suffixes = tuple(s.lower() for s in ([suffixes] if isinstance(suffixes, str) else suffixes))
    for suffix in suffixes:
        if not suffix.startswith(".") or len(suffix) < 2:
            raise ValueError(f"suffixes must look like '.csv', got {suffix!r}")
        owner = next((w.name for w in _REGISTRY.values() if suffix in w.suffixes and w.name != name), None)
        if owner is not None:
            raise ValueError(f"suffix {suffix!r} already belongs to format {owner!r}")
    entry = Writer(name, suffixes, function)
    _REGISTRY[name] = entry
    return entry


def registered_writers() -> Mapping[str, Writer]:
    """The registered writers by format name (a read-only view)."""
    return MappingProxyType(_REGISTRY)


def _known() -> str:
    return ", ".join(f"{w.name} ({' '.join(w.suffixes) or 'format= only'})" for w in _REGISTRY.values())


def _writer_for(path: pathlib.Path, format: str | None) -> Writer:
    if format is not None:
        if format not in _REGISTRY:
            raise ValueError(f"unknown format {format!r}; registered: {_known()}")
        return _REGISTRY[format]
    suffix = path.suffix.lower()
    for entry in _REGISTRY.values():
        if suffix and suffix in entry.suffixes:
            return entry
    raise ValueError(f"no writer for the suffix {suffix or '(none)'!r} of {str(path)!r}; give format= or "
                     f"use a registered one: {_known()}")


def write(fieldset: FieldSet, path: str | os.PathLike, *, reference: FieldSet | None = None,
          attrs: Mapping[str, Any] | None = None, format: str | None = None) -> list[pathlib.Path]:
    """Write ``fieldset`` with the writer of ``format`` (default: chosen by the suffix of ``path``).

    Parameters
    ----------
    fieldset : FieldSet
        The fields.
    path : str or os.PathLike
        Destination file (``.h5``, ``.csv``, ...) or, for ``format="png"``, folder.
    reference : FieldSet, optional
        Reference solution: same sites, times, field names and units.
    attrs : dict, optional
        Metadata (HDF5 root attributes; CSV and PNG ignore it).
    format : str, optional
        A registered format name (:func:`registered_writers`).

    Returns
    -------
    list of pathlib.Path
        Every file written.

    Raises
    ------
    ValueError
        For an unknown format or suffix (the message lists the registered ones), a ``fieldset``
        that is not a FieldSet, a reference that does not match, or what the writer rejects;
        nothing is written then.
    OSError
        If writing fails; no partial files remain.
    """
    if not isinstance(fieldset, FieldSet):
        raise ValueError(f"fieldset must be a FieldSet, got {type(fieldset).__name__}")
    path = pathlib.Path(path)
    entry = _writer_for(path, format)
    if reference is not None:
        check_matching(fieldset, reference, "reference")
    return entry.function(fieldset, path, reference=reference, attrs=attrs)


def read(path: str | os.PathLike) -> dict[str, Any]:
    """Read an HDF5 file written by the ``hdf5`` writer: ``{"fieldset", "reference", "attrs"}``.

    See :func:`elecsolver.fields.hdf5.read_hdf5` (also reads schema version 1).

    Raises
    ------
    ValueError
        If ``path`` does not end with .h5/.hdf5 or is not an elecsolver output file.
    FileNotFoundError
        If it does not exist.
    """
    path = pathlib.Path(path)
    if path.suffix.lower() not in _H5_SUFFIXES:
        raise ValueError(f"read() reads HDF5 files (.h5, .hdf5) only, got {str(path)!r}")
    return read_hdf5(path)


register_writer("hdf5", _H5_SUFFIXES, write_hdf5)
register_writer("csv", (".csv",), write_csv)
register_writer("png", (), write_png)
