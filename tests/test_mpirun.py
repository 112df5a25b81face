"""Under mpirun: rank discovery from Open MPI variables, a rendezvous found without MASTER_ADDR,
and a 2-rank run equal to the 1-process run (float64, relative 1e-10)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_cli
from elecsolver.parallel.launch import discover

MPIRUN = shutil.which("mpirun", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def test_discover_order():
    assert discover({}).world == 1
    info = discover({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
                     "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (info.rank, info.world, info.local_rank, info.local_world, info.launcher) == (1, 4, 1, 2, "openmpi")
    both = discover({"RANK": "0", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"})
    assert both.launcher == "torchrun" and both.rank == 0
    assert discover({"PMI_RANK": "2", "PMI_SIZE": "3"}).rank == 2
    # SLURM counts only for a task launched by srun (a job step)
    assert discover({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}).world == 1
    assert discover({"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0"}).world == 8


def test_discover_rejects_inconsistent_variables():
    from elecsolver.parallel.launch import LaunchError

    with pytest.raises(LaunchError, match="rank 5 of 2"):
        discover({"RANK": "5", "WORLD_SIZE": "2"})


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_mpirun_two_ranks_equal_one_process(tmp_path):
    args = ["run", "maxwell-point-source-2d", "--preset", "ci", "--steps", "5", "--dtype", "float64", "--quiet",
            "--set", "sampling.interior=301", "--set", "sampling.source=67", "--set", "sampling.boundary=45"]
    one = run_cli(*args, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    two = subprocess.run([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, "-m", "elecsolver.cli", *args,
                          "--out", str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    assert two.returncode == 0, two.stdout + two.stderr
    a = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=False)
    b = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=False)
    assert b["world"] == 2 and a["world"] == 1
    pa = torch.cat([v.reshape(-1) for v in a["model"].values()])
    pb = torch.cat([v.reshape(-1) for v in b["model"].values()])
    assert float((pa - pb).norm() / pa.norm()) < 1e-10
    la = [r["loss"] for r in a["history"]]
    lb = [r["loss"] for r in b["history"]]
    assert abs(la[-1] - lb[-1]) / abs(la[-1]) < 1e-10


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_a_users_script_under_mpirun_trains_data_parallel(tmp_path):
    """``mpirun -n 2 python my_script.py`` (es.main) joins the ranks: one run of world size 2 that equals the
    one-process run, not two silent copies writing into one folder."""
    script = Path(__file__).resolve().parents[1] / "examples" / "tm_cavity.py"
    args = ["--steps", "4", "--dtype", "float64", "--quiet", "--set", "sampling.interior=200",
            "--set", "sampling.boundary=50"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    one = subprocess.run([sys.executable, str(script), *args, "--out", str(tmp_path / "one")], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, str(script), *args, "--out",
                          str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert two.returncode == 0, two.stdout + two.stderr
    a = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=False)
    b = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=False)
    assert (a["world"], b["world"]) == (1, 2)
    pa = torch.cat([v.reshape(-1) for v in a["model"].values()])
    pb = torch.cat([v.reshape(-1) for v in b["model"].values()])
    assert float((pa - pb).norm() / pa.norm()) < 1e-10
