"""Adaptive refinement adds the highest-residual points; weighted losses are sum(w r^2) / sum(w)."""

from __future__ import annotations

import numpy as np
import torch
from dp_worker import small_problem

from elecsolver.sampling import derive_seed
from elecsolver.trainer import Trainer


def test_refine_adds_the_top_k_of_the_pool():
    torch.manual_seed(0)
    trainer = Trainer(small_problem(rar=True), progress=False)
    for _ in range(3):
        trainer.train_step()
    opts = trainer.problem.training
    pool = trainer.problem.sample("pde", derive_seed(opts.seed, "rar", "pde", trainer.step), trainer.step / opts.steps)
    pts = torch.as_tensor(pool.points, dtype=trainer.dtype)
    score = trainer.residual("pde", pts).detach().pow(2).sum(1).numpy()
    added = trainer.refine()
    assert added == {"pde": 7, "boundary": 7}
    assert len(pool) == 97 > 41  # sampling.rar_pool = 41: the pool is the first 41 of a fresh draw
    score = score[:41]
    expect = pool.points[:41][np.sort(np.argsort(-score, kind="stable")[:7])]
    np.testing.assert_array_equal(trainer.points.added["pde"].points, expect)
    # the added points are trained on from now on
    names = {name: n for name, _, n in trainer.batches()}
    assert names["pde"] == 97 + 7 and names["boundary"] == 23 + 7


def test_weighted_loss_is_the_weighted_mean():
    trainer = Trainer(small_problem(weights=True), progress=False)  # float64
    terms = trainer.loss_terms()
    c = trainer.constraints[0]
    cloud = trainer.points.cloud(c, 0)
    pts = torch.as_tensor(cloud.points)
    r2 = trainer.residual(c.name, pts).detach().pow(2).sum(1).numpy()
    expect = c.weight * np.sum(cloud.weights * r2) / np.sum(cloud.weights)
    assert abs(float(terms[0]) - expect) / expect < 1e-12
    assert abs(expect - c.weight * r2.mean()) / expect > 1e-4  # the weights matter


def test_rad_draws_in_proportion_to_its_density():
    """RAD's draws follow p ~ eps^k / mean(eps^k) + c (Wu et al. 2023, eq. 2): a chi-square test over bins of a
    known residual accepts the density and rejects the uniform one and the one without the constant c."""
    from scipy.stats import chisquare

    from elecsolver.training.points import rad_choice, rad_density

    x = (np.arange(40000) + 0.5) / 40000           # candidates on [0, 1]
    eps = np.abs(np.sin(3 * np.pi * x)) * x         # a residual magnitude with zeros and a trend
    pick = rad_choice(eps, 50000, 2.0, 0.5, seed=3)
    counts = np.bincount((x[pick] * 20).astype(int), minlength=20)
    edges = np.arange(40000) // 2000
    def expected(p):
        return 50000 * np.bincount(edges, weights=p, minlength=20)
    assert chisquare(counts, expected(rad_density(eps, 2.0, 0.5))).pvalue > 1e-3
    assert chisquare(counts, expected(np.full(40000, 1 / 40000))).pvalue < 1e-12
    assert chisquare(counts, expected(rad_density(eps, 2.0, 0.0))).pvalue < 1e-12
    # the density itself: eps^k / mean + c, normalised; uniform for a zero residual; the same draw for one seed
    p = rad_density(eps, 2.0, 0.5)
    np.testing.assert_allclose(p, (eps**2 / np.mean(eps**2) + 0.5) / (1.5 * 40000), rtol=1e-12)
    np.testing.assert_array_equal(rad_density(np.zeros(5), 1.0, 0.0), np.full(5, 0.2))
    np.testing.assert_array_equal(rad_choice(eps, 100, 2.0, 0.5, 9), rad_choice(eps, 100, 2.0, 0.5, 9))


def test_redistribute_replaces_the_cloud_with_the_drawn_candidates():
    torch.manual_seed(0)
    trainer = Trainer(small_problem(rad=True), progress=False)
    for _ in range(2):
        trainer.train_step()
    n = {name: k for name, _, k in trainer.batches()}
    drawn = trainer.redistribute()
    assert drawn == {"pde": n["pde"], "boundary": n["boundary"]}
    opts, step = trainer.problem.training, trainer.step
    seeds = [derive_seed(opts.seed, "rad", "pde", step)] + [derive_seed(opts.seed, "rad", "pde", step, j)
                                                             for j in (1, 2)]
    pool = np.concatenate([trainer.problem.sample("pde", s, step / opts.steps).points for s in seeds])
    score = trainer.residual("pde", torch.as_tensor(pool, dtype=trainer.dtype)).detach().pow(2).sum(1).numpy()
    from elecsolver.training.points import rad_choice

    pick = rad_choice(np.sqrt(score), n["pde"], 1.0, 1.0, derive_seed(opts.seed, "rad-draw", "pde", step))
    np.testing.assert_allclose(trainer.points.redistributed["pde"].points, pool[pick], rtol=0, atol=1e-15)
    # the drawn set is trained on, and kept through resampling rounds and checkpoints
    cloud = trainer.points.cloud(trainer.constraints[0], 7)
    np.testing.assert_array_equal(cloud.points, pool[pick])
    state = trainer.points.state_dict()
    fresh = Trainer(small_problem(rad=True), progress=False)
    fresh.points.load_state_dict(state)
    np.testing.assert_array_equal(fresh.points.cloud(fresh.constraints[0], 0).points, pool[pick])


def test_rad_options_are_checked():
    import pytest

    from elecsolver.config import ConfigError

    for change, words in [({"rad_k": -1.0}, "rad_k"), ({"rad_candidates": 0}, "rad_candidates"),
                          ({"rad_every": 5, "shard": "local"}, "rad_every"),
                          ({"rad_constraints": ["nope"]}, "rad_constraints")]:
        problem = small_problem()
        cfg = problem.config
        cfg["sampling"].update(change)
        with pytest.raises(ConfigError, match=words):
            type(problem)(cfg)
