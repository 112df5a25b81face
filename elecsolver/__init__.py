"""elecsolver: physics-informed neural networks for electromagnetics.

``import elecsolver as es`` gives what a user scripts with:

- geometry: ``es.Interval``, ``es.Rectangle``, ``es.Disk``, ``es.Polygon``, ``es.Box``, ``es.Sphere``,
  ``es.Cylinder`` (set operations ``|``, ``&``, ``-``), ``es.TimeDomain``, ``es.MeshDomain``;
- physics: PDEs (``es.MaxwellTEz``, ``es.MaxwellTMz``, ``es.Maxwell3D``, ``es.Helmholtz``, ``es.Wave``,
  ``es.Poisson``, ``es.Laplace``), conditions (``es.PEC``, ``es.PMC``, ``es.SilverMueller``, ``es.Dirichlet``,
  ``es.Neumann``, ``es.Robin``, ``es.Initial``), sources (``es.Source``, ``es.GaussianPulse``,
  ``es.GaussianProfile``, ...), ``es.Scales``;
- the problem base ``es.Problem``, ``es.Derived`` (an output computed from the fields) and ``es.ConfigError``;
  ``es.Parameter``: a configuration quantity taken as a network input (a family of configurations), ``es.Axis``;
- training: ``es.train(problem)`` (joins the ranks under mpirun/torchrun/srun, trains, exports), ``es.main``
  (the command line of a script), ``es.Trainer``, ``es.RunContext``;
- fields: ``es.GridSites``, ``es.MeshSites``, ``es.FieldSet``, ``es.relative_l2``, ``es.write``, ``es.read``;
- a finished run, loaded back: ``es.load(out)`` (fields at any points and, for a family, any configuration), and
  ``es.invert(model, places, times, data)`` (the family's configuration that explains probe traces).
"""

from ._version import __version__

from .axes import Axis, Parameter
from .config import ConfigError
from .fields import FieldSet, GridSites, MeshSites, read, relative_l2, write
from .geometry import (
    Box,
    Cylinder,
    Disk,
    Domain,
    Interval,
    MeshDomain,
    Polygon,
    Rectangle,
    Sphere,
    TimeDomain,
)
from .physics import *
from .physics import __all__ as _physics_all
from .problem import Derived, Problem
from .inverse import invert
from .query import TrainedModel, load
from .scales import C0, EPS0, ETA0, MU0, Scales
from .training.context import RunContext
from .training.trainer import Trainer


def train(problem, **kwargs):
    """Train ``problem`` and export its fields, data-parallel when a launcher started several ranks.

    Keywords (see :func:`elecsolver.cli.train`, composed outside the core: it is the one place, with the
    command line, that joins ``elecsolver.parallel``): ``out`` (folder, default "out"), ``device``
    ("cpu"/"cuda"), ``preset`` (recorded), ``resume``, ``stop_after``, ``quiet``, and ``parallel``: a dict or
    ``elecsolver.parallel.ParallelOptions`` with ``dp``, ``tp``, ``pp``, ``microbatches``, ``schedule``,
    ``zero``, ``recompute``, ``precision``, ``profile`` (docs/parallel.md), e.g. ``parallel={"tp": 2}`` under
    ``mpirun -n 2``; ``callbacks``: hooks of one's own in the training loop (:mod:`elecsolver.training.callbacks`).
    Returns the metrics dict on the writer rank (None elsewhere, or when stopped early).
    """
    from .cli import train as _train

    return _train(problem, **kwargs)


def main(problem_class=None, argv=None) -> None:
    """The command line of a user's script: ``python my_problem.py [--steps N --out DIR ...]`` runs the
    problem class given (or the one defined in the calling module) with every option of ``elecsolver run``;
    exits with the command's exit code."""
    import sys

    from .cli import main as _main
    from .cli import script_main

    if problem_class is None:
        sys.exit(_main(argv))
    sys.exit(script_main(problem_class, argv))


__all__ = ["C0", "EPS0", "ETA0", "MU0", "Axis", "Box", "ConfigError", "Parameter", "TrainedModel", "invert", "load", "Cylinder", "Derived", "Disk", "Domain", "FieldSet", "GridSites", "Interval", "MeshDomain",
           "MeshSites", "Polygon", "Problem", "Rectangle", "RunContext", "Scales", "Sphere", "TimeDomain", "Trainer",
           "__version__", "main", "read", "relative_l2", "train", "write", *physics.__all__]  # noqa: PLE0604
