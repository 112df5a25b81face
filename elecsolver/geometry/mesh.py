"""Domains given by a simplex mesh (triangles in 2D, tetrahedra in 3D), read with meshio.

:meth:`MeshDomain.from_file` reads any format meshio reads (gmsh .msh 2.2 and 4.1 in ASCII or
binary, .vtu, .xdmf, ...).  The domain is the cells of one physical group (gmsh: a name in
``mesh.field_data`` with the ids in the ``"gmsh:physical"`` cell data) or all cells; boundary parts
are the facets (lines in 2D, triangles in 3D) of named groups and their names become the tags.  For
formats without group names, groups are chosen by integer id in a named cell-data array
(``cell_data_key``) and the tags are the ids as strings (or names the caller gives).

Sampling: interior points choose a cell with probability proportional to its measure, then uniform
barycentric coordinates (triangles: the square-root map of Osada et al., ACM Trans. Graph. 21 (2002)
807, eq. 1; tetrahedra: spacings of three sorted uniforms, a flat Dirichlet(1, 1, 1, 1) draw, Devroye,
Non-Uniform Random Variate Generation (1986), ch. V.2);
boundary points choose a facet by measure and a uniform point on it.  Each facet's normal is
oriented away from the centroid of the domain cell it belongs to.  Second-order cells (triangle6,
tetra10) are used through their corner nodes (straight-sided).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from ..sampling import derive_seed, unit_samples
from .base import Domain, check_points

__all__ = ["MeshDomain"]

_CELL_TYPES = {2: ("triangle", "triangle6", "triangle7"), 3: ("tetra", "tetra10")}
_FACET_TYPES = {2: ("line", "line3"), 3: ("triangle", "triangle6", "triangle7")}
_CORNERS = {2: 3, 3: 4}


def _simplex_measure(v: np.ndarray) -> np.ndarray:
    """Measure of simplices v [M, k+1, d] (k = 1 length, 2 area, 3 volume)."""
    e = v[:, 1:] - v[:, :1]
    k = e.shape[1]
    if k == 1:
        return np.linalg.norm(e[:, 0], axis=1)
    if k == 2:
        if v.shape[2] == 2:
            return 0.5 * np.abs(e[:, 0, 0] * e[:, 1, 1] - e[:, 0, 1] * e[:, 1, 0])
        return 0.5 * np.linalg.norm(np.cross(e[:, 0], e[:, 1]), axis=1)
    return np.abs(np.linalg.det(e)) / 6.0


class MeshDomain(Domain):
    """A domain made of simplex cells, with tagged boundary facets.

    Parameters
    ----------
    points : array [P, d]
        Node coordinates (m), d = 2 or 3.
    cells : int array [C, d + 1]
        Node indices of the triangles (2D) or tetrahedra (3D) of the domain.
    facets : mapping str -> int array [F, d]
        Boundary parts: tag -> node indices of its lines (2D) or triangles (3D).
    source : str, optional
        Where the mesh came from (used in messages).

    Raises
    ------
    ValueError
        For bad shapes, indices out of range, no cells, degenerate (zero-measure) cells, or a
        facet that is not a face of any cell (its outward side would be unknown).
    """

    def __init__(self, points, cells, facets: Mapping[str, np.ndarray] | None = None, source: str | None = None):
        where = f" in {source!r}" if source else ""
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] not in (2, 3):
            raise ValueError(f"mesh points{where} must be [P, 2] or [P, 3], got shape {list(pts.shape)}")
        if not np.all(np.isfinite(pts)):
            raise ValueError(f"mesh points{where} must be finite")
        d = pts.shape[1]
        cells = np.asarray(cells)
        if cells.ndim != 2 or cells.shape[1] != d + 1 or cells.dtype.kind not in "iu":
            raise ValueError(f"cells{where} must be an int array [C, {d + 1}] for a {d}D mesh, "
                             f"got {cells.dtype} {list(cells.shape)}")
        if len(cells) == 0:
            raise ValueError(f"the mesh{where} has no {'triangles' if d == 2 else 'tetrahedra'} in the domain")
        if cells.min() < 0 or cells.max() >= len(pts):
            raise ValueError(f"cell node indices{where} must lie in [0, {len(pts)})")
        self.dim = d
        self.source = source
        self.points = pts
        self.cells = cells.astype(np.int64)
        verts = pts[self.cells]
        self.cell_measure = _simplex_measure(verts)
        if np.any(self.cell_measure <= 0):
            bad = np.flatnonzero(self.cell_measure <= 0)
            raise ValueError(f"{len(bad)} cells{where} have zero measure (e.g. cell {int(bad[0])}); fix the mesh")
        self._centroids = verts.mean(axis=1)
        self._lo, self._hi = verts.reshape(-1, d).min(0), verts.reshape(-1, d).max(0)
        # affine maps to barycentric coordinates: lambda[1:] = inv(E) (x - v0)
        self._inv = np.linalg.inv(np.transpose(verts[:, 1:] - verts[:, :1], (0, 2, 1)))
        self._clo, self._chi = verts.min(axis=1), verts.max(axis=1)
        self.facets: dict[str, np.ndarray] = {}
        self._facet_normals: dict[str, np.ndarray] = {}
        self._facet_measure: dict[str, np.ndarray] = {}
        for tag, f in (facets or {}).items():
            self._add_facets(str(tag), np.asarray(f), where)

    def _add_facets(self, tag: str, f: np.ndarray, where: str) -> None:
        d = self.dim
        if f.ndim != 2 or f.shape[1] != d or f.dtype.kind not in "iu":
            raise ValueError(f"facets of {tag!r}{where} must be an int array [F, {d}], got {f.dtype} {list(f.shape)}")
        if len(f) and (f.min() < 0 or f.max() >= len(self.points)):
            raise ValueError(f"facet node indices of {tag!r}{where} must lie in [0, {len(self.points)})")
        f = f.astype(np.int64)
        # owner cell of each facet: match sorted node tuples against all faces of all cells
        nc = len(self.cells)
        faces = np.concatenate([np.delete(self.cells, j, axis=1) for j in range(d + 1)])
        owner = np.tile(np.arange(nc), d + 1)
        keys = np.sort(np.concatenate([faces, f]), axis=1)
        _, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        cell_of_key = np.full(inv.max() + 1, -1, dtype=np.int64)
        cell_of_key[inv[: len(faces)]] = owner
        own = cell_of_key[inv[len(faces):]]
        if np.any(own < 0):
            bad = int(np.flatnonzero(own < 0)[0])
            raise ValueError(f"{int((own < 0).sum())} facets of boundary part {tag!r}{where} (e.g. nodes "
                             f"{f[bad].tolist()}) are not faces of any domain cell; choose boundary groups "
                             "that bound the domain group")
        v = self.points[f]
        if d == 2:
            t = v[:, 1] - v[:, 0]
            nrm = np.column_stack([t[:, 1], -t[:, 0]])
        else:
            nrm = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
        meas = _simplex_measure(v)
        if np.any(meas <= 0):
            raise ValueError(f"boundary part {tag!r}{where} has facets of zero measure; fix the mesh")
        nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
        away = np.einsum("ij,ij->i", nrm, v.mean(axis=1) - self._centroids[own])
        nrm[away < 0] *= -1
        self.facets[tag] = f
        self._facet_normals[tag] = nrm
        self._facet_measure[tag] = meas

    def __repr__(self) -> str:
        return (f"MeshDomain({self.dim}D, {len(self.cells)} cells, boundary parts {list(self.facets)}"
                + (f", from {self.source!r})" if self.source else ")"))

    # reading ----------------------------------------------------------------------------
    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike,
        domain_group: str | int | None = None,
        boundary_groups: Sequence[str | int] | Mapping[str, int] | None = None,
        cell_data_key: str | None = None,
    ) -> MeshDomain:
        """Read a mesh file with meshio.

        Parameters
        ----------
        path : str or path
            Any file meshio reads (.msh 2.2/4.1 ASCII or binary, .vtu, .xdmf, ...).
        domain_group : str or int, optional
            The physical group whose cells form the domain: a gmsh physical name, or an integer id
            in the cell-data array ``cell_data_key``.  Default: all triangles (2D) / tetrahedra (3D).
        boundary_groups : sequence of str or int, or mapping tag -> int, optional
            Boundary parts.  Names are gmsh physical names (they become the tags); ints are ids in
            ``cell_data_key`` (tag: the id as a string); a mapping names ids.  Default: every named
            gmsh physical group of dimension d - 1, or none for formats without names.
        cell_data_key : str, optional
            Cell-data array holding the group ids; default ``"gmsh:physical"`` when present.

        Returns
        -------
        MeshDomain
            2D if the file has triangles but no tetrahedra (z dropped), 3D if it has tetrahedra.

        Raises
        ------
        ValueError
            One error naming the file for an unreadable or malformed file (meshio's exceptions,
            including a ``SystemExit`` from its XDMF reader, are converted), a missing group, name or
            cell-data array, or a mesh without triangles/tetrahedra.
        """
        import meshio

        name = os.fspath(path)
        said = io.StringIO()  # meshio prints its readers' complaints before it exits: they go into our one error
        try:
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                try:
                    mesh = meshio.read(name)
                except ValueError as exc:
                    if "gmsh:physical" not in str(exc) or not _MESHIO_PATCHABLE:
                        raise
                    mesh = _read_gmsh41_partial_groups(name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 (meshio raises many types and may sys.exit() on bad XDMF)
            msg = str(exc) or type(exc).__name__
            if isinstance(exc, SystemExit):
                told = "; ".join(line.strip() for line in said.getvalue().splitlines() if line.strip())
                msg = f"meshio could not parse it ({told or f'it exited with status {exc.code}'})"
            raise ValueError(f"cannot read mesh file {name!r}: {msg}") from None
        try:
            return cls._from_meshio(mesh, name, domain_group, boundary_groups, cell_data_key)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 (malformed content that meshio accepted)
            raise ValueError(f"malformed mesh file {name!r}: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_meshio(cls, mesh, name, domain_group, boundary_groups, cell_data_key) -> MeshDomain:
        types = {b.type for b in mesh.cells}
        if types & set(_CELL_TYPES[3]):
            d = 3
        elif types & set(_CELL_TYPES[2]):
            d = 2
        else:
            raise ValueError(f"mesh file {name!r} has no triangles or tetrahedra (cell types: {sorted(types)})")
        pts = np.asarray(mesh.points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] < d:
            raise ValueError(f"mesh file {name!r} has {pts.shape[1] if pts.ndim == 2 else '?'}D points "
                             f"but {d}D cells")
        if d == 2 and pts.shape[1] == 3 and np.any(pts[:, 2] != pts[0, 2]):
            raise ValueError(f"mesh file {name!r} has triangles that are not in a plane z = const; a 2D "
                             "domain needs a planar mesh")
        pts = pts[:, :d]

        field_data = {str(k): np.asarray(v).reshape(-1) for k, v in (mesh.field_data or {}).items()}
        key = cell_data_key
        if key is None and "gmsh:physical" in mesh.cell_data:
            key = "gmsh:physical"
        needs_ids = domain_group is not None or boundary_groups is not None
        if key is not None and key not in mesh.cell_data:
            raise ValueError(f"mesh file {name!r} has no cell-data array {key!r}; it has "
                             f"{sorted(mesh.cell_data)}")
        if needs_ids and key is None:
            raise ValueError(f"mesh file {name!r} has no 'gmsh:physical' cell data; pass cell_data_key, "
                             f"one of {sorted(mesh.cell_data)}")

        def group_id(group, want_dim: int) -> int:
            if isinstance(group, (int, np.integer)) and not isinstance(group, bool):
                return int(group)
            if isinstance(group, str):
                if group not in field_data:
                    named = sorted(k for k, v in field_data.items() if len(v) > 1 and int(v[1]) == want_dim)
                    raise ValueError(f"mesh file {name!r} has no physical group named {group!r}; "
                                     f"its {want_dim}D groups are {named}")
                v = field_data[group]
                if len(v) > 1 and int(v[1]) != want_dim:
                    raise ValueError(f"physical group {group!r} in {name!r} is {int(v[1])}D, need {want_dim}D")
                return int(v[0])
            raise ValueError(f"a group must be a physical name (str) or id (int), got {group!r}")

        def gather(kinds, gid):
            out = []
            for i, block in enumerate(mesh.cells):
                if block.type not in kinds:
                    continue
                width = d + 1 if kinds is _CELL_TYPES[d] else d
                if block.data.ndim != 2 or block.data.shape[1] < width:
                    raise ValueError(f"malformed mesh file {name!r}: its {block.type} block has shape "
                                     f"{list(block.data.shape)}, need {width} nodes per cell (truncated file?)")
                data = block.data[:, :width]
                if gid is not None:
                    ids = np.asarray(mesh.cell_data[key][i]).reshape(-1)
                    data = data[ids == gid]
                out.append(data)
            width = d + 1 if kinds is _CELL_TYPES[d] else d
            return np.concatenate(out).astype(np.int64) if out else np.zeros((0, width), dtype=np.int64)

        dom_id = None if domain_group is None else group_id(domain_group, d)
        cells = gather(_CELL_TYPES[d], dom_id)
        if len(cells) == 0:
            what = "cells" if domain_group is None else f"cells in group {domain_group!r}"
            raise ValueError(f"mesh file {name!r} has no {d}D {what}")

        if boundary_groups is None:
            groups = {k: int(v[0]) for k, v in field_data.items() if len(v) > 1 and int(v[1]) == d - 1}
        elif isinstance(boundary_groups, Mapping):
            groups = {str(k): group_id(v, d - 1) for k, v in boundary_groups.items()}
        elif isinstance(boundary_groups, (str, int, np.integer)):
            raise ValueError("boundary_groups must be a list of names/ids or a mapping tag -> id, "
                             f"got {boundary_groups!r}")
        else:
            groups = {str(g): group_id(g, d - 1) for g in boundary_groups}
        facets = {}
        for tag, gid in groups.items():
            f = gather(_FACET_TYPES[d], gid) if key is not None else np.zeros((0, d), dtype=np.int64)
            if len(f) == 0 and boundary_groups is not None:
                raise ValueError(f"boundary group {tag!r} in {name!r} has no {'lines' if d == 2 else 'triangles'}")
            if len(f):
                facets[tag] = f
        return cls(pts, cells, facets, source=name)

    # geometry ---------------------------------------------------------------------------
    def bbox(self):
        return self._lo.copy(), self._hi.copy()

    def measure(self) -> float:
        return float(self.cell_measure.sum())

    def boundary_tags(self):
        return tuple(self.facets)

    def boundary_measure(self, tags=None) -> float:
        return float(sum(self._facet_measure[t].sum() for t in self.select_tags(tags)))

    def locate(self, points, tol: float = 1e-12) -> np.ndarray:
        """Index of a cell containing each point, int64 [N], -1 where none.

        Barycentric test with a per-cell bounding-box prefilter, vectorised in blocks.  A point on
        a face shared by two cells gets either one.

        Parameters
        ----------
        points : array [N, d]
        tol : float
            Barycentric coordinates down to -tol count as inside (relative, dimensionless).

        Raises
        ------
        ValueError
            If ``points`` is not [N, d].
        """
        pts = check_points(points, self.dim).astype(np.float64)
        out = np.full(len(pts), -1, dtype=np.int64)
        if len(pts) == 0:
            return out
        pad = tol * max(self.size(), 1e-300)
        cand = np.flatnonzero(np.all((pts >= self._lo - pad) & (pts <= self._hi + pad), axis=1))
        nc = len(self.cells)
        block_p = max(1, 2_000_000 // max(nc, 1))
        for s in range(0, len(cand), block_p):
            idx = cand[s : s + block_p]
            p = pts[idx]
            hit_p, hit_c = np.nonzero(
                np.all((p[:, None, :] >= self._clo[None] - pad) & (p[:, None, :] <= self._chi[None] + pad), axis=2)
            )
            if len(hit_p) == 0:
                continue
            v0 = self.points[self.cells[hit_c, 0]]
            lam = np.einsum("mij,mj->mi", self._inv[hit_c], p[hit_p] - v0)
            ok = (lam.min(axis=1) >= -tol) & (lam.sum(axis=1) <= 1 + tol)
            out[idx[hit_p[ok]]] = hit_c[ok]
        return out

    def contains(self, points, tol: float = 1e-12) -> np.ndarray:
        """Whether each point lies in a cell, bool [N] (barycentric test, see :meth:`locate`)."""
        return self.locate(points, tol) >= 0

    def signed_distance(self, points) -> np.ndarray:
        """Not an exact distance: -1 inside, +1 outside, 0 never (sign only).

        The CSG operations need only the sign away from the boundary; a mesh domain inside a CSG
        expression therefore cannot resolve coincident boundaries.
        """
        return np.where(self.contains(points), -1.0, 1.0)

    # sampling ---------------------------------------------------------------------------
    def _pick(self, measures: np.ndarray, u0: np.ndarray) -> np.ndarray:
        cum = np.cumsum(measures)
        return np.minimum(np.searchsorted(cum, u0 * cum[-1], side="right"), len(measures) - 1)

    def _interior(self, n, method, seed):
        d = self.dim
        u = unit_samples(n, d + 1, method, seed)
        c = self._pick(self.cell_measure, u[:, 0])
        verts = self.points[self.cells[c]]
        if d == 2:
            r = np.sqrt(u[:, 1])
            lam = np.column_stack([1 - r, r * (1 - u[:, 2]), r * u[:, 2]])
        else:
            s = np.sort(u[:, 1:], axis=1)
            lam = np.column_stack([s[:, 0], s[:, 1] - s[:, 0], s[:, 2] - s[:, 1], 1 - s[:, 2]])
        return np.einsum("mk,mkj->mj", lam, verts)

    def _boundary(self, n, method, seed, tags):
        u = unit_samples(n, self.dim, method, derive_seed(seed, "boundary"))
        return self._map_boundary(u, tags)

    def _boundary_part(self, k, method, seed, tags, part):
        # the first coordinate picks the facet by measure: part r takes [r, r + 1) / world of it (a run of facets
        # in the file's order, of measure exactly 1/world of the selected boundary)
        u = unit_samples(k, self.dim, method, derive_seed(seed, "boundary"))
        u[:, 0] = (part.rank + u[:, 0]) / part.world
        return self._map_boundary(u, tags)

    def _map_boundary(self, u: np.ndarray, tags: tuple[str, ...]):
        """Boundary points of the groups ``tags`` at parameters ``u`` [n, d] in [0, 1]^d: (points, normals, tags)."""
        d = self.dim
        f = np.concatenate([self.facets[t] for t in tags])
        nrm_all = np.concatenate([self._facet_normals[t] for t in tags])
        meas = np.concatenate([self._facet_measure[t] for t in tags])
        tg_all = np.concatenate([np.full(len(self.facets[t]), t, dtype=object) for t in tags])
        k = self._pick(meas, u[:, 0])
        v = self.points[f[k]]
        if d == 2:
            pts = v[:, 0] + u[:, 1:2] * (v[:, 1] - v[:, 0])
        else:
            r = np.sqrt(u[:, 1])
            lam = np.column_stack([1 - r, r * (1 - u[:, 2]), r * u[:, 2]])
            pts = np.einsum("mk,mkj->mj", lam, v)
        return pts, nrm_all[k], tg_all[k].astype(str)


_MESHIO_PATCH_LOCK = threading.Lock()


def _meshio_patchable() -> bool:
    """Whether meshio is a version whose gmsh 4.1 reader this module works around (5.3.x, where the workaround
    was written and tested: it swaps ``meshio.gmsh._gmsh41.Mesh`` for one read).  Other versions get meshio's
    own behaviour (and its error for files with elements outside every physical group)."""
    try:
        import meshio
        from meshio.gmsh import _gmsh41
    except ImportError:
        return False
    major_minor = tuple(int(p) for p in meshio.__version__.split(".")[:2] if p.isdigit())
    return major_minor == (5, 3) and hasattr(_gmsh41, "Mesh")


_MESHIO_PATCHABLE = _meshio_patchable()


def _read_gmsh41_partial_groups(name: str):
    """Read a gmsh 4.1 file in which some element blocks belong to no physical group.

    meshio 5.3 builds its ``"gmsh:physical"`` cell data only for blocks with a physical group and
    then refuses its own result (one array per block is required).  Its per-name ``cell_sets`` are
    still complete, so while meshio reads the file its mesh constructor is given a
    ``"gmsh:physical"`` rebuilt from them: the id of the block's first physical group, 0 for none.
    """
    from meshio.gmsh import _gmsh41

    original = _gmsh41.Mesh

    def tolerant_mesh(points, cells, *args, cell_data=None, field_data=None, cell_sets=None, **kwargs):
        cell_data = dict(cell_data or {})
        field_data = field_data or {}
        ids = []
        for k, block in enumerate(cells):
            gid = 0
            for group, (tag, _dim) in ((g, tuple(v)[:2]) for g, v in field_data.items()):
                members = (cell_sets or {}).get(group)
                if members is not None and k < len(members) and members[k] is not None and len(members[k]):
                    gid = int(tag)
                    break
            ids.append(np.full(len(block.data), gid, dtype=int))
        cell_data["gmsh:physical"] = ids
        return original(points, cells, *args, cell_data=cell_data, field_data=field_data,
                        cell_sets=cell_sets, **kwargs)

    import meshio

    with _MESHIO_PATCH_LOCK:
        _gmsh41.Mesh = tolerant_mesh
        try:
            return meshio.read(name)
        finally:
            _gmsh41.Mesh = original
