"""pec-cylinder-scattering: the Bessel/Hankel series satisfies the Helmholtz equation and the PEC conditions, the
problem is declared as specified (window, PML, masked interior, scattered and total fields), and a run
exports complex fields."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from elecsolver.problems import REGISTRY
from scipy import special

import elecsolver as es
from elecsolver.config import apply_overrides
from elecsolver.reference.cylinder import pec_cylinder_coefficients, pec_cylinder_scattered

K, A = 2 * math.pi, 0.5


def build(*overrides, preset="ci"):
    cls = REGISTRY["pec-cylinder-scattering"]
    return cls(apply_overrides(cls.preset_config(preset), list(overrides)))


@pytest.mark.parametrize("pol", ["TM", "TE"])
def test_series_satisfies_the_helmholtz_equation_outside_the_cylinder(pol):
    """-lap u - k^2 u = 0 by a fourth-order central difference (h = 2e-3 m; its truncation error is about
    h^4 k^6 / 90 relative to k^2 |u|, 1e-8), at points from the cylinder's surface to the window's corner."""
    rng = np.random.default_rng(0)
    r = rng.uniform(A + 0.05, 2.8, 200)
    phi = rng.uniform(-math.pi, math.pi, 200)
    x, y, h = r * np.cos(phi), r * np.sin(phi), 2e-3

    def u(dx, dy):
        return pec_cylinder_scattered(x + dx, y + dy, K, A, pol)

    def d2(axis):
        e = [(h * k, 0.0) if axis == 0 else (0.0, h * k) for k in (-2, -1, 0, 1, 2)]
        return (-u(*e[0]) + 16 * u(*e[1]) - 30 * u(*e[2]) + 16 * u(*e[3]) - u(*e[4])) / (12 * h**2)

    res = -(d2(0) + d2(1)) - K**2 * u(0.0, 0.0)
    assert np.max(np.abs(res)) / np.max(np.abs(K**2 * u(0.0, 0.0))) < 1e-6
    # and the scattered field radiates: r^(1/2) |u| tends to a constant (|u| ~ 1/sqrt(k r))
    far = np.array([20.0, 40.0, 80.0])
    amp = np.abs(pec_cylinder_scattered(far, 0 * far, K, A, pol)) * np.sqrt(far)
    assert np.ptp(amp) / amp.mean() < 0.02


def test_series_meets_the_pec_conditions_on_the_cylinder():
    phi = np.linspace(-math.pi, math.pi, 181)
    x, y = A * np.cos(phi), A * np.sin(phi)
    inc = np.exp(1j * K * x)
    # TM: Ez_total = 0 on r = a (just outside, where the series is used)
    total = pec_cylinder_scattered(x * (1 + 1e-15), y * (1 + 1e-15), K, A, "TM") + inc
    assert np.max(np.abs(total)) < 1e-12
    # TE: dHz_total/dr = 0 on r = a, with the series' own derivative (H_n' by scipy) and d/dr exp(i k r cos phi)
    c = pec_cylinder_coefficients(K * A, "TE")
    n = np.arange(c.size)[:, None]
    weight = np.where(n == 0, 1.0, 2.0)
    d_scat = np.sum(weight * (1j**n) * c[:, None] * K * special.h1vp(n, K * A) * np.cos(n * phi), axis=0)
    d_inc = 1j * K * np.cos(phi) * inc
    assert np.max(np.abs(d_scat + d_inc)) < 1e-12 * K
    # energy: a lossless scatterer has |c_n|^2 = -Re c_n for every term (the optical theorem, term by term)
    for pol in ("TM", "TE"):
        cn = pec_cylinder_coefficients(K * A, pol)
        np.testing.assert_allclose(np.abs(cn) ** 2, -cn.real, rtol=0, atol=1e-15)
        assert abs(cn[-1]) < 1e-30 and cn.size > K * A


def test_sites_on_the_surface_take_the_series_value_there():
    """A site on r = a that rounds to r = a - 1e-16 (e.g. (-0.3, -0.4) for a = 0.5) is on the surface, where the
    series holds (TE: Hz_total != 0), not inside the conductor."""
    x, y = np.array([-0.3 * (1 - 4e-16)]), np.array([-0.4 * (1 - 4e-16)])
    assert np.hypot(x, y)[0] < A  # the round-off the reference must not read as 'inside'
    on = pec_cylinder_scattered(x, y, K, A, "TE")
    off = pec_cylinder_scattered(np.array([-0.3 * (1 + 1e-9)]), np.array([-0.4 * (1 + 1e-9)]), K, A, "TE")
    np.testing.assert_allclose(on, off, rtol=1e-6)
    assert abs(on[0] + np.exp(1j * K * -0.3)) > 0.1  # not the inside value -u_inc


def test_series_refuses_bad_parameters():
    with pytest.raises(ValueError, match="polarisation"):
        pec_cylinder_scattered([1.0], [0.0], K, A, "TEM")
    with pytest.raises(ValueError, match="must be > 0"):
        pec_cylinder_scattered([1.0], [0.0], -K, A)


def test_problem_declares_the_window_the_pml_and_both_fields():
    p = build(preset="quick")  # the target case: k = 2 pi, a = 0.5 m, window [-2, 2]^2 m
    assert p.fields == ("Ez",) and p.outputs == ("Ez.re", "Ez.im") and p.time_convention == "exp(-i omega t)"
    assert p.pde.pml.lower == (-2.0, -2.0) and p.pde.pml.upper == (2.0, 2.0)
    lo, hi = p.domain.bbox()
    assert np.allclose(lo, -2.5) and np.allclose(hi, 2.5)
    ref = p.reference()
    assert set(ref.names) == {"Ez", "Ez_total"} and ref.is_complex("Ez") and ref.units["Ez_total"] == "V/m"
    pts = ref.points()
    r = np.hypot(pts[:, 0], pts[:, 1]).reshape(ref.shape)
    np.testing.assert_array_equal(ref.mask, r >= A - 1e-9 * 5.0)  # sites inside the cylinder are masked out
    np.testing.assert_allclose(ref.fields["Ez_total"], ref.fields["Ez"] + np.exp(1j * K * pts[:, 0]).reshape(ref.shape),
                               atol=1e-14)
    te = build("scattering.polarisation=TE", preset="quick")
    assert te.fields == ("Hz",) and te.units["Hz"] == "A/m" and "Hz_total" in te.reference().names
    # a zero network scores 1 on the scattered field: the metric is the complex-modulus relative L2
    zero = p.output_fieldset(np.zeros((pts.shape[0], 2)))
    assert p.errors(zero, ref)["Ez"] == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("pol", ["TM", "TE"])
@pytest.mark.parametrize("overrides", [[], ["scattering.wavenumber=5.0"], ["scattering.radius=0.3"],
                                       ["scattering.amplitude=2.5", "scattering.radius=0.7"]])
def test_the_reference_meets_the_pec_condition_for_the_configuration_it_is_given(pol, overrides):
    """The problem's reference (its output path, on sites of the cylinder's surface) is the scattered field of the
    configuration: the total field vanishes there (TM), or its normal derivative does (TE, a one-sided
    fourth-order difference outward, h = 1e-4 m): a reference that kept a default radius, wavenumber or amplitude
    fails."""
    p = build(f"scattering.polarisation={pol}", *overrides)
    c = p.config["scattering"]
    k, a, amp = c["wavenumber"], c["radius"], c["amplitude"]
    phi = np.linspace(-math.pi, math.pi, 37)[:-1]
    h = 1e-4
    rings = np.concatenate([np.column_stack([(a + j * h) * np.cos(phi), (a + j * h) * np.sin(phi)])
                            for j in range(5)])
    p.output = es.MeshSites(rings, {"vertex": np.arange(len(rings))[:, None]})
    us = np.asarray(p.reference().fields[p.field]).reshape(5, -1)
    total = us + amp * np.exp(1j * k * rings[:, 0]).reshape(5, -1)
    if pol == "TM":
        assert np.max(np.abs(total[0])) < 1e-10 * amp
    else:
        d_dr = (-25 * total[0] + 48 * total[1] - 36 * total[2] + 16 * total[3] - 3 * total[4]) / (12 * h)
        assert np.max(np.abs(d_dr)) < 1e-6 * k * amp
        assert np.max(np.abs(total[0])) > 0.5 * amp  # and the surface value is the outside one (not -u_inc)


@pytest.mark.parametrize(("overrides", "words"), [
    (["scattering.polarisation=TEM"], "scattering.polarisation"),
    (["scattering.radius=3.0"], "scattering.radius"),
    (["pml.thickness=0.0"], "pml.thickness"),
    (["truncation=none"], "truncation")])
def test_problem_refuses_bad_configurations(overrides, words):
    with pytest.raises(es.ConfigError, match=words):
        build(*overrides)


def test_a_short_run_exports_complex_fields_with_the_time_convention(tmp_path):
    import h5py

    p = build("training.steps=3", "sampling.interior=200", "sampling.cylinder=50", "sampling.pml_end=50",
              "output.n=21")
    es.train(p, out=str(tmp_path), quiet=True)
    with h5py.File(tmp_path / "fields.h5", "r") as f:
        assert f.attrs["time_convention"] == "exp(-i omega t)"
        assert f["fields/Ez"].shape == (21, 21, 2) and int(f["fields/Ez"].attrs["complex"]) == 1
        assert f["reference/Ez_total"].shape == (21, 21, 2)
    xdmf = (tmp_path / "fields.xdmf").read_text()
    assert all(f'Name="{n}"' in xdmf for n in ("Ez_re", "Ez_im", "Ez_abs", "Ez_total_abs", "Ez_ref_re"))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["rel_l2"]["full"]) == {"Ez", "Ez_total"} and metrics["time_convention"] == "exp(-i omega t)"
    assert (tmp_path / "Ez.png").exists() and (tmp_path / "Ez_total.png").exists()


# --- waveguide-te10 ---------------------------------------------------------------------------------------------

def guide(*overrides, preset="ci"):
    cls = REGISTRY["waveguide-te10"]
    return cls(apply_overrides(cls.preset_config(preset), list(overrides)))


@pytest.mark.parametrize("preset", ["quick", "below_cutoff", "pml"])
def test_te10_closed_form_satisfies_its_pde_and_conditions(preset):
    """Ey = sin(pi x / a) exp(i beta z) with beta from the dispersion relation; with the PML, its continuation
    exp(i beta z~) into the layer (the wall Ey = 0 at the layer's end is met only to |exp(i beta z~)| there)."""
    import torch

    from elecsolver.training.loss import constraint_residual

    p = guide(preset=preset)
    pml = p.pde.pml

    class Closed(torch.nn.Module):
        def forward(self, x):
            xs, ys = p.context.si(x)
            z = ys if pml is None else pml.stretched(1, ys)
            a = p.config["guide"]["a"]
            return p.channels({"Ey": torch.sin(math.pi * xs / a) * torch.exp(1j * p.beta * z)}, x.shape[0],
                              training_units=True)

    end = abs(cmath_exp(p)) if pml is not None else 0.0
    for c in p.constraints():
        cloud = c.sample(2, 1.0)
        pts = torch.as_tensor(cloud.points)
        nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals)
        r = constraint_residual(Closed(), c, pts, nrm, p.inputs, p.outputs, "autograd").detach()
        bound = 1.01 * end if c.name == "end" and pml is not None else 1e-10
        assert float(r.abs().max()) <= bound, (preset, c.name, float(r.abs().max()))
    if preset == "below_cutoff":  # evanescent: beta = i gamma, gamma = sqrt((pi/a)^2 - k^2)
        a = p.config["guide"]["a"]
        assert p.beta.real == 0 and p.beta.imag == pytest.approx(math.sqrt((math.pi / a) ** 2 - p.k**2), rel=1e-14)
    else:
        assert p.beta.imag == 0 and p.length == pytest.approx(2 * 2 * math.pi / p.beta.real, rel=1e-14)


def cmath_exp(p):
    import cmath

    pml = p.pde.pml
    z_end = complex(pml.stretched(1, __import__("torch").tensor([p.length + pml.thickness],
                                                                dtype=__import__("torch").float64))[0])
    return cmath.exp(1j * p.beta * z_end)


def test_te10_refuses_the_cutoff_frequency_and_bad_input():
    a = 22.86e-3
    with pytest.raises(es.ConfigError, match="cutoff"):
        guide(f"guide.frequency={es.C0 / (2 * a)!r}")
    with pytest.raises(es.ConfigError, match="termination"):
        guide("termination=open")
    with pytest.raises(es.ConfigError, match="guide.a"):
        guide("guide.a=-1.0")
