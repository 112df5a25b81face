"""Every registered problem's ``smoke`` preset (its ``ci`` preset shrunk: at most 3 steps, 64 points per loss term,
11 output sites per axis, width 64; :func:`elecsolver.problem.smoke_changes`) trains from the command line in this
process, and what it writes is self-consistent: a log row per step, the problem's output sites, and errors in
``metrics.json`` that equal the relative L2 error recomputed here from ``fields.h5``'s fields and reference.

The errors of three steps mean nothing; whether a preset trains well is the accuracy set's question
(tests/test_registry.py, ``-m accuracy``)."""

from __future__ import annotations

import csv
import json

import h5py
import numpy as np
import pytest
import torch
from conftest import run_main

from elecsolver.problem import SMOKE_POINTS, SMOKE_SITES, SMOKE_STEPS, SMOKE_WIDTH, Problem
from elecsolver.problems import REGISTRY

NAMES = sorted(REGISTRY)


def test_every_problem_has_a_smoke_preset_derived_from_its_ci_preset_or_its_default():
    from elecsolver.problems.helmholtz_square import HelmholtzSquare

    class NoCi(HelmholtzSquare):  # a user's problem with only a default preset
        presets = {"quick": {"training": {"steps": 500}, "sampling": {"interior": 900}}}

    smoke = NoCi.preset_config("smoke")
    assert smoke["training"]["steps"] == SMOKE_STEPS and smoke["sampling"]["interior"] == SMOKE_POINTS
    assert "smoke" in NoCi.presets and NoCi.default_preset == "quick"
    for name in NAMES:
        cls = REGISTRY[name]
        ci, smoke = cls.preset_config("ci"), cls.preset_config("smoke")
        assert smoke["training"]["steps"] == min(ci["training"]["steps"], SMOKE_STEPS)
        assert smoke["network"]["width"] == min(ci["network"]["width"], SMOKE_WIDTH)
        assert smoke["output"]["png"] is False
        for key in ("interior", "boundary", "initial", *(k for k in ci["loss"] if k in ci["sampling"])):
            assert smoke["sampling"][key] == min(ci["sampling"][key], SMOKE_POINTS), (name, key)
        assert smoke["sampling"]["resample_every"] == ci["sampling"]["resample_every"]  # not a count
        assert cls(smoke).windows == cls(ci).windows, name  # the same error windows (the point source's early one)
        # the problem's own sections and the loss weights are ci's
        for section in set(ci) - {"training", "sampling", "output", "network"}:
            assert smoke[section] == ci[section], (name, section)


def test_a_problem_trained_from_python_records_the_preset_its_configuration_is(tmp_path):
    import elecsolver as es

    cls = REGISTRY["helmholtz-square"]
    es.train(cls(cls.preset_config("smoke")), out=tmp_path / "a", quiet=True)
    changed = cls.preset_config("smoke")
    changed["training"]["seed"] = 5
    es.train(cls(changed), out=tmp_path / "b", quiet=True)
    got = [json.loads((tmp_path / d / "metrics.json").read_text())["preset"] for d in "ab"]
    assert got == ["smoke", "custom"]
    # config.toml names a preset --config can start from; its keys are the run's either way
    assert 'preset = "quick"' in (tmp_path / "b" / "config.toml").read_text()


def _rel_l2(h5: h5py.File, name: str, t_max: float | None) -> float:
    """||u - u_ref|| / ||u_ref|| over the masked sites and times <= t_max, from the file alone (docs/output-format.md:
    a complex field has its real and imaginary parts on a last axis of 2)."""
    u, ref = (np.asarray(h5[f"{group}/{name}"][()], dtype=np.float64) for group in ("fields", "reference"))
    if h5[f"fields/{name}"].attrs.get("complex", 0):
        u, ref = u[..., 0] + 1j * u[..., 1], ref[..., 0] + 1j * ref[..., 1]
    if "t" in h5["coords"] and t_max is not None:
        keep = h5["coords/t"][()] <= t_max * (1 + 1e-12)
        u, ref = u[keep], ref[keep]
    if "mask" in h5:
        mask = h5["mask"][()].astype(bool)
        u, ref = (u[:, mask], ref[:, mask]) if "t" in h5["coords"] else (u[mask], ref[mask])
    return float(np.linalg.norm((u - ref).ravel()) / np.linalg.norm(ref.ravel()))


@pytest.mark.filterwarnings("ignore:.*points per wavelength:UserWarning")  # 64 points are few, and said so
@pytest.mark.parametrize("name", NAMES)
def test_smoke_preset_trains_and_its_outputs_agree_with_each_other(name, tmp_path):
    out = tmp_path / "run"
    threads = torch.get_num_threads()
    proc = run_main("run", name, "--preset", "smoke", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert torch.get_num_threads() == threads and torch.get_default_dtype() == torch.float32  # nothing leaks
    cls = REGISTRY[name]
    problem = cls(cls.preset_config("smoke"))
    steps = problem.training.steps

    rows = list(csv.DictReader((out / "convergence.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(1, steps + 1))
    assert not list(out.glob("*.png"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["preset"] == "smoke" and metrics["steps"] == steps
    with h5py.File(out / "fields.h5") as h5:
        shape = tuple(h5[f"fields/{problem.fields[0]}"].shape)
        sites = shape[1:] if "t" in h5["coords"] else shape
        if h5[f"fields/{problem.fields[0]}"].attrs.get("complex", 0):
            sites = sites[:-1]
        assert sites == tuple(problem.output.shape) and max(sites) <= SMOKE_SITES
        own_scoring = type(problem).errors is not Problem.errors  # e.g. the 3-D cavity scores a field by its group
        for window, errors in metrics["rel_l2"].items():
            assert set(errors) >= set(problem.fields)
            last = {k.removeprefix(f"rel_l2_{window}_"): float(v) for k, v in rows[-1].items()
                    if k.startswith(f"rel_l2_{window}_")}
            for field, value in errors.items():
                if field in last:  # the last progress log is at the final parameters
                    assert last[field] == pytest.approx(value, rel=1e-9), (window, field)
                if not own_scoring:
                    assert value == pytest.approx(_rel_l2(h5, field, problem.windows[window]), rel=1e-9), \
                        (window, field)
