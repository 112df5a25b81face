"""The shipped problem's reference satisfies the problem's own PDE (shared/DESIGN.md invariant 6).

The FDTD fields, sampled on the output grid, are put into the problem's nondimensional residuals by
central differences: the residual falls at second order as the output grid is refined (it is the
finite-difference error, not a mismatch of equations, signs or scales), and flipping the source's
sign makes it large.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D

from elecsolver.config import apply_overrides


def _residuals(nx: int, nt: int, source_sign: float = 1.0):
    cfg = apply_overrides(MaxwellPointSource2D.default_config(),
                          [f"output.nx={nx}", f"output.ny={nx}", f"output.nt={nt}", "output.early_frames=2"])
    p = MaxwellPointSource2D(cfg)
    s, ref = p.scales, p.reference().fields
    c = {**p.output.axes, "t": p.times}
    ex, ey, hz = ref["Ex"] / s.E0, ref["Ey"] / s.E0, ref["Hz"] / s.H0
    dt = (c["t"][1] - c["t"][0]) / s.time
    dx = (c["x"][1] - c["x"][0]) / s.length

    def d(a, axis, h):
        return np.gradient(a, h, axis=axis)

    pts = torch.as_tensor(p.output_points())  # the problem's own source term, in training units
    src = (p.pde.source_terms(pts, p.context)["Hz"] * (s.length / s.E0)).numpy().reshape(hz.shape)
    r = [d(ex, 0, dt) - d(hz, 1, dx),
         d(ey, 0, dt) + d(hz, 2, dx),
         d(hz, 0, dt) - (d(ex, 1, dx) - d(ey, 2, dx)) - source_sign * src]
    scale = [d(ex, 0, dt), d(ey, 0, dt), d(hz, 0, dt)]
    # interior of the grid, away from the source core (sigma-scale structure) and the first/last frame
    xx, yy = np.meshgrid(c["x"], c["y"])
    mask = (np.hypot(xx - 0.4975, yy - 0.4975) > 0.1)[None] & np.ones(hz.shape, bool)
    mask[0] = mask[-1] = False
    mask[:, [0, -1], :] = mask[:, :, [0, -1]] = False
    return [np.linalg.norm(ri[mask]) / np.linalg.norm(si[mask]) for ri, si in zip(r, scale)], r, src


def test_reference_residual_falls_at_second_order():
    coarse, _, _ = _residuals(101, 41)
    fine, _, _ = _residuals(201, 81)
    for c, f in zip(coarse, fine):
        assert c < 0.06
        assert 3.3 < c / f < 4.7, (coarse, fine)


def test_source_sign_is_the_problems():
    _, right, src = _residuals(101, 41, +1.0)
    _, wrong, _ = _residuals(101, 41, -1.0)
    near = np.abs(src) > 0.1 * np.abs(src).max()
    assert np.linalg.norm(right[2][near]) < 0.3 * np.linalg.norm(wrong[2][near])


@pytest.mark.parametrize("key,value", [("source.sigma", 2.5e-3), ("source.frequency", 1.2e9)])
def test_reference_follows_the_configuration(key, value):
    base = MaxwellPointSource2D()
    changed = MaxwellPointSource2D(apply_overrides(base.default_config(), [f"{key}={value}"]))
    a, b = base.reference().fields["Ex"], changed.reference().fields["Ex"]  # sigma shapes the near field of E
    assert np.linalg.norm(a - b) / np.linalg.norm(a) > 0.05
