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
    expect = pool.points[np.sort(np.argsort(-score, kind="stable")[:7])]
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
