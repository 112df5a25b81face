"""Every registered problem is held to its word: its reference satisfies its PDE and conditions, and its
``ci`` preset reaches the bounds it declares (``Problem.bounds``), bounds that a zero field cannot meet."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import run_cli
from elecsolver.problem import GENERIC_SECTIONS
from elecsolver.problems import REGISTRY

import elecsolver as es
from elecsolver.training.loss import constraint_residual

NAMES = sorted(REGISTRY)


class _Exact(torch.nn.Module):
    """A problem's closed form as a network of the training-unit inputs."""

    def __init__(self, problem, factor: float = 1.0):
        super().__init__()
        self.p, self.factor = problem, factor

    def forward(self, x):
        p = self.p
        out = p.exact(*p.context.si(x))
        return self.factor * p.channels(out, x.shape[0], training_units=True)


@pytest.mark.parametrize("name", NAMES)
def test_reference_satisfies_the_pde_and_the_conditions(name):
    cls = REGISTRY[name]
    problem = cls(cls.preset_config("ci"))
    if not problem.has_exact():
        # maxwell-point-source-2d: an FDTD reference; tests/test_problem_reference.py puts it into the problem's own
        # residual by central differences and checks the second order of the Yee scheme.
        # pec-cylinder-scattering: the Bessel/Hankel series (scipy, not differentiable by torch);
        # tests/test_cylinder_scattering.py puts it into the Helmholtz equation by finite differences and into the
        # conditions on the cylinder with the series' own derivatives
        # line-source-2d: the Green's function convolved with the Gaussian (quadrature); tests/test_line_source.py
        # puts it into the Helmholtz equation by extrapolated finite differences and checks the Hankel closed form
        # maxwell-point-source-family: the FDTD of maxwell-point-source-2d at each configuration;
        # tests/test_family.py holds it equal to that problem's reference at the same source
        # dielectric-cylinder-family: the Bessel/Hankel series; tests/test_dielectric_cylinder.py puts it into the
        # problem's own k and source by finite differences, checks its interface conditions and three limits
        assert name in ("maxwell-point-source-2d", "pec-cylinder-scattering", "line-source-2d",
                        "maxwell-point-source-family", "dielectric-cylinder-family"), \
            f"{name} has neither a closed form nor a reference test"
        return
    _assert_exact_residuals(problem, name)


GENERIC = (*GENERIC_SECTIONS, "family")  # the family box is a range, not a value the reference reads


def _physical_values(cls) -> list[tuple[str, object]]:
    """(key, value) pairs away from a problem's defaults: every numeric key outside the generic sections, at 0.6 and
    2 times its value (0.1 and -0.1 m for a zero), an integer at +1 and +2."""
    out = []
    for section, keys in cls.preset_config("ci").items():
        if section in GENERIC or not isinstance(keys, dict):
            continue
        for k, v in keys.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            values = [v + 1, v + 2] if isinstance(v, int) else [0.1, -0.1] if v == 0 else [0.6 * v, 2.0 * v]
            out.extend((f"{section}.{k}", x) for x in values)
    return out


def _build_or_refused(name: str, key: str, value):
    """The ``ci`` problem with ``key`` set to ``value``, or None when it is refused in one line naming the key."""
    from elecsolver.config import ConfigError, apply_overrides

    cls = REGISTRY[name]
    try:
        return cls(apply_overrides(cls.preset_config("ci"), [f"{key}={value!r}"]))
    except ConfigError as e:
        msg = str(e)
        assert "\n" not in msg and (key in msg or key.split(".")[-1] in msg), msg
        return None


CLOSED_FORM = [n for n in NAMES if REGISTRY[n](REGISTRY[n].preset_config("ci")).has_exact()]
CASES = [(n, k, v) for n in CLOSED_FORM for k, v in _physical_values(REGISTRY[n])]


@pytest.mark.parametrize(("name", "key", "value"), CASES, ids=[f"{n}-{k}={v:.4g}" for n, k, v in CASES])
def test_reference_is_right_for_every_configuration_it_accepts(name, key, value):
    """Each numeric key of a closed-form problem at values away from its default: either the configuration is
    refused in one line that names the key, or the closed form satisfies the PDE, the boundary conditions and the
    interface conditions at the sampled collocation points (walls, interfaces and corners included), to round-off,
    through the problem's own residuals (a reference that kept a default would fail here, as sin(k x) sin(k y)
    did for helmholtz-square at k side != m pi)."""
    problem = _build_or_refused(name, key, value)
    if problem is None:
        return
    assert problem.has_exact()
    _assert_exact_residuals(problem, name)


def _assert_exact_residuals(problem, name):
    eps = 1e-3
    for c in problem.constraints():
        cloud = c.sample(7, 1.0)
        pts = torch.as_tensor(cloud.points, dtype=torch.float64)
        nrm = None if cloud.normals is None else torch.as_tensor(cloud.normals, dtype=torch.float64)

        def res(factor, c=c, pts=pts, nrm=nrm):
            return constraint_residual(_Exact(problem, factor), c, pts, nrm, problem.inputs, problem.outputs,
                                       "autograd").detach()

        r = res(1.0)
        # the size of the operator applied to the solution: r(u + eps u) - r(u) = eps L u (the source cancels).
        # That is zero for a homogeneous equation (a source-free cavity, Laplace) or a zero boundary value; there
        # the floor is the residual of an O(1) field per point in training units: sqrt(number of points)
        size = max(float((res(1.0 + eps) - r).norm() / eps), pts.shape[0] ** 0.5)
        assert float(r.norm()) / size < 1e-8, (name, c.name, float(r.norm()) / size)


SERIES = [n for n in NAMES if n not in CLOSED_FORM and isinstance(REGISTRY[n](REGISTRY[n].preset_config("ci")).pde,
                                                                    es.Helmholtz)]
SERIES_CASES = [(n, k, v) for n in SERIES for k, v in _physical_values(REGISTRY[n]) if not k.startswith("pml.")]


def _helmholtz_residual_of_the_reference(problem, n_sites: int = 60, seed: int = 0):
    """max |-lap u - k^2 u - f| / max(|k^2 u| + |f|) of the problem's reference, at ``n_sites`` random sites of its
    physical window (inside the PML's inner box, outside masked holes), with k and f from the problem's own PDE and
    the Laplacian by fourth-order central differences (h = 0.01 / max k, truncation error about (k h)^4 / 90 = 1e-10
    of k^2 u); sites whose stencil straddles a jump of k (an interface) are left out."""
    from elecsolver.physics.base import coefficient

    pde, ctx = problem.pde, problem.context
    lo, hi = (np.array(pde.pml.lower), np.array(pde.pml.upper)) if pde.pml is not None else problem.space_domain.bbox()
    rng = np.random.default_rng(seed)
    centres = rng.uniform(lo, hi, (4 * n_sites, 2))

    def k_and_f(points_si):
        pts = torch.as_tensor(problem.training_units(problem.with_configuration(points_si)))
        k = np.broadcast_to(np.asarray(coefficient(pde.k, pts, ctx)), (pts.shape[0],))
        return np.abs(k), pde.rhs(pts, ctx).detach().numpy() if pde.source is not None else 0.0 * k

    kmax = float(np.max(k_and_f(centres)[0]))
    h = 0.01 / kmax
    offsets = [(0, 0)] + [(h * j, 0) for j in (-2, -1, 1, 2)] + [(0, h * j) for j in (-2, -1, 1, 2)]
    stencil = np.concatenate([centres + np.array(o) for o in offsets])  # [9 * M, 2], offset-major
    problem.output = es.MeshSites(stencil, {"vertex": np.arange(len(stencil))[:, None]})
    u = np.asarray(problem.reference().fields[pde.field]).reshape(9, -1)
    k, f = (a.reshape(9, -1) if np.ndim(a) else a for a in k_and_f(stencil))
    mask = problem.output_mask()
    keep = np.all(np.isclose(k, k[0], rtol=1e-12, atol=0), 0)  # one medium under the whole stencil
    if mask is not None:
        keep &= np.all(np.asarray(mask).reshape(9, -1), 0)
    keep &= np.all(np.isfinite(u), 0)
    assert keep.sum() >= n_sites // 2, "too few sites away from interfaces and holes"
    idx = np.flatnonzero(keep)[:n_sites]
    u, k0, f0 = u[:, idx], k[0, idx], (f[0, idx] if np.ndim(f) else f)

    def d2(first):  # rows: 0 centre, first..first+3 at -2h, -h, +h, +2h
        m2, m1, p1, p2 = u[first], u[first + 1], u[first + 2], u[first + 3]
        return (-m2 + 16 * m1 - 30 * u[0] + 16 * p1 - p2) / (12 * h**2)

    residual = -(d2(1) + d2(5)) - k0**2 * u[0] - f0
    return float(np.max(np.abs(residual)) / np.max(np.abs(k0**2 * u[0]) + np.abs(f0)))


@pytest.mark.parametrize(("name", "key", "value"), SERIES_CASES, ids=[f"{n}-{k}={v:.4g}" for n, k, v in SERIES_CASES])
def test_series_reference_is_right_for_every_configuration_it_accepts(name, key, value):
    """The frequency-domain problems whose reference is a series or a quadrature (Bessel/Hankel, Graf), at values
    away from the defaults: refused in one line naming the key, or the reference written for that configuration
    solves the problem's own Helmholtz equation (its k and source) to 1e-6 (the PML's keys change nothing the
    reference sees; the conditions on a PEC cylinder and across a dielectric's surface are checked with the series'
    own derivatives in tests/test_cylinder_scattering.py and tests/test_dielectric_cylinder.py)."""
    problem = _build_or_refused(name, key, value)
    if problem is None:
        return
    assert _helmholtz_residual_of_the_reference(problem) < 1e-6


@pytest.mark.accuracy  # trains every ci preset to check its error: the accuracy set
@pytest.mark.parametrize("name", NAMES)
def test_ci_preset_reaches_its_declared_bounds(name, tmp_path):
    cls = REGISTRY[name]
    bounds = cls.bounds.get("ci")
    assert bounds, f"{name} declares no ci bounds"
    for window in bounds.values():
        assert all(0 < b < 1.0 for b in window.values()), "a zero field scores 1.0: such a bound tests nothing"
    out = tmp_path / name
    proc = run_cli("run", name, "--preset", "ci", "--out", str(out), "--quiet", timeout=1800)
    assert proc.returncode == 0, proc.stderr
    rel = json.loads((out / "metrics.json").read_text())["rel_l2"]
    for window, fields in bounds.items():
        for field, bound in fields.items():
            assert rel[window][field] < bound, (name, window, field, rel[window][field], bound)
