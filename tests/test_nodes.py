"""A family solved at nodes of its box (``sampling.parameters = "nodes"``): the interpolated output layer
(:class:`elecsolver.networks.NodeInterpolation`) and the solves that fill it (:mod:`elecsolver.training.nodes`)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from conftest import run_main
from elecsolver.problems import REGISTRY

import elecsolver as es
from elecsolver.config import apply_overrides
from elecsolver.jets import Jet, JetSpec
from elecsolver.networks import NodeInterpolation, chebyshev_lobatto


def test_chebyshev_lobatto_points():
    np.testing.assert_allclose(chebyshev_lobatto(2, 1.5, 4.0), [1.5, 4.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(chebyshev_lobatto(3, -1.0, 1.0), [-1.0, 0.0, 1.0], rtol=0, atol=1e-15)
    x = chebyshev_lobatto(5, 0.0, 2.0)
    np.testing.assert_allclose(x, [1 - math.cos(math.pi * j / 4) for j in range(5)], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="n >= 2"):
        chebyshev_lobatto(1, 0.0, 1.0)


def _head(seed=0):
    torch.manual_seed(seed)
    head = NodeInterpolation([chebyshev_lobatto(3, -1.0, 2.0), chebyshev_lobatto(4, 0.5, 1.5)], [2, 3], 5, 2)
    head.double()
    with torch.no_grad():
        head.weight.normal_()
        head.bias.normal_()
    return head


def test_node_interpolation_is_each_nodes_layer_at_its_node_and_exact_for_polynomials():
    head = _head()
    h = torch.randn(6, 5, dtype=torch.float64)
    for s, (p, q) in enumerate(head.node_values()):
        x = torch.tensor([[0.1, 0.2, p, q]], dtype=torch.float64).expand(6, 4)
        np.testing.assert_allclose(head(h, x).detach(), (h @ head.weight[s].T + head.bias[s]).detach(), rtol=0,
                                   atol=1e-12)
    # layers that are a polynomial of degree <= (2, 3) in (p, q) at the nodes are that polynomial everywhere
    nodes = torch.tensor(head.node_values(), dtype=torch.float64)
    a, b = torch.randn(5, 2, 5, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64)

    def layer(p, q):
        mono = torch.stack([torch.ones_like(p), p, p**2, q**3, p**2 * q**3], -1)  # [..., 5]
        return torch.einsum("...k,koi->...oi", mono, a), torch.einsum("...k,ko->...o", mono, b)

    with torch.no_grad():
        head.weight.copy_(layer(nodes[:, 0], nodes[:, 1])[0])
        head.bias.copy_(layer(nodes[:, 0], nodes[:, 1])[1])
    pq = torch.rand(6, 2, dtype=torch.float64) * torch.tensor([3.0, 1.0]) + torch.tensor([-1.0, 0.5])
    x = torch.cat([torch.rand(6, 2, dtype=torch.float64), pq], 1)  # every point its own configuration
    w, bias = layer(pq[:, 0], pq[:, 1])
    want = torch.einsum("ni,noi->no", h, w) + bias
    np.testing.assert_allclose(head(h, x).detach(), want, rtol=1e-11, atol=1e-11)
    # the same through the grouped path (a few configurations)
    x2 = torch.cat([x[:3], x[:3]])
    np.testing.assert_allclose(head(torch.cat([h[:3], h[:3]]), x2).detach(), torch.cat([want[:3], want[:3]]),
                               rtol=1e-11, atol=1e-11)
    assert float(head.basis(pq).sum(1).sub(1).abs().max()) < 1e-12  # a partition of unity


def test_node_interpolation_on_jets_and_its_gradient_in_the_parameters():
    head = _head(1)
    n = 4
    spec = JetSpec([0, 1], [(0, 0), (0, 1), (1, 1)])
    xv = torch.cat([torch.rand(n, 2), torch.tensor([[0.3, 0.9]]).expand(n, 2)], 1).double()
    xj = Jet.from_spec(torch.stack([xv] + [torch.zeros_like(xv)] * 5), spec)
    hj = Jet.from_spec(torch.randn(6, n, 5, dtype=torch.float64), spec)
    out = head(hj, xj).channels
    w = torch.einsum("s,soi->oi", head.basis(xv[:1, 2:])[0], head.weight)
    np.testing.assert_allclose(out[1:].detach(), (hj.channels[1:] @ w.T).detach(), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="parameter columns"):
        head(Jet.from_spec(hj.channels[:2], JetSpec([2])), Jet.from_spec(torch.stack([xv, xv]), JetSpec([2])))
    # reverse mode through the parameters (an inversion) against central differences
    h = torch.randn(n, 5, dtype=torch.float64)
    p = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True)
    f = lambda p: head(h, torch.cat([xv[:, :2], p.expand(n, 2)], 1)).sum()  # noqa: E731
    (g,) = torch.autograd.grad(f(p), p)
    eps = 1e-6
    fd = [(f(p.detach() + eps * e) - f(p.detach() - eps * e)).item() / (2 * eps) for e in torch.eye(2).double()]
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-7)


def test_nodes_need_a_family_and_least_squares():
    for args, msg in ((["run", "helmholtz-square", "--preset", "ci", "--set", 'sampling.parameters="nodes"'],
                       "needs a family"),
                      (["run", "dielectric-cylinder-family", "--set", 'training.optimizer="adam"'],
                       "set training.optimizer = 'least_squares'"),
                      (["run", "dielectric-cylinder-family", "--set", "sampling.nodes=1"],
                       "sampling.nodes must be an integer in [2, 64]")):
        proc = run_main(*args, "--out", "/nonexistent/never")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert msg in proc.stderr, proc.stderr


SMALL = ["sampling.interior=700", "sampling.cylinder=300", "sampling.pml_end=120", "network.width=120",
         "output.n=21"]


def _problem(*overrides, preset=None):
    cls = REGISTRY["dielectric-cylinder-family"]
    return cls(apply_overrides(cls.preset_config(preset), [*SMALL, *overrides]))


def test_the_family_at_a_node_is_the_single_solve_there():
    """sampling.snapshots = 2 and nodes = 3 share the box's corners: at a corner, the interpolated output layer is
    the reduced solve there, whose span holds that corner's own full solve, so the family's fields equal the
    single-configuration solve of the same features and points (float64, to round-off over the conditioning)."""
    from elecsolver.trainer import Trainer

    fam = _problem("sampling.snapshots=2", "sampling.nodes=3")
    tr = Trainer(fam, progress=False)
    tr.train()
    single = _problem("sampling.parameters=\"fixed\"", "cylinder.eps_r=4.0", "cylinder.radius=0.15")
    ts = Trainer(single, progress=False)
    ts.train()
    pts = torch.as_tensor(fam.output_points()[:, :2])  # training units
    with torch.no_grad():
        cols = torch.as_tensor(fam.training_units_of_parameters(np.array([[4.0, 0.15]]))).expand(pts.shape[0], 2)
        got = tr.model(torch.cat([pts, cols], 1))
        want = ts.model(torch.cat([pts, cols], 1))
    assert float((got - want).norm() / want.norm()) < 1e-6


def test_the_family_on_two_data_parallel_ranks_equals_one_process(tmp_path):
    """Every rank keeps its spatial shard of the same points; each node's solve combines the ranks' rows by a
    tall-skinny QR, so the family trained on 2 ranks exports the fields of one process (float64, to the solve's
    round-off)."""
    import subprocess
    import sys

    from conftest import free_port

    args = [sys.executable, "-m", "elecsolver.cli", "run", "dielectric-cylinder-family", "--quiet",
            "--set", "sampling.snapshots=2", "--set", "sampling.nodes=3", "--set", "output.png=false",
            *[a for kv in SMALL for a in ("--set", kv)]]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                             "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    one = subprocess.run([*args, "--out", str(tmp_path / "one")], env=env, capture_output=True, text=True,
                         timeout=600)
    assert one.returncode == 0, one.stderr
    port = str(free_port())
    procs = [subprocess.Popen([*args, "--out", str(tmp_path / "two")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=dict(env, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for r in range(2)]
    for p in procs:
        text, _ = p.communicate(timeout=600)
        assert p.returncode == 0, text
    a, b = es.read(tmp_path / "one" / "fields.h5"), es.read(tmp_path / "two" / "fields.h5")
    for name in ("Ez", "Ez_s"):
        want, got = a["fieldset"].fields[name], b["fieldset"].fields[name]
        assert np.linalg.norm(got - want) <= 1e-8 * np.linalg.norm(want), name
