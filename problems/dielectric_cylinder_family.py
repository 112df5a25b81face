"""``dielectric-cylinder-family``: TMz scattering of a plane wave by a dielectric cylinder, for a box of
permittivities and radii, frequency domain, in a PML.

Time convention exp(-i omega t).  The incident wave Ez_inc = A exp(i k0 x) (k0 = 2 pi rad/m, lambda = 1 m) meets a
homogeneous cylinder r < a of relative permittivity eps_r (mu_r = 1) on the z axis.  The family's inputs
(:class:`elecsolver.Parameter`) are

    eps_r in family.cylinder.eps_r = [1.5, 4],      a in family.cylinder.radius = [0.15, 0.35] m,

so that the network maps (x, y, eps_r, a) to the complex scattered field Ez_s = Ez - Ez_inc (V/m) of

    -lap Ez_s - k^2 Ez_s = (k^2 - k0^2) Ez_inc,     k = k0 sqrt(eps_r) for r < a, k0 outside

(the total field's -lap Ez - k^2 Ez = 0 less the incident wave's -lap Ez_inc - k0^2 Ez_inc = 0), in the window
[-1, 1]^2 m wrapped in a PML of thickness 0.5 m (:class:`~elecsolver.PML`) closed by Ez_s = 0.

The material jump.  For TMz with mu continuous, the interface conditions on r = a are the continuity of Ez and of
dEz/dn (H_phi); a network that is smooth in (x, y) meets both by construction, so one network with the piecewise k
above solves the problem, the equation holding on each side.  What a smooth network cannot carry is the jump of the
second normal derivative, (k1^2 - k0^2) Ez on r = a; without it the residual's misfit there spreads over the window
(a random-feature solve of eps_r = 4, a = 0.25 m stays at 62 %).  So the network reads the level-set feature
g(phi) = phi |phi| / (1 + phi^2), C1 with a jump of its second derivative on the surface (the cusp-capturing
network of Tseng et al., J. Comput. Phys. 491 (2023) 112359, one derivative higher), and it reads it in mapped
coordinates (:class:`MappedKink`, ``network.kink``, default on): a radial map, the identity beyond 0.9 m, holds the
surface r = a on the circle r' = a_ref (the box's mid radius) for every a, so that the features do not depend on
the parameters and the field at a fixed (x', y') varies smoothly with (eps_r, a).  (A jump in the coefficient of a
derivative, such as eps_r in div(eps_r grad phi), is met by ``subdomains`` and interfaces instead, one copy per
side.)  The disc r <= a_max + 0.1 m holds a second, denser cloud of collocation points (``sampling.cylinder``).

Training: random features (1200 sin features of (x', y', g), random Fourier frequencies kept as initialised) and
least-squares solves of the output layer in float64 (Dong & Li, Comput. Methods Appl. Mech. Engrg. 387 (2021)
114129).  One configuration (``sampling.parameters = "fixed"``; presets ``ci`` and ``single``) is one solve, about
0.3 % in 20-40 s.  The family (``sampling.parameters = "nodes"``; :mod:`elecsolver.training.nodes`) solves the
configurations at 4 x 4 Chebyshev nodes of the box (``quick``, the default; ``long``: 6 x 6), then at 16 x 16
nodes in the span of those solutions, and its output layer interpolates the latter: a query or an inversion is one
evaluation of the network.

The configuration a run exports and scores, and a query evaluates, is ``cylinder.eps_r`` and ``cylinder.radius``:
``elecsolver query OUT --set cylinder.eps_r=2.5``.  ``sampling.parameters = "fixed"`` trains the one configuration
(a single cylinder, or fine-tuning with ``--init-from``, also outside the box).

Reference: the exact Bessel/Hankel series (:func:`elecsolver.reference.cylinder.dielectric_cylinder_total`;
Balanis, *Advanced Engineering Electromagnetics*, 2nd ed., sec. 11.5).  Output: the total field Ez (complex, V/m;
a :class:`~elecsolver.Derived` output, Ez_s + Ez_inc) and Ez_s on an n x n grid over the window.  Errors: relative
L2 with the complex modulus.  Scales: L = 1/k0 (outside the cylinder the residual reads -lap' u' - u'), E0 = A.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import elecsolver as es
from elecsolver.reference.cylinder import dielectric_cylinder_total

__all__ = ["DielectricCylinderFamily"]

# the family's parameters: (name, unit, configuration key under "cylinder")
PARAMETERS = (("eps_r", "1", "eps_r"), ("a", "m", "radius"))
MAP_EXTENT = 0.9  # the coordinate map of MappedKink is the identity beyond 0.9 x the window's half width
REFERENCE_SHARE = 0.5  # a_ref: 3/4 of the way up the box of radii (see MappedKink)
MIN_SLOPE = 0.2  # the least dr'/dr the map may have (one-to-one, and not too compressed)


def kink(phi):
    """g(phi) = phi |phi| / (1 + phi^2): C1 at phi = 0 with a jump of 4 in its second derivative, bounded."""
    return phi * phi.abs() / (1 + phi**2)


class MappedKink(torch.nn.Module):
    """The network's inputs for the cylinder of radius a: coordinates (x', y') in which the cylinder's surface
    stays at the radius a_ref for every a, and the level-set feature g(r' - a_ref) (training units),
    [N, d] -> [N, 3] (the inputs themselves are not passed on: ``keep_inputs = False``).

    The radial map is defined from the mapped side, r = sigma(r') = r' (1 + delta(a) c(r')^3) with
    c = max(0, 1 - r'^2 / R^2) and delta(a) = (a - a_ref) / (a_ref c(a_ref)^3), so that r' = a_ref lands on r = a.
    It is a polynomial in (x', y') inside r' < R (smooth at the axis), C2 at R and the identity beyond (the PML
    and the receivers are untouched).  The network reads r' = rho(r, a), the inverse, found by Newton's method;
    its derivatives come from the implicit function theorem (rho_r = 1 / sigma_r', rho_rr = -sigma_r'r' rho_r^3,
    rho_a = -sigma_a rho_r, ...).  Defined this way the map stretches less than one defined from the physical side
    (for a = 0.15 m, dr'/dr stays within [0.75, 2.0] instead of [0.53, 1.73]), and a solve at eps_r = 4, a =
    0.15 m reaches 0.25 % instead of 7.8 %.

    In these coordinates the kink of the field's second normal derivative, (k1^2 - k0^2) Ez on r = a, lies on one
    fixed circle for every configuration, and the field varies smoothly with (eps_r, a) at a fixed (x', y'): the
    features need not depend on the parameters, and output layers solved at different configurations can be
    combined (:mod:`elecsolver.training.nodes`).  g carries the kink itself (the cusp-capturing feature of Tseng et
    al., J. Comput. Phys. 491 (2023) 112359, one derivative higher).  The map is one-to-one while
    d sigma / dr' = 1 + delta c^2 (c - 6 r'^2 / R^2) > 0 (:meth:`min_slope`).
    """

    keep_inputs = False
    # the network scales x' and y' to [-1, 1] and g to [-0.3, 0.3]: slower features along g (a random-feature
    # solve of eps_r = 4, a = 0.25 m reaches 1.4 % with g's frequencies as large as x's, 0.2 % with 0.3 of them)
    spans = (1.0, 1.0, 0.3)
    NEWTON = 30  # iterations (quadratic convergence from r / (1 + delta); 5-6 suffice in the box)

    def __init__(self, a_column: int, a_ref: float, outer: float):
        super().__init__()
        self.a_column, self.a_ref, self.outer = a_column, float(a_ref), float(outer)
        self.h_ref = self.a_ref * (1 - self.a_ref**2 / self.outer**2) ** 3

    def _sigma(self, rp, delta):
        """sigma, d sigma / dr', d2 sigma / dr'2, d sigma / da, d2 sigma / dr' da at r' for delta(a)."""
        big = self.outer**2
        inside = (rp * rp < big).to(rp.dtype)
        c = torch.clamp(1 - rp**2 / big, min=0.0)
        slope = c**2 * (c - 6 * rp**2 / big)  # d (r' c^3) / dr'
        curve = (-18 * c**2 * rp / big + 24 * c * rp**3 / big**2) * inside  # d2 (r' c^3) / dr'2
        return (rp * (1 + delta * c**3), 1 + delta * slope, delta * curve, rp * c**3 / self.h_ref,
                slope / self.h_ref)

    def _rho(self, r, a):
        """r' = rho(r, a) by Newton's method (differentiable through its iterations, for reverse mode)."""
        delta = (a - self.a_ref) / self.h_ref
        rp = r / (1 + delta)
        for _ in range(self.NEWTON):
            sig, s1 = self._sigma(rp, delta)[:2]
            rp = rp - (sig - r) / s1
        return rp

    def forward(self, x):
        r = torch.sqrt(x[:, 0] ** 2 + x[:, 1] ** 2 + 1e-12)
        rp = self._rho(r, x[:, self.a_column])
        m = rp / r
        return torch.stack([x[:, 0] * m, x[:, 1] * m, kink(rp - self.a_ref)], 1)

    def derivatives(self, x):
        """Value [N, 3], gradient [N, 3, d] and Hessian [N, 3, d, d] along the inputs, in closed form (the
        implicit function theorem for rho, the product and chain rules for x' = x rho / r and g), so that the
        least-squares solve's Jacobian passes through without autograd."""
        n, d = x.shape
        ac = self.a_column
        px, py, a = x[:, 0], x[:, 1], x[:, ac]
        r = torch.sqrt(px**2 + py**2 + 1e-12)
        with torch.no_grad():
            rho = self._rho(r, a)
        delta = (a - self.a_ref) / self.h_ref
        _, s1, s11, sa, s1a = self._sigma(rho, delta)
        rr = 1 / s1
        rrr = -s11 * rr**3
        ra = -sa * rr
        rar = -(s11 * ra + s1a) * rr**2
        raa = -(s11 * ra**2 + 2 * s1a * ra) * rr
        nx, ny = px / r, py / r

        def radial(f_r, f_rr, f_a, f_ar, f_aa):  # gradient [N, d] and Hessian [N, d, d] of f(r, a)
            g = x.new_zeros(n, d)
            h = x.new_zeros(n, d, d)
            g[:, 0], g[:, 1], g[:, ac] = f_r * nx, f_r * ny, f_a
            t = f_r / r
            h[:, 0, 0] = f_rr * nx * nx + t * (1 - nx * nx)
            h[:, 1, 1] = f_rr * ny * ny + t * (1 - ny * ny)
            h[:, 0, 1] = h[:, 1, 0] = (f_rr - t) * nx * ny
            h[:, 0, ac] = h[:, ac, 0] = f_ar * nx
            h[:, 1, ac] = h[:, ac, 1] = f_ar * ny
            h[:, ac, ac] = f_aa
            return g, h

        m = rho / r
        m_r = (rr - m) / r
        m_rr = (rrr - 2 * m_r) / r
        m_a = ra / r
        m_ar = (rar - m_a) / r
        gm, hm = radial(m_r, m_rr, m_a, m_ar, raa / r)
        grho, hrho = radial(rr, rrr, ra, rar, raa)

        def product(u, gu, hu, v, gv, hv):  # u v, its gradient and Hessian
            return (u * v, gu * v[:, None] + u[:, None] * gv,
                    hu * v[:, None, None] + gu[:, :, None] * gv[:, None, :] + gv[:, :, None] * gu[:, None, :]
                    + u[:, None, None] * hv)

        unit_x, unit_y, h0 = x.new_zeros(n, d), x.new_zeros(n, d), x.new_zeros(n, d, d)
        unit_x[:, 0], unit_y[:, 1] = 1.0, 1.0
        vx, gx, hx = product(px, unit_x, h0, m, gm, hm)
        vy, gy, hy = product(py, unit_y, h0, m, gm, hm)
        phi = rho - self.a_ref
        q = 1 + phi**2
        k1 = 2 * phi.abs() / q**2
        k2 = 2 * torch.sign(phi) * (1 - 3 * phi**2) / q**3
        gg = k1[:, None] * grho
        hg = k2[:, None, None] * grho[:, :, None] * grho[:, None, :] + k1[:, None, None] * hrho
        return (torch.stack([vx, vy, kink(phi)], 1), torch.stack([gx, gy, gg], 1), torch.stack([hx, hy, hg], 1))

    def min_slope(self, a: float) -> float:
        """min over r' in [0, R] of dr/dr' for radius a (training units); the map is one-to-one where it is > 0."""
        rp = torch.linspace(0, self.outer, 2001, dtype=torch.float64)
        return float(self._sigma(rp, torch.tensor((float(a) - self.a_ref) / self.h_ref, dtype=torch.float64))[1].min())


class DielectricCylinderFamily(es.Problem):
    """A plane wave on a dielectric cylinder with (eps_r, a) as network inputs; see the module docstring.

    Configuration keys
    ------------------
    scattering.wavenumber : free-space wavenumber k0 of the incident plane wave
    scattering.half_width : half width W of the window [-W, W]^2 inside the PML
    scattering.amplitude : amplitude A of the incident Ez = A exp(i k0 x) (V/m)
    cylinder.eps_r : relative permittivity of the cylinder (the configuration a query starts from)
    cylinder.radius : cylinder radius a (the configuration a query starts from)
    network.kink : the level-set input feature that carries the jump of the second normal derivative on r = a
    """

    name = "dielectric-cylinder-family"
    defaults = {
        "scattering": {"wavenumber": 2 * math.pi, "half_width": 1.0, "amplitude": 1.0},
        "cylinder": {"eps_r": 4.0, "radius": 0.25},
        "family": {"cylinder": {"eps_r": [1.5, 4.0], "radius": [0.15, 0.35]}},
        "pml": {"thickness": 0.5, "reflection": 1e-3, "order": 2},
        "output": {"n": 101},
        # random features (Dong & Li, Comput. Methods Appl. Mech. Engrg. 387 (2021) 114129): one hidden layer of
        # sin features kept as initialised, the output layer solved by least squares in float64
        "network": {"width": 1200, "depth": 1, "activation": "sin", "init": "fourier", "first_omega": 18.0,
                    "output_gain": 1.0, "kink": True},
        # the family: solves at 6 x 6 Chebyshev nodes of the box, then at 16 x 16 in their span, interpolated
        "sampling": {"interior": 3000, "cylinder": 1500, "pml_end": 400, "parameters": "nodes", "snapshots": 6,
                     "nodes": 16},
        "training": {"dtype": "float64", "optimizer": "least_squares", "steps": 1, "log_every": 1,
                     "checkpoint_every": 1},
    }
    presets = {
        # one configuration (eps_r = 4, a = 0.25 m, or any --set cylinder.*) by one least-squares solve: a minute
        "ci": {"sampling": {"parameters": "fixed"}, "output": {"n": 61}},
        # one configuration with more features and points
        "single": {"sampling": {"parameters": "fixed", "interior": 6000, "cylinder": 3000},
                   "network": {"width": 1600}},
        # the family from 4 x 4 snapshots (the default preset)
        "quick": {"sampling": {"snapshots": 4}},
        # the family from 6 x 6 snapshots
        "long": {},
    }
    bounds = {"ci": {"full": {"Ez": 0.01, "Ez_s": 0.015}}}

    def setup(self):
        c, p, box = self.config["scattering"], self.config["pml"], self.config["family"]["cylinder"]
        k0, w, amp = c["wavenumber"], c["half_width"], c["amplitude"]
        if not (k0 > 0 and w > 0 and amp > 0 and p["thickness"] > 0 and self.config["output"]["n"] >= 2):
            raise es.ConfigError(f"need scattering.wavenumber > 0 (rad/m), half_width > 0 (m), amplitude > 0, "
                                 f"pml.thickness > 0 (m) and output.n >= 2; got k0={k0!r}, half_width={w!r}, "
                                 f"amplitude={amp!r}, thickness={p['thickness']!r}")
        wavelengths = 2 * (w + p["thickness"]) * k0 / (2 * math.pi)
        if wavelengths > 100:  # the collocation points resolve a few wavelengths, not thousands
            raise es.ConfigError(f"scattering.half_width = {w:g} m, pml.thickness and scattering.wavenumber make the "
                                 f"box {wavelengths:.3g} wavelengths wide; keep it within 100")
        self.parameters = []
        for name, unit, key in PARAMETERS:
            rng = box.get(key)
            if not (isinstance(rng, (list, tuple)) and len(rng) == 2):
                raise es.ConfigError(f"family.cylinder.{key} must be the trained range [lower, upper], got {rng!r}")
            self.parameters.append(es.Parameter(name, rng[0], rng[1], unit=unit, key=f"cylinder.{key}"))
        p_eps, p_a = self.parameters
        if p_eps.lower < 1.0 or not (0 < p_a.lower and p_a.upper < w):
            raise es.ConfigError(f"the box needs family.cylinder.eps_r >= 1 and 0 < family.cylinder.radius < "
                                 f"scattering.half_width = {w:g} m; got eps_r in [{p_eps.lower:g}, {p_eps.upper:g}], "
                                 f"radius in [{p_a.lower:g}, {p_a.upper:g}] m")

        def inside(x, y, eps_r, a):
            return (x**2 + y**2 < a**2).to(x.dtype)

        def wavenumber(x, y, eps_r, a):  # k0 sqrt(eps_r) inside r < a, k0 outside
            return k0 * torch.sqrt(1.0 + (eps_r - 1.0) * inside(x, y, eps_r, a))

        def source(x, y, eps_r, a):  # (k^2 - k0^2) Ez_inc, V/m per m^2
            return k0**2 * (eps_r - 1.0) * inside(x, y, eps_r, a) * amp * torch.exp(1j * k0 * x)

        pml = es.PML([-w, -w], [w, w], p["thickness"], k0, reflection=p["reflection"], order=p["order"])
        lo, hi = pml.outer_bounds()
        self.domain = es.Rectangle(lo, hi, name="outer")
        self.pde = es.Helmholtz(wavenumber, source=source, field="Ez_s", unit="V/m", pml=pml)
        self.conditions = [es.Dirichlet(on=["outer:xmin", "outer:xmax", "outer:ymin", "outer:ymax"], value=0.0,
                                        name="pml_end")]
        self.regions = {"cylinder": es.Disk((0.0, 0.0), min(w, p_a.upper + 0.1))}
        if self.config["network"]["kink"]:  # inputs x, y, then the parameters; lengths in training units k0 x
            a_ref = p_a.lower + REFERENCE_SHARE * (p_a.upper - p_a.lower)
            self.input_features = MappedKink(2 + [q.name for q in self.parameters].index("a"), k0 * a_ref,
                                             k0 * MAP_EXTENT * w)
            for a in (p_a.lower, p_a.upper):
                self._check_map(a)
        self.scales = es.Scales(length=1.0 / k0, E0=amp)
        axis = np.linspace(-w, w, self.config["output"]["n"])
        self.output = es.GridSites({"x": axis, "y": axis})
        self.derived = {"Ez": es.Derived("V/m", lambda f, x, y: f["Ez_s"] + amp * np.exp(1j * k0 * x))}

    def place_points(self, points):
        """Collocation points of a configuration from reference ones (:func:`elecsolver.training.nodes.placed`):
        the space columns of ``points`` [n, d] (training units) are read as mapped coordinates (x', y') and sent to
        x = x' sigma(r') / r' of :class:`MappedKink` for each point's radius a, so that every radius is solved on
        points that sample its mapped coordinates alike (the cylinder's inside by as many points whatever its size;
        on physical points a solve at a = 0.15 m fell to 12-22 % for some seeds).  Returns the points and the
        Jacobian determinant d(x, y) / d(x', y') = sigma'(r') sigma(r') / r' [n]."""
        f = self.input_features
        ones = torch.ones(points.shape[0], dtype=points.dtype, device=points.device)
        if f is None:
            return points, ones
        rp = torch.sqrt(points[:, 0] ** 2 + points[:, 1] ** 2)
        delta = (points[:, f.a_column] - f.a_ref) / f.h_ref
        _, slope = f._sigma(rp, delta)[:2]
        scale = 1 + delta * torch.clamp(1 - rp**2 / f.outer**2, min=0.0) ** 3  # sigma(r') / r'
        out = points.clone()
        out[:, :2] = points[:, :2] * scale[:, None]
        return out, slope * scale

    def check(self):
        conf, w = self.configuration, self.config["scattering"]["half_width"]
        if not (conf["eps_r"] >= 1.0 and 0 < conf["a"] < w):  # also with sampling.parameters = fixed
            raise es.ConfigError(f"cylinder.eps_r = {conf['eps_r']:g} and cylinder.radius = {conf['a']:g} m need "
                                 f"eps_r >= 1 and 0 < radius < scattering.half_width = {w:g} m")
        if self.input_features is not None:
            self._check_map(conf["a"])

    def _check_map(self, a: float) -> None:
        """Refuse a radius a (m) that the coordinate map of :class:`MappedKink` cannot hold one-to-one."""
        k0, w = self.config["scattering"]["wavenumber"], self.config["scattering"]["half_width"]
        if not (0 < a < MAP_EXTENT * w and self.input_features.min_slope(k0 * a) > MIN_SLOPE):
            lo, hi = self.parameters[1].lower, self.parameters[1].upper
            raise es.ConfigError(f"a cylinder of radius {a:g} m is too far from the mid radius "
                                 f"{0.5 * (lo + hi):g} m of family.cylinder.radius = [{lo:g}, {hi:g}] for the "
                                 f"network's coordinate map (it must stay within about 0.45 of "
                                 f"{MAP_EXTENT:g} x scattering.half_width); narrow the range or move it, or set "
                                 "network.kink = false")

    def reference(self):
        """The series of the configuration (:attr:`configuration`: eps_r, a in m) on the output grid, SI."""
        c, conf = self.config["scattering"], self.configuration
        x, y = self.output.coordinates().T
        total = dielectric_cylinder_total(x, y, c["wavenumber"], conf["a"], conf["eps_r"], c["amplitude"])
        us = total - c["amplitude"] * np.exp(1j * c["wavenumber"] * x)
        return self.output_fieldset(self.channels({"Ez_s": torch.as_tensor(us)}, us.size).numpy(), si=True)
