"""Record a finished run's errors as a problem's recorded result (``benchmarks/results/<problem>.json``).

The problem gallery (docs/problems.md) and the README's table are generated from these files by
``python tools/gen_docs.py``; a number is written here once and quoted from here.

    elecsolver run maxwell-cavity-2d --preset quick --out out-cav
    python benchmarks/record.py out-cav [--note "one thread beside another run"]
    python tools/gen_docs.py

Each record holds the command that re-runs the measurement (``elecsolver run PROBLEM --config OUT/config.toml``
and the preset), the date, the machine (CPU model and threads), the seed, the steps, the training wall time
``wall_s`` (s) and the relative L2 errors of ``metrics.json`` (fractions, per window and field).  A record of
the same problem, preset and command replaces the older one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def record(run: Path, note: str = "", results: Path = RESULTS) -> dict:
    """Add the finished run in ``run`` to ``results/<problem>.json``; returns the record.

    Raises
    ------
    SystemExit
        If ``run`` holds no finished run (metrics.json and config.toml).
    """
    try:
        metrics = json.loads((run / "metrics.json").read_text())
        config = (run / "config.toml").read_text()
    except OSError as exc:
        raise SystemExit(f"record: {run} holds no finished run ({exc.strerror}: {exc.filename})") from None
    seed = next((line.split("=")[1].strip() for line in config.splitlines() if line.startswith("seed =")), "?")
    problem, preset = metrics["problem"], metrics["preset"]
    entry = {"preset": preset, "command": f"elecsolver run {problem} --config {run / 'config.toml'}",
             "date": datetime.date.today().isoformat(),
             "machine": f"{cpu_model()}, {os.environ.get('OMP_NUM_THREADS') or os.cpu_count()} threads",
             "seeds": seed, "steps": metrics["steps"], "wall_s": round(metrics["wall_s"], 1),
             "rel_l2": metrics["rel_l2"], "note": note}
    path = results / f"{problem}.json"
    data = json.loads(path.read_text()) if path.is_file() else {"problem": problem, "results": []}
    data["results"] = [r for r in data["results"] if (r["preset"], r["command"]) != (preset, entry["command"])]
    data["results"].append(entry)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return entry


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="the output folder of a finished elecsolver run")
    p.add_argument("--note", default="", help="what the numbers need beside them (a shared host, seeds, ...)")
    p.add_argument("--results", type=Path, default=RESULTS, help="the folder of the results files")
    args = p.parse_args(argv)
    entry = record(args.run, args.note, args.results)
    print(json.dumps(entry))


if __name__ == "__main__":
    main()
