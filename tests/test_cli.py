"""The command line: outputs, HDF5/XDMF contract, resume, bad input (exit code 2, nothing written)."""

from __future__ import annotations

import json

import h5py
import meshio
import numpy as np
import pytest
import torch
from conftest import NO_PNG, SMALL_GRID, run_cli, run_main

from elecsolver.io.hdf5 import read_fields

PROBLEM = "maxwell-point-source-2d"


@pytest.fixture(scope="module")
def run30(tmp_path_factory):
    out = tmp_path_factory.mktemp("run30") / "out"
    proc = run_cli("run", PROBLEM, "--steps", "30", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_problems_lists_the_main_job():
    proc = run_cli("problems")
    assert proc.returncode == 0
    assert PROBLEM in proc.stdout.splitlines()


def test_run_writes_every_output(run30):
    out, proc = run30
    for name in ("fields.h5", "fields.xdmf", "metrics.json", "convergence.csv", "checkpoint.pt"):
        assert (out / name).is_file(), name
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert any(p.startswith("Hz_") for p in pngs) and any(p.startswith("Ex_") for p in pngs)
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*tmp"))
    m = json.loads((out / "metrics.json").read_text())
    assert m["problem"] == PROBLEM and m["preset"] == "quick" and m["steps"] == 30
    assert m["wall_s"] > 0 and m["points_per_s"] > 0
    for window in ("early", "full"):
        for field in ("Ex", "Ey", "Hz"):
            assert np.isfinite(m["rel_l2"][window][field]) and m["rel_l2"][window][field] >= 0
    assert "relative L2 error" in proc.stdout
    rows = (out / "convergence.csv").read_text().splitlines()
    assert rows[0].startswith("step,loss") and "rel_l2_early_Hz" in rows[0] and len(rows) >= 2


def test_hdf5_reads_back_with_units_and_metrics(run30):
    out, _ = run30
    data = read_fields(out / "fields.h5")
    assert data["units"]["Ex"] == "V/m" and data["units"]["Hz"] == "A/m" and data["units"]["t"] == "s"
    with h5py.File(out / "fields.h5", "r") as h:
        for name in ("coords/x", "coords/y", "coords/t", "fields/Ex", "fields/Ey", "fields/Hz",
                     "reference/Ex", "reference/Ey", "reference/Hz"):
            assert "units" in h[name].attrs
        assert h["fields/Hz"].shape == (41, 101, 101)
        assert h.attrs["problem"] == PROBLEM and int(h.attrs["schema_version"]) == 2
        config = json.loads(h.attrs["config"])
        assert config["source"]["sigma"] == 7.5e-3
        scales = json.loads(h.attrs["scales"])
        assert scales["H0_A_per_m"] == pytest.approx(scales["E0_V_per_m"] / 376.730313, rel=1e-6)
    m = json.loads((out / "metrics.json").read_text())
    assert data["attrs"]["metrics"]["rel_l2"] == m["rel_l2"]
    # the stored metric is the relative L2 error of the stored fields
    early = slice(0, 25)
    for f in ("Ex", "Ey", "Hz"):
        a, b = data["fields"][f][early], data["reference"][f][early]
        assert np.linalg.norm(a - b) / np.linalg.norm(b) == pytest.approx(m["rel_l2"]["early"][f], rel=1e-9)


def test_xdmf_opens_from_another_directory(run30, tmp_path, monkeypatch):
    out, _ = run30
    monkeypatch.chdir(tmp_path)
    data = read_fields(out / "fields.h5")
    with meshio.xdmf.TimeSeriesReader(str(out / "fields.xdmf")) as reader:
        points, _cells = reader.read_points_cells()
        assert reader.num_steps == 41
        assert points.shape[0] == 101 * 101
        for k in range(reader.num_steps):
            t, point_data, _ = reader.read_data(k)
            assert t == pytest.approx(data["coords"]["t"][k])
            np.testing.assert_array_equal(point_data["Hz"], data["fields"]["Hz"][k].ravel())


def _params(path):
    state = torch.load(path, weights_only=False)
    return torch.cat([v.reshape(-1).double() for v in state["model"].values()])


def test_resume_gives_the_uninterrupted_parameters(tmp_path):
    # in this process, on the smoke preset's clouds and output sites
    common = ["run", PROBLEM, "--preset", "smoke", "--steps", "20", "--quiet",
              "--set", "training.checkpoint_every=5", "--set", "sampling.resample_every=4",
              # adaptive refinement at steps 5, 10, 15: the one at the interruption must survive it
              "--set", "sampling.rar_every=5", "--set", "sampling.rar_pool=400", "--set", "sampling.rar_add=40"]
    a, b = tmp_path / "straight", tmp_path / "resumed"
    assert run_main(*common, "--out", str(a)).returncode == 0
    first = run_main(*common, "--out", str(b), "--stop-after", "10")
    assert first.returncode == 0, first.stderr
    assert not (b / "fields.h5").exists()
    state = torch.load(b / "checkpoint.pt", weights_only=False)
    assert state["step"] == 10 and len(state["points"]["rar_points"]["pde"][0]) == 80
    second = run_main(*common, "--out", str(b), "--resume")
    assert second.returncode == 0, second.stderr
    assert torch.equal(_params(a / "checkpoint.pt"), _params(b / "checkpoint.pt"))
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (a, b))
    assert ma["rel_l2"] == mb["rel_l2"] and mb["steps"] == 20


def test_resume_with_other_configuration_is_refused(tmp_path, monkeypatch):
    from elecsolver.problems import REGISTRY

    out = tmp_path / "o"
    common = ["run", PROBLEM, "--preset", "smoke", "--quiet", "--out", str(out)]
    first = run_main(*common, "--steps", "4", "--stop-after", "2")
    assert first.returncode == 0 and "stopped at step 2 of 4; continue with --resume" in first.stdout
    references = []  # the refusals below come before the reference (an FDTD run of the new source) is computed
    monkeypatch.setattr(REGISTRY[PROBLEM], "reference", lambda self: references.append(1))
    before = (out / "config.toml").read_text()
    proc = run_main(*common, "--steps", "4", "--resume", "--set", "source.sigma=2.5e-3")
    assert proc.returncode == 2
    assert "source.sigma" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (out / "config.toml").read_text() == before  # the refused configuration overwrote nothing
    # a --stop-after the checkpoint has passed: one line, not a silent exit
    proc = run_main(*common, "--steps", "4", "--resume", "--stop-after", "1")
    assert proc.returncode == 2 and "at or before the checkpoint's step 2" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert references == []
    # a --stop-after beyond the last step would never stop: refused before anything is written
    fresh = tmp_path / "fresh"
    proc = run_main("run", PROBLEM, "--preset", "smoke", "--quiet", "--out", str(fresh), "--steps", "5",
                    "--stop-after", "100")
    assert proc.returncode == 2 and "--stop-after 100 lies beyond the run's last step (5" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not fresh.exists()


@pytest.mark.parametrize("args,message", [
    (["run", "no-such-problem"], "unknown problem"),
    (["run", PROBLEM, "--preset", "nope"], "unknown preset"),
    (["run", PROBLEM, "--set", "no.such.key=1"], "unknown configuration key"),
    (["run", PROBLEM, "--set", "source.sigma=\"wide\""], "expected a number"),
    (["run", PROBLEM, "--set", "source.sigma=-1"], "sigma must be a positive"),
    (["run", PROBLEM, "--set", "source.frequency=1e12"], "no FDTD reference for source.frequency=1e+12"),
    (["run", PROBLEM, "--set", "sampling.rar_constraints=[\"pml\"]"], "sampling.rar_constraints names ['pml']"),
    (["run", "my_problem.py"], "problem file my_problem.py does not exist"),
    (["run", PROBLEM, "--steps", "0"], "--steps must be >= 1"),
    (["run", PROBLEM, "--steps", "ten"], "invalid int value"),
    (["run", PROBLEM, "--resume"], "no checkpoint"),
    (["run", PROBLEM, "--device", "tpu"], "--device"),
    (["run", PROBLEM, "--set", "source.x0=5"], "source.x0 = 5.0 m lies outside window.x"),
    (["run", PROBLEM, "--set", "source.y0=-0.2"], "source.y0 = -0.2 m lies outside window.y"),
    (["run", PROBLEM, "--set", "source.amplitude=0"], "source.amplitude = 0 gives no field"),
    # found by the slow fuzz (tests/test_fuzz.py): each ended in a traceback
    (["run", "dielectric-cylinder-family", "--set", "pml.order=1e300"], "order must be an integer in [1, 10]"),
    (["run", "maxwell-point-source-family", "--set", "source.sigma=1e300"], "source.sigma = 1e+300 m must be below"),
    (["run", "line-source-2d", "--set", "network.first_omega=1e300"], "first_omega must be a number in (0, 1e+06]"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, args, message):
    out = tmp_path / "o"
    proc = run_main(*args, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_output_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    proc = run_cli("run", PROBLEM, "--steps", "5", "--out", str(tmp_path / "file" / "sub"))
    assert proc.returncode == 2 and "not a folder" in proc.stderr
    assert (tmp_path / "file").read_text() == "x"
    proc = run_cli("run", PROBLEM, "--steps", "5", "--out", str(tmp_path / "file"))
    assert proc.returncode == 2


def test_example_script_takes_the_cli_options(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "maxwell_point_source_2d.py"
    out = tmp_path / "ex"
    proc = subprocess.run([sys.executable, str(script), "--preset", "ci", "--steps", "3", "--out", str(out),
                           "--quiet", "--set", "sampling.interior=200", *NO_PNG, *SMALL_GRID], capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == 3 and m["preset"] == "ci"
    cfg = json.loads(h5py.File(out / "fields.h5", "r").attrs["config"])
    assert cfg["sampling"]["interior"] == 200


def test_a_problem_file_imports_the_files_beside_it_and_a_missing_import_is_one_clear_error(tmp_path):
    """``elecsolver run dir/file.py`` puts dir on the import path, as ``python dir/file.py`` does."""
    from elecsolver.cli import UsageError, load_problem_class

    (tmp_path / "shared_setup.py").write_text("WIDTH = 0.5\n")
    (tmp_path / "uses_it.py").write_text(
        "import elecsolver as es\nfrom shared_setup import WIDTH\n\n"
        "class Beside(es.Problem):\n    name = 'beside'\n    width = WIDTH\n")
    cls = load_problem_class(str(tmp_path / "uses_it.py"))
    assert cls.__name__ == "Beside" and cls.width == 0.5
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    with pytest.raises(UsageError, match="No module named 'no_such_module_here'.*on the import path"):
        load_problem_class(str(tmp_path / "broken.py"))


def test_an_output_folder_of_another_problem_is_refused(tmp_path):
    """Training problem B into the folder of a finished run of problem A would replace some of A's files and leave
    the others (A's snapshots) beside B's: one line, exit 2, A's files untouched."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "metrics.json").write_text(json.dumps({"problem": "helmholtz-square"}))
    (out / "Ez.png").write_bytes(b"png")
    proc = run_cli("run", PROBLEM, "--preset", "ci", "--steps", "2", "--quiet", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds the outputs of another problem ('helmholtz-square')" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["Ez.png", "metrics.json"]


def test_no_core_module_imports_the_command_line():
    """The command line composes the core, parallel/ and problems/; the core never reaches up to it (only the
    package root's es.train / es.main call into it, when called)."""
    import re
    from pathlib import Path

    import elecsolver

    root = Path(elecsolver.__file__).parent
    pattern = re.compile(r"^\s*(from\s+(\.+cli|elecsolver\.cli)\s+import|import\s+elecsolver\.cli)", re.M)
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name not in ("cli.py", "__init__.py") or p.parent != root
                 if pattern.search(p.read_text())]
    assert offenders == []


def test_a_closed_stdout_ends_the_command_quietly(capfd):
    """``elecsolver plan ... | head``: the reader closing the pipe ends the command with 128 + SIGPIPE and no
    traceback, whatever it was printing."""
    from elecsolver.cli import _guarded

    def plan():
        print("--dp 8 --tp 1 --pp 1")
        raise BrokenPipeError(32, "Broken pipe")

    assert _guarded(plan) == 141
    assert capfd.readouterr().err == ""
