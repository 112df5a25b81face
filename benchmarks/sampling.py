"""Interior sampling speed: a CSG domain and a ~10^5-cell triangle mesh, uniform and Sobol.

    python benchmarks/sampling.py                 # 10^6 points, median of 3 runs
    python benchmarks/sampling.py --n 200000 --repeats 5 --cells-side 224

Domains (metres):

* CSG: (Rectangle [0, 1] x [0, 1] minus Disk((0.5, 0.5), 0.25)) union Polygon (a triangle poking
  out of the right side); points are drawn by rejection from the bounding box.
* Mesh: the unit square as a structured triangulation, ``2 * side^2`` triangles (side = 224 gives
  100 352 cells), built in memory with numpy as ``MeshDomain(points, cells, facets)``; points
  choose a cell by area, then uniform barycentric coordinates.

Prints, per domain and method, the median wall time of ``--repeats`` calls of
``sample_interior(n, method, seed)`` (a new seed each run) and the points per second.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from elecsolver.geometry import Disk, MeshDomain, Polygon, Rectangle


def csg_domain():
    """(unit square - disk of radius 0.25 at the centre) | triangle reaching to x = 1.4 m."""
    return (Rectangle([0.0, 0.0], [1.0, 1.0]) - Disk([0.5, 0.5], 0.25)) | Polygon([[0.8, 0.3], [1.4, 0.5],
                                                                                      [0.8, 0.7]])


def square_mesh(side: int) -> MeshDomain:
    """Unit square split into side x side squares of two triangles each; boundary tags by side."""
    xs = np.linspace(0.0, 1.0, side + 1)
    xx, yy = np.meshgrid(xs, xs)
    pts = np.column_stack([xx.ravel(), yy.ravel()])
    idx = np.arange((side + 1) ** 2).reshape(side + 1, side + 1)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()
    cells = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    facets = {"bottom": np.column_stack([idx[0, :-1], idx[0, 1:]]),
              "right": np.column_stack([idx[:-1, -1], idx[1:, -1]]),
              "top": np.column_stack([idx[-1, 1:], idx[-1, :-1]]),
              "left": np.column_stack([idx[1:, 0], idx[:-1, 0]])}
    return MeshDomain(pts, cells, facets, source="structured square")


def bench(domain, n: int, method: str, repeats: int) -> tuple[float, int]:
    """Median seconds of ``repeats`` interior draws of n points, and the count drawn."""
    times = []
    got = 0
    for r in range(repeats):
        t0 = time.perf_counter()
        cloud = domain.sample_interior(n, method, seed=r)
        times.append(time.perf_counter() - t0)
        got = len(cloud)
    return statistics.median(times), got


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="points per draw (default 10^6)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the median is reported")
    parser.add_argument("--cells-side", type=int, default=224, help="mesh squares per side (2 side^2 cells)")
    parser.add_argument("--methods", default="uniform,sobol", help="comma-separated sampling methods")
    args = parser.parse_args(argv)
    if args.n < 1 or args.repeats < 1 or args.cells_side < 1:
        parser.error("--n, --repeats and --cells-side must be >= 1")

    t0 = time.perf_counter()
    mesh = square_mesh(args.cells_side)
    build_s = time.perf_counter() - t0
    domains = {"CSG (square - disk) | triangle": csg_domain(), f"mesh, {len(mesh.cells)} triangles": mesh}
    print(f"mesh built in {build_s:.2f} s; n = {args.n}, median of {args.repeats} runs")
    print(f"{'domain':<34} {'method':<8} {'median s':>9} {'points/s':>12}")
    rows = []
    for label, domain in domains.items():
        for method in args.methods.split(","):
            sec, got = bench(domain, args.n, method, args.repeats)
            rows.append({"domain": label, "method": method, "median_s": sec, "points_per_s": got / sec})
            print(f"{label:<34} {method:<8} {sec:>9.3f} {got / sec:>12.3e}")
    return rows


if __name__ == "__main__":
    main()
