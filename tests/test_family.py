"""Parameter axes and the family of point sources: inputs, sampling, sources and heads with parameters, data
parallelism, queries and fine-tuning starts (elecsolver.axes, elecsolver.query, problems/maxwell_point_source_family)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import NO_PNG, run_cli, run_main
from elecsolver.problems import get_problem_class

import elecsolver as es
from elecsolver.operators import evaluate

FAM = get_problem_class("maxwell-point-source-family")
MPS = get_problem_class("maxwell-point-source-2d")


def _family(**sets):
    from elecsolver.config import apply_overrides

    return FAM(apply_overrides(FAM.preset_config("ci"), [f"{k}={v}" for k, v in sets.items()]))


# ---- axes -----------------------------------------------------------------------------------------------------------
def test_axes_of_a_family_and_of_a_single_configuration():
    p = _family()
    assert p.inputs == ("x", "y", "t", "x0", "y0", "f")
    assert [a.kind for a in p.axes] == ["space", "space", "time", "parameter", "parameter", "parameter"]
    assert p.field_inputs == ("x", "y", "t")
    assert p.units["x0"] == "m" and p.units["f"] == "Hz"
    assert p.configuration == {"x0": 0.4975, "y0": 0.4975, "f": 1.0e9}
    single = MPS(MPS.preset_config("ci"))
    assert single.inputs == single.field_inputs == ("x", "y", "t") and single.parameters == []
    # the PDE differentiates along space and time only: the jets carry no parameter direction
    for c in p.constraints():
        assert set(c.wrt) <= {"x", "y", "t"}


def test_parameter_columns_cover_the_box_in_training_units():
    p = _family()
    cloud = p.sample("pde", seed=4)
    cols = cloud.points[:, 3:] * p._axis_scales()[3:]  # SI
    for k, par in enumerate(p.parameters):
        assert par.lower <= cols[:, k].min() and cols[:, k].max() <= par.upper
        assert cols[:, k].max() - cols[:, k].min() > 0.9 * (par.upper - par.lower)  # a low-discrepancy spread
    # f in training units is f T (T = L / c0): O(1)
    assert 2 < cloud.points[:, 5].min() and cloud.points[:, 5].max() < 4.1
    # the source disc follows each point's own source
    src = p.sample("source", seed=4).points
    rho = np.hypot(src[:, 0] - src[:, 3], src[:, 1] - src[:, 4]) * p.scales.length
    assert rho.max() <= p.source_disc_radius() * (1 + 1e-12)
    # sampling.parameters = fixed: every point at the configuration
    fixed = _family(**{"sampling.parameters": '"fixed"', "source.frequency": 1.4e9}).sample("pde", seed=4).points
    assert np.allclose(fixed[:, 3:] * p._axis_scales()[3:], [0.4975, 0.4975, 1.4e9], rtol=1e-14)


def test_parameter_declaration_errors():
    with pytest.raises(ValueError, match=r"upper > lower, got \[0.7, 0.3\]"):
        es.Parameter("x0", 0.7, 0.3, unit="m")
    with pytest.raises(ValueError, match="identifier other than"):
        es.Parameter("t", 0, 1)
    with pytest.raises(es.ConfigError, match=r"source.frequency = 1.4e\+09 Hz lies outside the trained range"):
        _family(**{"source.frequency": 1.4e9})


def test_bad_family_input_is_one_line_and_writes_nothing(tmp_path):
    for args in (["--set", "family.source.x0=[0.7, 0.3]"], ["--set", "source.x0=0.9"],
                 ["--set", "family.source.frequency=[-1e9, 1e9]"], ["--set", "source.x0=[0.3, 0.7]"]):
        out = tmp_path / "never"
        proc = run_main("run", "maxwell-point-source-family", "--preset", "ci", "--steps", "2", "--out", str(out),
                       *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not out.exists()


# ---- sources and the near-field head with parameters ------------------------------------------------------------
def test_parametric_source_equals_the_fixed_source_at_each_configuration():
    x0, y0, f = es.Parameter("x0", 0.3, 0.7, "m"), es.Parameter("y0", 0.3, 0.7, "m"), es.Parameter("f", 8e8, 1.2e9, "Hz")
    family = es.Source("Hz", es.GaussianPulse(f), es.GaussianProfile((x0, y0), 7.5e-3))
    g = torch.Generator().manual_seed(1)
    n = 50
    coords = {"x": 0.42 + 0.01 * torch.randn(n, generator=g, dtype=torch.float64),  # about the source: values O(1)
              "y": 0.55 + 0.01 * torch.randn(n, generator=g, dtype=torch.float64),
              "t": 4e-9 * torch.rand(n, generator=g, dtype=torch.float64),
              "x0": torch.full((n,), 0.42, dtype=torch.float64), "y0": torch.full((n,), 0.55, dtype=torch.float64),
              "f": torch.full((n,), 1.1e9, dtype=torch.float64)}
    fixed = es.Source("Hz", es.GaussianPulse(1.1e9), es.GaussianProfile((0.42, 0.55), 7.5e-3))
    a, b = family.value(coords), fixed.value(coords)
    assert float(b.abs().max()) > 1.0 and torch.allclose(a, b, rtol=1e-13, atol=1e-13 * float(b.abs().max()))
    with pytest.raises(ValueError, match="is not an input of this problem"):
        family.value({k: v for k, v in coords.items() if k != "f"})


def test_near_field_head_with_parameter_columns():
    """The family's head: equal to the single configuration's at that configuration, and its jets equal nested
    autograd to second order along (x, y, t) with the parameters as further inputs (float64)."""
    p = _family(**{"network.near_field_hz": "true"})
    single = MPS(MPS.preset_config("ci") | {"network": {**MPS.preset_config("ci")["network"], "near_field_hz": True}})
    head, head1 = p.heads[0], single.heads[0]
    g = torch.Generator().manual_seed(2)
    xyt = torch.rand(40, 3, generator=g, dtype=torch.float64) * torch.tensor([0.2, 0.2, 1.0]) + \
        torch.tensor([0.4, 0.4, 0.2])
    conf = torch.as_tensor(p.training_units_of_parameters(np.array([[0.4975, 0.4975, 1e9]])))
    x = torch.cat([xyt, conf.expand(40, 3)], 1)
    assert torch.allclose(head.closed_form(x), head1.closed_form(xyt), rtol=1e-13, atol=1e-15)
    from elecsolver.networks import Activation, JetLinear, Network

    torch.manual_seed(0)
    net = Network(torch.nn.Sequential(JetLinear(6, 8), Activation("sin"), JetLinear(8, 3)), [head]).double()
    names, outs = list(p.inputs), ["Ex", "Ey", "Hz"]
    varied = torch.cat([xyt, torch.as_tensor(p.training_units_of_parameters(
        np.column_stack([0.45 + 0.1 * xyt[:, 0].numpy(), 0.5 * np.ones(40), 0.9e9 + 1e8 * xyt[:, 2].numpy()])))], 1)
    for kw in ({"wrt": ["x", "y", "t"]}, {"wrt": ["x", "y", "t"], "second": [("x", "y"), ("t", "t")]}):
        a = evaluate(net, varied, names, outs, **kw).jet.channels
        b = evaluate(net, varied, names, outs, method="autograd", **kw).jet.channels
        assert float((a - b).norm() / b.norm()) < 1e-10, kw


def test_parameter_scale_narrows_only_the_parameter_columns():
    """network.parameter_scale s maps each parameter input to [-s, s]: the network with s equals the one with s = 1
    fed the parameter columns moved to centre + s (p - centre), space and time columns and their jets untouched; the
    default builds the very network of before (float64)."""
    from elecsolver.config import ConfigError
    from elecsolver.networks import InputScaling, Network

    base, narrow = _family(), _family(**{"network.parameter_scale": 0.25})
    assert base._input_spans(0) is None and narrow._input_spans(2) == [1, 1, 1, .25, .25, .25, 1, 1]
    torch.manual_seed(3)
    n1 = base.build_network().double()
    torch.manual_seed(3)
    n2 = narrow.build_network().double()
    s1, s2 = n1.state_dict(), n2.state_dict()
    assert s1.keys() == s2.keys()
    for k in s1:  # the same weights; only the scaling of the parameter columns differs
        if not k.endswith("inv_half"):
            assert torch.equal(s1[k], s2[k]), k
    sc1 = next(m for m in n1.modules() if isinstance(m, InputScaling))
    x = torch.as_tensor(narrow.sample("pde", seed=1).points[:64], dtype=torch.float64)
    moved = x.clone()
    moved[:, 3:] = sc1.centre[3:] + 0.25 * (x[:, 3:] - sc1.centre[3:])
    names, outs = list(base.inputs), list(base.outputs)
    kw = {"wrt": ["x", "y", "t"], "second": [("x", "x"), ("t", "t")]}
    # the bodies (the near-field head reads the parameters themselves, unscaled)
    a = evaluate(Network(n2.body, []), x, names, outs, **kw).jet.channels
    b = evaluate(Network(n1.body, []), moved, names, outs, **kw).jet.channels
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="positive"):
        InputScaling([0.0, 0.0], [1.0, 1.0], [1.0, 0.0])
    with pytest.raises(ConfigError, match="parameter_scale"):
        _family(**{"network.parameter_scale": 0})


# ---- data parallel ----------------------------------------------------------------------------------------------
def test_family_dp2_equals_one_process(tmp_path):
    """Parameters are drawn with the points and sharded along space with them: dp = 2 is one process (float64)."""
    from test_parallel import assert_equal_runs, launch, merged, results

    ones, twos = {"one": {"family": True}}, {"two": {"family": True, "parallel": {"dp": 2}}}
    procs = launch(tmp_path, 1, ones), launch(tmp_path, 2, twos)  # side by side
    one, two = merged(results(tmp_path, 1, ones, procs[0])["one"]), merged(results(tmp_path, 2, twos, procs[1])["two"])
    assert_equal_runs(two, one)


# ---- queries, es.load, --init-from --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("family") / "run"
    proc = run_main("run", "maxwell-point-source-family", "--preset", "ci", "--steps", "30", "--out", str(out),
                    "--quiet", *NO_PNG, "--set", "output.nx=41", "--set", "output.ny=41")
    assert proc.returncode == 0, proc.stderr
    return out


def test_query_at_the_training_configuration_equals_the_run(short_run, tmp_path):
    run = es.read(short_run / "fields.h5")
    assert dict(run["fieldset"].parameters) == {"x0": 0.4975, "y0": 0.4975, "f": 1e9}
    assert run["fieldset"].units["f"] == "Hz"
    out = tmp_path / "q"
    proc = run_cli("query", str(short_run), "--set", "source.x0=0.4975", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    q = es.read(out / "fields.h5")
    for name in ("Ex", "Ey", "Hz"):  # the same float32 network in another process: equal to its roundoff (MKL's
        # kernels depend on the arrays' alignment, so two processes may round differently: 3e-5 of the peak seen)
        a, b = q["fieldset"].fields[name], run["fieldset"].fields[name]
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-4 * np.abs(b).max())
    m = json.loads((out / "metrics.json").read_text())
    assert m["configuration"]["x0"]["value"] == 0.4975 and m["rel_l2"]["early"]
    assert '<Information Name="x0" Value="0.4975 m"' in (out / "fields.xdmf").read_text()
    import meshio

    with meshio.xdmf.TimeSeriesReader(str(out / "fields.xdmf")) as reader:  # meshio reads it as any other file
        reader.read_points_cells()
        _, point_data, _ = reader.read_data(3)
    np.testing.assert_array_equal(point_data["Hz"], q["fieldset"].fields["Hz"][3].ravel())


def test_load_evaluates_any_configuration_and_probe(short_run):
    model = es.load(short_run)
    assert [p.name for p in model.parameters] == ["x0", "y0", "f"]
    fs = model.fields({"x0": 0.42, "source.frequency": 1.1e9})
    assert fs.parameters["x0"] == 0.42 and fs.parameters["f"] == 1.1e9
    # the points of the output grid at one time, through at(): the same values
    t = fs.times[10]
    xs, ys = np.meshgrid(fs.sites.axes["x"], fs.sites.axes["y"])
    pts = np.column_stack([xs.ravel(), ys.ravel(), np.full(xs.size, t)])
    got = model.at(pts, {"x0": 0.42, "f": 1.1e9})
    np.testing.assert_allclose(got["Hz"], fs.fields["Hz"][10].ravel(), rtol=1e-6, atol=1e-9)
    trace = model.probe([[0.2, 0.3], [0.8, 0.6]], fs.times, {"x0": 0.42, "f": 1.1e9})
    assert trace["Hz"].shape == (2, len(fs.times))
    with pytest.raises(es.ConfigError, match="lies outside the trained box"):
        model.fields({"f": 1.4e9})
    with pytest.warns(UserWarning, match="extrapolating"):
        model.fields({"f": 1.4e9}, extrapolate=True)
    with pytest.raises(es.ConfigError, match="no parameter"):
        model.at(pts, {"z0": 1.0})
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        model.at(pts[:, :2])


def test_query_bad_input_is_one_line_and_writes_nothing(short_run, tmp_path):
    for args in (["--set", "source.x0=0.9"], ["--set", "cavity.a=1"], ["--set", "source.x0=abc"],
                 ["--set", "source.x0"]):
        out = tmp_path / "never"
        proc = run_main("query", str(short_run), *args, "--out", str(out))
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not out.exists()
    proc = run_main("query", str(tmp_path), "--out", str(tmp_path / "never"))
    assert proc.returncode == 2 and "no trained run" in proc.stderr


def test_init_from_starts_from_the_runs_network_and_refuses_another_shape(short_run, tmp_path):
    from elecsolver.query import load_network_state
    from elecsolver.trainer import Trainer

    cfg = FAM.preset_config("ci")
    cfg["training"].update(init_from=str(short_run), steps=3)
    cfg["sampling"]["parameters"] = "fixed"
    cfg["source"]["frequency"] = 1.4e9  # outside the box: fixed sampling trains it
    tr = Trainer(FAM(cfg), progress=False)
    state = load_network_state(FAM(FAM.preset_config("ci")), short_run)
    for name, t in tr.model.state_dict().items():
        assert torch.equal(t, state[name].to(t.dtype)), name
    out = tmp_path / "never"
    proc = run_main("run", "maxwell-point-source-family", "--preset", "ci", "--init-from", str(short_run),
                   "--set", "network.width=32", "--steps", "2", "--out", str(out), "--quiet")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "does not fit this run's" in proc.stderr and not out.exists()


# ---- inversion ------------------------------------------------------------------------------------------------------
PLACES = np.array([[0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]])


def test_inversion_of_noise_free_family_data_recovers_the_configuration(short_run):
    """Hz at 4 probes computed by the family itself at a configuration inside the box: the inversion recovers it
    to 1e-6 (relative), whatever the 8 starts of the design."""
    model = es.load(short_run)
    times = np.linspace(0.5e-9, 4e-9, 15)
    truth = {"x0": 0.46, "y0": 0.53, "f": 1.07e9}
    import copy

    ref = copy.deepcopy(model)
    ref.network = ref.network.double()
    ref.dtype = torch.float64
    data = ref.probe(PLACES, times, truth)
    out = es.invert(model, PLACES, times, {"Hz": data["Hz"]}, lbfgs_steps=200)
    for k, v in truth.items():
        assert abs(out["configuration"][k] - v) <= 1e-6 * abs(v), (k, out["configuration"][k], v, out["misfit"])
    assert out["misfit"] < 1e-12 and len(out["starts"]) == 8
    # one unknown, the others given
    one = es.invert(model, PLACES, times, {"Hz": data["Hz"]}, unknowns=["source.frequency"],
                    known={"x0": 0.46, "y0": 0.53})
    assert abs(one["configuration"]["f"] - 1.07e9) <= 1e-6 * 1.07e9
    # the search in float64 (float32 by default) lands on the same configuration
    wide = es.invert(model, PLACES, times, {"Hz": data["Hz"]}, lbfgs_steps=200, search_dtype="float64")
    for k, v in truth.items():
        assert abs(wide["configuration"][k] - v) <= 1e-6 * abs(v), k
    with pytest.raises(es.ConfigError, match="search_dtype must be 'float32' or 'float64'"):
        es.invert(model, PLACES, times, {"Hz": data["Hz"]}, search_dtype="float16")


def test_invert_command_and_bad_probes(short_run, tmp_path):
    model = es.load(short_run)
    times = np.linspace(0.5e-9, 4e-9, 15)
    hz = model.probe(PLACES, times, {"x0": 0.46, "y0": 0.53, "f": 1.07e9})["Hz"]
    good = tmp_path / "probes.npz"
    np.savez(good, places=PLACES, times=times, Hz=hz)
    proc = run_main("invert", str(short_run), "--probes", str(good), "--json", str(tmp_path / "inv.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("recovered: x0 = ")
    got = json.loads((tmp_path / "inv.json").read_text())["configuration"]
    assert abs(got["x0"] - 0.46) < 1e-3 and abs(got["f"] - 1.07e9) < 1e-3 * 1.07e9
    bad = {"shape": dict(places=PLACES, times=times, Hz=hz[:, :-1]),
           "field": dict(places=PLACES, times=times, Bz=hz),
           "places": dict(places=PLACES[:, :1], times=times, Hz=hz),
           "missing": dict(times=times, Hz=hz)}
    for label, arrays in bad.items():
        path = tmp_path / f"{label}.npz"
        np.savez(path, **arrays)
        proc = run_main("invert", str(short_run), "--probes", str(path))
        assert proc.returncode == 2, (label, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (label, proc.stderr)
    proc = run_main("invert", str(short_run), "--probes", str(good), "--unknowns", "z0")
    assert proc.returncode == 2 and "no parameters" in proc.stderr


def test_reference_of_a_configuration_is_the_single_problems():
    """The family's reference at a configuration is maxwell-point-source-2d's for that source (the FDTD that
    tests/test_problem_reference.py puts into the PDE), through the same cache entry."""
    from elecsolver.config import apply_overrides

    sets = ["source.x0=0.42", "source.y0=0.55", "source.frequency=1.1e9"]
    fam = FAM(apply_overrides(FAM.preset_config("ci"), sets)).reference()
    one = MPS(apply_overrides(MPS.preset_config("ci"), sets)).reference()
    for k in ("Ex", "Ey", "Hz"):
        np.testing.assert_array_equal(fam.fields[k], one.fields[k])
