"""Subdomains and interfaces: smooth level sets, the level-set copies of the fields (continuous by construction,
derivatives free to jump), jets equal to autograd through them, Poisson's interface conditions against the
dielectric cylinder's closed form, and the declarations refused with one clear error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_jets_equal_autograd
from elecsolver.problems import REGISTRY

import elecsolver as es
from elecsolver.networks import SubdomainFeatures, SubdomainMerge, input_function_jet
from elecsolver.jets import seed_jet
from elecsolver.training.loss import constraint_residual

DIELECTRIC = REGISTRY["electrostatics-dielectric-cylinder"]


@pytest.mark.parametrize("domain", [es.Interval(-0.5, 1.5), es.Rectangle([0, -1], [2, 0.5]),
                                    es.Box([0, 0, 0], [1, 2, 0.5]), es.Disk([0.3, -0.2], 0.7),
                                    es.Sphere([0, 0, 1], 0.4)])
def test_level_sets_vanish_on_the_boundary_and_are_the_signed_distance_to_first_order(domain):
    inside = domain.sample_interior(200, "uniform", 0).points
    bnd = domain.sample_boundary(200, "uniform", 1)
    x = torch.as_tensor(bnd.points, dtype=torch.float64).requires_grad_(True)
    level = domain.level_set(x)
    assert float(level.detach().abs().max()) < 1e-12
    assert bool((domain.level_set(torch.as_tensor(inside)) < 0).all())
    # grad l is along the outward normal on the boundary (away from a box's edges and corners, where the normal
    # jumps), and of length 1 on a sphere and at the ends of an interval: l is there the signed distance to first
    # order
    grad = torch.autograd.grad(level.sum(), x)[0].numpy()
    sd = domain.signed_distance(bnd.points + 1e-3 * bnd.normals)  # a regular boundary point moves out by 1e-3
    regular = np.abs(sd - 1e-3) < 1e-9
    assert regular.sum() > 100
    length = np.linalg.norm(grad[regular], axis=1)
    assert np.max(np.abs(grad[regular] / length[:, None] - bnd.normals[regular])) < 1e-12
    assert length.min() > 0
    if isinstance(domain, (es.Disk, es.Sphere, es.Interval)):
        np.testing.assert_allclose(length, 1.0, rtol=1e-12)


def test_a_domain_without_a_smooth_level_set_is_refused_as_a_subdomain():
    tri = es.Polygon([[0, 0], [1, 0], [0, 1]])
    with pytest.raises(NotImplementedError, match="no smooth level set"):
        tri.level_set(torch.zeros(1, 2))

    class Bad(DIELECTRIC):
        def setup(self):
            super().setup()
            self.subdomains = {"rod": tri}

    with pytest.raises(es.ConfigError, match=r"subdomains\['rod'\].*no smooth level set"):
        Bad(DIELECTRIC.preset_config("ci"))


def test_input_function_jet_equals_autograd_to_second_order():
    def fn(x):
        return torch.stack([torch.sin(x[:, 0]) * x[:, 1] ** 2, x[:, 0] * x[:, 1] + x[:, 2] ** 3], 1)

    x = torch.randn(50, 3, dtype=torch.float64)
    jet = seed_jet(x, (0, 1, 2), pairs=[(0, 1), (2, 2)], laplacian={0: 1.0, 1: 2.0})
    out = input_function_jet(fn, jet)
    xr = x.clone().requires_grad_(True)
    val = fn(xr)
    for j in range(2):
        g = torch.autograd.grad(val[:, j].sum(), xr, create_graph=True)[0]
        hess = torch.stack([torch.autograd.grad(g[:, i].sum(), xr, retain_graph=True)[0] for i in range(3)], 1)
        assert torch.allclose(out.value[:, j], val[:, j].detach(), atol=1e-14)
        for k in range(3):
            assert torch.allclose(out.derivative(k)[:, j], g[:, k].detach(), atol=1e-13)
        assert torch.allclose(out.second_derivative(0, 1)[:, j], hess[:, 0, 1], atol=1e-13)
        assert torch.allclose(out.second_derivative(2, 2)[:, j], hess[:, 2, 2], atol=1e-13)
        assert torch.allclose(out.lap[:, j], hess[:, 0, 0] + 2 * hess[:, 1, 1], atol=1e-13)


def test_copies_agree_on_the_interface_and_their_normal_derivatives_differ():
    problem = DIELECTRIC(DIELECTRIC.preset_config("ci"))
    torch.manual_seed(0)
    net = problem.build_network().double()
    assert isinstance(net.body[0], SubdomainFeatures) and isinstance(net.body[-1], SubdomainMerge)
    assert problem.outputs == ("V@rod", "V@background")
    cloud = problem.sample("interface", seed=3)
    x = torch.as_tensor(cloud.points).requires_grad_(True)
    v = net(x)
    jump = (v[:, 0] - v[:, 1]).detach()
    scale = float(v.detach().abs().max())
    assert float(jump.abs().max()) < 1e-13 * scale  # continuous by construction (the level set is 0 there)
    n = torch.as_tensor(cloud.normals)
    dn = [(torch.autograd.grad(v[:, c].sum(), x, retain_graph=True)[0] * n).sum(1) for c in range(2)]
    assert float((dn[0] - dn[1]).abs().mean()) > 1e-3 * float(dn[1].abs().mean())  # a kink is representable


def test_jets_equal_autograd_for_every_term_of_a_problem_with_subdomains():
    problem = DIELECTRIC(DIELECTRIC.preset_config("ci"))
    torch.manual_seed(1)
    assert_jets_equal_autograd(problem, problem.build_network().double(), 1e-12, seed=5)


def _residual(problem, name, values):
    """The residual of term ``name`` for a network returning the closed-form channels ``values(x, y)`` (SI)."""

    class Net(torch.nn.Module):
        def forward(self, x):
            xs, ys = problem.context.si(x)
            return problem.channels(values(xs, ys), x.shape[0], training_units=True)

    c = problem.constraint(name)
    cloud = c.sample(2, 1.0)
    nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals)
    pts = torch.as_tensor(cloud.points)
    return constraint_residual(Net(), c, pts, nrm, problem.inputs, problem.outputs, "autograd").detach(), cloud


def test_poisson_interface_conditions_hold_for_the_closed_form_and_measure_a_wrong_field():
    problem = DIELECTRIC(DIELECTRIC.preset_config("ci"))
    c = problem.config["cylinder"]
    eps, e0 = c["eps_r"], c["E0"]
    r, _ = _residual(problem, "interface", problem.exact)
    assert r.shape[1] == 2 and float(r.abs().max()) < 1e-13
    # the applied field alone on both sides: V continuous, but D_n jumps by (eps_r - 1) eps0 E0 n_x; in training
    # units (V' = V / (E0 L), x' = x / L) the flux residual is eps_r dV'/dn' - dV'/dn' = -(eps_r - 1) n_x
    r, cloud = _residual(problem, "interface", lambda x, y: {"V": -e0 * x})
    assert float(r[:, 0].abs().max()) < 1e-13
    expected = -(eps - 1) * torch.as_tensor(cloud.normals[:, 0])
    assert torch.allclose(r[:, 1], expected, atol=1e-12)
    # the closed form itself satisfies each side's equation and the window's value
    for term in ("pde", "window"):
        assert float(_residual(problem, term, problem.exact)[0].abs().max()) < 1e-12


def test_the_output_takes_each_sites_copy():
    problem = DIELECTRIC(DIELECTRIC.preset_config("ci"))
    ref = problem.reference()
    c = problem.config["cylinder"]
    xy = problem.output.coordinates()
    rho = np.hypot(xy[:, 0], xy[:, 1])
    v = ref.fields["V"].reshape(-1)
    inside, outside = rho < c["radius"] * 0.999, rho > c["radius"] * 1.001
    np.testing.assert_allclose(v[inside], -c["E0"] * xy[inside, 0] * 2 / (c["eps_r"] + 1), rtol=1e-12, atol=1e-12)
    a2 = c["radius"] ** 2
    k = (c["eps_r"] - 1) / (c["eps_r"] + 1)
    np.testing.assert_allclose(v[outside], -c["E0"] * xy[outside, 0] * (1 - k * a2 / rho[outside] ** 2), rtol=1e-12,
                               atol=1e-12)


def test_channels_fill_every_copy_or_the_copy_named():
    problem = DIELECTRIC(DIELECTRIC.preset_config("ci"))
    ch = problem.channels({"V": torch.tensor([1.0, 2.0])}, 2)
    assert ch.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    ch = problem.channels({"V@rod": 3.0, "V@background": torch.tensor([4.0, 5.0])}, 2)
    assert ch.tolist() == [[3.0, 4.0], [3.0, 5.0]]
    with pytest.raises(ValueError, match=r"V@slab"):
        problem.channels({"V@slab": 1.0}, 2)


@pytest.mark.parametrize(("change", "words"), [
    (lambda p: setattr(p, "interfaces", []), "no interface joins"),
    (lambda p: setattr(p, "interfaces", [es.Interface("slab")]), "is on subdomain 'slab'"),
    (lambda p: setattr(p, "interfaces", [es.Interface("rod", on="rod:xmin")]), "rod:xmin"),
    (lambda p: setattr(p, "interfaces", [es.Interface("rod", outside="rod")]), "outside='rod'"),
    (lambda p: setattr(p, "subdomains", {"background": p.subdomains["rod"]}), "'background'"),
    (lambda p: setattr(p, "subdomains", {"rod": es.Sphere([0, 0, 0], 1e-3)}), "2D"),
])
def test_bad_subdomain_declarations_are_one_clear_error(change, words):
    class Bad(DIELECTRIC):
        def setup(self):
            super().setup()
            change(self)

    with pytest.raises(es.ConfigError, match=words):
        Bad(DIELECTRIC.preset_config("ci"))


def test_hard_pec_with_subdomains_is_refused():
    cfg = DIELECTRIC.preset_config("ci")
    cfg["network"]["hard_pec"] = True
    with pytest.raises(es.ConfigError, match="hard_pec does not combine with subdomains"):
        DIELECTRIC(cfg)


def test_a_pde_without_interface_conditions_says_so():
    pde = es.Wave()
    with pytest.raises(NotImplementedError, match="Wave declares no interface conditions"):
        pde.interface_residual(None, None, None, None, None, None)


def test_helmholtz_interface_residual_is_the_jump_of_the_field_and_its_normal_derivative():
    """Equal permeability on both sides: [u] and [du/dn], here for u_in = sin(2x + y), u_out = cos(x - 3y)."""
    from elecsolver.operators import evaluate

    pde = es.Helmholtz(2 * math.pi, field="Ez")

    class F(torch.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x[:, 0], x[:, 1])[:, None]

    pts = torch.rand(20, 2, dtype=torch.float64)
    n = torch.nn.functional.normalize(torch.rand(20, 2, dtype=torch.float64), dim=1)
    ctx = es.Context(("x", "y"), es.Scales(), {"Ez": "V/m"}, pde)
    inner = evaluate(F(lambda x, y: torch.sin(2 * x + y)), pts, ("x", "y"), ("Ez",), wrt=("x", "y"), method="autograd")
    outer = evaluate(F(lambda x, y: torch.cos(x - 3 * y)), pts, ("x", "y"), ("Ez",), wrt=("x", "y"), method="autograd")
    r = pde.interface_residual(inner, outer, pts, pts, n, ctx)
    x, y = pts[:, 0], pts[:, 1]
    c, s = torch.cos(2 * x + y), -torch.sin(x - 3 * y)
    dn = n[:, 0] * (2 * c - s) + n[:, 1] * (c + 3 * s)
    assert torch.allclose(r, torch.stack([torch.sin(2 * x + y) - torch.cos(x - 3 * y), dn], 1), atol=1e-14)


@pytest.mark.slow
def test_dielectric_cylinder_quick_preset_reaches_one_percent(tmp_path):
    import json

    from conftest import run_cli

    out = tmp_path / "q"
    proc = run_cli("run", "electrostatics-dielectric-cylinder", "--out", str(out), "--quiet", timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "metrics.json").read_text())["rel_l2"]["full"]["V"] < 0.01


def test_maxwell_1d_residual_vanishes_for_a_plane_wave_in_a_dielectric():
    pde = es.Maxwell1D("Ey", eps_r=4.0)
    assert pde.fields == ("Ey", "Hz") and pde.axes == ("x",)
    ctx = es.Context(("x", "t"), es.Scales(length=1.0), dict(pde.units), pde)
    from elecsolver.operators import evaluate

    n = 2.0

    class Wave(torch.nn.Module):  # Ey = cos(k (n x - c0 t)), Hz = n Ey / eta0, in training units (T = L / c0)
        def forward(self, x):
            e = torch.cos(3.0 * (n * x[:, 0] - x[:, 1]))
            return torch.stack([e, n * e], 1)

    pts = torch.rand(50, 2, dtype=torch.float64)
    f = evaluate(Wave(), pts, ("x", "t"), ("Ey", "Hz"), wrt=("x", "t"), method="autograd")
    assert float(pde.residual(f, pts, ctx).abs().max()) < 1e-10  # terms of size 12; a_E = 1 to round-off
    with pytest.raises(ValueError, match="polarisation must be 'Ey'"):
        es.Maxwell1D("Ex")


def test_maxwell_interface_residual_is_the_jump_of_the_tangential_fields():
    from elecsolver.operators import Fields
    from elecsolver.jets import Jet

    pde = es.MaxwellTEz()
    vals = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], dtype=torch.float64)  # Ex, Ey, Hz per side
    n = torch.tensor([[0.6, 0.8]], dtype=torch.float64)

    def side(row):
        return Fields(Jet(vals[row].reshape(1, 1, 3), ()), ("x", "y", "t"), ("Ex", "Ey", "Hz"))

    r = pde.interface_residual(side(0), side(1), None, None, n, None)
    d = vals[0] - vals[1]
    # n x dE has only a z component, n_x dEy - n_y dEx; n x (dHz z) = (n_y dHz, -n_x dHz, 0)
    expected = torch.tensor([[0.6 * d[1] - 0.8 * d[0], 0.8 * d[2], -0.6 * d[2]]], dtype=torch.float64)
    assert torch.allclose(r, expected, atol=1e-15)


def test_an_interface_face_on_the_domains_boundary_is_refused():
    """A layer whose face is the domain's own edge (a capacitor plate) has no neighbour there: Interface() on its
    whole boundary would hold that face to continuity with nothing; it is refused, naming the faces to give."""

    class Capacitor(es.Problem):
        name = "capacitor"
        defaults = {"sampling": {"interior": 50}}
        faces = None

        def setup(self):
            layer = es.Interval(0.0, 1e-3, name="layer")
            self.domain = es.Interval(0.0, 2e-3, name="gap")
            self.subdomains = {"layer": layer}
            self.pde = es.Laplace(field="V", unit="V", eps_r=es.piecewise([(layer, 4.0)], default=1.0))
            self.interfaces = [es.Interface("layer", on=self.faces)]
            self.conditions = [es.Dirichlet(on="gap:xmin", value=1.0), es.Dirichlet(on="gap:xmax", value=0.0,
                                                                                       name="ground")]
            self.scales = es.Scales(length=2e-3, E0=500.0)
            self.output = es.GridSites({"x": np.linspace(0.0, 2e-3, 11)})

    with pytest.raises(es.ConfigError, match=r"faces \['layer:xmin'\] of subdomain 'layer' lie on the domain's "
                                             r"boundary.*on=\['layer:xmax'\]"):
        Capacitor(Capacitor.preset_config())

    class Fixed(Capacitor):
        faces = "layer:xmax"

    assert [c.name for c in Fixed(Fixed.preset_config()).constraints()] == ["pde", "dirichlet", "ground", "interface"]
