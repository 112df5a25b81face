"""Training on a domain read from a mesh file: the PEC cavity TE_11 mode on a gmsh triangulation.

    python examples/mesh_domain.py --steps 1500 --out out-mesh
    python examples/mesh_domain.py --mesh my_square.msh --steps 3000 --interior 4000

The unit square [0, 1] m x [0, 1] m is read from ``examples/data/unit_square.msh`` (gmsh 2.2 ASCII,
physical surface "cavity", physical line "pec" on all four sides; regenerate it with
``examples/data/make_unit_square.py``) with :meth:`elecsolver.geometry.MeshDomain.from_file`.  The
problem is :class:`PecCavityTE` of ``examples/pec_cavity_te.py`` (TEz: Ex, Ey, Hz; PEC walls,
tangential E = 0) with its collocation points drawn from ``TimeDomain(mesh, 0, t_end)``: interior
points uniformly over the triangles, wall points on the "pec" facets with the facets' outward
normals, initial points on the mesh at t = 0.  Coordinates are nondimensional with L = 1 m, so
the mesh in metres is used as it is (x' = x / L).

After training, the network is evaluated on the mesh nodes at ``nt`` times in [0, t_end], compared
with the closed-form mode (relative L2 error over nodes and times, printed), and written with
:func:`elecsolver.io.mesh_output.write_mesh_fields` to ``OUT/fields.h5`` + ``OUT/fields.xdmf``
(Ex, Ey in V/m, Hz in A/m, coordinates in m, times in s; open the .xdmf in ParaView).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch

from elecsolver.geometry import MeshDomain, TimeDomain
from elecsolver.io.mesh_output import write_mesh_fields
from elecsolver.problem import relative_l2
from elecsolver.sampling import PointCloud
from elecsolver.trainer import Trainer

HERE = Path(__file__).resolve().parent
DEFAULT_MESH = HERE / "data" / "unit_square.msh"


def _load_cavity_module():
    name = "elecsolver_example_pec_cavity_te"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "pec_cavity_te.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


PecCavityTE = _load_cavity_module().PecCavityTE


class MeshCavityTE(PecCavityTE):
    """:class:`PecCavityTE` with every collocation cloud drawn from a :class:`MeshDomain`.

    Parameters
    ----------
    mesh : MeshDomain
        2D domain (m) with a boundary part named ``wall_tag``; for the closed-form reference it
        should be the unit square.
    wall_tag : str
        Boundary part carrying the PEC condition.
    config : dict, optional
        As :class:`PecCavityTE` (default: its default configuration).

    Raises
    ------
    ValueError
        If ``mesh`` is not 2D or has no boundary part ``wall_tag``.
    """

    name = "pec-cavity-te-mesh"

    def __init__(self, mesh: MeshDomain, wall_tag: str = "pec", config: dict | None = None):
        super().__init__(config)
        if not isinstance(mesh, MeshDomain) or mesh.dim != 2:
            raise ValueError(f"mesh must be a 2D MeshDomain, got {mesh!r}")
        mesh.select_tags(wall_tag)  # ValueError naming the known tags
        self.mesh, self.wall_tag = mesh, wall_tag
        self.space_time = TimeDomain(mesh, 0.0, self.config["window"]["t_end"])

    def _interior(self, seed, progress=1.0):
        s = self.config["sampling"]
        return PointCloud(self.space_time.sample_interior(s["interior"], s["method"], seed).points)

    def _walls(self, seed, progress=1.0):
        s = self.config["sampling"]
        cloud = self.space_time.sample_boundary(s["wall"], s["method"], seed, tags=self.wall_tag)
        return PointCloud(cloud.points, cloud.normals)

    def _initial(self, seed, progress=1.0):
        s = self.config["sampling"]
        return PointCloud(self.space_time.sample_initial(s["initial"], s["method"], seed).points)

    # evaluation on the mesh nodes ------------------------------------------------------------
    def node_times(self) -> np.ndarray:
        """Output times (s), float64 [nt] (``output.nt`` evenly spaced in [0, t_end])."""
        return np.linspace(0.0, self.config["window"]["t_end"], self.config["output"]["nt"]) * self.scales()["time_s"]

    def node_inputs(self) -> np.ndarray:
        """Nondimensional network inputs (x, y, t) at every node and output time, [nt * M, 3]
        (time-major: row k * M + i is node i at time k)."""
        t = self.node_times() / self.scales()["time_s"]
        xy = self.mesh.points / self.scales()["length_m"]
        return np.column_stack([np.tile(xy, (len(t), 1)), np.repeat(t, len(xy))])

    def closed_form(self, p: np.ndarray) -> np.ndarray:
        """The TE_mn mode at nondimensional inputs p [N, 3], nondimensional (Ex, Ey, Hz) [N, 3]."""
        m, n = self.config["mode"]["m"], self.config["mode"]["n"]
        a, b = m * np.pi, n * np.pi
        w = np.hypot(a, b)
        x, y, t = p[:, 0], p[:, 1], p[:, 2]
        return np.stack([-(b / w) * np.cos(a * x) * np.sin(b * y) * np.sin(w * t),
                         (a / w) * np.sin(a * x) * np.cos(b * y) * np.sin(w * t),
                         np.cos(a * x) * np.cos(b * y) * np.cos(w * t)], 1)

    def nodes_si(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """Nondimensional outputs [nt * M, 3] -> {"Ex", "Ey" (V/m), "Hz" (A/m)}, each [nt, M]."""
        s, nn = self.scales(), len(self.mesh.points)
        return {"Ex": values[:, 0].reshape(-1, nn) * s["E0_V_per_m"],
                "Ey": values[:, 1].reshape(-1, nn) * s["E0_V_per_m"],
                "Hz": values[:, 2].reshape(-1, nn) * s["H0_A_per_m"]}


@torch.no_grad()
def predict_nodes(trainer: Trainer, problem: MeshCavityTE) -> dict[str, np.ndarray]:
    """Trained fields on the mesh nodes, SI, each [nt, M]."""
    x = torch.as_tensor(problem.node_inputs(), dtype=trainer.dtype, device=trainer.device)
    return problem.nodes_si(trainer.model(x).double().cpu().numpy())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500, help="training steps (default 1500)")
    parser.add_argument("--out", default="out-mesh", help="output folder (default out-mesh)")
    parser.add_argument("--mesh", default=str(DEFAULT_MESH), help="gmsh file with groups 'cavity' and 'pec'")
    parser.add_argument("--interior", type=int, default=None, help="interior points per round (default 2000)")
    parser.add_argument("--wall", type=int, default=None, help="wall points per round (default 400)")
    parser.add_argument("--initial", type=int, default=None, help="initial points per round (default 400)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    for key in ("interior", "wall", "initial"):
        if getattr(args, key) is not None and getattr(args, key) < 1:
            parser.error(f"--{key} must be >= 1")

    mesh = MeshDomain.from_file(args.mesh, domain_group="cavity", boundary_groups=["pec"])
    print(f"mesh: {mesh}, area {mesh.measure():.4g} m^2, wall length {mesh.boundary_measure():.4g} m")
    problem = MeshCavityTE(mesh)
    problem.config["training"]["steps"] = args.steps
    for key in ("interior", "wall", "initial"):
        if getattr(args, key) is not None:
            problem.config["sampling"][key] = getattr(args, key)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(problem, out_dir=out, progress=False)
    trainer.train()

    fields = predict_nodes(trainer, problem)
    reference = problem.nodes_si(problem.closed_form(problem.node_inputs()))
    rel = {k: relative_l2(fields[k], reference[k]) for k in problem.outputs}
    scales = problem.scales()
    # all components together, each in its own scale (E / E0, H / H0)
    stack = np.stack([fields["Ex"] / scales["E0_V_per_m"], fields["Ey"] / scales["E0_V_per_m"],
                      fields["Hz"] / scales["H0_A_per_m"]])
    stack_ref = np.stack([reference["Ex"] / scales["E0_V_per_m"], reference["Ey"] / scales["E0_V_per_m"],
                          reference["Hz"] / scales["H0_A_per_m"]])
    rel["all"] = relative_l2(stack, stack_ref)
    print("relative L2 error on the mesh nodes vs the closed form:", json.dumps({k: round(v, 4) for k, v in rel.items()}))

    metrics = {"problem": problem.name, "steps": trainer.step, "wall_s": trainer.wall_s, "rel_l2": rel,
               "nodes": len(mesh.points), "cells": len(mesh.cells)}
    h5 = write_mesh_fields(out / "fields.h5", points=mesh.points, cells={"triangle": mesh.cells},
                           times=problem.node_times(), fields=fields,
                           units={k: problem.units[k] for k in problem.outputs},
                           attrs={"problem": problem.name, "mesh": str(args.mesh), "config": problem.config,
                                  "scales": scales, "metrics": metrics})
    print(f"wrote {h5} and {h5.with_suffix('.xdmf')}")
    return {**metrics, "h5": str(h5), "xdmf": str(h5.with_suffix(".xdmf"))}


if __name__ == "__main__":
    main()
