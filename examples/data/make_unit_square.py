"""Regenerate unit_square.msh: the unit square [0, 1] m x [0, 1] m as 8 x 8 x 2 triangles.

    python examples/data/make_unit_square.py

gmsh 2.2 ASCII (written with meshio): physical surface "cavity" (id 1, all 128 triangles) and
physical line "pec" (id 2, the 32 edge segments of all four sides).  81 nodes, z = 0.
"""

from pathlib import Path

import meshio
import numpy as np


def main(n: int = 8) -> Path:
    xs = np.linspace(0.0, 1.0, n + 1)
    xx, yy = np.meshgrid(xs, xs)
    pts = np.column_stack([xx.ravel(), yy.ravel(), np.zeros(xx.size)])
    idx = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)          # idx[j, i]: node at (x_i, y_j)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()
    tri = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    bnd = np.concatenate([np.column_stack([idx[0, :-1], idx[0, 1:]]),       # y = 0
                          np.column_stack([idx[:-1, -1], idx[1:, -1]]),     # x = 1
                          np.column_stack([idx[-1, 1:], idx[-1, :-1]]),     # y = 1
                          np.column_stack([idx[1:, 0], idx[:-1, 0]])])      # x = 0
    mesh = meshio.Mesh(pts, [("line", bnd), ("triangle", tri)],
                       cell_data={"gmsh:physical": [np.full(len(bnd), 2), np.full(len(tri), 1)],
                                  "gmsh:geometrical": [np.full(len(bnd), 1), np.full(len(tri), 1)]},
                       field_data={"cavity": np.array([1, 2]), "pec": np.array([2, 1])})
    out = Path(__file__).resolve().parent / "unit_square.msh"
    meshio.write(out, mesh, file_format="gmsh22", binary=False)
    return out


if __name__ == "__main__":
    print(main())
