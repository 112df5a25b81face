"""Physics objects on closed forms: every PDE and condition gives (a) a zero residual for an exact
solution, (b) exactly the hand-computed operator of a perturbation b for u + eps b, (c) the same physics
under non-default scales (each case runs with the default scales and with L != 1, explicit T, E0 != 1,
H0 != E0/eta0; the expected residual of (b) is the SI operator times the factor the docstrings give).

The closed forms are written in SI and wrapped in a module that maps training-unit points to training-unit
fields; :func:`evaluate` (autograd) carries exactly the derivatives each object declares, so the tests also
prove the declarations sufficient.  Float64 throughout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from elecsolver.geometry import Disk, Rectangle
from elecsolver.operators import evaluate
from elecsolver.physics import (
    PDE,
    PEC,
    PMC,
    Context,
    Dirichlet,
    GaussianProfile,
    GaussianPulse,
    Helmholtz,
    Impedance,
    Initial,
    InitialRate,
    Laplace,
    Maxwell,
    Maxwell3D,
    MaxwellTEz,
    MaxwellTMz,
    ModulatedGaussian,
    Neumann,
    Poisson,
    RampedSinusoid,
    Robin,
    SilverMueller,
    Source,
    Wave,
    piecewise,
)
from elecsolver.reference import fdtd
from elecsolver.scales import C0, EPS0, ETA0, MU0, Scales

DT = torch.float64
N = 48
TOL = 1e-8
PI = math.pi
SCALES = [pytest.param(Scales(), id="default-scales"),
          pytest.param(Scales(length=0.3, time=2.5e-9, E0=5.0, H0=0.02), id="L0.3-T2.5ns-E0_5-H0_0.02")]
TEZ, TMZ, XYZT = ("x", "y", "t"), ("x", "y", "t"), ("x", "y", "z", "t")


# ---------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------
def uniform(lo, hi, n=N, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lo, hi = torch.tensor(lo, dtype=DT), torch.tensor(hi, dtype=DT)
    return lo + (hi - lo) * torch.rand(n, len(lo), generator=g, dtype=DT)


class ClosedForm(nn.Module):
    """``fn(*si_coordinates) -> {field: SI values}`` behind the network's interface (training units)."""

    def __init__(self, fn, ctx: Context):
        super().__init__()
        self.fn, self.names = fn, tuple(ctx.pde.fields)
        sc = ctx.scales
        col = [sc.time if a == "t" else sc.length for a in ctx.inputs]
        self.register_buffer("col", torch.tensor(col, dtype=DT))
        self.register_buffer("unit", torch.tensor([ctx.field_scale(n) for n in self.names], dtype=DT))

    def forward(self, p):
        si = (p * self.col).unbind(1)
        out, zero = self.fn(*si), 0.0 * si[0]
        return torch.stack([out.get(n, zero) + zero for n in self.names], dim=1) / self.unit


def context(pde, inputs, scales) -> Context:
    return Context(tuple(inputs), scales, dict(pde.units), pde)


def fields_for(obj, fn, ctx: Context, si_points: torch.Tensor):
    """The Fields of the closed form with exactly the derivatives ``obj`` declares; the training points."""
    d = obj.derivatives(ctx.inputs, ctx.scales) if isinstance(obj, PDE) else obj.derivatives(ctx.inputs)
    sc = ctx.scales
    pts = si_points / torch.tensor([sc.time if a == "t" else sc.length for a in ctx.inputs], dtype=DT)
    f = evaluate(ClosedForm(fn, ctx), pts, ctx.inputs, ctx.pde.fields, wrt=d.wrt, method="autograd",
                 second=d.second or None, laplacian=d.laplacian_dict())
    return f, pts


def pde_res(pde, fn, inputs, scales, si_points):
    ctx = context(pde, inputs, scales)
    f, pts = fields_for(pde, fn, ctx, si_points)
    return pde.residual(f, pts, ctx), f


def cond_res(cond, pde, fn, inputs, scales, si_points, normals=None):
    ctx = context(pde, inputs, scales)
    f, pts = fields_for(cond, fn, ctx, si_points)
    return cond.residual(f, pts, normals, ctx), f


def term_size(f) -> float:
    """The size of the individual terms: the largest norm of a carried channel (values, derivatives)."""
    data = f.jet.data.detach()
    return float(torch.linalg.vector_norm(data.reshape(data.shape[0], -1), dim=1).max())


def assert_zero(res: torch.Tensor, f, tol: float = TOL):
    size = term_size(f)
    assert size > 0
    rel = float(torch.linalg.vector_norm(res.detach())) / size
    assert rel < tol, f"residual {rel:.2e} of the term size {size:.2e}"


def assert_close(res: torch.Tensor, expected: torch.Tensor, tol: float = TOL):
    assert res.shape == expected.shape, (res.shape, expected.shape)
    ref = float(torch.linalg.vector_norm(expected.detach()))
    assert ref > 0
    err = float(torch.linalg.vector_norm((res - expected).detach())) / ref
    assert err < tol, f"relative error {err:.2e}"


def plus(fn, eps, b):
    """The closed form fn + eps * b (dicts of components)."""

    def g(*xs):
        u, d = dict(fn(*xs)), b(*xs)
        for k, v in d.items():
            u[k] = u.get(k, 0.0) + eps * v
        return u

    return g


def e_factor(sc: Scales) -> float:
    """Training residual / SI residual of an electric equation (A/m^2 -> 1): L / H0."""
    return sc.length / sc.H0


def h_factor(sc: Scales) -> float:
    """Training residual / SI residual of a magnetic equation (V/m^2 -> 1): L / E0."""
    return sc.length / sc.E0


def walls_2d(a, b, t_hi, n=N // 4, seed=1):
    """Points (x, y, t) on the four sides of [0, a] x [0, b] and their outward normals [4n, 2]."""
    s = uniform([0.0, 0.0], [1.0, t_hi], n, seed)
    u, t = s[:, 0], s[:, 1]
    z, o = torch.zeros_like(u), torch.ones_like(u)
    sides = [((a * u, z, t), (z, -o)), ((a * o, b * u, t), (o, z)), ((a * u, b * o, t), (z, o)),
             ((z, b * u, t), (-o, z))]
    pts = torch.cat([torch.stack(p, 1) for p, _ in sides])
    nrm = torch.cat([torch.stack(q, 1) for _, q in sides])
    return pts, nrm


def walls_3d(a, b, d, t_hi, n=N // 6, seed=2):
    """Points (x, y, z, t) on the six faces of [0, a] x [0, b] x [0, d] and their outward normals [6n, 3]."""
    s = uniform([0.0, 0.0, 0.0], [1.0, 1.0, t_hi], n, seed)
    u, v, t = s[:, 0], s[:, 1], s[:, 2]
    z, o = torch.zeros_like(u), torch.ones_like(u)
    faces = [((z, b * u, d * v), (-o, z, z)), ((a * o, b * u, d * v), (o, z, z)),
             ((a * u, z, d * v), (z, -o, z)), ((a * u, b * o, d * v), (z, o, z)),
             ((a * u, b * v, z), (z, z, -o)), ((a * u, b * v, d * o), (z, z, o))]
    pts = torch.cat([torch.stack((*p, t), 1) for p, _ in faces])
    nrm = torch.cat([torch.stack(q, 1) for _, q in faces])
    return pts, nrm


# ---------------------------------------------------------------------------------------------------
# closed forms (SI)
# ---------------------------------------------------------------------------------------------------
CAV_A, CAV_B = 1.0, 0.6  # m


def omega_of(k, eps_r=1.0, mu_r=1.0):
    return C0 * k / math.sqrt(eps_r * mu_r)


def te_cavity(m, n, eps_r=1.0, mu_r=1.0, a=CAV_A, b=CAV_B):
    """TEz TE_mn standing wave of a PEC rectangle (Pozar, *Microwave Engineering*, 4th ed., secs. 3.3 and 6.3,
    cut to 2D): Hz = H cos(kx x) cos(ky y) cos(w t), Ex = -H ky/(eps w) cos sin sin(wt),
    Ey = H kx/(eps w) sin cos sin(wt), w^2 mu eps = kx^2 + ky^2; tangential E vanishes on every side."""
    kx, ky = m * PI / a, n * PI / b
    w, eps, h = omega_of(math.hypot(kx, ky), eps_r, mu_r), EPS0 * eps_r, 1.0 / ETA0

    def fn(x, y, t):
        cx, sx, cy, sy = torch.cos(kx * x), torch.sin(kx * x), torch.cos(ky * y), torch.sin(ky * y)
        st = torch.sin(w * t)
        return {"Hz": h * cx * cy * torch.cos(w * t), "Ex": -h * ky / (eps * w) * cx * sy * st,
                "Ey": h * kx / (eps * w) * sx * cy * st}

    return fn, 2 * PI / w


def te_cavity_pmc(m, n, a=CAV_A, b=CAV_B):
    """TEz mode of a PMC rectangle: Hz = H sin(kx x) sin(ky y) cos(wt), zero (tangential H) on the sides."""
    kx, ky = m * PI / a, n * PI / b
    w, h = omega_of(math.hypot(kx, ky)), 1.0 / ETA0

    def fn(x, y, t):
        sx, cx, sy, cy = torch.sin(kx * x), torch.cos(kx * x), torch.sin(ky * y), torch.cos(ky * y)
        st = torch.sin(w * t)
        return {"Hz": h * sx * sy * torch.cos(w * t), "Ex": h * ky / (EPS0 * w) * sx * cy * st,
                "Ey": -h * kx / (EPS0 * w) * cx * sy * st}

    return fn, 2 * PI / w


def tm_cavity(m, n, eps_r=1.0, a=CAV_A, b=CAV_B, cos_mode=False):
    """TMz TM_mn mode (Pozar, 4th ed., secs. 3.3 and 6.3, cut to 2D): Ez = sin(kx x) sin(ky y) cos(wt) in a
    PEC rectangle, Hx = -ky/(mu w) sin cos sin(wt), Hy = kx/(mu w) cos sin sin(wt); with ``cos_mode`` the
    dual PMC-rectangle mode Ez = cos cos cos(wt), Hx = ky/(mu w) cos sin sin(wt),
    Hy = -kx/(mu w) sin cos sin(wt)."""
    kx, ky = m * PI / a, n * PI / b
    w, mu = omega_of(math.hypot(kx, ky), eps_r), MU0

    def fn(x, y, t):
        sx, cx, sy, cy = torch.sin(kx * x), torch.cos(kx * x), torch.sin(ky * y), torch.cos(ky * y)
        st = torch.sin(w * t)
        if cos_mode:
            return {"Ez": cx * cy * torch.cos(w * t), "Hx": ky / (mu * w) * cx * sy * st,
                    "Hy": -kx / (mu * w) * sx * cy * st}
        return {"Ez": sx * sy * torch.cos(w * t), "Hx": -ky / (mu * w) * sx * cy * st,
                "Hy": kx / (mu * w) * cx * sy * st}

    return fn, 2 * PI / w


BOX = (1.0, 0.5, 0.8)


def te101(a=BOX[0], d=BOX[2]):
    """TE101 mode of a PEC box a x b x d (Pozar, 4th ed., sec. 6.3): Ey = sin(pi x/a) sin(pi z/d) cos(wt),
    Hx = (pi/d)/(mu0 w) sin cos sin(wt), Hz = -(pi/a)/(mu0 w) cos sin sin(wt),
    w = c0 pi sqrt(1/a^2 + 1/d^2)."""
    kx, kz = PI / a, PI / d
    w = omega_of(math.hypot(kx, kz))

    def fn(x, y, z, t):
        sx, cx, sz, cz = torch.sin(kx * x), torch.cos(kx * x), torch.sin(kz * z), torch.cos(kz * z)
        st = torch.sin(w * t)
        return {"Ey": sx * sz * torch.cos(w * t), "Hx": kz / (MU0 * w) * sx * cz * st,
                "Hz": -kx / (MU0 * w) * cx * sz * st}

    return fn, 2 * PI / w


def gaussian_front(s, width):
    return torch.exp(-((s / width) ** 2))


# ---------------------------------------------------------------------------------------------------
# Maxwell
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("mode,eps_r", [((1, 0), 1.0), ((2, 1), 1.0), ((1, 2), 4.0)])
def test_tez_cavity_mode(sc, mode, eps_r):
    pde = MaxwellTEz(eps_r=eps_r)
    fn, period = te_cavity(*mode, eps_r=eps_r)
    pts = uniform([0, 0, 0], [CAV_A, CAV_B, period])
    res, f = pde_res(pde, fn, TEZ, sc, pts)
    assert res.shape == (N, 3)
    assert_zero(res, f)
    # (b) b on Ex: eps0 eps_r db/dt in the Ex row, (curl b)_z = -db/dy in the Hz row
    amp, eps = 2.0, 1e-3  # V/m per (m s)-ish units, see b

    def b(x, y, t):
        return {"Ex": amp * (1 + x**2 + y) * t * 1e9}

    res, _ = pde_res(pde, plus(fn, eps, b), TEZ, sc, pts)
    x, y, t = pts.unbind(1)
    expected = torch.stack([EPS0 * eps_r * amp * (1 + x**2 + y) * 1e9 * e_factor(sc), 0 * x,
                            -amp * t * 1e9 * h_factor(sc)], 1)
    assert_close(res, eps * expected)


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("mode", [(1, 1), (2, 3)])
def test_tez_pec_walls(sc, mode):
    pde = MaxwellTEz()
    fn, period = te_cavity(*mode)
    pts, nrm = walls_2d(CAV_A, CAV_B, period)
    res, f = cond_res(PEC(), pde, fn, TEZ, sc, pts, nrm)
    assert res.shape == (pts.shape[0], 1)   # TEz: only (n x E)_z
    assert_zero(res, f)
    eps = 1e-3

    def b(x, y, t):
        return {"Ex": 1 + x * y + 0 * t, "Ey": 2 + x + 0 * t}

    res, _ = cond_res(PEC(), pde, plus(fn, eps, b), TEZ, sc, pts, nrm)
    x, y, _ = pts.unbind(1)
    expected = (nrm[:, 0] * (2 + x) - nrm[:, 1] * (1 + x * y)) / sc.E0   # (n x b)_z / E0
    assert_close(res, eps * expected.unsqueeze(1))


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("mode,eps_r", [((1, 1), 1.0), ((3, 2), 4.0)])
def test_tmz_cavity_mode_and_pec(sc, mode, eps_r):
    pde = MaxwellTMz(eps_r=eps_r)
    fn, period = tm_cavity(*mode, eps_r=eps_r)
    pts = uniform([0, 0, 0], [CAV_A, CAV_B, period])
    res, f = pde_res(pde, fn, TMZ, sc, pts)
    assert res.shape == (N, 3)
    assert_zero(res, f)
    wall, nrm = walls_2d(CAV_A, CAV_B, period)
    res_w, f_w = cond_res(PEC(), pde, fn, TMZ, sc, wall, nrm)
    assert res_w.shape == (wall.shape[0], 2)   # TMz: (n x E)_x, (n x E)_y
    assert_zero(res_w, f_w)
    # (b) b on Ez: eps0 eps_r db/dt in the Ez row, (curl b)_x = db/dy in Hx, (curl b)_y = -db/dx in Hy
    eps, s = 1e-3, 1e9

    def b(x, y, t):
        return {"Ez": (1 + x * y) * t * s}

    res, _ = pde_res(pde, plus(fn, eps, b), TMZ, sc, pts)
    x, y, t = pts.unbind(1)
    expected = torch.stack([EPS0 * eps_r * (1 + x * y) * s * e_factor(sc), x * t * s * h_factor(sc),
                            -y * t * s * h_factor(sc)], 1)
    assert_close(res, eps * expected)
    res_w, _ = cond_res(PEC(), pde, plus(fn, eps, b), TMZ, sc, wall, nrm)
    xw, yw, tw = wall.unbind(1)
    bw = (1 + xw * yw) * tw * s / sc.E0
    assert_close(res_w, eps * torch.stack([nrm[:, 1] * bw, -nrm[:, 0] * bw], 1))   # n x (b z)


@pytest.mark.parametrize("sc", SCALES)
def test_pmc_walls(sc):
    # TMz dual mode: n x H = (n_x Hy - n_y Hx) z vanishes on the sides of a PMC rectangle
    pde = MaxwellTMz()
    fn, period = tm_cavity(2, 1, cos_mode=True)
    pts = uniform([0, 0, 0], [CAV_A, CAV_B, period])
    res, f = pde_res(pde, fn, TMZ, sc, pts)
    assert_zero(res, f)
    wall, nrm = walls_2d(CAV_A, CAV_B, period)
    res_w, f_w = cond_res(PMC(), pde, fn, TMZ, sc, wall, nrm)
    assert res_w.shape == (wall.shape[0], 1)
    assert_zero(res_w, f_w)
    eps = 1e-3

    def b(x, y, t):
        return {"Hx": (1 + x) / ETA0 + 0 * t, "Hy": (2 - y) / ETA0 + 0 * t}

    res_w, _ = cond_res(PMC(), pde, plus(fn, eps, b), TMZ, sc, wall, nrm)
    x, y, _ = wall.unbind(1)
    expected = (nrm[:, 0] * (2 - y) - nrm[:, 1] * (1 + x)) / ETA0 / sc.H0
    assert_close(res_w, eps * expected.unsqueeze(1))
    # TEz: H = Hz z, n x H = (n_y Hz, -n_x Hz): two components, zero for Hz = sin sin
    pde = MaxwellTEz()
    fn, period = te_cavity_pmc(1, 2)
    res, f = pde_res(pde, fn, TEZ, sc, uniform([0, 0, 0], [CAV_A, CAV_B, period]))
    assert_zero(res, f)
    wall, nrm = walls_2d(CAV_A, CAV_B, period)
    res_w, f_w = cond_res(PMC(), pde, fn, TEZ, sc, wall, nrm)
    assert res_w.shape == (wall.shape[0], 2)
    assert_zero(res_w, f_w)


@pytest.mark.parametrize("sc", SCALES)
def test_maxwell3d_te101_box(sc):
    pde = Maxwell3D()
    fn, period = te101()
    pts = uniform([0, 0, 0, 0], [*BOX, period])
    res, f = pde_res(pde, fn, XYZT, sc, pts)
    assert res.shape == (N, 6)
    assert_zero(res, f)
    wall, nrm = walls_3d(*BOX, period)
    res_w, f_w = cond_res(PEC(), pde, fn, XYZT, sc, wall, nrm)
    assert res_w.shape == (wall.shape[0], 3)
    assert_zero(res_w, f_w)
    # (b) b on Hy: mu0 db/dt in Hy; -(curl b)_x = +db/dz in Ex, -(curl b)_z = -db/dx in Ez
    eps, s = 1e-3, 1e9 / ETA0

    def b(x, y, z, t):
        return {"Hy": (x + z**2) * t * s}

    res, _ = pde_res(pde, plus(fn, eps, b), XYZT, sc, pts)
    x, y, z, t = pts.unbind(1)
    zero = 0 * x
    expected = torch.stack([2 * z * t * s * e_factor(sc), zero, -t * s * e_factor(sc),
                            zero, MU0 * (x + z**2) * s * h_factor(sc), zero], 1)
    assert_close(res, eps * expected)


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("eps_r,mu_r", [(4.0, 1.0), (4.0, 2.0), ("callable", 1.0)])
def test_plane_wave_in_dielectric(sc, eps_r, mu_r):
    """Ey = cos(k x - w t), Hz = Ey / eta with k = w sqrt(eps_r mu_r)/c0, eta = eta0 sqrt(mu_r/eps_r)
    (Pozar, 4th ed., sec. 1.4), on a generic Maxwell with two components."""
    er = 4.0 if eps_r == "callable" else eps_r
    coef = (lambda x, y, z, t: 4.0 + 0 * x) if eps_r == "callable" else eps_r
    pde = Maxwell((None, "Ey", None), (None, None, "Hz"), eps_r=coef, mu_r=mu_r)
    w = 2 * PI * 1e9
    k, eta = w * math.sqrt(er * mu_r) / C0, ETA0 * math.sqrt(mu_r / er)

    def fn(x, y, z, t):
        e = torch.cos(k * x - w * t)
        return {"Ey": e, "Hz": e / eta}

    pts = uniform([0, 0, 0, 0], [0.5, 0.5, 0.5, 2e-9])
    res, f = pde_res(pde, fn, XYZT, sc, pts)
    assert res.shape == (N, 2)
    assert_zero(res, f)
    # the vacuum speed in a dielectric is wrong: residual of the size of the terms
    res_vac, _ = pde_res(Maxwell((None, "Ey", None), (None, None, "Hz")), fn, XYZT, sc, pts)
    assert float(res_vac.detach().norm()) > 0.1 * term_size(f)


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("callable_sigma", [False, True])
def test_conductor_uniform_decay(sc, callable_sigma):
    """A spatially uniform E in a conductor, H = 0: eps dE/dt = -sigma E, E = E(0) exp(-sigma t / eps)
    (the Ampere-Maxwell law with curl H = 0 and J = sigma E; Taflove & Hagness, 3rd ed., eqs. 3.1-3.2)."""
    sigma, eps_r = 0.01, 2.0
    coef = (lambda x, y, z, t: sigma + 0 * x) if callable_sigma else sigma
    pde = Maxwell3D(eps_r=eps_r, sigma=coef)
    rate = sigma / (EPS0 * eps_r)

    def fn(x, y, z, t):
        e = torch.exp(-rate * t) + 0 * x
        return {"Ex": e, "Ey": 0.5 * e}

    pts = uniform([0, 0, 0, 0], [1, 1, 1, 3 / rate])
    res, f = pde_res(pde, fn, XYZT, sc, pts)
    assert_zero(res, f)
    # (b) b = A t on Ez: eps dA t/dt + sigma A t in the Ez row
    eps, amp = 1e-3, rate

    def b(x, y, z, t):
        return {"Ez": amp * t + 0 * x}

    res, _ = pde_res(pde, plus(fn, eps, b), XYZT, sc, pts)
    t = pts[:, 3]
    expected = torch.zeros(N, 6, dtype=DT)
    expected[:, 2] = (EPS0 * eps_r * amp + sigma * amp * t) * e_factor(sc)
    assert_close(res, eps * expected)


@pytest.mark.parametrize("sc", SCALES)
def test_varying_and_piecewise_permittivity(sc):
    """eps_r(x) enters point by point: for Ex = A t (uniform), the Ex row is eps0 eps_r(x) A (L / H0)."""
    amp = 1e9

    def fn(*xs):
        return {"Ex": amp * xs[-1]}

    pts3 = uniform([0, 0, 0, 0], [1, 1, 1, 1e-9])
    res, _ = pde_res(Maxwell3D(eps_r=lambda x, y, z, t: 1 + x**2), fn, XYZT, sc, pts3)
    expected = torch.zeros(N, 6, dtype=DT)
    expected[:, 0] = EPS0 * (1 + pts3[:, 0] ** 2) * amp * e_factor(sc)
    assert_close(res, expected)
    eps_r = piecewise([(Rectangle([0.0, 0.0], [0.5, 1.0]), 4.0), (Disk([0.75, 0.5], 0.2), 9.0)], default=1.0)
    pts = uniform([0, 0, 0], [1, 1, 1e-9], n=200)
    res, _ = pde_res(MaxwellTEz(eps_r=eps_r), fn, TEZ, sc, pts)
    x, y = pts[:, 0], pts[:, 1]
    er = torch.where(x <= 0.5, 4.0, torch.where((x - 0.75) ** 2 + (y - 0.5) ** 2 <= 0.04, 9.0, 1.0)).to(DT)
    assert {4.0, 9.0, 1.0} <= set(er.tolist())
    assert_close(res[:, 0], EPS0 * er * amp * e_factor(sc))
    assert float(res[:, 1:].detach().abs().max()) == 0.0


def integrated_pulse(pulse: GaussianPulse):
    """G(t) = int_0^t g: tau sqrt(pi)/2 (erf((t - t0)/tau) + erf(t0/tau))."""
    tau, t0 = pulse.tau, pulse.t0
    return lambda t: tau * math.sqrt(PI) / 2 * (torch.erf((t - t0) / tau) + math.erf(t0 / tau))


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("kind", ["TEz-Hz", "TMz-Ez"])
def test_maxwell_source(sc, kind):
    """A field whose driven row without the source is exactly the source term: Hz = (A / mu0) s(x, y) G(t)
    (mu0 dHz/dt = A g s, the magnetic line source), or Ez = (A / eps0) s G (eps0 dEz/dt = A g s)."""
    pulse, prof, amp = GaussianPulse(1e9), GaussianProfile((0.4, 0.5), 0.08), 3.0
    comp, pde_cls, inputs = ("Hz", MaxwellTEz, TEZ) if kind == "TEz-Hz" else ("Ez", MaxwellTMz, TMZ)
    material = MU0 if comp == "Hz" else EPS0
    big_g = integrated_pulse(pulse)

    def fn(x, y, t):
        return {comp: amp / material * prof(x, y) * big_g(t)}

    src = Source(comp, pulse, prof, amplitude=amp)
    with_src, without = pde_cls(sources=[src]), pde_cls()
    pts = uniform([0.2, 0.3, 0.0], [0.6, 0.7, 2 * pulse.t0])
    r1, f = pde_res(with_src, fn, inputs, sc, pts)
    r0, _ = pde_res(without, fn, inputs, sc, pts)
    k = without.fields.index(comp)
    x, y, t = pts.unbind(1)
    term = amp * pulse(t) * prof(x, y) * (h_factor(sc) if comp == "Hz" else e_factor(sc))
    assert_close(r0[:, k], term)                      # the residual without the source is the source term
    assert_zero(r1[:, k], f)                          # ... so with it the driven row vanishes
    other = [i for i in range(3) if i != k]
    assert torch.equal(r1[:, other], r0[:, other])    # and the other rows do not see the source
    with pytest.raises(ValueError, match="source drives"):
        pde_cls(sources=[Source("Hq", pulse, prof)])


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("phi", [0.0, 0.7, 2.5])
def test_silver_mueller_outgoing_plane_wave(sc, phi):
    """A plane wave leaving along the normal satisfies n x E + eta n x (n x H) = 0 exactly (TEz, TMz, 3D)."""
    kx, ky = math.cos(phi), math.sin(phi)
    w = 2 * PI * 1e9
    k = w / C0
    pts = uniform([0, 0, 0], [1, 1, 2e-9])
    nrm = torch.tensor([[kx, ky]], dtype=DT).expand(N, 2)

    def te(x, y, t):
        hz = torch.cos(k * (kx * x + ky * y) - w * t) / ETA0
        return {"Hz": hz, "Ex": -ETA0 * hz * ky, "Ey": ETA0 * hz * kx}   # E = eta H x k

    def tm(x, y, t):
        ez = torch.cos(k * (kx * x + ky * y) - w * t)
        return {"Ez": ez, "Hx": ez / ETA0 * ky, "Hy": -ez / ETA0 * kx}   # H = k x E / eta

    def n_cross_e(e):   # the nonzero components of n x E: TEz (n x E)_z; TMz (n_y Ez, -n_x Ez)
        if "Ez" in e:
            return torch.stack([nrm[:, 1] * e["Ez"], -nrm[:, 0] * e["Ez"]], 1)
        return (nrm[:, 0] * e["Ey"] - nrm[:, 1] * e["Ex"]).unsqueeze(1)

    for pde, fn in ((MaxwellTEz(), te), (MaxwellTMz(), tm)):
        res_pde, f = pde_res(pde, fn, TEZ, sc, pts)
        assert_zero(res_pde, f)
        res, f = cond_res(SilverMueller(), pde, fn, TEZ, sc, pts, nrm)
        assert_zero(res, f)

        def back(x, y, t, fn=fn):   # the same wave travelling in, along -n: k -> -k and H -> -H
            return {c: (-v if c.startswith("H") else v) for c, v in fn(-x, -y, t).items()}

        res_pde, f = pde_res(pde, back, TEZ, sc, pts)
        assert_zero(res_pde, f)
        res_in, _ = cond_res(SilverMueller(), pde, back, TEZ, sc, pts, nrm)   # not absorbed: 2 n x E
        assert_close(res_in, 2 * n_cross_e(back(*pts.unbind(1))) / sc.E0)
    # TEz perturbation: the residual is (n x E)_z - (eta H0 / E0) Hz, so b on Hz adds -eta b / E0
    eps = 1e-3

    def b(x, y, t):
        return {"Hz": (1 + x * y) / ETA0 + 0 * t}

    res, _ = cond_res(SilverMueller(), MaxwellTEz(), plus(te, eps, b), TEZ, sc, pts, nrm)
    x, y, _ = pts.unbind(1)
    assert_close(res, -eps * ETA0 * ((1 + x * y) / ETA0 / sc.E0).unsqueeze(1))


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("medium", ["pde-number", "pde-function", "given"])
def test_silver_mueller_3d_dielectric(sc, medium):
    """3D plane wave in eps_r = 4 leaving along an oblique normal: eta = eta0 / 2 from the PDE's eps_r (a
    number or a function, evaluated at the boundary points) or given to the condition."""
    n = torch.tensor([1.0, 2.0, -2.0], dtype=DT) / 3
    p = torch.tensor([2.0, 1.0, 2.0], dtype=DT) / 3   # polarisation, p . n = 0
    q = torch.linalg.cross(n, p)
    er = 4.0
    w = 2 * PI * 1e9
    k, eta = w * math.sqrt(er) / C0, ETA0 / math.sqrt(er)

    def fn(x, y, z, t):
        s = torch.cos(k * (n[0] * x + n[1] * y + n[2] * z) - w * t)
        return {**{c: p[i] * s for i, c in enumerate(("Ex", "Ey", "Ez"))},
                **{c: q[i] * s / eta for i, c in enumerate(("Hx", "Hy", "Hz"))}}

    pde = Maxwell3D(eps_r=(lambda *xs: er + 0 * xs[0]) if medium == "pde-function" else er)
    pts = uniform([0, 0, 0, 0], [1, 1, 1, 2e-9])
    res, f = pde_res(pde, fn, XYZT, sc, pts)
    assert_zero(res, f)
    cond = SilverMueller(eps_r=er) if medium == "given" else SilverMueller()
    nrm = n.expand(N, 3)
    res, f = cond_res(cond, pde, fn, XYZT, sc, pts, nrm)
    assert res.shape == (N, 3)
    assert_zero(res, f)
    # with the vacuum impedance the same wave leaves n x E - (eta0 / eta) n x E = -n x E (n x E = q s)
    res_vac, _ = cond_res(SilverMueller(eps_r=1.0), pde, fn, XYZT, sc, pts, nrm)
    s = torch.cos(k * (pts[:, :3] @ n) - w * pts[:, 3])
    assert_close(res_vac, -(q[None, :] * s[:, None]) / sc.E0)


@pytest.mark.parametrize("sc", SCALES)
@pytest.mark.parametrize("q", [0.3, 0.8, 1.2])
def test_silver_mueller_oblique_incidence(sc, q):
    """TEz wave hitting x = a at angle q: the incident wave alone leaves Ey - eta Hz = eta Hz (cos q - 1);
    with the reflected wave of coefficient R = (cos q - 1)/(cos q + 1) the condition holds exactly, which is
    the reflection formula of the conditions module's docstring (|R| = (1 - cos q)/(1 + cos q))."""
    a, w = 0.7, 2 * PI * 1e9
    k = w / C0
    cq, sq = math.cos(q), math.sin(q)
    r = (cq - 1) / (cq + 1)

    def wave(x, y, t, kx, ky, amp):
        hz = amp * torch.cos(w * t - k * (kx * (x - a) + ky * y)) / ETA0
        return {"Hz": hz, "Ex": -ETA0 * hz * ky, "Ey": ETA0 * hz * kx}

    def incident(x, y, t):
        return wave(x, y, t, cq, sq, 1.0)

    def both(x, y, t):
        i, o = incident(x, y, t), wave(x, y, t, -cq, sq, r)
        return {c: i[c] + o[c] for c in i}

    pde = MaxwellTEz()
    res, f = pde_res(pde, both, TEZ, sc, uniform([0, 0, 0], [a, 1, 2e-9]))
    assert_zero(res, f)
    s = uniform([0, 0], [1, 2e-9])
    pts = torch.stack([a + 0 * s[:, 0], s[:, 0], s[:, 1]], 1)
    nrm = torch.tensor([[1.0, 0.0]], dtype=DT).expand(N, 2)
    res, f = cond_res(SilverMueller(), pde, both, TEZ, sc, pts, nrm)
    assert_zero(res, f)
    res, _ = cond_res(SilverMueller(), pde, incident, TEZ, sc, pts, nrm)
    hz = incident(*pts.unbind(1))["Hz"]
    assert_close(res, (ETA0 * hz * (cq - 1) / sc.E0).unsqueeze(1))


@pytest.mark.parametrize("sc", SCALES)
def test_initial(sc):
    pde = MaxwellTEz()
    fn, period = te_cavity(2, 1)
    s = uniform([0, 0], [CAV_A, CAV_B])
    pts = torch.cat([s, torch.zeros(N, 1, dtype=DT)], 1)
    res, f = cond_res(Initial(values=fn), pde, fn, TEZ, sc, pts)
    assert res.shape == (N, 3)
    assert_zero(res, f)
    eps = 1e-3

    def b(x, y, t):
        return {"Ey": 1 + x * y + 0 * t, "Hz": (2 - x) / ETA0 + 0 * t}

    res, _ = cond_res(Initial(values=fn), pde, plus(fn, eps, b), TEZ, sc, pts)
    x, y, _ = pts.unbind(1)
    assert_close(res, eps * torch.stack([0 * x, (1 + x * y) / sc.E0, (2 - x) / ETA0 / sc.H0], 1))
    # zero initial values: the residual is the fields (Ex = Ey = 0 at t = 0 for this mode, Hz is not)
    res, f = cond_res(Initial(), pde, fn, TEZ, sc, pts)
    assert torch.equal(res, f.values)
    assert_close(res[:, 2], fn(x, y, 0 * x)["Hz"] / sc.H0)
    assert Initial(values=fn, hard=True).hard  # imposed through the network's head (tests/test_problem.py)


# ---------------------------------------------------------------------------------------------------
# scalar PDEs
# ---------------------------------------------------------------------------------------------------
SCALAR_SCALES = [pytest.param(Scales(), id="default-scales"),
                 pytest.param(Scales(length=0.3, time=4e-9, E0=5.0), id="L0.3-T4ns-E0_5")]


def stationary(sc: Scales) -> float:
    """Training residual / SI residual of a stationary scalar equation on a field in V/m: L^2 / E0."""
    return sc.length**2 / sc.E0


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_helmholtz_sin_sin(sc):
    """u = sin(k x) sin(k y) solves -lap u - k^2 u = k^2 sin sin (helmholtz-square's equation)."""
    k = 4 * PI
    pde = Helmholtz(k, source=lambda x, y: k**2 * torch.sin(k * x) * torch.sin(k * y), field="Ez")
    assert pde.fields == ("Ez",) and pde.units == {"Ez": "V/m"}
    d = pde.derivatives(("x", "y"))
    assert d.wrt == ("x", "y") and d.laplacian_dict() == {"x": 1.0, "y": 1.0} and d.second == ()

    def fn(x, y):
        return {"Ez": torch.sin(k * x) * torch.sin(k * y)}

    pts = uniform([0, 0], [1, 1])
    res, f = pde_res(pde, fn, ("x", "y"), sc, pts)
    assert res.shape == (N, 1)
    assert_zero(res, f)
    # (b) b = A x^2 y: -lap b - k^2 b = -2 A y - k^2 A x^2 y
    eps, amp = 1e-3, 5.0

    def b(x, y):
        return {"Ez": amp * x**2 * y}

    res, _ = pde_res(pde, plus(fn, eps, b), ("x", "y"), sc, pts)
    x, y = pts.unbind(1)
    assert_close(res, eps * ((-2 * amp * y - k**2 * amp * x**2 * y) * stationary(sc)).unsqueeze(1))


def test_helmholtz_scaling_ratio():
    """(c) one SI field under two scales: the residuals differ by exactly (L2^2 / U2) / (L1^2 / U1)."""
    k = 3.0
    pde = Helmholtz(k)

    def fn(x, y, z):
        return {"u": torch.exp(0.3 * x) * torch.cos(y) + x * y * z}

    pts = uniform([0, 0, 0], [1, 1, 1])
    s1, s2 = Scales(length=2.0, E0=0.1), Scales(length=0.3, E0=7.0)
    r1, _ = pde_res(pde, fn, ("x", "y", "z"), s1, pts)
    r2, _ = pde_res(pde, fn, ("x", "y", "z"), s2, pts)
    assert_close(r2, r1 * (stationary(s2) / stationary(s1)))
    x, y, z = pts.unbind(1)
    lap = (0.09 - 1.0) * torch.exp(0.3 * x) * torch.cos(y)
    assert_close(r1[:, 0], (-lap - k**2 * fn(x, y, z)["u"]) * stationary(s1))


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_helmholtz_varying_wavenumber(sc):
    """k(x) = k0 (1 + x / 2) (an inhomogeneous medium): u = exp(x/2) cos(2 y) with f = -lap u - k^2 u."""
    k0 = 2.0

    def kk(x, y):
        return k0 * (1 + x / 2)

    def fn(x, y):
        return {"u": torch.exp(x / 2) * torch.cos(2 * y)}

    pde = Helmholtz(kk, source=lambda x, y: (4 - 0.25 - kk(x, y) ** 2) * fn(x, y)["u"], unit="V")
    res, f = pde_res(pde, fn, ("x", "y"), sc, uniform([0, 0], [1, 1]))
    assert_zero(res, f)


def test_helmholtz_matches_helmholtz_square():
    """With L = U = 1, Helmholtz(k0, k0^2 sin sin, field="Ez") gives exactly the residual helmholtz-square
    used before it was ported to this object: -lap Ez - k0^2 Ez - k0^2 sin(k0 x) sin(k0 y), [N, 1]."""
    k0 = 4 * PI
    pde = Helmholtz(k0, source=lambda x, y: k0**2 * torch.sin(k0 * x) * torch.sin(k0 * y), field="Ez")

    def fn(x, y):   # the exact solution plus a perturbation, so both residuals are nonzero
        return {"Ez": torch.sin(k0 * x) * torch.sin(k0 * y) + 0.1 * x * (1 - x) * y * (1 - y)}

    ctx = context(pde, ("x", "y"), Scales())
    f, pts = fields_for(pde, fn, ctx, uniform([0, 0], [1, 1]))
    x, y = pts.unbind(1)
    theirs = (-f.lap("Ez") - k0**2 * f["Ez"] - k0**2 * torch.sin(k0 * x) * torch.sin(k0 * y)).unsqueeze(1)
    ours = pde.residual(f, pts, ctx)
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-12 * float(theirs.detach().abs().max()))


def dalembert(c):
    """u = exp(-((x - c t - 0.3)/0.1)^2) + 0.5 sin(4 pi (x + c t)): d'Alembert's solution of u_tt = c^2 u_xx
    (d'Alembert's formula; Evans, *Partial Differential Equations*, 2nd ed., 2010, sec. 2.4.1)."""

    def fn(x, t):
        return {"u": gaussian_front(x - c * t - 0.3, 0.1) + 0.5 * torch.sin(4 * PI * (x + c * t))}

    return fn


@pytest.mark.parametrize("sc", SCALAR_SCALES)
@pytest.mark.parametrize("with_scales", [True, False])
def test_wave_dalembert(sc, with_scales):
    c = C0 / 2
    pde = Wave(speed=c)
    r2 = (c * sc.time / sc.length) ** 2
    d = pde.derivatives(("x", "t"), sc if with_scales else None)
    if with_scales:
        assert d.laplacian_dict() == {"t": 1.0, "x": -r2} and d.second == ()
    else:
        assert d.laplacian_dict() == {"x": 1.0} and d.second == (("t", "t"),)
    ctx = context(pde, ("x", "t"), sc)
    pts = uniform([0, 0], [1, 2e-9])
    perturbed = plus(dalembert(c), 1e-3, lambda x, t: {"u": 7.0 * x**2 * t**2 * 1e18})
    for fn, want in ((dalembert(c), None), (perturbed, "b")):
        pt = pts / torch.tensor([sc.length, sc.time], dtype=DT)
        f = evaluate(ClosedForm(fn, ctx), pt, ctx.inputs, pde.fields, wrt=d.wrt, method="autograd",
                     second=d.second or None, laplacian=d.laplacian_dict())
        res = pde.residual(f, pt, ctx)
        if want is None:
            assert_zero(res, f)
        else:   # b_tt - c^2 b_xx = 2 A x^2 - 2 c^2 A t^2, times T^2 / U
            x, t = pts.unbind(1)
            amp = 7.0 * 1e18
            expected = (2 * amp * x**2 - 2 * c**2 * amp * t**2) * sc.time**2 / sc.E0
            assert_close(res, 1e-3 * expected.unsqueeze(1))


def test_wave_needs_matching_channels():
    pde = Wave(speed=C0 / 2)
    sc_a, sc_b = Scales(), Scales(length=0.3, time=4e-9)
    ctx = context(pde, ("x", "t"), sc_b)
    d = pde.derivatives(("x", "t"), sc_a)   # declared for other scales: weights differ and no (t, t) pair
    f = evaluate(ClosedForm(dalembert(C0 / 2), ctx), uniform([0, 0], [1, 1]), ctx.inputs, pde.fields,
                 wrt=d.wrt, method="autograd", laplacian=d.laplacian_dict())
    with pytest.raises(KeyError, match="Wave needs"):
        pde.residual(f, uniform([0, 0], [1, 1]), ctx)


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_wave_2d_plane_wave_and_sources(sc):
    c = 0.8 * C0
    kx, ky = 0.6, 0.8
    pde = Wave(speed=c, field="Ez")

    def fn(x, y, t):
        return {"Ez": gaussian_front(kx * x + ky * y - c * t - 0.2, 0.15)}

    pts = uniform([0, 0, 0], [1, 1, 2e-9])
    res, f = pde_res(pde, fn, ("x", "y", "t"), sc, pts)
    assert_zero(res, f)
    # a source: u = A t^2 sin(q x) needs f = 2 A sin(q x) + c^2 q^2 A t^2 sin(q x)
    q, amp = 3.0, 1e18

    def forced(x, y, t):
        return {"Ez": amp * t**2 * torch.sin(q * x)}

    def rhs(x, y, t):
        return amp * (2 + c**2 * q**2 * t**2) * torch.sin(q * x)

    pde_f = Wave(speed=c, field="Ez", source=rhs)
    res, f = pde_res(pde_f, forced, ("x", "y", "t"), sc, pts)
    assert_zero(res, f)
    res0, _ = pde_res(pde, forced, ("x", "y", "t"), sc, pts)    # without it the residual is the source term
    x, y, t = pts.unbind(1)
    assert_close(res0[:, 0], amp * (2 + c**2 * q**2 * t**2) * torch.sin(q * x) * sc.time**2 / sc.E0)
    # a Source object (waveform x profile) enters as -A g s T^2 / U
    pulse, prof = GaussianPulse(1e9), GaussianProfile((0.5, 0.5), 0.2)
    pde_s = Wave(speed=c, field="Ez", source=Source("Ez", pulse, prof, amplitude=1e18))
    res_s, _ = pde_res(pde_s, fn, ("x", "y", "t"), sc, pts)
    res_0, _ = pde_res(pde, fn, ("x", "y", "t"), sc, pts)
    assert_close(res_s - res_0, -(1e18 * pulse(t) * prof(x, y) * sc.time**2 / sc.E0).unsqueeze(1))
    with pytest.raises(ValueError, match="drives"):
        Wave(field="Ez", source=Source("u", pulse, prof))


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_poisson_and_laplace(sc):
    U = sc.of_unit("V")
    fac = sc.length**2 / U
    pts = uniform([-1, -1, -1], [1, 1, 1])
    x, y, z = pts.unbind(1)
    xyz = ("x", "y", "z")
    # Poisson with a number: phi = x^2 + y^2 - z^2 + x y, -lap phi = -2
    pde = Poisson(-2.0)
    assert pde.fields == ("phi",) and pde.units == {"phi": "V"}

    def quad(x, y, z):
        return {"phi": x**2 + y**2 - z**2 + x * y}

    res, f = pde_res(pde, quad, xyz, sc, pts)
    assert_zero(res, f)
    # Poisson with a function: phi = sin(2 x) exp(y), -lap phi = (4 - 1) phi
    pde = Poisson(lambda x, y, z: 3 * torch.sin(2 * x) * torch.exp(y))

    def trig(x, y, z):
        return {"phi": torch.sin(2 * x) * torch.exp(y)}

    res, f = pde_res(pde, trig, xyz, sc, pts)
    assert_zero(res, f)
    # Laplace: a harmonic polynomial; (b) b = A x^2 y gives -lap b = -2 A y
    lap = Laplace()

    def harmonic(x, y, z):
        return {"phi": x**3 - 3 * x * y**2 + x * y * z + y**2 - z**2}

    res, f = pde_res(lap, harmonic, xyz, sc, pts)
    assert_zero(res, f)
    res, _ = pde_res(lap, plus(harmonic, 1e-3, lambda x, y, z: {"phi": 4.0 * x**2 * y}), xyz, sc, pts)
    assert_close(res, 1e-3 * (-2 * 4.0 * y * fac).unsqueeze(1))


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_poisson_varying_permittivity(sc):
    """-div(eps grad phi) with eps = 1 + x^2, phi = x^2 + y: div(eps grad phi) = 2 + 6 x^2
    (grad eps . grad phi read from autograd on eps and the declared first derivatives)."""
    fac = sc.length**2 / sc.of_unit("V")
    pde = Poisson(lambda x, y: -(2 + 6 * x**2), eps_r=lambda x, y: 1 + x**2)

    def fn(x, y):
        return {"phi": x**2 + y}

    pts = uniform([-1, -1], [1, 1])
    res, f = pde_res(pde, fn, ("x", "y"), sc, pts)
    assert_zero(res, f)
    res, _ = pde_res(pde, plus(fn, 1e-3, lambda x, y: {"phi": y**2}), ("x", "y"), sc, pts)
    x = pts[:, 0]
    assert_close(res, 1e-3 * (-2 * (1 + x**2) * fac).unsqueeze(1))   # -div(eps grad y^2) = -2 eps
    # a piecewise eps (numpy, no gradient): constant in each region, -eps lap phi there
    eps_r = piecewise([(Rectangle([-1.0, -1.0], [0.0, 1.0]), 5.0)], default=2.0)
    res, _ = pde_res(Laplace(eps_r=eps_r), fn, ("x", "y"), sc, pts)
    assert_close(res[:, 0], -torch.where(x <= 0, 5.0, 2.0).to(DT) * 2 * fac)


def test_scalar_inputs_and_arguments():
    with pytest.raises(ValueError, match="stationary"):
        Helmholtz(1.0).check_inputs(("x", "y", "t"))
    with pytest.raises(ValueError, match="time-dependent"):
        Wave().check_inputs(("x", "y"))
    with pytest.raises(ValueError, match="spatial"):
        Poisson(0.0).check_inputs(("t",))
    Helmholtz(1.0).check_inputs(("x", "y", "z"))
    Wave().check_inputs(("x", "t"))
    with pytest.raises(ValueError, match="wavenumber"):
        Helmholtz(-1.0)
    with pytest.raises(ValueError, match="speed"):
        Wave(speed=0.0)
    with pytest.raises(ValueError, match="eps_r"):
        Poisson(0.0, eps_r=-1.0)
    with pytest.raises(ValueError, match="field"):
        Laplace(field="not a name")
    with pytest.raises(ValueError, match="stationary"):
        Helmholtz(1.0, source=Source("u", GaussianPulse(1e9), GaussianProfile((0.0, 0.0), 0.1)))
    assert Helmholtz(np.float64(2.0)).k == 2.0
    with pytest.raises(ValueError, match="needs the inputs"):
        MaxwellTEz().check_inputs(("x", "y", "z", "t"))


# ---------------------------------------------------------------------------------------------------
# scalar conditions
# ---------------------------------------------------------------------------------------------------
def u_smooth(x, y):
    return {"u": torch.sin(2 * x) * torch.cos(3 * y) + x * y}


def grad_u_smooth(x, y):
    return 2 * torch.cos(2 * x) * torch.cos(3 * y) + y, -3 * torch.sin(2 * x) * torch.sin(3 * y) + x


def boundary_points(n=N, seed=3):
    """Points on a unit circle with outward normals (x, y)/r (any points with unit normals would do)."""
    a = uniform([0.0], [2 * PI], n, seed)[:, 0]
    nrm = torch.stack([torch.cos(a), torch.sin(a)], 1)
    return nrm.clone(), nrm


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_dirichlet(sc):
    pde, U = Helmholtz(2.0), sc.E0
    pts, _ = boundary_points()
    res, f = cond_res(Dirichlet(value=lambda x, y: u_smooth(x, y)["u"]), pde, u_smooth, ("x", "y"), sc, pts)
    assert res.shape == (N, 1)
    assert_zero(res, f)
    res, f = cond_res(Dirichlet(value=3.0), pde, lambda x, y: {"u": 3.0 + 0 * x}, ("x", "y"), sc, pts)
    assert_zero(res, f)
    res, _ = cond_res(Dirichlet(), pde, plus(lambda x, y: {"u": 0 * x}, 1e-3, u_smooth), ("x", "y"), sc, pts)
    x, y = pts.unbind(1)
    assert_close(res[:, 0], 1e-3 * u_smooth(x, y)["u"] / U)
    # on some fields of a Maxwell PDE (Ez of a PEC cavity), values in each field's unit
    fn, period = tm_cavity(1, 1)
    wall, _ = walls_2d(CAV_A, CAV_B, period)
    res, f = cond_res(Dirichlet(fields="Ez"), MaxwellTMz(), fn, TMZ, sc, wall)
    assert res.shape == (wall.shape[0], 1)
    assert_zero(res, f)
    res, _ = cond_res(Dirichlet(value=lambda x, y, t: {"Hy": 1.0 + 0 * x}, fields=("Ez", "Hy")), MaxwellTMz(),
                      lambda x, y, t: {"Hy": 2.0 + 0 * x}, TMZ, sc, wall)
    assert_close(res, torch.tensor([[0.0, 1.0 / sc.H0]], dtype=DT).expand(wall.shape[0], 2))
    with pytest.raises(ValueError, match="no field"):
        cond_res(Dirichlet(fields="Ex"), MaxwellTMz(), fn, TMZ, sc, wall)


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_neumann_and_robin(sc):
    pde, U, L = Poisson(0.0, field="u", unit="V/m"), sc.E0, sc.length
    pts, nrm = boundary_points()
    x, y = pts.unbind(1)

    def dn(x, y, n):
        gx, gy = grad_u_smooth(x, y)
        return n[:, 0] * gx + n[:, 1] * gy

    # the normals of the test points are (x, y) on the unit circle, so g(x, y) = (x, y) . grad u
    def g_neumann(x, y):
        return dn(x, y, torch.stack([x, y], 1))

    res, f = cond_res(Neumann(value=g_neumann), pde, u_smooth, ("x", "y"), sc, pts, nrm)
    assert res.shape == (N, 1)
    assert_zero(res, f)
    # (b) b = A x^2 y on a zero Neumann condition: A (2 x y n_x + x^2 n_y) L / U
    amp = 3.0
    res, _ = cond_res(Neumann(), pde, lambda x, y: {"u": 1e-3 * amp * x**2 * y}, ("x", "y"), sc, pts, nrm)
    assert_close(res[:, 0], 1e-3 * amp * (2 * x * y * nrm[:, 0] + x**2 * nrm[:, 1]) * L / U)
    # Robin alpha u + beta du/dn = g (alpha in 1/m)
    alpha, beta = 2.5, 0.4

    def g_robin(x, y):
        return alpha * u_smooth(x, y)["u"] + beta * g_neumann(x, y)

    for a_coef in (alpha, lambda x, y: alpha + 0 * x):
        cond = Robin(alpha=a_coef, beta=beta, value=g_robin)
        res, f = cond_res(cond, pde, u_smooth, ("x", "y"), sc, pts, nrm)
        assert_zero(res, f)
    res, _ = cond_res(Robin(alpha=alpha, beta=beta), pde, lambda x, y: {"u": 1e-3 * amp * x**2 * y},
                      ("x", "y"), sc, pts, nrm)
    expected = alpha * amp * x**2 * y + beta * amp * (2 * x * y * nrm[:, 0] + x**2 * nrm[:, 1])
    assert_close(res[:, 0], 1e-3 * expected * L / U)
    # Robin(alpha=0, beta=1) is Neumann; Impedance is Robin
    r1, _ = cond_res(Robin(alpha=0.0, beta=1.0, value=g_neumann), pde, u_smooth, ("x", "y"), sc, pts, nrm)
    r2, _ = cond_res(Neumann(value=g_neumann), pde, u_smooth, ("x", "y"), sc, pts, nrm)
    assert torch.allclose(r1, r2, rtol=0, atol=1e-14)
    assert Impedance is Robin
    with pytest.raises(ValueError, match="both 0"):
        Robin(alpha=0.0, beta=0.0)
    assert Neumann().derivatives(("x", "y", "t")).wrt == ("x", "y")


@pytest.mark.parametrize("sc", SCALAR_SCALES)
def test_wave_cauchy_data(sc):
    """Initial and InitialRate hold u and du/dt of d'Alembert's solution at t = 0."""
    c = C0 / 2
    pde, fn = Wave(speed=c), dalembert(c)

    def u0(x, t):
        return fn(x, 0 * t)["u"]

    def v0(x, t):   # du/dt at t = 0: -c F'(x - 0.3) + 0.5 * 4 pi c cos(4 pi x)
        s = x - 0.3
        return -c * (-2 * s / 0.01) * torch.exp(-((s / 0.1) ** 2)) + 0.5 * 4 * PI * c * torch.cos(4 * PI * x)

    pts = torch.cat([uniform([0], [1]), torch.zeros(N, 1, dtype=DT)], 1)
    res, f = cond_res(Initial(values=u0), pde, fn, ("x", "t"), sc, pts)
    assert_zero(res, f)
    res, f = cond_res(InitialRate(value=v0), pde, fn, ("x", "t"), sc, pts)
    assert res.shape == (N, 1)
    assert_zero(res, f)
    res, _ = cond_res(InitialRate(), pde, lambda x, t: {"u": 1e-3 * 1e9 * x * t}, ("x", "t"), sc, pts)
    assert_close(res[:, 0], 1e-3 * 1e9 * pts[:, 0] * sc.time / sc.E0)
    assert InitialRate().where == "initial" and InitialRate().derivatives(("x", "t")).wrt == ("t",)


# ---------------------------------------------------------------------------------------------------
# sources and materials
# ---------------------------------------------------------------------------------------------------
def test_modulated_gaussian():
    f0, bw = 2e9, 1e9
    g = ModulatedGaussian(f0, bw)
    assert g.tau == pytest.approx(2 * math.sqrt(math.log(10)) / (PI * bw), rel=1e-15)
    assert g.t0 == pytest.approx(3.65 * g.tau, rel=1e-15)
    t = np.linspace(0, 2 * g.t0, 4001)
    assert np.allclose(g(t), g(torch.tensor(t)).numpy(), rtol=0, atol=1e-15)
    assert g(g.t0) == 0.0 and abs(g(0.0)) < 2e-6
    # the amplitude spectrum at the band edges f0 +- B/2 is 10 % of its value at f0 (Riemann sum, exact for
    # a Gaussian on a fine grid)
    dt = t[1] - t[0]

    def spectrum(f):
        return abs(np.sum(g(t) * np.exp(-2j * PI * f * t)) * dt)

    peak = spectrum(f0)
    assert peak == pytest.approx(g.tau * math.sqrt(PI) / 2, rel=1e-6)
    for edge in (f0 - bw / 2, f0 + bw / 2):
        assert spectrum(edge) / peak == pytest.approx(0.1, rel=1e-4)
    assert ModulatedGaussian(f0, tau=1e-9, t0=2e-9).t0 == 2e-9
    with pytest.raises(ValueError, match="not both"):
        ModulatedGaussian(f0, bw, tau=1e-9)
    with pytest.raises(ValueError, match="bandwidth"):
        ModulatedGaussian(f0, -1.0)
    with pytest.raises(ValueError, match="t0"):
        ModulatedGaussian(f0, t0=float("inf"))


def test_ramped_sinusoid():
    f = 1e9
    g = RampedSinusoid(f, ramp_cycles=3)
    tr = 3 / f
    t = np.linspace(-1e-9, 6e-9, 7001)
    assert np.allclose(g(t), g(torch.tensor(t)).numpy(), rtol=0, atol=1e-15)
    r = g.ramp(t)
    assert np.all(r[t <= 0] == 0) and np.all(r[t >= tr] == 1) and np.all(np.diff(r) >= 0)
    assert g.ramp(tr / 2) == pytest.approx(0.5, abs=1e-15)
    late = t >= tr
    assert np.allclose(g(t[late]), np.sin(2 * PI * f * t[late]), rtol=0, atol=1e-15)
    # r' = 0 at both ends of the ramp (C1): one-sided slopes vanish like h
    h = 1e-15
    assert abs(float(g.ramp(h)) / h) < 1e-3 / tr and abs((1 - float(g.ramp(tr - h))) / h) < 1e-3 / tr
    assert np.allclose(RampedSinusoid(f, 0)(t), np.where(t >= 0, np.sin(2 * PI * f * t), 0.0), atol=1e-15)
    with pytest.raises(ValueError, match="ramp_cycles"):
        RampedSinusoid(f, -1)


def test_fdtd_uses_the_shared_source():
    f, sigma = 1e9, 7.5e-3
    pulse, prof = GaussianPulse(f), GaussianProfile((0.4, 0.6), sigma)
    assert fdtd.pulse_tau(f) == pulse.tau and fdtd.pulse_t0(f) == pulse.t0
    t = np.linspace(0, 4e-9, 101)
    assert np.array_equal(fdtd.gaussian_pulse(t, f), pulse(t))
    x, y = np.meshgrid(np.linspace(0.3, 0.5, 11), np.linspace(0.5, 0.7, 9))
    assert np.array_equal(fdtd.gaussian_source_profile(x, y, sigma, 0.4, 0.6), prof(x, y))
    with pytest.raises(ValueError, match="frequency"):
        fdtd.pulse_tau(-1.0)
    # numpy scalars are numbers too (a frequency read from an array)
    assert GaussianPulse(np.float32(1e9)).frequency == pytest.approx(1e9)
    assert fdtd.pulse_tau(np.int64(10**9)) == GaussianPulse(1e9).tau
    with pytest.raises(ValueError, match="frequency"):
        GaussianPulse(True)


def test_piecewise():
    eps = piecewise([(Disk([0.0, 0.0], 1.0), 4.0), (Rectangle([0.0, -2.0], [2.0, 2.0]), 9.0)], default=1.0)
    x = torch.tensor([0.0, 0.5, 1.5, -1.5, 1.0], dtype=torch.float32)
    y = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float32)
    t = torch.zeros(5, dtype=torch.float32)
    out = eps(x, y, t)   # a trailing time is ignored; the first region wins on overlaps and its boundary
    assert out.dtype == torch.float32 and out.tolist() == [4.0, 4.0, 9.0, 1.0, 4.0]
    assert np.array_equal(eps(np.array([[0.0, 1.5]]), np.array([[0.0, 0.0]])), np.array([[4.0, 9.0]]))
    with pytest.raises(ValueError, match="different dimensions"):
        piecewise([(Disk([0.0, 0.0], 1.0), 4.0), (_Fake3D(), 2.0)], 1.0)
    with pytest.raises(ValueError, match="finite"):
        piecewise([(Disk([0.0, 0.0], 1.0), float("nan"))], 1.0)
    with pytest.raises(ValueError, match="2 coordinates"):
        eps(x)


class _Fake3D:
    dim = 3

    def contains(self, points):
        return np.ones(len(points), bool)


@pytest.mark.parametrize("dim", [1, 2, 3])
@pytest.mark.parametrize("spacing", [0.5, 1.0])
def test_smoothed_source_integrates_to_one_at_the_sampled_resolution(dim, spacing):
    """The normalised Gaussian profile (a smoothed point source in 1D/3D, line source in 2D) sums to 1 within 1e-3
    on a grid of spacing h = spacing * sigma (one or two samples per sigma), off-centre, over +-8 sigma; the error of
    such a sum is of order exp(-2 pi^2 sigma^2 / h^2) (Poisson summation), 3e-9 at h = sigma."""
    sigma = 2.5e-3
    center = (0.41, 0.613, 0.37)[:dim]
    prof = GaussianProfile(center, sigma)
    h = spacing * sigma
    axes = [np.arange(c - 8 * sigma + 0.3 * h, c + 8 * sigma, h) for c in center]
    grids = np.meshgrid(*axes, indexing="ij")
    total = float(np.sum(prof(*grids))) * h**dim
    assert abs(total - 1.0) < 1e-3, total
    # and with the unnormalised bump the sum is (2 pi sigma^2)^(d/2), not 1: the normalisation is what is tested
    assert abs(total / prof.norm - (2 * math.pi * sigma**2) ** (dim / 2)) < 1e-3 * (2 * math.pi * sigma**2) ** (dim / 2)
