"""Where field values live: a tensor-product grid (:class:`GridSites`) or mesh nodes (:class:`MeshSites`).

Both validate themselves on construction (one :class:`ValueError` naming what to fix), store their
coordinates as read-only float64 arrays in SI metres, and define

* ``shape`` -- the site shape of a field array (grids: the axes *reversed*, ``(nz, ny, nx)``;
  meshes: ``(M,)``), so a field ``values[..., j, i]`` sits at ``(x[i], y[j])``;
* ``coordinates()`` -- float64 ``[S, dim]`` coordinates of every site in the C order of ``shape``;
* ``names`` -- the coordinate names ``("x",)``, ``("x", "y")`` or ``("x", "y", "z")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Union

import numpy as np

__all__ = ["AXIS_NAMES", "CELL_NODES", "GridSites", "MeshSites", "Sites", "increasing_axis"]

AXIS_NAMES = ("x", "y", "z")
# linear meshio cell types (https://github.com/nschloe/meshio, ``meshio/_common.py``) -> nodes per cell
CELL_NODES = {"vertex": 1, "line": 2, "triangle": 3, "quad": 4, "tetra": 4, "pyramid": 5, "wedge": 6,
              "hexahedron": 8}


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def increasing_axis(what: str, values: Any, unit: str) -> np.ndarray:
    """Check a 1-D, finite, strictly increasing real array with >= 1 value; return a read-only float64 copy.

    Parameters
    ----------
    what : str
        Name used in the error message, e.g. ``"axes['x']"`` or ``"times"``.
    values : array_like
        The values.
    unit : str
        Unit named in the error message (``"m"``, ``"s"``).

    Raises
    ------
    ValueError
        If ``values`` is not such an array.
    """
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size < 1 or arr.dtype.kind not in "fiu":
        raise ValueError(f"{what} must be a 1-D real array ({unit}) with at least 1 value, "
                         f"got {arr.dtype} shape {list(arr.shape)}")
    arr = np.array(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(np.diff(arr) <= 0):
        raise ValueError(f"{what} must be finite and strictly increasing ({unit})")
    return _frozen(arr)


class GridSites:
    """A tensor-product grid in SI metres: 1, 2 or 3 axes named ``x``, ``y``, ``z`` (in that order).

    Parameters
    ----------
    axes : dict of str to array_like
        ``{"x": [nx]}``, ``{"x": [nx], "y": [ny]}`` or ``{"x": [nx], "y": [ny], "z": [nz]}``; each
        1-D, finite, strictly increasing, at least 1 value (the HDF5 and PNG writers need 2 to
        form cells), in metres.  Stored as read-only float64 copies.

    Attributes
    ----------
    axes : mapping of str to ndarray
        The axes, float64 [n] each.
    names : tuple of str
        ``("x",)``, ``("x", "y")`` or ``("x", "y", "z")``.
    dim : int
        Number of axes.
    shape : tuple of int
        Site shape of a field array: the axes reversed, ``(nx,)``, ``(ny, nx)``, ``(nz, ny, nx)``.
    size : int
        Number of sites ``S``.

    Raises
    ------
    ValueError
        If ``axes`` is empty, not named as above, or an axis is not 1-D, finite and strictly increasing.

    Examples
    --------
    >>> g = GridSites({"x": [0.0, 0.1, 0.2], "y": [0.0, 0.5]})
    >>> g.shape
    (2, 3)
    >>> g.coordinates()[4]          # row j*nx + i = 1*3 + 1: (x[1], y[1])
    array([0.1, 0.5])
    """

    kind = "grid"

    def __init__(self, axes: Mapping[str, Any]) -> None:
        if not isinstance(axes, Mapping) or not 1 <= len(axes) <= 3:
            raise ValueError('axes must be a dict with 1 to 3 axes, e.g. {"x": x, "y": y} (m)')
        names = tuple(axes)
        if names != AXIS_NAMES[:len(names)]:
            raise ValueError(f"axes must be named ('x',), ('x', 'y') or ('x', 'y', 'z') in that order, "
                             f"got {names}")
        self._axes = {name: increasing_axis(f"axes[{name!r}]", axes[name], "m") for name in names}

    @property
    def axes(self) -> Mapping[str, np.ndarray]:
        return MappingProxyType(self._axes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._axes)

    @property
    def dim(self) -> int:
        return len(self._axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in reversed(self._axes.values()))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def shape_names(self) -> list[str]:
        """Names of the dimensions of ``shape``, e.g. ``["ny", "nx"]`` (for error messages)."""
        return [f"n{name}" for name in reversed(self.names)]

    def coordinates(self) -> np.ndarray:
        """Coordinates of all sites, float64 ``[S, dim]`` (m), columns x, y[, z], in the C order of ``shape``.

        Row ``j*nx + i`` of a 2-D grid is ``(x[i], y[j])``; of a 3-D grid row ``(k*ny + j)*nx + i``
        is ``(x[i], y[j], z[k])``.
        """
        grids = np.meshgrid(*reversed(list(self._axes.values())), indexing="ij")
        return np.stack([g.ravel() for g in reversed(grids)], axis=1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GridSites):
            return NotImplemented
        return self.names == other.names and all(np.array_equal(self._axes[n], other._axes[n])
                                                  for n in self.names)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GridSites({', '.join(f'{n}: {a.size}' for n, a in self._axes.items())})"


class MeshSites:
    """The nodes of an unstructured mesh, with its cells (meshio cell type names).

    Parameters
    ----------
    points : array_like [M, d]
        Node coordinates in metres, ``d`` = 1, 2 or 3, ``M >= 1``, finite; stored as read-only float64.
    cells : dict of str to int array_like [K, nodes]
        Connectivity per meshio cell type (``"line"``, ``"triangle"``, ``"quad"``, ``"tetra"``,
        ``"hexahedron"``, also ``"vertex"``, ``"pyramid"``, ``"wedge"``): 0-based rows of ``points``,
        ``K >= 1``.  Stored as read-only int64; the order of the dict is kept.

    Attributes
    ----------
    points : ndarray
        float64 [M, d].
    cells : mapping of str to ndarray
        int64 [K, nodes] per cell type.
    names : tuple of str
        Coordinate names, ``("x", "y", "z")[:d]``.
    dim : int
        ``d``.
    shape : tuple of int
        ``(M,)``.
    size : int
        ``M``.

    Raises
    ------
    ValueError
        If points are not a finite real [M, d] array, or a cell block has an unknown type, the
        wrong number of nodes, is empty, is not integer, or has node indices outside ``[0, M)``.
    """

    kind = "mesh"

    def __init__(self, points: Any, cells: Mapping[str, Any]) -> None:
        pts = np.asarray(points)
        if pts.ndim != 2 or pts.shape[1] not in (1, 2, 3) or pts.shape[0] < 1 or pts.dtype.kind not in "fiu":
            raise ValueError(f"points must be a real array [M, d] with d = 1, 2 or 3 and M >= 1 (m), "
                             f"got {pts.dtype} shape {list(pts.shape)}")
        pts = np.array(pts, dtype=np.float64)
        if not np.all(np.isfinite(pts)):
            raise ValueError("points must be finite (m)")
        self._points = _frozen(pts)
        if not isinstance(cells, Mapping) or not cells:
            raise ValueError('cells must be a non-empty dict {cell type: int array [K, nodes]}, '
                             'e.g. {"triangle": tris}')
        self._cells = {ctype: self._check_block(ctype, block, len(pts)) for ctype, block in cells.items()}

    @staticmethod
    def _check_block(ctype: str, block: Any, m: int) -> np.ndarray:
        if ctype not in CELL_NODES:
            raise ValueError(f"unknown cell type {ctype!r}; use one of {sorted(CELL_NODES)}")
        arr, nodes = np.asarray(block), CELL_NODES[ctype]
        if arr.ndim != 2 or arr.shape[1] != nodes or len(arr) == 0 or arr.dtype.kind not in "iu":
            raise ValueError(f"cells[{ctype!r}] must be a non-empty int array [K, {nodes}], "
                             f"got {arr.dtype} shape {list(arr.shape)}")
        if arr.min() < 0 or arr.max() >= m:
            raise ValueError(f"cells[{ctype!r}] node indices must lie in [0, {m}) (0-based rows of points)")
        return _frozen(np.array(arr, dtype=np.int64))

    @property
    def points(self) -> np.ndarray:
        return self._points

    @property
    def cells(self) -> Mapping[str, np.ndarray]:
        return MappingProxyType(self._cells)

    @property
    def names(self) -> tuple[str, ...]:
        return AXIS_NAMES[:self.dim]

    @property
    def dim(self) -> int:
        return self._points.shape[1]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self._points),)

    @property
    def size(self) -> int:
        return len(self._points)

    def shape_names(self) -> list[str]:
        """Names of the dimensions of ``shape``: ``["M"]`` (for error messages)."""
        return ["M"]

    def coordinates(self) -> np.ndarray:
        """The points, float64 ``[M, d]`` (m); a writable copy."""
        return self._points.copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MeshSites):
            return NotImplemented
        return (np.array_equal(self._points, other._points) and self._cells.keys() == other._cells.keys()
                and all(np.array_equal(b, other._cells[t]) for t, b in self._cells.items()))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        blocks = ", ".join(f"{t}: {len(b)}" for t, b in self._cells.items())
        return f"MeshSites({self.size} points in {self.dim}D, {blocks})"


Sites = Union[GridSites, MeshSites]
