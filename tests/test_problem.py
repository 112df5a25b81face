"""The problem base: declarations become constraints, scales, heads and output sites; bad declarations and bad
input get one clear error (exit code 2 from the CLI, nothing written)."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
import torch
from conftest import run_main

import elecsolver as es
from elecsolver.operators import evaluate


class Cavity(es.Problem):
    """TEz TE_11 mode of a unit PEC square (a small copy of examples/pec_cavity_te.py)."""

    name = "cavity-test"
    defaults = {"output": {"n": 9, "nt": 5}, "network": {"width": 16, "depth": 2},
                "sampling": {"interior": 64, "boundary": 32, "initial": 16},
                "training": {"steps": 5, "dtype": "float64"}}

    def setup(self):
        self.domain = es.TimeDomain(es.Rectangle([0, 0], [1, 1]), 0.0, 0.5 * self.scales.time)
        self.pde = es.MaxwellTEz()
        self.conditions = [es.PEC(weight=10.0), es.Initial(self.exact, weight=10.0)]
        n = self.config["output"]["n"]
        self.output = es.GridSites({"x": np.linspace(0, 1, n), "y": np.linspace(0, 1, n)})
        self.times = np.linspace(0, 0.5 * self.scales.time, self.config["output"]["nt"])

    def exact(self, x, y, t):
        w, tt = math.pi * math.sqrt(2), t / self.scales.time
        return {"Ex": -(math.pi / w) * torch.cos(math.pi * x) * torch.sin(math.pi * y) * torch.sin(w * tt),
                "Ey": (math.pi / w) * torch.sin(math.pi * x) * torch.cos(math.pi * y) * torch.sin(w * tt),
                "Hz": torch.cos(math.pi * x) * torch.cos(math.pi * y) * torch.cos(w * tt) / es.ETA0}


@pytest.mark.parametrize(("exact", "words"), [
    (lambda self, x, y: {"Ex": x}, r"called as exact\(x, y, t\) with the SI coordinates"),
    (lambda self, x, y, t: {"Eyy": x}, r"returned values for \['Eyy'\], which are no fields of"),
    (lambda self, x, y, t: [x, y], "must return a dict {field: tensor}"),
])
def test_a_wrong_exact_is_one_clear_error(exact, words):
    """A user's exact() with the wrong signature, field names or return type: a ConfigError (exit 2 from the CLI)
    that says what the call expects, not a traceback from deep inside."""
    bad = type("BadExact", (Cavity,), {"exact": exact})
    with pytest.raises(es.ConfigError, match=words):
        bad().reference()


def test_declaration_gives_inputs_units_terms_and_loss_weights():
    p = Cavity()
    assert p.inputs == ("x", "y", "t") and p.outputs == ("Ex", "Ey", "Hz")
    assert p.units == {"x": "m", "y": "m", "t": "s", "Ex": "V/m", "Ey": "V/m", "Hz": "A/m"}
    assert [c.name for c in p.constraints()] == ["pde", "pec", "initial"]
    assert p.config["loss"] == {"pde": 1.0, "pec": 10.0, "initial": 10.0}
    changed = Cavity(es.config.apply_overrides(p.config, ["loss.pec=3"]))
    assert changed.constraint("pec").weight == 3.0
    # PEC points on the walls with outward normals, in training units; initial points at t = 0
    cloud = p.sample("pec", seed=1)
    assert len(cloud) == 32 and cloud.normals.shape == (32, 2)
    on_wall = np.isclose(cloud.points[:, :2], 0).any(1) | np.isclose(cloud.points[:, :2], 1).any(1)
    assert on_wall.all() and cloud.points[:, 2].max() <= 0.5 + 1e-12
    assert np.all(p.sample("initial", seed=1).points[:, 2] == 0)


def test_reference_is_the_closed_form_on_the_output_sites():
    p = Cavity()
    ref = p.reference()
    assert ref.fields["Hz"].shape == (5, 9, 9) and ref.units["Hz"] == "A/m"
    xx, yy = np.meshgrid(p.output.axes["x"], p.output.axes["y"])
    np.testing.assert_allclose(ref.fields["Hz"][0], np.cos(np.pi * xx) * np.cos(np.pi * yy) / es.ETA0, atol=1e-15)
    # the metric of the reference against itself is 0, of zero fields 1
    assert all(v == 0 for v in p.metrics(ref, ref)["full"].values())
    zero = ref.with_fields({k: 0 * v for k, v in ref.fields.items()})
    assert all(v == pytest.approx(1.0) for v in p.metrics(zero, ref)["full"].values())


def test_hard_initial_values_hold_exactly_and_jets_equal_autograd():
    p = Cavity(es.config.apply_overrides(Cavity.preset_config(), ["network.hard_initial=true"]))
    assert [c.name for c in p.constraints()] == ["pde", "pec"]
    torch.manual_seed(0)
    net = p.build_network().double()
    pts = torch.as_tensor(p.training_units(p.domain.sample_initial(16, "sobol", seed=2).points))
    u0 = torch.stack([p.exact(*p.context.si(pts))[k] / p.context.field_scale(k) for k in p.outputs], 1)
    assert torch.allclose(net(pts), u0, atol=1e-14)
    x = torch.rand(20, 3, dtype=torch.float64)
    kw = {"second": [("x", "t")], "laplacian": {"x": 1.0, "y": 1.0}}
    a = evaluate(net, x, p.inputs, p.outputs, **kw).jet.channels
    b = evaluate(net, x, p.inputs, p.outputs, method="autograd", **kw).jet.channels
    assert float((a - b).norm() / b.norm()) < 1e-10


def test_trainer_under_a_launcher_without_a_context_refuses(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(es.ConfigError, match="every rank would train its own copy; use elecsolver.train"):
        es.Trainer(Cavity(), progress=False)


@pytest.mark.parametrize("change,message", [
    (lambda p: setattr(p, "conditions", [es.PEC("left")]), "on tags ['left']"),
    (lambda p: setattr(p, "conditions", [es.PEC(), es.PEC()]), "declared twice"),
    (lambda p: setattr(p, "domain", es.Rectangle([0, 0], [1, 1])), "needs the inputs ('x', 'y', 't')"),
    (lambda p: setattr(p, "pde", "maxwell"), "self.pde to an elecsolver.physics PDE"),
    (lambda p: setattr(p.pde, "units", ("V/m",)), "MaxwellTEz.units must be a dict {component: SI unit}"),
])
def test_bad_declarations_raise_one_config_error(change, message):
    class Bad(Cavity):
        def setup(self):
            super().setup()
            change(self)

    with pytest.raises(es.ConfigError) as info:
        Bad()
    assert message in str(info.value)


USER_PROBLEM = """
import numpy as np
import elecsolver as es


class Slope(es.PDE):
    fields, units = ("u",), {{"u": "V/m"}}

    def derivatives(self, inputs, scales=None):
        return es.Derivatives(wrt=("x",))

    def residual(self, f, points, ctx):
        return {residual}


class Line(es.Problem):
    name = "line"
    defaults = {{"training": {{"steps": 3}}, "sampling": {{"interior": 16, "boundary": 2}}}}

    def setup(self):
        self.domain = {domain}
        self.pde = Slope()
        self.conditions = [es.Dirichlet(value=lambda *c: 0 * c[0] + 1.0)]
        self.output = es.GridSites({{"x": np.linspace(0, 1, 5)}})
        self.times = {times}
"""


def _user_file(tmp_path, residual="(f.d('u', 'x') - 1.0).unsqueeze(1)", domain="es.Interval(0, 1)", times="None"):
    path = tmp_path / "line_problem.py"
    path.write_text(textwrap.dedent(USER_PROBLEM.format(residual=residual, domain=domain, times=times)))
    return path


def test_a_problem_file_outside_the_repository_runs_from_the_cli(tmp_path):
    path = _user_file(tmp_path)
    out = tmp_path / "o"
    proc = run_main("run", str(path), "--out", str(out), "--quiet", "--steps", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = es.read(out / "fields.h5")
    assert data["fieldset"].fields["u"].shape == (5,) and data["attrs"]["problem"] == "line"
    proc = run_main("run", f"{path}:Line", "--out", str(tmp_path / "o2"), "--quiet", "--steps", "1")
    assert proc.returncode == 0, proc.stderr
    # the command that config.toml says re-runs it names the file, not the unregistered name
    line = next(ln for ln in (out / "config.toml").read_text().splitlines() if "run it with:" in ln)
    command = line.split("run it with: ")[1].split()
    assert command[:3] == ["elecsolver", "run", f"{path}:Line"], line
    proc = run_main(*command[1:], "--out", str(tmp_path / "o3"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    first, again = (torch.load(d / "checkpoint.pt", weights_only=False)["model"] for d in (out, tmp_path / "o3"))
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)  # the same run


@pytest.mark.parametrize("kwargs,message", [
    ({"residual": "f.d('u', 'x') - 1.0"}, "loss term 'pde': the residual must have shape [N, m] = [4, m], got [4]"),
    ({"residual": "(f.d('u', 't') - 1.0).unsqueeze(1)", "domain": "es.TimeDomain(es.Interval(0, 1), 0, 1e-9)",
      "times": "np.linspace(0, 1e-9, 3)"}, "loss term 'pde': du/dt is read but was not declared"),
], ids=["residual-shape", "undeclared-derivative"])
def test_a_bad_residual_is_one_line_exit_2_nothing_written(tmp_path, kwargs, message):
    path = _user_file(tmp_path, **kwargs)
    out = tmp_path / "o"
    proc = run_main("run", str(path), "--out", str(out), "--quiet", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()


def test_an_unwritable_output_folder_is_one_line(tmp_path, monkeypatch, capsys):
    from elecsolver import cli

    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)
    code = cli.main(["run", "helmholtz-square", "--steps", "1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not writable by this user" in err[0]
    assert not (tmp_path / "o").exists()


def test_files_honour_the_umask(tmp_path):
    import os

    old = os.umask(0o027)
    try:
        p = Cavity()
        tr = es.Trainer(p, out_dir=tmp_path, progress=False)
        tr.train()
        es.write(tr.predict(), tmp_path / "f.h5")
    finally:
        os.umask(old)
    for name in ("checkpoint.pt", "convergence.csv", "f.h5", "f.xdmf"):
        assert oct((tmp_path / name).stat().st_mode & 0o777) == oct(0o640), name


class Annulus(es.Problem):
    """Laplace's equation on a square with a hole, phi = x^2 - y^2 (harmonic): output sites in the hole are masked."""

    name = "annulus-test"
    defaults = {"network": {"width": 8, "depth": 1}, "sampling": {"interior": 32, "boundary": 16},
                "training": {"steps": 2, "dtype": "float64"}}

    def setup(self):
        self.domain = es.Rectangle([-1, -1], [1, 1]) - es.Disk([0, 0], 0.5)
        self.pde = es.Laplace(field="phi", unit="V")
        self.conditions = [es.Dirichlet(value=lambda x, y: x**2 - y**2)]
        self.output = es.GridSites({"x": np.linspace(-1, 1, 21), "y": np.linspace(-1, 1, 21)})

    def exact(self, x, y):
        return {"phi": x**2 - y**2}


def test_output_sites_outside_the_domain_are_masked_and_left_out_of_the_metrics(tmp_path):
    p = Annulus()
    mask = p.output_mask()
    xx, yy = np.meshgrid(p.output.axes["x"], p.output.axes["y"])
    np.testing.assert_array_equal(mask, np.hypot(xx, yy) >= 0.5 - 1e-9)
    ref = p.reference()
    assert np.array_equal(ref.mask, mask)
    wrong_in_hole = ref.with_fields({"phi": np.where(mask, ref.fields["phi"], 7.0)})
    assert p.metrics(wrong_in_hole, ref)["full"]["phi"] == 0.0
    data = es.read(es.write(ref, tmp_path / "a.h5")[0])
    assert np.array_equal(data["fieldset"].mask, mask)


def test_key_meanings_read_the_docstring_sections_a_subclass_over_its_bases():
    class Base(es.Problem):
        """A base.

        Configuration keys
        ------------------
        source.x0 : source centre x
        window.t : [0, t_end] of the time window,
            continued on a deeper line

        Notes
        -----
        not a key : ignored
        """

    class Child(Base):
        """A child.

        Configuration keys
        ------------------
        source.x0 : the centre's x, in m
        """

    assert Base.key_meanings() == {"source.x0": "source centre x",
                                   "window.t": "[0, t_end] of the time window, continued on a deeper line"}
    assert Child.key_meanings() == {"source.x0": "the centre's x, in m",
                                    "window.t": "[0, t_end] of the time window, continued on a deeper line"}
