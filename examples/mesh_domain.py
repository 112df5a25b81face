"""Training on a domain read from a mesh file: the PEC cavity TE_11 mode on a gmsh triangulation.

    python examples/mesh_domain.py --steps 1500 --out out-mesh
    python examples/mesh_domain.py --set mesh.file=my_square.msh --set sampling.interior=4000 --out out-mesh

The unit square [0, 1] m x [0, 1] m is read from ``examples/data/unit_square.msh`` (gmsh 2.2 ASCII, physical
surface "cavity", physical line "pec" on all four sides; regenerate it with ``examples/data/make_unit_square.py``)
with :meth:`elecsolver.MeshDomain.from_file`.  The problem is :class:`PecCavityTE` of ``pec_cavity_te.py``
with its domain replaced by ``TimeDomain(mesh, 0, t_end)`` (interior points uniform over the triangles,
PEC points on the "pec" facets with their outward normals, initial points on the mesh at t = 0) and its
output sites by the mesh nodes: ``OUT/fields.h5`` + ``fields.xdmf`` hold Ex, Ey (V/m) and Hz (A/m) on the
triangulation at ``output.nt`` times, with the closed-form mode as the reference.
"""

import sys
from pathlib import Path

import elecsolver as es

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from pec_cavity_te import PecCavityTE


class MeshCavityTE(PecCavityTE):
    """:class:`PecCavityTE` on a mesh: collocation points and output sites from a gmsh file."""

    name = "pec-cavity-te-mesh"
    defaults = {**PecCavityTE.defaults,
                "mesh": {"file": str(HERE / "data" / "unit_square.msh"), "domain_group": "cavity", "wall_group": "pec"}}

    def setup(self):
        super().setup()
        m = self.config["mesh"]
        mesh = es.MeshDomain.from_file(m["file"], domain_group=m["domain_group"], boundary_groups=[m["wall_group"]])
        if mesh.dim != 2:
            raise es.ConfigError(f"mesh.file {m['file']} is {mesh.dim}D; the TE cavity needs a 2D mesh")
        self.domain = es.TimeDomain(mesh, 0.0, self.domain.t1)
        self.conditions[0] = es.PEC(m["wall_group"], weight=10.0)
        self.output = es.MeshSites(mesh.points, {"triangle": mesh.cells})
        self.mesh = mesh


if __name__ == "__main__":
    es.main(MeshCavityTE)
