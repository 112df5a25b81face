"""Error against wall time: the main job's PINN presets beside the package's FDTD at dx = 20 mm ... 2.5 mm.

    python benchmarks/time_to_accuracy.py --runs out-ci out-quick --png benchmarks/time_to_accuracy.png
    python benchmarks/time_to_accuracy.py --fdtd-from sweep.json --runs out-ci out-quick   # reuse a quiet timing

Every run folder is an ``elecsolver run maxwell-point-source-2d --out DIR`` (its ``fields.h5``, ``metrics.json``
and ``convergence.csv``).  The FDTD (:func:`elecsolver.reference.fdtd.solve_te_point_source`, free space by a
reflection-free buffer) is timed at each cell size (median of ``--repeats`` runs, the cell sizes interleaved) and
scored like the PINN: relative L2 per field over the 101 x 101 output sites and 41 times (early: t <= 2.4 ns,
full: 0-4 ns), source included, against a finer FDTD (``--reference-dx``, default 1.25 mm).  The PINN's fields
are re-scored against the same finer FDTD (the problem's own reference, dx = 3.33 mm, differs from it by about
0.1 %).  At dx = 20 mm, coarser than the output spacing (10 mm), the FDTD's fields on its own 20 mm nodes are
interpolated to the output sites by bicubic splines (scipy).

A single forward solve is FDTD's game: the PINN's case is one network for many configurations and inverse
problems, not this race.  The PNG has two panels: the full window (the FDTD curve and each PINN run's final
error) and the early window (the FDTD curve and each PINN run's trajectory from ``convergence.csv``).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
from scipy.interpolate import RectBivariateSpline

from elecsolver.reference import fdtd

FIELDS = ("Ex", "Ey", "Hz")
SOURCE = {"amplitude": 1.0, "frequency": 1.0e9, "sigma": 7.5e-3, "x0": 0.4975, "y0": 0.4975}
X = np.linspace(0.0, 1.0, 101)
T = np.linspace(0.0, 4.0e-9, 41)
EARLY = 25  # frames with t <= 2.4 ns


def rel(a: dict, b: dict, frames: int | None = None) -> dict:
    return {k: float(np.linalg.norm((a[k] - b[k])[:frames]) / np.linalg.norm(b[k][:frames])) for k in FIELDS}


def fdtd_on_output(dx: float) -> tuple[dict, float]:
    """FDTD fields on the output sites at cell size dx, and the solve's wall time (s)."""
    spacing = max(dx, X[1] - X[0])
    n = int(round(1.0 / spacing)) + 1
    nodes = np.linspace(0.0, 1.0, n)
    t0 = time.perf_counter()
    out = fdtd.solve_te_point_source(**SOURCE, x=nodes, y=nodes, t=T, dx=dx)
    wall = time.perf_counter() - t0
    if n == len(X):
        return {k: np.asarray(out[k]) for k in FIELDS}, wall
    fields = {}
    for k in FIELDS:  # [nt, ny, nx] on the coarse nodes -> the output sites
        v = np.asarray(out[k])
        fields[k] = np.stack([RectBivariateSpline(nodes, nodes, frame, kx=3, ky=3)(X, X) for frame in v])
    return fields, wall


def fdtd_sweep(dxs, repeats: int, reference_dx: float) -> tuple[list[dict], dict]:
    ref, _ = fdtd_on_output(reference_dx)
    walls = {dx: [] for dx in dxs}
    fields = {}
    for _ in range(repeats):  # interleaved: a noisy host slows every cell size alike
        for dx in dxs:
            fields[dx], w = fdtd_on_output(dx)
            walls[dx].append(w)
    rows = []
    for dx in dxs:
        rows.append({"dx_mm": dx * 1e3, "wall_s": float(np.median(walls[dx])),
                     "wall_spread_s": float(np.max(walls[dx]) - np.min(walls[dx])),
                     "early": rel(fields[dx], ref, EARLY), "full": rel(fields[dx], ref)})
    return rows, ref


def pinn_run(folder: Path, ref: dict) -> dict:
    import elecsolver as es

    data = es.read(folder / "fields.h5")
    fs = data["fieldset"]
    pred = {k: np.asarray(fs.fields[k]) for k in FIELDS}
    metrics = json.loads((folder / "metrics.json").read_text())
    trajectory = []
    conv = folder / "convergence.csv"
    if conv.exists():
        with conv.open() as f:
            for row in csv.DictReader(f):
                if row.get("rel_l2_early_Ex"):
                    trajectory.append((float(row["wall_s"]), {k: float(row[f"rel_l2_early_{k}"]) for k in FIELDS}))
    return {"run": str(folder), "preset": metrics.get("preset"), "steps": metrics.get("steps"),
            "wall_s": metrics["wall_s"], "early": rel(pred, ref, EARLY), "full": rel(pred, ref),
            "trajectory": trajectory}


def table(fd: list[dict], runs: list[dict]) -> str:
    lines = ["| solver | setting | wall time (s) | early Ex / Ey / Hz | full Ex / Ey / Hz |", "|---|---|---|---|---|"]

    def pct(d):
        return " / ".join(f"{100 * d[k]:.3g} %" for k in FIELDS)

    for r in fd:
        lines.append(f"| FDTD | dx = {r['dx_mm']:.3g} mm | {r['wall_s']:.3g} (spread {r['wall_spread_s']:.2g}) | "
                     f"{pct(r['early'])} | {pct(r['full'])} |")
    for r in runs:
        lines.append(f"| PINN | {r['preset']} ({r['steps']} steps) | {r['wall_s']:.0f} | {pct(r['early'])} | "
                     f"{pct(r['full'])} |")
    return "\n".join(lines)


def plot(fd: list[dict], runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colours = {"Ex": "tab:blue", "Ey": "tab:orange", "Hz": "tab:green"}
    for ax, window in zip(axes, ("full", "early")):
        for k in FIELDS:
            ax.loglog([r["wall_s"] for r in fd], [100 * r[window][k] for r in fd], "o-", color=colours[k],
                      label=f"FDTD {k}")
            for r in fd:
                if k == "Ex":
                    ax.annotate(f"{r['dx_mm']:.3g} mm", (r["wall_s"], 100 * r[window][k]), fontsize=7,
                                textcoords="offset points", xytext=(3, 3))
        for j, r in enumerate(runs):
            marker = "sD^v"[j % 4]
            for k in FIELDS:
                if window == "early" and r["trajectory"]:
                    w, e = zip(*[(wall, err[k]) for wall, err in r["trajectory"] if wall > 0])
                    ax.loglog(w, [100 * v for v in e], "--", color=colours[k], alpha=0.5)
                ax.loglog([r["wall_s"]], [100 * r[window][k]], marker, color=colours[k], markersize=8,
                          label=f"PINN {r['preset']} {k}" if k == "Ex" or j == 0 else None)
        ax.axhline(2.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("wall time on a 2-core CPU (s)")
        ax.set_title(f"{window} window ({'0-4 ns' if window == 'full' else 't <= 2.4 ns'})")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("relative L2 error (%)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("maxwell-point-source-2d: error against wall time (FDTD: one forward solve per dx)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=[], type=Path, help="elecsolver run output folders")
    ap.add_argument("--dx-mm", nargs="+", type=float, default=[20.0, 10.0, 5.0, 10 / 3, 2.5])
    ap.add_argument("--reference-dx-mm", type=float, default=1.25)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--fdtd-from", type=Path, default=None,
                    help="take the FDTD rows from an earlier --json (timed on a quiet host) instead of timing anew")
    a = ap.parse_args(argv)
    if a.fdtd_from is not None:
        fd = json.loads(a.fdtd_from.read_text())["fdtd"]
        ref, _ = fdtd_on_output(a.reference_dx_mm * 1e-3)
    else:
        fd, ref = fdtd_sweep([d * 1e-3 for d in a.dx_mm], a.repeats, a.reference_dx_mm * 1e-3)
    runs = [pinn_run(r, ref) for r in a.runs]
    print(table(fd, runs))
    if a.png is not None:
        plot(fd, runs, a.png)
        print(f"wrote {a.png}")
    if a.json is not None:
        a.json.write_text(json.dumps({"fdtd": fd, "pinn": runs}, indent=1))


if __name__ == "__main__":
    main()
