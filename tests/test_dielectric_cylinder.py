"""dielectric-cylinder-family: the dielectric series against its three limits (no cylinder, a conductor, no
absorption), the equations and interface conditions it must satisfy, and the problem's declaration."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import run_cli, run_main
from elecsolver.problems import REGISTRY

import elecsolver as es
from elecsolver.config import apply_overrides
from elecsolver.reference.cylinder import (
    dielectric_cylinder_coefficients,
    dielectric_cylinder_total,
    pec_cylinder_coefficients,
    pec_cylinder_scattered,
)

K0, A = 2 * math.pi, 0.25


def build(*overrides, preset="ci"):
    cls = REGISTRY["dielectric-cylinder-family"]
    return cls(apply_overrides(cls.preset_config(preset), list(overrides)))


# ---- the series ------------------------------------------------------------------------------------------------
def test_no_contrast_scatters_nothing():
    """eps_r = 1: c_n = 0 and the total field is the incident wave, inside and outside, to round-off."""
    c, _ = dielectric_cylinder_coefficients(K0, A, 1.0)
    assert np.max(np.abs(c)) < 1e-15
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, 500), rng.uniform(-1, 1, 500)
    np.testing.assert_allclose(dielectric_cylinder_total(x, y, K0, A, 1.0), np.exp(1j * K0 * x), rtol=0, atol=1e-13)


def test_a_lossy_cylinder_of_growing_permittivity_tends_to_the_pec_series():
    """eps_r = E (1 + i), E -> infinity: c_n -> -J_n(k0 a) / H_n(k0 a) (TM PEC), the gap falling as E^(-1/2) (the
    interior wave's k0 / k1), and the scattered field outside tends to the PEC cylinder's."""
    pec = pec_cylinder_coefficients(K0 * A, "TM")
    gaps = []
    for e in (1e6, 1e8, 1e10):
        c, _ = dielectric_cylinder_coefficients(K0, A, e * (1 + 1j), n_max=pec.size - 1)
        gaps.append(np.max(np.abs(c - pec)))
    assert gaps[-1] < 1e-5
    np.testing.assert_allclose(gaps[0] / gaps[1], 10.0, rtol=0.02)
    np.testing.assert_allclose(gaps[1] / gaps[2], 10.0, rtol=0.02)
    x, y = np.array([0.5, -0.7, 0.1, 0.9]), np.array([0.0, 0.3, -0.6, 0.9])
    scattered = dielectric_cylinder_total(x, y, K0, A, 1e10 * (1 + 1j)) - np.exp(1j * K0 * x)
    np.testing.assert_allclose(scattered, pec_cylinder_scattered(x, y, K0, A, "TM"), rtol=0, atol=1e-4)
    inside = dielectric_cylinder_total(np.array([0.0, 0.1]), np.array([0.0, 0.05]), K0, A, 1e10 * (1 + 1j))
    assert np.max(np.abs(inside)) < 1e-30  # the field dies in the skin of the conductor


@pytest.mark.parametrize("eps_r", [1.5, 2.5, 4.0, 12.0])
def test_a_lossless_cylinder_conserves_power(eps_r):
    """The optical theorem term by term: with no absorption the power scattered by each order equals the power
    it takes from the incident wave, |c_n|^2 = -Re c_n (Bohren & Huffman 1983, sec. 8.4); so the scattering and
    extinction widths, (4/k0) sum' |c_n|^2 and -(4/k0) Re sum' c_n (sum' over n from -N to N), are equal.  A lossy
    cylinder (Im eps_r > 0) absorbs: extinction exceeds scattering."""
    c, _ = dielectric_cylinder_coefficients(K0, A, eps_r)
    np.testing.assert_allclose(np.abs(c) ** 2, -c.real, rtol=0, atol=1e-14)
    w = np.where(np.arange(c.size) == 0, 1.0, 2.0)
    scattering, extinction = 4 / K0 * np.sum(w * np.abs(c) ** 2), -4 / K0 * np.sum(w * c.real)
    assert scattering > 1e-3 and abs(scattering - extinction) < 1e-13 * extinction
    lossy, _ = dielectric_cylinder_coefficients(K0, A, eps_r + 0.5j)
    assert -4 / K0 * np.sum(w * lossy.real) > 4 / K0 * np.sum(w * np.abs(lossy) ** 2) * 1.01


def test_series_solves_the_helmholtz_equation_on_each_side_and_is_c1_across_the_interface():
    """-lap Ez - k^2 Ez = 0 with k = k0 sqrt(eps_r) inside and k0 outside (fourth-order differences, h = 1e-3 m),
    and Ez and dEz/dr continuous on r = a (one-sided second-order differences)."""
    eps = 4.0
    rng = np.random.default_rng(1)
    h = 1e-3
    for lo, hi, k in ((0.02, A - 0.01, K0 * math.sqrt(eps)), (A + 0.01, 1.4, K0)):
        r, phi = rng.uniform(lo, hi, 200), rng.uniform(-math.pi, math.pi, 200)
        x, y = r * np.cos(phi), r * np.sin(phi)

        def u(dx, dy, x=x, y=y):
            return dielectric_cylinder_total(x + dx, y + dy, K0, A, eps)

        def d2(axis, u=u):
            s = [(h * j, 0.0) if axis == 0 else (0.0, h * j) for j in (-2, -1, 0, 1, 2)]
            return (-u(*s[0]) + 16 * u(*s[1]) - 30 * u(*s[2]) + 16 * u(*s[3]) - u(*s[4])) / (12 * h**2)

        res = -(d2(0) + d2(1)) - k**2 * u(0.0, 0.0)
        assert np.max(np.abs(res)) < 1e-6 * k**2 * np.max(np.abs(u(0.0, 0.0)))
    phi = np.linspace(-math.pi, math.pi, 73)

    def on(r):
        return dielectric_cylinder_total(r * np.cos(phi), r * np.sin(phi), K0, A, eps)

    d = 1e-5
    np.testing.assert_allclose(on(A - 1e-12), on(A + 1e-12), rtol=0, atol=1e-10)
    d_in = (3 * on(A - 1e-12) - 4 * on(A - d) + on(A - 2 * d)) / (2 * d)
    d_out = (-3 * on(A + 1e-12) + 4 * on(A + d) - on(A + 2 * d)) / (2 * d)
    np.testing.assert_allclose(d_in, d_out, rtol=0, atol=1e-7 * K0 * np.abs(on(A)).max())


def test_series_refuses_bad_parameters():
    with pytest.raises(ValueError, match="must be > 0"):
        dielectric_cylinder_coefficients(-K0, A, 2.0)
    with pytest.raises(ValueError, match="must be > 0"):
        dielectric_cylinder_total([0.5], [0.0], K0, 0.0, 2.0)


# ---- the problem -----------------------------------------------------------------------------------------------
def test_problem_declares_the_family_the_window_the_pml_and_both_fields():
    p = build(preset="quick")
    assert [(q.name, q.lower, q.upper, q.unit, q.key) for q in p.parameters] == [
        ("eps_r", 1.5, 4.0, "1", "cylinder.eps_r"), ("a", 0.15, 0.35, "m", "cylinder.radius")]
    assert p.inputs == ("x", "y", "eps_r", "a") and p.configuration == {"eps_r": 4.0, "a": 0.25}
    assert p.fields == ("Ez_s",) and p.complex_fields == ("Ez_s",) and set(p.derived) == {"Ez"}
    assert p.pde.pml.outer_bounds() == ((-1.5, -1.5), (1.5, 1.5))
    ref = p.reference()
    x, y = p.output.coordinates().T
    total = dielectric_cylinder_total(x, y, K0, 0.25, 4.0)
    np.testing.assert_allclose(ref.fields["Ez"].reshape(-1), total, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ref.fields["Ez_s"].reshape(-1), total - np.exp(1j * K0 * x), rtol=0, atol=1e-12)
    other = build("cylinder.eps_r=2.0", "cylinder.radius=0.3", preset="quick").reference()
    np.testing.assert_allclose(other.fields["Ez"].reshape(-1), dielectric_cylinder_total(x, y, K0, 0.3, 2.0),
                               rtol=0, atol=1e-12)


def test_residual_of_the_series_is_small_at_the_collocation_points():
    """The PDE term of the problem, evaluated on the exact scattered field (series, by fourth-order differences),
    is the discretisation error only: the piecewise k and the source (k^2 - k0^2) Ez_inc are right."""
    import torch

    p = build(preset="quick")
    ctx = p.context
    rng = np.random.default_rng(3)
    r, phi = np.concatenate([rng.uniform(0.02, 0.24, 100), rng.uniform(0.26, 0.95, 100)]), rng.uniform(-3, 3, 200)
    x, y, h = r * np.cos(phi), r * np.sin(phi), 1e-3

    def us(dx, dy):
        return dielectric_cylinder_total(x + dx, y + dy, K0, A, 4.0) - np.exp(1j * K0 * (x + dx))

    lap = sum((-us(*s(-2)) + 16 * us(*s(-1)) - 30 * us(0, 0) + 16 * us(*s(1)) - us(*s(2))) / (12 * h**2)
              for s in (lambda j: (h * j, 0.0), lambda j: (0.0, h * j)))
    pts = torch.as_tensor(p.training_units(np.column_stack([x, y, np.full(200, 4.0), np.full(200, A)])))
    si = ctx.si(pts)
    k = p.pde.k(*si).numpy()
    f = p.pde.source(*si).numpy()
    res = -lap - k**2 * us(0, 0) - f
    assert np.max(np.abs(res)) < 1e-5 * K0**2 * 4
    assert np.allclose(k[:100], K0 * 2.0) and np.allclose(k[100:], K0)


def test_bad_family_boxes_are_one_line():
    def build(*overrides):
        return globals()["build"](*overrides, preset="quick")

    with pytest.raises(es.ConfigError, match="eps_r >= 1"):
        build("family.cylinder.eps_r=[0.5, 2.0]")
    with pytest.raises(es.ConfigError, match="radius"):
        build("family.cylinder.radius=[0.2, 1.5]")
    with pytest.raises(es.ConfigError, match="upper"):
        build("family.cylinder.radius=[0.3, 0.2]")
    with pytest.raises(es.ConfigError, match=r"^cylinder.eps_r = 6 lies outside the trained range \[1.5, 4\];"):
        build("cylinder.eps_r=6.0")
    build("cylinder.eps_r=6.0", "sampling.parameters=fixed")  # one configuration may lie outside the box
    assert REGISTRY["dielectric-cylinder-family"](
        REGISTRY["dielectric-cylinder-family"].preset_config("ci")).sampling.parameters == "fixed"


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cylinder") / "run"
    proc = run_main("run", "dielectric-cylinder-family", "--set", "sampling.snapshots=2", "--set", "sampling.nodes=4",
                    "--set", "network.width=150", "--set", "sampling.interior=700", "--set", "sampling.cylinder=300",
                    "--set", "sampling.pml_end=120", "--set", "output.n=61", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_short_run_exports_the_total_field_with_its_configuration(short_run):
    run = es.read(short_run / "fields.h5")
    fs = run["fieldset"]
    assert dict(fs.parameters) == {"eps_r": 4.0, "a": 0.25} and fs.units["a"] == "m"
    assert fs.fields["Ez"].dtype == np.complex128 and fs.fields["Ez"].shape == (61, 61)
    x = fs.sites.coordinates()[:, 0].reshape(61, 61)
    np.testing.assert_allclose(fs.fields["Ez"] - fs.fields["Ez_s"], np.exp(1j * K0 * x), rtol=0, atol=1e-12)
    m = json.loads((short_run / "metrics.json").read_text())
    assert set(m["rel_l2"]["full"]) == {"Ez_s", "Ez"}


RECEIVERS = 0.9 * np.column_stack([np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)])


def test_inversion_of_noise_free_receiver_data_recovers_eps_r_and_the_radius(short_run, tmp_path):
    """The complex scattered field at 8 receivers on r = 0.9 m, computed by the family itself (float64) at a
    configuration inside the box: the inversion recovers (eps_r, a) to 1e-6, from the command line too."""
    import copy

    import torch

    model = es.load(short_run)
    ref = copy.deepcopy(model)
    ref.network, ref.dtype = ref.network.double(), torch.float64
    truth = {"eps_r": 2.7, "a": 0.22}
    ez_s = ref.at(RECEIVERS, truth)["Ez_s"]
    assert ez_s.shape == (8,) and np.iscomplexobj(ez_s)
    out = es.invert(model, RECEIVERS, None, {"Ez_s": ez_s}, lbfgs_steps=200)
    for k, v in truth.items():
        assert abs(out["configuration"][k] - v) <= 1e-6 * v, (k, out["configuration"][k], v, out["misfit"])
    path = tmp_path / "receivers.npz"
    np.savez(path, places=RECEIVERS, Ez_s=ref.at(RECEIVERS, {"a": 0.22})["Ez_s"])  # eps_r: the run's 4
    proc = run_cli("invert", str(short_run), "--probes", str(path), "--unknowns", "cylinder.radius")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("recovered: a = 0.22 m"), proc.stdout
    bad = {"times": dict(places=RECEIVERS, times=np.ones(3), Ez_s=ez_s),
           "shape": dict(places=RECEIVERS, Ez_s=ez_s[:-1]),
           "missing": dict(Ez_s=ez_s)}
    for label, arrays in bad.items():
        np.savez(tmp_path / f"{label}.npz", **arrays)
        proc = run_main("invert", str(short_run), "--probes", str(tmp_path / f"{label}.npz"))  # refused in-process
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (label, proc.stderr)


def test_a_query_is_scored_against_the_series_of_its_configuration(short_run, tmp_path):
    proc = run_cli("query", str(short_run), "--set", "cylinder.eps_r=2.0", "--set", "cylinder.radius=0.3", "--out",
                   str(tmp_path / "q"))
    assert proc.returncode == 0, proc.stderr
    q = es.read(tmp_path / "q" / "fields.h5")
    x, y = q["fieldset"].sites.coordinates().T
    np.testing.assert_allclose(q["reference"].fields["Ez"].reshape(-1), dielectric_cylinder_total(x, y, K0, 0.3, 2.0),
                               rtol=0, atol=1e-12)
    proc = run_main("query", str(short_run), "--set", "cylinder.eps_r=5", "--out", str(tmp_path / "no"))
    assert proc.returncode == 2 and "cylinder.eps_r = 5 (trained on [1.5, 4])" in proc.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("overrides", [(), ("cylinder.radius=0.17",), ("sampling.parameters=\"nodes\"",
                                                                      "sampling.nodes=3")])
def test_jets_through_the_mapped_coordinates_equal_autograd(overrides):
    """The network on the mapped coordinates and the level-set feature (:class:`MappedKink` in
    :class:`elecsolver.networks.InputFeatures`), at a = a_ref (the identity map), away from it, and the family's
    interpolated output layer: every loss term's residual through jets equals nested autograd (float64), also at
    points right beside the cylinder's surface."""
    from conftest import assert_jets_equal_autograd

    p = build("network.width=64", *overrides)
    net = p.build_network().double()
    if overrides and "nodes" in overrides[0]:
        with torch.no_grad():
            net.heads[0].weight.normal_()
            net.heads[0].bias.normal_()
    assert type(net.body[0]).__name__ == "InputFeatures" and net.body[1].centre.numel() == 3  # x', y', g
    assert_jets_equal_autograd(p, net, rel=1e-10)


def test_the_map_holds_the_surface_at_the_mid_radius_and_is_the_identity_outside():
    p = build()
    f = p.input_features
    k0 = 1.0 / p.scales.length
    assert f.a_ref == pytest.approx(k0 * 0.25) and f.outer == pytest.approx(k0 * 0.9)
    th = torch.linspace(0, 2 * math.pi, 7, dtype=torch.float64)
    for a in (0.15, 0.2, 0.3, 0.35):
        x = torch.stack([k0 * a * torch.cos(th), k0 * a * torch.sin(th), 3 + 0 * th, k0 * a + 0 * th], 1)
        np.testing.assert_allclose(f(x)[:, :2].norm(dim=1), k0 * 0.25, rtol=1e-12)  # r = a -> r' = a_ref
        np.testing.assert_allclose(f(x)[:, 2], 0.0, atol=1e-12)  # the kink on the surface
        out = torch.stack([k0 * 0.95 * torch.cos(th), k0 * 1.2 * torch.sin(th), 3 + 0 * th, k0 * a + 0 * th], 1)
        np.testing.assert_allclose(f(out)[:, :2], out[:, :2], rtol=0, atol=1e-12)  # beyond R: the identity
        assert f.min_slope(k0 * a) > 0.4
    # the closed form's derivatives (forward mode) against central differences
    x = torch.tensor([[0.7, -0.4, 2.0, k0 * 0.31]], dtype=torch.float64)
    val, grad, hess = f.derivatives(x)
    eps = 1e-6
    for i in range(4):
        e = torch.zeros(1, 4, dtype=torch.float64)
        e[0, i] = eps
        np.testing.assert_allclose(((f(x + e) - f(x - e)) / (2 * eps))[0], grad[0, :, i], rtol=1e-7, atol=1e-9)
        dg = (f.derivatives(x + e)[1] - f.derivatives(x - e)[1]) / (2 * eps)
        np.testing.assert_allclose(dg[0], hess[0, :, :, i], rtol=1e-6, atol=1e-8)
    with pytest.raises(es.ConfigError, match="too far from the mid radius"):
        build("family.cylinder.radius=[0.05, 0.6]")


def test_the_kink_feature_is_c1_with_a_second_derivative_jump():
    import torch

    p = build()
    g = p.input_features
    a = 0.25 / p.scales.length  # the mid radius: the map is the identity
    x = torch.tensor([[a - 1e-6, 0.0, 3.0, a], [a + 1e-6, 0.0, 3.0, a]], dtype=torch.float64, requires_grad=True)
    val = g(x)[:, 2]
    d1 = torch.autograd.grad(val.sum(), x, create_graph=True)[0][:, 0]
    d2 = torch.autograd.grad(d1.sum(), x)[0][:, 0]
    assert float(val.detach().abs().max()) < 1e-11 and float(d1.detach().abs().max()) < 1e-5
    np.testing.assert_allclose(d2.numpy(), [-2.0, 2.0], atol=1e-5)
    assert build("network.kink=false").input_features is None
