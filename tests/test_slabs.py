"""Time slabs (``training.slabs``): the slab boundary continues the previous slab's field exactly (values and
spatial derivatives, for trained weights), a new slab starts as the previous network continued, jets equal
autograd through the slab network, each slab's points lie in it and its loss has no initial term, a resumed
run equals an uninterrupted one bit for bit, and bad configurations are one clear error.  dp=2 against one
process: tests/test_data_parallel.py (time-slabs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dp_worker import small_problem

from elecsolver.config import ConfigError
from elecsolver.jets import seed_jet
from elecsolver.networks import at_time
from elecsolver.trainer import Trainer
from elecsolver.training.options import TrainingOptions
from elecsolver.training.slabs import SlabNetwork, Slabs


def _problem(steps: int = 6, slabs: int = 2, hard_initial: bool = False):
    p = small_problem(hard_initial=hard_initial)
    p.config["training"].update(steps=steps, slabs=slabs)
    return type(p)(p.config)


def _inputs(n: int, t, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, generator=g, dtype=torch.float64) * 1.2 - 0.1
    x[:, 2] = t if np.isscalar(t) else torch.as_tensor(t)
    return x


def _params(module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def _slab(tr) -> int:
    return tr.callback(Slabs).slab


def test_the_slab_boundary_continues_the_previous_slabs_field():
    tr = Trainer(_problem(), progress=False)
    assert isinstance(tr.callback(Slabs), Slabs)
    tr.train(stop_after=5)  # slab 0's 3 steps, then 2 steps of slab 1
    m = tr.model
    assert isinstance(m, SlabNetwork) and _slab(tr) == 1 and tr.step == 5 and tr.segment_step == 2
    # slab 1's weights moved away from slab 0's: the continuity below is not the trivial copy
    assert (_params(m.current) - _params(m.previous)).norm() > 1e-5 * _params(m.previous).norm()
    ts = m.t_start
    assert ts == pytest.approx(tr.callback(Slabs).bounds[1] / tr.problem.scales.time)
    x = _inputs(64, ts)
    with torch.no_grad():
        here, before = m(x), m.previous(x)
    assert float((here - before).norm() / before.norm()) < 1e-13
    # and so do its spatial derivatives (u_1(., t_1) = u_0(., t_1) as functions of x), from the training jets
    with torch.no_grad():
        jet, jet0 = m(seed_jet(x, (0, 1, 2))), m.previous(seed_jet(x, (0, 1, 2)))
    for k in (0, 1):
        a, b = jet.channels[1 + k], jet0.channels[1 + k]
        assert float((a - b).norm() / b.norm()) < 1e-12
    # a little later the two networks differ: the new slab learnt something of its own
    later = _inputs(64, ts + 0.05)
    with torch.no_grad():
        assert float((m(later) - m.previous(later)).norm() / m.previous(later).norm()) > 1e-6
        # before t_1 the network is the previous slab's (piecewise evaluation)
        early = _inputs(64, np.linspace(0.0, ts * 0.999, 64))
        assert torch.equal(m(early), m.previous(early))


def test_a_new_slab_starts_as_the_previous_network_continued():
    tr = Trainer(_problem(), progress=False)
    tr.train(stop_after=3)  # the end of slab 0
    assert _slab(tr) == 0 and tr.segment_step == 3
    tr.callback(Slabs).before_step(tr)  # what the next step does first: switch to slab 1
    assert _slab(tr) == 1 and tr.segment_step == 0 and tr.step == 3
    m = tr.model
    x = _inputs(64, np.linspace(m.t_start, 2 * m.t_start, 64), seed=1)
    with torch.no_grad():
        assert float((m(x) - m.previous(x)).norm() / m.previous(x).norm()) < 1e-13


def test_slab_network_jets_equal_autograd():
    torch.manual_seed(0)
    net = lambda: torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))  # noqa: E731
    from elecsolver.networks import FuncJet

    m = SlabNetwork(FuncJet(net().double()), FuncJet(net().double()), t_column=2, t_start=0.4)
    x = _inputs(20, np.linspace(0.4, 0.9, 20), seed=2)
    jet = m(seed_jet(x, (0, 1, 2), pairs=[(0, 0), (0, 2), (2, 2)]))
    xa = x.clone().requires_grad_(True)

    def u(z):
        zs = torch.stack([z[:, 0], z[:, 1], torch.full_like(z[:, 2], 0.4)], 1)
        return m.previous(zs) + m.current(z) - m.current(zs)

    out = u(xa)
    assert torch.allclose(jet.channels[0], out, rtol=0, atol=1e-14)
    for c in range(2):
        g = torch.autograd.grad(out[:, c].sum(), xa, create_graph=True)[0]
        for k in range(3):
            assert torch.allclose(jet.channels[1 + k][:, c], g[:, k], rtol=0, atol=1e-13)
        hx = torch.autograd.grad(g[:, 0].sum(), xa, retain_graph=True)[0]
        ht = torch.autograd.grad(g[:, 2].sum(), xa, retain_graph=True)[0]
        for p, h in enumerate([hx[:, 0], hx[:, 2], ht[:, 2]]):
            assert torch.allclose(jet.channels[4 + p][:, c], h, rtol=0, atol=1e-12)


def test_at_time_holds_t_fixed_in_a_jet():
    x = _inputs(5, 0.7)
    j = at_time(seed_jet(x, (0, 2)), 2, 0.25)
    assert torch.equal(j.channels[0][:, 2], torch.full((5,), 0.25, dtype=torch.float64))
    assert torch.equal(j.channels[0][:, :2], x[:, :2])
    assert torch.equal(j.channels[1][:, 0], torch.ones(5, dtype=torch.float64))  # d/dx of x survives
    assert float(j.channels[2].abs().max()) == 0.0  # d/dt of every input is 0


def test_each_slab_trains_on_its_own_points_without_an_initial_term():
    tr = Trainer(_problem(), progress=False)
    names0 = [c.name for c in tr.constraints]
    assert "initial" in names0  # the small problem's soft initial condition, in slab 0
    bounds = tr.callback(Slabs).bounds
    t1 = bounds[1] / tr.problem.scales.time
    t_end = bounds[2] / tr.problem.scales.time
    pts0 = {b.constraint.name: b.points for b in tr.points.at(0)}
    assert float(pts0["pde"][:, 2].max()) <= t1 + 1e-12
    tr.train(stop_after=4)
    assert "initial" not in [c.name for c in tr.constraints]
    pts1 = {b.constraint.name: b.points for b in tr.points.at(0)}
    assert float(pts1["pde"][:, 2].min()) >= t1 - 1e-12 and float(pts1["pde"][:, 2].max()) <= t_end + 1e-12
    assert tr.options.total_steps == 6


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole = Trainer(_problem(), progress=False, out_dir=tmp_path / "whole")
    (tmp_path / "whole").mkdir()
    whole.train()
    for stop in (3, 4):  # at the slab boundary and inside slab 1
        out = tmp_path / f"part{stop}"
        out.mkdir()
        Trainer(_problem(), progress=False, out_dir=out).train(stop_after=stop)
        resumed = Trainer(_problem(), progress=False, out_dir=out)
        resumed.load_checkpoint()
        assert resumed.step == stop and _slab(resumed) == (0 if stop == 3 else 1)  # slab 0 ends at step 3
        resumed.train()
        assert resumed.step == 6
        assert torch.equal(_params(whole.model), _params(resumed.model))
        assert [r["step"] for r in resumed.history] == [r["step"] for r in whole.history] == list(range(1, 7))
        assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]


def test_a_checkpoint_without_slabs_is_refused(tmp_path):
    from elecsolver.trainer import ResumeError

    Trainer(_problem(slabs=1), progress=False, out_dir=tmp_path).train(stop_after=2)
    p = _problem(slabs=2)
    with pytest.raises(ResumeError, match="training.slabs"):
        Trainer(p, progress=False, out_dir=tmp_path).load_checkpoint()


def test_steps_split_over_the_slabs():
    cfg = {"training": {"steps": 7, "seed": 0, "dtype": "float64", "optimizer": "adam", "lr": 1e-3, "lr_final": 1e-4,
                        "schedule": "constant", "lbfgs": {"history": 5, "max_iter": 5}, "log_every": 1,
                        "checkpoint_every": 1, "derivatives": "jet", "compile": False, "accumulate": 1, "slabs": 3,
                        "finish": {"optimizer": "lbfgs", "steps": 2, "lr": 1.0}}}
    o = TrainingOptions.from_config(cfg)
    assert o.slab_steps() == [2, 2, 3] and o.total_steps == 7 + 3 * 2
    for steps, share, expected in [(8000, [0.6, 0.4], [4800, 3200]), (7, [1, 1, 5], [2, 1, 4]),
                                   (3, [100, 1, 1], [1, 1, 1]), (10, [3, 3, 4], [3, 3, 4])]:
        cfg["training"].update(steps=steps, slabs=len(share), slab_share=share)
        o = TrainingOptions.from_config(cfg)
        assert o.slab_steps() == expected and sum(expected) == steps, (share, o.slab_steps())


def test_a_slab_share_moves_the_switch():
    """Six steps in shares 2 : 1: the first slab trains steps 1-4, the second 5-6 (its points in t >= t_1)."""
    p = small_problem()
    p.config["training"].update(steps=6, slabs=2, slab_share=[2, 1])
    tr = Trainer(type(p)(p.config), progress=False)
    tr.train(stop_after=3)
    assert _slab(tr) == 0 and tr.step == 3
    tr.train(stop_after=4)  # the first slab's last step
    assert _slab(tr) == 0 and tr.step == 4 and tr.segment_step == 4
    tr.train(stop_after=5)  # the second slab's first
    assert _slab(tr) == 1 and tr.step == 5 and tr.segment_step == 1
    tr.train()
    assert _slab(tr) == 1 and tr.step == 6 and tr.segment_step == 2


@pytest.mark.parametrize(("slabs", "extra", "words"), [
    (0, {}, "training.slabs must be an integer in"),
    (7, {}, "training.slabs must be an integer in"),
    (True, {}, "training.slabs must be an integer in"),
    (2, {"least_squares": {"every": 2, "ridge": 1e-6}}, "does not combine with a least-squares solve"),
    (2, {"slab_share": [1.0]}, r"training.slab_share must be null.*1 shares for 2 slab\(s\); set training.slabs=1"),
    (1, {"slab_share": [0.7, 0.3]}, r"2 shares for 1 slab\(s\); set training.slabs=2"),
    (2, {"slab_share": [1.0, 0.0]}, "training.slab_share must be null.*finite number > 0"),
    # non-finite values are refused, with key and value, before any block is read
    (2, {"slab_share": [float("inf"), 1.0]}, r"training.slab_share = \[Infinity, 1.0\]: not a finite number"),
    (2, {"slab_share": [float("nan"), 1.0]}, r"training.slab_share = \[NaN, 1.0\]: not a finite number"),
    (2, {"slab_share": [True, 1.0]}, "training.slab_share must be null.*finite number > 0"),
    (2, {"slab_share": "0.6,0.4"}, "training.slab_share must be null.*not a list"),
])
def test_bad_slab_options_are_one_clear_error(slabs, extra, words):
    p = small_problem()
    p.config["training"].update(steps=6, slabs=slabs, **extra)
    with pytest.raises(ConfigError, match=words):
        type(p)(p.config)


def test_a_problem_without_time_is_refused():
    from elecsolver.problems import get_problem_class

    cls = get_problem_class("helmholtz-square")
    cfg = cls.preset_config("ci")
    cfg["training"]["slabs"] = 2
    with pytest.raises(ConfigError, match="needs a time-dependent problem"):
        Trainer(cls(cfg), progress=False)


def test_init_from_starts_the_first_slab_and_carries_into_the_next(tmp_path):
    """training.init_from loads the finished run's network once, into the first slab's; the second slab's network
    is built on it (its frozen part starts from those weights, trained on in slab 0)."""
    from elecsolver.export import export_run

    p = _problem(steps=2, slabs=1)
    start = Trainer(p, progress=False, out_dir=tmp_path)
    start.train()
    export_run(start, None, tmp_path, "ci")
    q = _problem()
    q.config["training"]["init_from"] = str(tmp_path)
    tr = Trainer(type(q)(q.config), progress=False)
    assert torch.equal(_params(tr.model), _params(start.model))
    tr.train()
    assert _slab(tr) == 1 and tr.step == 6 and isinstance(tr.model, SlabNetwork)
