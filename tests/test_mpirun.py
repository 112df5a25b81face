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
from conftest import NO_PNG, SMALL_GRID, run_main
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
            "--set", "sampling.interior=301", "--set", "sampling.source=67", "--set", "sampling.boundary=45",
            *NO_PNG, *SMALL_GRID]
    one, two = _beside([*args, "--out", str(tmp_path / "one")], [*args, "--out", str(tmp_path / "two")])
    assert one.returncode == 0, one.stderr
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
            "--set", "sampling.boundary=50", *NO_PNG]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    # the two runs side by side
    started = subprocess.Popen([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, str(script), *args, "--out",
                                str(tmp_path / "two")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    one = subprocess.run([sys.executable, str(script), *args, "--out", str(tmp_path / "one")], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    two = _finish(started)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stdout + two.stderr
    _same_parameters(tmp_path / "one", tmp_path / "two")


def _same_parameters(one, two):
    """The one-process and the two-rank checkpoints hold the same parameters (relative 1e-10); returns both."""
    a = torch.load(one / "checkpoint.pt", weights_only=False)
    b = torch.load(two / "checkpoint.pt", weights_only=False)
    assert (a["world"], b["world"]) == (1, 2)
    pa = torch.cat([v.reshape(-1) for v in a["model"].values()])
    pb = torch.cat([v.reshape(-1) for v in b["model"].values()])
    assert float((pa - pb).norm() / pa.norm()) < 1e-10
    return a, b


ARGS_SMALL = ["run", "maxwell-point-source-2d", "--preset", "ci", "--steps", "4", "--dtype", "float64", "--quiet",
              "--set", "sampling.interior=301", "--set", "sampling.source=67", "--set", "sampling.boundary=45",
              "--set", "training.log_every=2", *NO_PNG, *SMALL_GRID]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "out"
    one = run_main(*ARGS_SMALL, "--out", str(out))
    assert one.returncode == 0, one.stderr
    return out


def _start_mpirun(args) -> subprocess.Popen:
    """``mpirun -n 2 elecsolver ARGS``, started in the background."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return subprocess.Popen([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, "-m", "elecsolver.cli", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout=600) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _mpirun(args, timeout=600):
    return _finish(_start_mpirun(args), timeout)


def _beside(one_args, two_args):
    """``elecsolver ONE_ARGS`` in this process while ``mpirun -n 2 elecsolver TWO_ARGS`` runs beside it (the
    one-process run a parallel one is compared with); returns both CompletedProcesses."""
    started = _start_mpirun(two_args)
    try:
        one = run_main(*one_args)
    finally:
        two = _finish(started)
    return one, two


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
@pytest.mark.parametrize("strategy", [["--tp", "2"], pytest.param(["--pp", "2", "--microbatches", "3", "--schedule",
                                                                   "gpipe"], marks=pytest.mark.slow)],
                         ids=["tp2", "pp2"])
def test_mpirun_model_parallel_run_exports_what_one_process_does(tmp_path, one_process, strategy):
    """The CLI under mpirun with a sharded (tp) or split (pp) network: the loss curve, the exported fields'
    errors against the reference and the fields themselves equal the one-process run's (float64); every rank
    writes its own log file."""
    import json

    import h5py

    out = tmp_path / "two"
    two = _mpirun([*ARGS_SMALL, *strategy, "--out", str(out)])
    assert two.returncode == 0, two.stdout + two.stderr
    ma = json.loads((one_process / "metrics.json").read_text())
    mb = json.loads((out / "metrics.json").read_text())
    assert mb["world_size"] == 2 and mb["parallel"]["tp"] * mb["parallel"]["pp"] == 2
    for w in ma["rel_l2"]:
        for f, v in ma["rel_l2"][w].items():
            assert abs(mb["rel_l2"][w][f] - v) <= 1e-9 * v, (w, f)
    with h5py.File(one_process / "fields.h5") as a, h5py.File(out / "fields.h5") as b:
        for name in ("Ex", "Ey", "Hz"):
            fa, fb = a["fields"][name][...], b["fields"][name][...]
            assert float(abs(fa - fb).max()) <= 1e-9 * float(abs(fa).max()), name
    assert (out / "logs" / "rank0.log").is_file() and (out / "logs" / "rank1.log").is_file()


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
@pytest.mark.parametrize("strategy", [["--tp", "2"], ["--pp", "2", "--microbatches", "3"]], ids=["tp2", "pp2"])
def test_mpirun_loss_balancing_under_model_parallelism_equals_one_process(tmp_path, strategy):
    """training.balance under tensor or pipeline parallelism: the gradient norms are taken on the gathered
    network and a pipeline schedule weights the terms it forms, so the loss curve (with the weights it logs)
    equals one process's (float64)."""
    import csv

    args = [*ARGS_SMALL, "--set", "training.balance.every=2"]
    one, two = _beside([*args, "--out", str(tmp_path / "one")], [*args, *strategy, "--out", str(tmp_path / "two")])
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stdout + two.stderr
    rows = [list(csv.DictReader((tmp_path / d / "convergence.csv").open())) for d in ("one", "two")]
    assert len(rows[0]) == len(rows[1]) == 2
    for a, b in zip(*rows):
        assert float(a["weight_boundary"]) != 1.0  # the balancing ran (step 2 logs the weights of step 2)
        for key in ("loss", "weight_pde", "weight_source", "weight_boundary"):
            assert abs(float(a[key]) - float(b[key])) <= 1e-9 * abs(float(a[key])), key


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_mpirun_bad_layout_is_one_clear_error(tmp_path):
    r = _mpirun([*ARGS_SMALL, "--tp", "3", "--out", str(tmp_path / "bad")], timeout=120)
    assert r.returncode != 0
    assert "dp x tp x pp" in r.stderr and "2 ranks" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_parallel_strategies_example_agrees_with_one_process():
    """examples/parallel_strategies.py under mpirun -n 2: every strategy's losses beside the one-process ones,
    agreeing to 1e-10 (the last column)."""
    script = Path(__file__).resolve().parents[1] / "examples" / "parallel_strategies.py"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    r = subprocess.run([MPIRUN, "--oversubscribe", "-n", "2", sys.executable, str(script), "--steps", "2"], env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if line and not line.startswith("strategy")]
    names = " ".join(rows)
    for needed in ("one process", "tensor parallel tp=2", "GPipe", "1F1B", "ZeRO"):
        assert needed in names
    assert len(rows) == 7
    assert all(float(line.split()[-1]) <= 1e-10 for line in rows)


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
@pytest.mark.parametrize("strategy", [["--tp", "2"], pytest.param(["--pp", "2", "--microbatches", "3"],
                                                                  marks=pytest.mark.slow)], ids=["tp2", "pp2"])
def test_mpirun_model_parallel_resume_continues_exactly(tmp_path, one_process, strategy):
    """Stopped after 2 of 4 steps and resumed, every shard from its own checkpoint file: the same errors as the
    uninterrupted one-process run (float64)."""
    import json

    out = tmp_path / "res"
    first = _mpirun([*ARGS_SMALL, *strategy, "--stop-after", "2", "--out", str(out)])
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(list(out.glob("checkpoint*.pt"))) == 2
    second = _mpirun([*ARGS_SMALL, *strategy, "--resume", "--out", str(out)])
    assert second.returncode == 0, second.stdout + second.stderr
    ma = json.loads((one_process / "metrics.json").read_text())
    mb = json.loads((out / "metrics.json").read_text())
    for w in ma["rel_l2"]:
        for f, v in ma["rel_l2"][w].items():
            assert abs(mb["rel_l2"][w][f] - v) <= 1e-9 * v, (w, f)


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
@pytest.mark.parametrize("bad, words", [
    (["--tp", "2", "--set", "network.width=15"], "not a multiple of tp=2"),
    pytest.param(["--pp", "2", "--microbatches", "60"], "use --microbatches 45 or less", marks=pytest.mark.slow),
], ids=["width", "microbatches"])
def test_mpirun_layout_the_network_does_not_fit_is_one_clear_error(tmp_path, bad, words):
    r = _mpirun([*ARGS_SMALL, *bad, "--out", str(tmp_path / "bad")], timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and r.stderr.count("elecsolver: error:") == 1
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "bad").exists()


def _dp_equals_one_process(tmp_path, args, field, shape):
    """``elecsolver run ARGS`` under mpirun -n 2 equals one process: parameters and loss (float64, relative
    1e-10) and the exported ``field`` (its dataset's shape ``shape``)."""
    import h5py
    import numpy as np

    one, two = _beside([*args, "--out", str(tmp_path / "one")], [*args, "--out", str(tmp_path / "two")])
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stdout + two.stderr
    a, b = _same_parameters(tmp_path / "one", tmp_path / "two")
    la, lb = a["history"][-1]["loss"], b["history"][-1]["loss"]
    assert abs(la - lb) / abs(la) < 1e-10
    with h5py.File(tmp_path / "one" / "fields.h5", "r") as f1, h5py.File(tmp_path / "two" / "fields.h5", "r") as f2:
        ea, eb = f1[f"fields/{field}"][()], f2[f"fields/{field}"][()]
        assert ea.shape == shape and np.max(np.abs(ea - eb)) <= 1e-10 * np.max(np.abs(ea))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_mpirun_complex_fields_with_a_pml_equal_one_process(tmp_path):
    """A time-harmonic problem (complex Ez as two channels, |r|^2 loss, a PML, a complex Dirichlet value) under
    mpirun -n 2 equals one process: parameters and loss (float64, relative 1e-10) and the exported complex fields."""
    _dp_equals_one_process(tmp_path, ["run", "pec-cylinder-scattering", "--preset", "ci", "--steps", "4", "--dtype",
                                      "float64", "--quiet", "--set", "sampling.interior=301", "--set",
                                      "sampling.cylinder=67", "--set", "sampling.pml_end=45", "--set", "output.n=21", *NO_PNG],
                           "Ez", (21, 21, 2))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install 'elecsolver[mpi]')")
def test_mpirun_subdomains_and_an_interface_equal_one_process(tmp_path):
    """A problem with a subdomain (one copy of V per side, level-set features, an interface term, a piecewise
    permittivity) under mpirun -n 2 equals one process."""
    _dp_equals_one_process(tmp_path, ["run", "electrostatics-dielectric-cylinder", "--preset", "ci", "--steps", "4",
                                      "--dtype", "float64", "--quiet", "--set", "sampling.interior=301", "--set",
                                      "sampling.interface=67", "--set", "sampling.window=45", "--set", "output.n=21", *NO_PNG],
                           "V", (21, 21))
