"""Configuration files (``--config run.toml``, ``elecsolver config``, ``OUT/config.toml``), ``--version`` and
TensorBoard logging (``training.tensorboard``)."""

from __future__ import annotations

import csv
import importlib.metadata

import numpy as np
import pytest
import torch
from conftest import NO_PNG, run_cli, run_main

from elecsolver import __version__
from elecsolver.cli import _parser, _parallel_options, _configure, main
from elecsolver.config import ConfigError, read_toml
from elecsolver.problems import REGISTRY, get_problem_class

PROBLEM = "maxwell-point-source-2d"


def test_version_has_one_source():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"elecsolver {__version__}"
    assert importlib.metadata.version("elecsolver") == __version__  # pyproject reads elecsolver/_version.py


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_config_prints_every_key_and_reads_back_to_the_same_configuration(name, tmp_path, capsys):
    cls = get_problem_class(name)
    for preset in cls.presets:
        assert main(["config", name, "--preset", preset]) == 0
        text = capsys.readouterr().out
        path = tmp_path / f"{preset}.toml"
        path.write_text(text)
        data, _ = read_toml(path)
        assert data["preset"] == preset and "parallel" in data
        # read back on top of the problem's *default* preset: the file's `preset` line picks the base
        args = _parser().parse_args(["run", name, "--config", str(path)])
        problem = _configure(cls, args)
        assert problem.config == cls.preset_config(preset), preset
        assert args.preset == preset and args.parallel_file == {}


def test_set_and_flags_override_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('preset = "ci"\n[training]\nsteps = 7\nlr = 0.002\n[parallel]\ntp = 2\nprecision = "bf16"\n')
    args = _parser().parse_args(["run", PROBLEM, "--config", str(path), "--set", "training.lr=0.003",
                                 "--precision", "fp16"])
    problem = _configure(get_problem_class(PROBLEM), args)
    assert problem.training.steps == 7 and problem.training.lr == 0.003
    options = _parallel_options(args)
    assert options.tp == 2 and options.precision == "fp16" and options.pp == 1


@pytest.mark.parametrize("text, where, what", [
    ("training = 3\n[nonsense\n", "line 2", "not valid TOML"),
    ('[training]\nsteps = 5\nstpes = 5\n', "line 3",
     "unknown configuration key 'training.stpes' (did you mean 'steps'?)"),
    ('[source]\nfrequency = "1 GHz"\n', "line 2", "source.frequency: expected a number"),
    ('[parallel]\ntp = 2\nshards = 2\n', "line 3", "unknown configuration key 'parallel.shards': "),  # none close
    ('[training]\nfinish = {steps = 2.5}\n', "line 2", "training.finish.steps: expected an integer"),
    ('[training]\nsteps = 0\n', None, "training.steps must be >= 1"),
])
def test_a_bad_config_file_is_one_line_naming_file_and_line_and_nothing_is_written(tmp_path, text, where, what):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = tmp_path / "out"
    proc = run_main("run", PROBLEM, "--config", str(path), "--out", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], proc.stderr
    if where:
        assert f"--config {path} {where}" in lines[0]
    assert not out.exists()


def test_an_unknown_training_key_in_a_problems_defaults_is_refused():
    config = get_problem_class(PROBLEM).preset_config("ci")
    config["training"]["stpes"] = 3  # what merge() would refuse from a user; here from a problem's own defaults
    with pytest.raises(ConfigError, match=r"unknown key training\.stpes"):
        get_problem_class(PROBLEM)(config)


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """20 steps of the main job's ci preset from a printed config file, with TensorBoard, logged every 10 steps."""
    root = tmp_path_factory.mktemp("cfg")
    proc = run_cli("config", PROBLEM, "--preset", "ci")
    assert proc.returncode == 0, proc.stderr
    (root / "run.toml").write_text(proc.stdout)
    out = root / "o1"
    code = main(["run", PROBLEM, "--config", str(root / "run.toml"), "--steps", "20", "--out", str(out), "--quiet",
                 "--set", "training.tensorboard=true", "--set", "training.log_every=10", *NO_PNG])
    assert code == 0
    return root, out


def test_config_toml_reruns_the_run_bit_for_bit(logged_run):
    root, out = logged_run
    text = (out / "config.toml").read_text()
    assert "steps = 20" in text and "tensorboard = true" in text and 'preset = "ci"' in text
    again = root / "o2"
    assert main(["run", PROBLEM, "--config", str(out / "config.toml"), "--out", str(again), "--quiet"]) == 0
    first = torch.load(out / "checkpoint.pt", weights_only=False)["model"]
    second = torch.load(again / "checkpoint.pt", weights_only=False)["model"]
    assert first.keys() == second.keys()
    for k in first:
        assert torch.equal(first[k], second[k]), k


def test_tensorboard_scalars_equal_convergence_csv(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, out = logged_run
    events = EventAccumulator(str(out / "tb"), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    rows = list(csv.DictReader((out / "convergence.csv").open()))
    assert [int(r["step"]) for r in rows] == [10, 20]
    columns = [c for c in rows[0] if c != "step"]
    assert sorted(events.Tags()["scalars"]) == sorted(columns)
    for column in columns:
        logged = events.Scalars(column)
        assert [e.step for e in logged] == [10, 20]
        # TensorBoard stores float32: equal to the CSV's float64 within float32 rounding
        np.testing.assert_allclose([e.value for e in logged], [float(r[column]) for r in rows], rtol=2**-23)
    assert sorted(events.Tags()["images"]) == ["fields/Ex", "fields/Ey", "fields/Hz"]
    image = events.Images("fields/Hz")[-1]
    assert image.step == 20 and (image.width, image.height) == (101, 101)


def test_output_png_must_be_a_boolean():
    """The switch that skips the PNG snapshots: a value that is not true or false is refused, naming the key."""
    cls = get_problem_class("maxwell-cavity-2d")
    config = cls.preset_config("ci")
    assert config["output"]["png"] is True  # every problem has it, on by default
    config["output"]["png"] = "no"
    with pytest.raises(ConfigError, match="output.png must be true"):
        cls(config)
