"""The neutral in-memory field model: :class:`FieldSet` = sites + named fields + units (+ times, mask).

A FieldSet validates itself on construction and is immutable: its arrays are read-only copies, so
nothing a caller does to its inputs afterwards (or a writer does to the FieldSet) changes it.
Every writer (:mod:`elecsolver.fields.writers`) and metric (:mod:`elecsolver.fields.metrics`)
works on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from .sites import GridSites, MeshSites, Sites, increasing_axis

__all__ = ["FieldSet", "check_matching"]

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEPT_DTYPES = ("float32", "float64", "complex64", "complex128")


def _field_array(name: str, values: Any, shape: tuple[int, ...], dims: list[str]) -> np.ndarray:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(f"field name {name!r} must be an identifier (ASCII letters, digits and '_', "
                         f"not starting with a digit)")
    arr = np.asarray(values)
    if arr.shape != shape:
        raise ValueError(f"fields[{name!r}] must have shape [{', '.join(dims)}] = {list(shape)}, "
                         f"got {list(arr.shape)}")
    if arr.dtype.kind not in "fiuc":
        raise ValueError(f"fields[{name!r}] must be real or complex numbers, got dtype {arr.dtype}")
    if arr.dtype.name in _KEPT_DTYPES:
        dtype = arr.dtype
    else:
        dtype = np.complex128 if arr.dtype.kind == "c" else np.float64
    out = np.array(arr, dtype=dtype, order="C")
    out.flags.writeable = False
    return out


class FieldSet:
    """Named real or complex fields on sites, optionally over times, with units and an optional mask.

    Parameters
    ----------
    sites : GridSites or MeshSites
        Where the values live (SI metres).
    fields : dict of str to array_like
        ``{name: values}``, at least one; each of shape ``(nt, *sites.shape)`` when ``times`` is
        given, else ``sites.shape``.  Names are ASCII identifiers (``Ex``, ``Hz``).  float32,
        float64, complex64 and complex128 are kept; other real dtypes become float64, other complex
        ones complex128.  Stored as read-only C-contiguous copies.
    units : dict of str to str
        A unit string for every field (``"V/m"``) and for every coordinate: ``"x"``, ``"y"``,
        ``"z"`` as the sites have them, which must be ``"m"``, and ``"t"`` = ``"s"`` when times are
        given.  Other keys are dropped.
    times : array_like [nt], optional
        Times in seconds: 1-D, finite, strictly increasing, ``nt >= 1``; stored as float64.  None:
        static (or time-harmonic) fields without a time axis.
    mask : bool array_like of ``sites.shape``, optional
        True where the site lies inside the domain; at least one True.  Metrics ignore sites where
        it is False; writers store it.
    parameters : dict of str to float, optional
        The configuration these fields belong to, for a family of configurations: {parameter name: SI value}
        (e.g. ``{"x0": 0.42, "f": 1.1e9}``), each with its unit in ``units``.  Writers store it.

    Attributes
    ----------
    sites, fields, units, times, mask, parameters
        As given (``fields`` and ``units`` as read-only mappings, in the given order).
    names : tuple of str
        Field names.
    static : bool
        True when there are no times.
    shape : tuple of int
        Shape of every field array, ``(nt, *sites.shape)`` or ``sites.shape``.
    coordinate_names : tuple of str
        Columns of :meth:`points`: ``sites.names`` then ``"t"`` when there are times.

    Raises
    ------
    ValueError
        For sites of another type, no fields, a bad field name, shape or dtype, a missing or wrong
        coordinate unit, bad times, or a mask that is not bool of ``sites.shape`` or is all False.
    """

    def __init__(self, sites: Sites, fields: Mapping[str, Any], units: Mapping[str, str],
                 times: Any = None, mask: Any = None, parameters: Mapping[str, float] | None = None) -> None:
        if not isinstance(sites, (GridSites, MeshSites)):
            raise ValueError(f"sites must be GridSites or MeshSites, got {type(sites).__name__}")
        self._sites = sites
        self._times = None if times is None else increasing_axis("times", times, "s")
        if not isinstance(fields, Mapping) or not fields:
            raise ValueError(f"fields must be a non-empty dict {{name: array [{', '.join(self._dims())}]}}")
        self._fields = {name: _field_array(name, v, self.shape, self._dims()) for name, v in fields.items()}
        self._parameters = self._check_parameters(parameters or {})
        self._units = self._check_units(units)
        self._mask = None if mask is None else self._check_mask(mask)

    # --- validation -------------------------------------------------------------------------------
    def _dims(self) -> list[str]:
        return ([] if self._times is None else ["nt"]) + self._sites.shape_names()

    def _check_parameters(self, parameters: Mapping[str, float]) -> dict[str, float]:
        if not isinstance(parameters, Mapping):
            raise ValueError(f"parameters must be a dict {{name: SI value}}, got {type(parameters).__name__}")
        out = {}
        for name, value in parameters.items():
            if not isinstance(name, str) or not NAME_RE.match(name) or name in self._fields or name in ("x", "y",
                                                                                                       "z", "t"):
                raise ValueError(f"parameter name {name!r} must be an identifier other than the coordinates and "
                                 "the fields")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or \
                    not np.isfinite(value):
                raise ValueError(f"parameters[{name!r}] must be a finite number, got {value!r}")
            out[name] = float(value)
        return out

    def _check_units(self, units: Mapping[str, str]) -> dict[str, str]:
        needed = [*self.coordinate_names, *self._fields, *self._parameters]
        if not isinstance(units, Mapping):
            raise ValueError(f"units must be a dict with a unit string for each of {needed}")
        missing = [k for k in needed if not isinstance(units.get(k), str) or not units.get(k)]
        if missing:
            raise ValueError(f"units must give a unit string for each of {missing} (fields e.g. 'V/m', "
                             f"coordinates 'm', time 's')")
        for key in self.coordinate_names:
            si = "s" if key == "t" else "m"
            if units[key] != si:
                raise ValueError(f"units[{key!r}] must be {si!r} (coordinates are SI), got {units[key]!r}")
        return {k: units[k] for k in needed}

    def _check_mask(self, mask: Any) -> np.ndarray:
        arr = np.asarray(mask)
        if arr.dtype != np.bool_ or arr.shape != self._sites.shape:
            raise ValueError(f"mask must be a bool array of the site shape "
                             f"[{', '.join(self._sites.shape_names())}] = {list(self._sites.shape)}, "
                             f"got {arr.dtype} shape {list(arr.shape)}")
        if not arr.any():
            raise ValueError("mask must be True at one site at least (True = inside the domain)")
        arr = arr.copy()
        arr.flags.writeable = False
        return arr

    # --- properties -------------------------------------------------------------------------------
    @property
    def sites(self) -> Sites:
        return self._sites

    @property
    def fields(self) -> Mapping[str, np.ndarray]:
        return MappingProxyType(self._fields)

    @property
    def parameters(self) -> Mapping[str, float]:
        """The configuration of a family these fields belong to, {name: SI value} (empty otherwise)."""
        return MappingProxyType(self._parameters)

    @property
    def units(self) -> Mapping[str, str]:
        return MappingProxyType(self._units)

    @property
    def times(self) -> np.ndarray | None:
        return self._times

    @property
    def mask(self) -> np.ndarray | None:
        return self._mask

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._fields)

    @property
    def static(self) -> bool:
        return self._times is None

    @property
    def shape(self) -> tuple[int, ...]:
        return self._sites.shape if self._times is None else (self._times.size, *self._sites.shape)

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        return self._sites.names + (() if self._times is None else ("t",))

    def is_complex(self, name: str) -> bool:
        """True if field ``name`` is complex (complex64/complex128); KeyError if there is no such field."""
        return self._fields[name].dtype.kind == "c"

    # --- flat (network) order ---------------------------------------------------------------------
    def points(self) -> np.ndarray:
        """SI coordinates of every (time, site), float64 ``[nt*S, dim(+1)]``.

        Time-major: all sites (in the C order of ``sites.coordinates()``) at ``times[0]``, then
        at ``times[1]``, ...; columns x[, y, z] (m) then t (s) when there are times.  Row
        ``k*S + s`` belongs to ``values[k].ravel()[s]``.  This is the order a network is evaluated
        in; :meth:`from_flat` is the inverse.
        """
        coords = self._sites.coordinates()
        if self._times is None:
            return coords
        nt, s = self._times.size, len(coords)
        return np.column_stack([np.tile(coords, (nt, 1)), np.repeat(self._times, s)])

    @classmethod
    def from_flat(cls, sites: Sites, values: Any, names: Sequence[str], units: Mapping[str, str],
                  times: Any = None, mask: Any = None) -> FieldSet:
        """Build a FieldSet from values in :meth:`points` order, one column per field.

        Parameters
        ----------
        sites : GridSites or MeshSites
            The sites.
        values : array_like [nt*S, c] (or [nt*S] when c = 1)
            Values at ``points()`` rows, e.g. a network's output (a detached CPU tensor works);
            column ``j`` becomes field ``names[j]``, dtype kept as in the constructor.
        names : sequence of str
            ``c`` distinct field names.
        units, times, mask
            As in the constructor.

        Raises
        ------
        ValueError
            If ``values`` does not have ``nt*S`` rows and ``len(names)`` columns, names repeat,
            or the constructor rejects the result.
        """
        names = list(names)
        nt = 1 if times is None else np.size(times)
        arr = np.asarray(values)
        if arr.ndim == 1 and len(names) == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape != (nt * sites.size, len(names)):
            raise ValueError(f"values must have shape [nt*S, len(names)] = {[nt * sites.size, len(names)]}, "
                             f"got {list(arr.shape)}")
        if len(set(names)) != len(names):
            raise ValueError(f"names must be distinct, got {names}")
        shape = sites.shape if times is None else (nt, *sites.shape)
        fields = {name: arr[:, j].reshape(shape) for j, name in enumerate(names)}
        return cls(sites, fields, units, times=times, mask=mask)

    # --- derived FieldSets ------------------------------------------------------------------------
    def _replace(self, fields: Mapping[str, Any], units: Mapping[str, str], times: Any) -> FieldSet:
        return FieldSet(self._sites, fields, {**units, **{k: self._units[k] for k in self._parameters}}, times=times,
                        mask=self._mask, parameters=self._parameters)

    def select_times(self, index: slice | Sequence[int] | np.ndarray | int) -> FieldSet:
        """A new FieldSet with the times ``times[index]`` (a slice, an int or bool index array, or one int).

        Raises
        ------
        ValueError
            If the FieldSet is static, the index is out of range, or selects no time or times
            that are not strictly increasing.
        """
        if self._times is None:
            raise ValueError("select_times needs a time series; this FieldSet is static (times=None)")
        idx = index if isinstance(index, slice) else np.atleast_1d(np.asarray(index))
        try:
            times = self._times[idx]
        except IndexError as exc:
            raise ValueError(f"time index {index!r} does not fit nt={self._times.size}: {exc}") from exc
        if times.size == 0:
            raise ValueError(f"time index {index!r} selects no time")
        return self._replace({n: a[idx] for n, a in self._fields.items()}, self._units, times)

    def window(self, t_max: float | None) -> FieldSet:
        """The times ``<= t_max`` (s); ``None``: this FieldSet itself.

        Raises
        ------
        ValueError
            If ``t_max`` is given for a static FieldSet or no time is ``<= t_max``.
        """
        if t_max is None:
            return self
        if self._times is None:
            raise ValueError("t_max needs a time series; this FieldSet is static (times=None)")
        keep = self._times <= t_max
        if not keep.any():
            raise ValueError(f"no time is <= t_max = {t_max} s (times start at {self._times[0]} s)")
        return self.select_times(keep)

    def with_fields(self, fields: Mapping[str, Any], units: Mapping[str, str] | None = None) -> FieldSet:
        """A new FieldSet with the same sites, times and mask and these fields instead.

        ``units`` defaults to this FieldSet's units; given units are added to (and override) them,
        so only new field names need one.
        """
        return self._replace(fields, {**self._units, **(units or {})}, self._times)

    def __repr__(self) -> str:
        when = "static" if self._times is None else f"{self._times.size} times"
        masked = "" if self._mask is None else f", mask {int(self._mask.sum())}/{self._mask.size}"
        return f"FieldSet({self._sites!r}, {when}, fields {list(self._fields)}{masked})"


def check_matching(a: FieldSet, b: FieldSet, what: str, names: Sequence[str] | None = None) -> None:
    """Raise ValueError unless ``b`` has the sites and times of ``a`` and the fields ``names``.

    Parameters
    ----------
    a, b : FieldSet
        E.g. prediction and reference.
    what : str
        Name of ``b`` in the messages (``"reference"``).
    names : sequence of str, optional
        Field names both must have; default: ``b`` must have exactly ``a``'s names and units.
    """
    if not isinstance(b, FieldSet):
        raise ValueError(f"{what} must be a FieldSet, got {type(b).__name__}")
    if a.sites != b.sites:
        raise ValueError(f"{what} must have the same sites: {a.sites!r} vs {b.sites!r}")
    if b.times is None:
        same_times = a.times is None
    else:
        same_times = a.times is not None and np.array_equal(a.times, b.times)
    if not same_times:
        raise ValueError(f"{what} must have the same times (s) as the fields")
    if names is None:
        if set(a.names) != set(b.names):
            raise ValueError(f"{what} must have the same field names: {list(a.names)}, got {list(b.names)}")
        bad = [n for n in a.names if a.units[n] != b.units[n]]
        if bad:
            raise ValueError(f"{what} must have the same units as the fields; differ for {bad}")
    else:
        missing = [n for n in names if n not in a.fields or n not in b.fields]
        if missing:
            raise ValueError(f"fields {missing} are missing; both have {sorted(set(a.names) & set(b.names))}")
