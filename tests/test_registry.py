"""Every registered problem is held to its word: its reference satisfies its PDE and conditions, and its
``ci`` preset reaches the bounds it declares (``Problem.bounds``), bounds that a zero field cannot meet."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_cli
from elecsolver.problems import REGISTRY

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
