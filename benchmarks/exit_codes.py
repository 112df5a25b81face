"""Exit codes of many consecutive 2-rank CLI runs (the teardown check: every run exits 0).

    python benchmarks/exit_codes.py --runs 50                  # torchrun-style variables, 2 processes
    python benchmarks/exit_codes.py --runs 50 --launcher mpirun
    python benchmarks/exit_codes.py --runs 5 --worker tests/failure_worker.py  # a script taking elecsolver's arguments

Each run is ``elecsolver run maxwell-point-source-2d --preset ci --steps 2`` with a tiny point cloud and
output grid (about 10 s on 2 cores), started either as 2 processes with RANK / WORLD_SIZE / MASTER_ADDR /
MASTER_PORT set (as tests/test_data_parallel.py launches workers) or under ``mpirun -n 2``.  The script
prints one line per run (the exit code of every rank, the wall time) and a summary; the output of any
run with a non-zero code is kept under ``--keep`` (default /tmp/elecsolver-exit-codes).  Exit status: 0 when
every rank of every run exited 0 (and no output said "terminate called" or that process-group threads were still
alive at exit).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TINY = ["--preset", "ci", "--steps", "2", "--quiet",
        "--set", "sampling.interior=64", "--set", "sampling.source=16", "--set", "sampling.boundary=16",
        "--set", "sampling.initial=16", "--set", "output.nx=11", "--set", "output.ny=11",
        "--set", "output.nt=5", "--set", "output.early_frames=3"]


# words in a run's output that make it count as bad even with exit code 0
WATCH = ("terminate called", "still alive at exit")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), PYTHONUNBUFFERED="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def run_torchrun_style(cmd: list[str], world: int, timeout: float) -> tuple[list, str]:
    """Start ``world`` processes of ``cmd`` with torchrun-style variables; their exit codes and output."""
    port, procs = _free_port(), []
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in range(world)]
        for rank in range(world):
            env = _clean_env()
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen(cmd, env=env, stdout=outs[rank], stderr=subprocess.STDOUT, text=True))
        deadline, codes = time.monotonic() + timeout, []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(f"timeout({p.wait()})")
        text = ""
        for rank, f in enumerate(outs):
            f.seek(0)
            text += f"----- rank {rank} (exit {codes[rank]}) -----\n{f.read()}"
    return codes, text


def run_mpirun(cmd: list[str], world: int, timeout: float) -> tuple[list, str]:
    mpirun = shutil.which("mpirun", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if mpirun is None:
        raise SystemExit("mpirun not found (pip install 'elecsolver[mpi]')")
    env = _clean_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        p = subprocess.run([mpirun, "--oversubscribe", "-n", str(world), *cmd], env=env, capture_output=True,
                           text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        return ["timeout"], str(exc.stdout or "") + str(exc.stderr or "")
    return [p.returncode], p.stdout + p.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--launcher", choices=["env", "mpirun"], default="env")
    ap.add_argument("--worker", help="a script run instead of `python -m elecsolver.cli` (given the same "
                                     "arguments: run PROBLEM OPTIONS)")
    ap.add_argument("--problem", default="maxwell-point-source-2d")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--keep", default=os.path.join(tempfile.gettempdir(), "elecsolver-exit-codes"))
    args = ap.parse_args(argv)

    keep = Path(args.keep)
    keep.mkdir(parents=True, exist_ok=True)
    tally: collections.Counter = collections.Counter()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            out = Path(tmp) / f"run{i}"
            if args.worker:
                cmd = [sys.executable, args.worker, "run", args.problem, *TINY, "--out", str(out)]
            else:
                cmd = [sys.executable, "-m", "elecsolver.cli", "run", args.problem, *TINY, "--out", str(out)]
            t0 = time.perf_counter()
            run = run_mpirun if args.launcher == "mpirun" else run_torchrun_style
            codes, text = run(cmd, args.world, args.timeout)
            wall = time.perf_counter() - t0
            ok = all(c == 0 for c in codes) and not any(w in text for w in WATCH)
            for c in codes:
                tally[c] += 1
            if not ok:
                bad += 1
                (keep / f"run{i}.log").write_text(text)
            print(f"run {i + 1:3d}/{args.runs}: exit codes {codes}  {wall:5.1f} s"
                  + ("" if ok else f"  (output: {keep / f'run{i}.log'})"), flush=True)
            shutil.rmtree(out, ignore_errors=True)
    print(f"{args.runs - bad}/{args.runs} runs with every rank exiting 0; exit codes seen: "
          + ", ".join(f"{c}: {n}" for c, n in sorted(tally.items(), key=lambda kv: str(kv[0]))))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
