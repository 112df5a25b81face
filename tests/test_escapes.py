"""Bad input that used to run silently or end in a traceback: each is now one line naming the key (exit 2, nothing
written), or one line on a failed write with the earlier files intact (exit 1)."""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import NO_PNG, ROOT, run_cli

from elecsolver import cli
from elecsolver.config import ConfigError
from elecsolver.problems import get_problem_class

CAVITY = ["run", "maxwell-cavity-2d", "--preset", "smoke", "--steps", "2", *NO_PNG, "--quiet"]
CAVITY_CI = ["run", "maxwell-cavity-2d", "--preset", "ci", "--steps", "2", *NO_PNG, "--quiet"]


def _refused(capsys, argv, out: Path, *needles: str) -> str:
    code = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("elecsolver: error: "), err
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    assert not out.exists()
    return err[0]


def test_a_term_left_without_points_is_refused_unless_switched_off(tmp_path, capsys):
    _refused(capsys, [*CAVITY, "--set", "sampling.interior=0"], tmp_path / "o", "sampling.interior = 0",
             "'pde'", "--set loss.pde=0")
    _refused(capsys, [*CAVITY, "--set", "sampling.boundary=-5"], tmp_path / "o", "sampling.boundary", "-5")
    # switched off explicitly: the run goes on without the PDE term
    out = tmp_path / "off"
    assert cli.main([*CAVITY, "--set", "sampling.interior=0", "--set", "loss.pde=0", "--out", str(out)]) == 0
    header = (out / "convergence.csv").read_text().splitlines()[0]
    assert "loss_pde" not in header and "loss_pec" in header


@pytest.mark.parametrize(("key", "text"), [("cavity.a", "NaN"), ("training.lr", "NaN"),
                                           ("training.lr", "Infinity"), ("mode.amplitude", "-Infinity")])
def test_a_non_finite_value_is_refused_naming_key_and_value(tmp_path, capsys, key, text):
    _refused(capsys, [*CAVITY, "--set", f"{key}={text}"], tmp_path / "o", f"--set {key}={text}",
             "not a finite number")


def test_a_non_finite_value_from_python_is_refused_naming_its_key():
    cls = get_problem_class("maxwell-cavity-2d")
    config = cls.preset_config("ci")
    config["cavity"]["b"] = math.inf
    with pytest.raises(ConfigError, match=r"cavity\.b = Infinity: not a finite number"):
        cls(config)


@pytest.mark.parametrize(("problem", "key", "value", "axis"), [
    ("maxwell-cavity-3d", "cavity.b", "1e300", "along y"), ("maxwell-cavity-3d", "cavity.b", "1e-300", "along x"),
    ("maxwell-cavity-2d", "window.periods", "1e5", "along t"), ("waveguide-te10", "guide.length", "1e3", "along y"),
    ("dielectric-interface-1d", "window.travel", "1e5", "along t")])
def test_a_domain_beyond_ten_thousand_scales_is_refused_naming_the_key(tmp_path, capsys, problem, key, value, axis):
    """A box of 1e300 m (which trained to a NaN loss with the advice to lower the learning rate) or a window of
    1e5 periods: one line naming the axis, its span in scales and the key, nothing written."""
    argv = ["run", problem, "--preset", "ci", "--steps", "2", "--quiet", "--set", f"{key}={value}"]
    _refused(capsys, argv, tmp_path / "o", axis, "at most 1e+04 scales", f"check {key} = {float(value):.4g}")


def test_output_sites_beyond_the_domain_are_refused(tmp_path, capsys):
    text = (ROOT / "examples" / "tm_cavity.py").read_text()
    wide = text.replace('np.linspace(0, 2, out["nx"])', 'np.linspace(0, 6, out["nx"])')
    assert wide != text
    script = tmp_path / "wide_cavity.py"
    script.write_text(wide)
    line = _refused(capsys, ["run", str(script), "--steps", "2", "--quiet"], tmp_path / "o",
                    "x in [0, 6]", "x in [0, 2]")
    assert "beyond the domain" in line


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc")
def test_an_output_folder_that_cannot_be_created_is_one_line(tmp_path, capsys):
    code = cli.main([*CAVITY, "--out", "/proc/elecsolver-out"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--out /proc/elecsolver-out: cannot create a folder in /proc" in err[0]


def test_helmholtz_square_refuses_a_configuration_its_exact_solution_does_not_solve(tmp_path, capsys):
    for setting in ("physics.wavenumber=10.0", "physics.side=1.3"):
        _refused(capsys, ["run", "helmholtz-square", "--steps", "2", "--quiet", "--set", setting], tmp_path / "o",
                 "physics.wavenumber x physics.side", "multiple of pi")
    # k0 side = 6 pi is a configuration the exact solution solves: accepted
    cls = get_problem_class("helmholtz-square")
    p = cls(cls.preset_config("ci") | {"physics": {"wavenumber": 4 * math.pi, "side": 1.5}})
    edge = torch.tensor([[1.5], [0.3]], dtype=torch.float64)
    assert abs(float(p.exact(edge[0], edge[1])["Ez"])) < 1e-12


def test_a_full_disk_is_one_line_and_the_earlier_checkpoint_is_intact(tmp_path, capsys, monkeypatch):
    """ENOSPC injected into the checkpoint write (a write that stops half way, as on a full disk)."""
    out = tmp_path / "o"
    assert cli.main([*CAVITY, "--steps", "4", "--stop-after", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    before = (out / "checkpoint.pt").read_bytes()

    def full_disk(obj, path, *args, **kwargs):
        Path(path).write_bytes(b"\0" * 100)  # a partial file, then the error a full disk gives
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    code = cli.main([*CAVITY, "--steps", "4", "--resume", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert f"cannot write {out / 'checkpoint.pt'}: No space left on device" in err[0]
    assert (out / "checkpoint.pt").read_bytes() == before
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


_KILLED_WRITE = """
import contextlib, os, sys, time
import elecsolver.fields.hdf5, elecsolver.io.atomic, elecsolver.training.trainer
original, count = elecsolver.io.atomic.atomic_path, [0]

@contextlib.contextmanager
def half_written(final):  # the write of KILL_IN number KILL_AT stops half way and the process is killed there
    with original(final) as tmp:
        yield tmp
        if os.path.basename(final) == os.environ["KILL_IN"]:
            count[0] += 1
            if count[0] == int(os.environ["KILL_AT"]):
                os.truncate(tmp, os.path.getsize(tmp) // 2)
                open(os.environ["KILL_MARKER"], "w").close()
                time.sleep(600)

elecsolver.training.trainer.atomic_path = elecsolver.fields.hdf5.atomic_path = half_written
from elecsolver.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _killed_while_writing(tmp_path: Path, name: str, at: int, *argv: str) -> None:
    import signal
    import sys
    import time

    marker = tmp_path / f"writing-{name}"
    env = {**os.environ, "KILL_IN": name, "KILL_AT": str(at), "KILL_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITE, *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), f"the run ended (exit {proc.poll()}) before writing {name}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("name", ["checkpoint.pt", "fields.h5"])
def test_a_process_killed_while_it_writes_leaves_the_previous_complete_file(tmp_path, name):
    """SIGKILL while the second checkpoint.pt (or the resumed run's fields.h5) is half written: the file is the
    previous complete one, byte for byte; the next run removes the unfinished temporary file and completes."""
    import h5py

    from elecsolver.training.trainer import read_checkpoint

    out = tmp_path / "o"
    run = [*CAVITY, "--steps", "4", "--set", "training.checkpoint_every=2", "--out", str(out)]
    if name == "checkpoint.pt":  # a run stopped at step 2, resumed and killed while writing step 4's checkpoint
        assert cli.main([*run, "--stop-after", "2"]) == 0
        before = (out / name).read_bytes()
        _killed_while_writing(tmp_path, name, 1, *run, "--resume")
    else:  # a complete run, then the same run again into the same folder, killed while writing its fields
        assert cli.main(run) == 0
        before = (out / name).read_bytes()
        _killed_while_writing(tmp_path, name, 1, *run)
    assert (out / name).read_bytes() == before
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # the killed write's temporary file
    if name == "checkpoint.pt":
        assert read_checkpoint(out / name)["step"] == 2
    else:
        with h5py.File(out / name, "r") as f:
            assert len(f.keys()) > 0
    proc = run_cli(*run, *(["--resume"] if name == "checkpoint.pt" else []))
    assert proc.returncode == 0, proc.stderr
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert read_checkpoint(out / "checkpoint.pt")["step"] == 4


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          check=False).returncode == 0


def test_a_real_full_disk_is_one_line(tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "300k"):
        pytest.skip("mounting a small tmpfs needs root and a mount-capable container")
    try:
        # the ci preset's outputs (the smoke preset's all fit in 300 kB)
        proc = run_cli(*CAVITY_CI, "--out", str(disk / "o"))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert f"cannot write {disk / 'o'}" in lines[0] and "Traceback" not in proc.stderr
        assert not [p for p in (disk / "o").iterdir() if p.name.endswith(".tmp")]
        for name in ("checkpoint.pt", "fields.h5", "metrics.json"):  # either absent or complete
            path = disk / "o" / name
            if path.exists() and name == "metrics.json":
                json.loads(path.read_text())
            elif path.exists() and name == "checkpoint.pt":
                torch.load(path, weights_only=False)
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not-a-checkpoint"])
def test_a_damaged_checkpoint_is_one_line_naming_the_file(tmp_path, capsys, damage):
    out = tmp_path / "o"
    assert cli.main([*CAVITY, "--steps", "4", "--stop-after", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    ckpt = out / "checkpoint.pt"
    if damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:5000])
    elif damage == "garbage":
        ckpt.write_text("garbage\n")
    else:
        torch.save({"something": 1}, ckpt)
    code = cli.main([*CAVITY, "--steps", "4", "--resume", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{ckpt}" in err[0], err
    assert ("truncated or corrupted" in err[0]) or ("not an elecsolver checkpoint" in err[0])
    assert not (out / "fields.h5").exists()


def test_quiet_still_says_where_the_outputs_went_and_a_pipe_gets_no_bar(tmp_path):
    quiet = run_cli(*CAVITY, "--out", str(tmp_path / "q"))
    assert quiet.returncode == 0 and f"outputs in {tmp_path / 'q'}{os.sep}" in quiet.stdout
    # output.png = false: no snapshots, and the closing line does not promise them
    assert "PNG" not in quiet.stdout and not list((tmp_path / "q").glob("*.png"))
    loud = run_cli(*CAVITY[:-1], "--set", "training.log_every=1", "--out", str(tmp_path / "l"))
    assert loud.returncode == 0
    assert "step/s" not in loud.stderr and "\r" not in loud.stderr  # no progress bar on a pipe
    assert sum(" step 1: " in ln or " step 2: " in ln for ln in loud.stderr.splitlines()) == 2  # one log line a step


@pytest.mark.parametrize(("problem", "key", "value", "words"), [
    ("helmholtz-square", "physics.wavenumber", "0", "must be positive"),
    ("helmholtz-square", "sampling.points_per_wavelength", "0", ">= 2 points per side"),
    ("maxwell-cavity-2d", "training.least_squares.ridge", "1e300", "in [0, 1]"),
    ("maxwell-cavity-2d", "network.width", "1e300", "at most 10^9"),
    ("maxwell-cavity-2d", "network.depth", "1e12", "at most 10^9")])
def test_what_the_fuzzed_cases_found_is_one_line_naming_the_key(tmp_path, capsys, problem, key, value, words):
    """A zero wavenumber (once a ZeroDivisionError traceback), a ridge of 1e300 (once reported as a loss that is not
    quadratic) and a network beyond any memory (once an OverflowError): one line, exit 2, nothing written."""
    preset = ["--preset", "ci"]
    _refused(capsys, ["run", problem, *preset, "--steps", "2", "--quiet", "--set", f"{key}={value}"], tmp_path / "o",
             key, words)
