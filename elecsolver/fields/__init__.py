"""A neutral field model and its writers, in the spirit of meshio: one in-memory model, one writer per format.

* :class:`GridSites`, :class:`MeshSites` -- where values live (SI metres);
* :class:`FieldSet` -- named real/complex fields on sites, with units, optional times (s) and mask;
* :func:`relative_l2` -- per-field relative L2 error between two FieldSets;
* :func:`write` / :func:`read` -- the writer registry (``hdf5`` + XDMF 3, ``csv``, ``png``;
  :func:`register_writer` adds one, :func:`registered_writers` lists them) and the HDF5 reader;
  the module :mod:`~elecsolver.fields.writers` holds the registry.

The HDF5 layout (schema version 2) is described in :mod:`elecsolver.fields.hdf5` and in
``docs/output-format.md``.
"""

from . import writers
from .fieldset import FieldSet
from .hdf5 import SCHEMA_VERSION
from .metrics import relative_l2
from .sites import GridSites, MeshSites
from .writers import Writer, read, register_writer, registered_writers, write

__all__ = ["SCHEMA_VERSION", "FieldSet", "GridSites", "MeshSites", "Writer", "read", "register_writer",
           "registered_writers", "relative_l2", "write", "writers"]
