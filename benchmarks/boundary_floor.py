"""The modelling floor of the main job's boundary model: the padded box the PINN trains on, solved by FDTD.

    python benchmarks/boundary_floor.py                  # the table in the measurement log in CHANGELOG.md (~30 s)
    python benchmarks/boundary_floor.py --paddings 0.1 0.15 --half-dx
    python benchmarks/boundary_floor.py --per-side       # the main job's default: padding per side from the source

The PINN of ``maxwell-point-source-2d`` solves Maxwell's equations on the output window [0, 1]^2 m padded by
``absorbing.padding`` metres on every side, closed by the first-order Silver-Mueller condition E . tau = eta0 Hz
(:class:`elecsolver.physics.SilverMueller`), which reflects (1 - cos q) / (1 + cos q) of a plane wave arriving at
angle q.  Even an exact solution of that problem differs from the free-space field; this script measures by how
much: the package's Yee FDTD (:func:`elecsolver.reference.fdtd.solve_te_point_source`) of the same source on the
same padded box with the same wall condition (``boundary="silver-muller"``), against the free-space FDTD reference
the problem is scored on (a reflection-free PEC buffer), on the same output grid (101 x 101 sites, 41 times) and
with the same metric (relative L2 per field over all sites and times, source included; "early": t <= 2.4 ns).
Both use the same cells, so the difference is the boundary model's, not the discretisation's (``--half-dx``
repeats the table at dx / 2 to show it).  A PEC box of the same padding (no absorption) is printed beside it.
``--per-side`` adds, for every source, the main job's default box: each side padded by the least p with
d + 2 p >= c0 (t_end - t0 + tau), at least 0.05 m (``MaxwellPointSource2D.paddings``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from elecsolver.reference import fdtd

FIELDS = ("Ex", "Ey", "Hz")


def rel(a: dict, b: dict, frames: int | None = None) -> dict:
    return {k: float(np.linalg.norm((a[k] - b[k])[:frames]) / np.linalg.norm(b[k][:frames])) for k in FIELDS}


def main_job_paddings(source: dict) -> tuple[float, float, float, float]:
    """The main job's default per-side padding (m) for this source (``absorbing.per_side``)."""
    from elecsolver.problems import get_problem_class

    cls = get_problem_class("maxwell-point-source-2d")
    cfg = cls.preset_config("quick")
    cfg["source"].update({k: source[k] for k in ("frequency", "sigma", "x0", "y0")})
    return cls(cfg).paddings()


def floors(source: dict, paddings, boundaries, dx=None) -> list[tuple]:
    x = y = np.linspace(0.0, 1.0, 101)
    t = np.linspace(0.0, 4e-9, 41)
    free = fdtd.solve_te_point_source(**source, x=x, y=y, t=t, dx=dx)
    rows = []
    for boundary in boundaries:
        for pad in paddings:
            start = time.perf_counter()
            box = fdtd.solve_te_point_source(**source, x=x, y=y, t=t, dx=dx, buffer=pad, boundary=boundary)
            rows.append((boundary, pad, rel(box, free), rel(box, free, 25), time.perf_counter() - start))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paddings", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.12, 0.15, 0.2, 0.3])
    ap.add_argument("--half-dx", action="store_true", help="also at half the default cell size (10/6 mm)")
    ap.add_argument("--per-side", action="store_true", help="also the main job's per-side padding for every source")
    args = ap.parse_args()
    default = {"amplitude": 1.0, "frequency": 1e9, "sigma": 7.5e-3, "x0": 0.4975, "y0": 0.4975}
    cases = [("default source (0.4975, 0.4975) m, 1 GHz, sigma 7.5 mm", default, ["silver-muller", "pec"], None)]
    if args.half_dx:
        cases.append(("the same at dx = 10/6 mm", default, ["silver-muller"], 1 / 600))
    for pos, f, s in (((0.62, 0.41), 0.9e9, 7.5e-3), ((0.3, 0.3), 1.2e9, 7.5e-3), ((0.7, 0.3), 0.8e9, 7.5e-3),
                      ((0.4975, 0.4975), 1e9, 2.5e-3)):
        cases.append((f"source ({pos[0]}, {pos[1]}) m, {f / 1e9:g} GHz, sigma {s * 1e3:g} mm",
                      {**default, "x0": pos[0], "y0": pos[1], "frequency": f, "sigma": s}, ["silver-muller"], None))
    print("| case | wall | padding (m) | full Ex / Ey / Hz (%) | early Ex / Ey / Hz (%) | FDTD s |")
    print("|---|---|---|---|---|---|")
    for name, source, boundaries, dx in cases:
        paddings = args.paddings if name.startswith("default") or dx else [p for p in args.paddings if p in (0.1, 0.15)]
        paddings = list(paddings or args.paddings)
        if args.per_side and not dx:
            paddings.append(main_job_paddings(source))
        for boundary, pad, full, early, wall in floors(source, paddings, boundaries, dx):
            pad = f"{pad:g}" if np.ndim(pad) == 0 else "per side " + "/".join(f"{p:.3f}" for p in pad)
            print(f"| {name} | {boundary} | {pad} | " + " / ".join(f"{100 * full[k]:.3f}" for k in FIELDS)
                  + " | " + " / ".join(f"{100 * early[k]:.3f}" for k in FIELDS) + f" | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
