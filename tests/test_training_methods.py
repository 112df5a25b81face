"""Training methods: the L-BFGS finish after Adam (a known least-squares minimiser; the
finish holds the last round's points, lowers the loss, resumes bit for bit, and is refused where it cannot be
exact)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dp_worker import small_problem

from elecsolver.config import ConfigError
from elecsolver.trainer import Trainer
from elecsolver.training.options import TrainingOptions
from elecsolver.training.step import Step


def _least_squares_step(optimizer: str, steps: int, **extra):
    """A Step on theta [5] for the loss |A theta - b|^2 / m + 0.1 |theta|^2 (known minimiser)."""
    rng = np.random.default_rng(0)
    a = torch.as_tensor(rng.normal(size=(40, 5)) @ np.diag([1, 3, 10, 30, 100]))  # condition number ~ 1e2
    b = torch.as_tensor(rng.normal(size=40))
    theta = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))
    cfg = {"training": {"steps": steps, "seed": 0, "dtype": "float64", "optimizer": optimizer, "lr": 1.0,
                        "lr_final": 1.0, "schedule": "constant", "lbfgs": {"history": 10, "max_iter": 20},
                        "log_every": 1, "checkpoint_every": 1, "derivatives": "jet", "compile": False,
                        "accumulate": 1, **extra}}
    options = TrainingOptions.from_config(cfg)

    def terms(batches):
        return torch.stack([(a @ theta - b).pow(2).mean(), 0.1 * theta.pow(2).sum()])

    step = Step([theta], options, terms, lambda: [], lambda params: None, lambda t: t)
    exact = torch.linalg.solve(a.T @ a / 40 + 0.1 * torch.eye(5, dtype=torch.float64), a.T @ b / 40)
    return step, theta, exact


def test_lbfgs_reaches_the_least_squares_minimiser():
    step, theta, exact = _least_squares_step("lbfgs", 3)
    for _ in range(3):
        step()
    # to the round-off of the loss: near the minimum f = f* + d^T H d / 2 stops changing in float64 once
    # d ~ sqrt(1e-16 f* / lambda_min) ~ 1e-8
    assert float((theta.detach() - exact).norm() / exact.norm()) < 1e-8
    # Adam at the same budget of gradient evaluations (60) is far from it: the test measures the optimizer
    adam, theta_a, _ = _least_squares_step("adam", 60)
    adam.optimizer.param_groups[0]["lr"] = 0.05
    for _ in range(60):
        adam()
    assert float((theta_a.detach() - exact).norm() / exact.norm()) > 1e-3


def _finish_problem(**finish):
    p = small_problem()
    cfg = p.config
    cfg["training"].update(steps=4, finish={"optimizer": "lbfgs", "steps": 3, "lr": 1.0, **finish},
                           lbfgs={"history": 10, "max_iter": 5}, log_every=1)
    return type(p)(cfg)


def test_the_finish_runs_after_the_main_steps_on_the_last_rounds_points():
    torch.manual_seed(0)
    trainer = Trainer(_finish_problem(), progress=False)
    trainer.train(stop_after=4)
    assert not trainer.in_finish and trainer.step == 4
    last = [b[0].clone() for b in trainer._batches_now()]
    loss_adam = trainer.history[-1]["loss"]
    trainer.train()
    assert trainer.in_finish and trainer.step == 7
    assert isinstance(trainer.optimizer, torch.optim.LBFGS)
    for before, now in zip(last, trainer._batches_now()):  # the points of step 3 (round 1), not round 2's
        assert torch.equal(before, now[0])
    assert trainer.history[-1]["loss"] < 0.5 * loss_adam, (loss_adam, trainer.history[-1]["loss"])
    assert [row["lr"] for row in trainer.history[-3:]] == [1.0, 1.0, 1.0]


def test_a_run_resumed_inside_the_finish_equals_an_uninterrupted_one(tmp_path):
    (tmp_path / "whole").mkdir()
    (tmp_path / "part").mkdir()
    whole = Trainer(_finish_problem(), progress=False, out_dir=tmp_path / "whole")
    whole.train()
    part = Trainer(_finish_problem(), progress=False, out_dir=tmp_path / "part")
    part.train(stop_after=5)  # one finish step done, checkpoint written
    resumed = Trainer(_finish_problem(), progress=False, out_dir=tmp_path / "part")
    resumed.load_checkpoint()
    assert resumed.in_finish and resumed.step == 5
    resumed.train()
    a = torch.cat([p.detach().reshape(-1) for p in whole.model.parameters()])
    b = torch.cat([p.detach().reshape(-1) for p in resumed.model.parameters()])
    assert torch.equal(a, b)


@pytest.mark.parametrize(("finish", "words"), [({"optimizer": "newton"}, "training.finish.optimizer"),
                                               ({"steps": -1}, "training.finish.steps"),
                                               ({"lr": 0}, "training.finish.lr"),
                                               ({"iters": 3}, "training.finish must be"),
                                               ({"steps": 0}, "needs both an optimizer and steps"),
                                               ({"optimizer": "none"}, "needs both an optimizer and steps")])
def test_bad_finish_options_are_one_clear_error(finish, words):
    with pytest.raises(ConfigError, match=words):
        _finish_problem(**finish)


def _balanced_problem(alpha=0.0, every=2):
    p = small_problem()
    cfg = p.config
    cfg["training"].update(balance={"every": every, "alpha": alpha})
    cfg["loss"]["boundary"] = 3.0  # a declared weight: the balanced gradient norms keep its ratio
    return type(p)(cfg)


def _term_gradient_norms(trainer):
    terms = trainer._terms_fn(trainer._batches_now())
    out = []
    for i in range(len(terms)):
        g = torch.autograd.grad(terms[i], trainer.params, retain_graph=True, allow_unused=True)
        out.append(float(torch.cat([x.reshape(-1) for x in g if x is not None]).norm()))
    return np.array(out)


def test_balancing_equalises_the_gradient_norms_up_to_the_declared_weights():
    torch.manual_seed(0)
    trainer = Trainer(_balanced_problem(), progress=False)
    weights = np.array([c.weight for c in trainer.constraints])
    before = _term_gradient_norms(trainer)
    spread = before / weights
    assert spread.max() / spread.min() > 10  # the terms pull very differently before
    lam = np.array(trainer.balance())
    after = _term_gradient_norms(trainer)
    np.testing.assert_allclose(after / weights, np.full(len(after), (before / weights).sum()), rtol=1e-10)
    np.testing.assert_allclose(lam, (before / weights).sum() / (before / weights), rtol=1e-10)


def test_balancing_smooths_with_alpha_and_is_kept_in_checkpoints(tmp_path):
    torch.manual_seed(0)
    trainer = Trainer(_balanced_problem(alpha=0.9, every=3), progress=False, out_dir=tmp_path)
    tmp_path.mkdir(exist_ok=True)
    weights = np.array([c.weight for c in trainer.constraints])
    hat = (lambda g: g.sum() / g)(_term_gradient_norms(trainer) / weights)
    trainer.train(stop_after=1)  # step 0 balances: lambda = 0.9 * 1 + 0.1 * lambda_hat
    np.testing.assert_allclose(trainer.balance_weights.numpy(), 0.9 + 0.1 * hat, rtol=1e-10)
    assert "weight_pde" in trainer.history[-1]
    resumed = Trainer(_balanced_problem(alpha=0.9, every=3), progress=False, out_dir=tmp_path)
    resumed.load_checkpoint()
    assert torch.equal(resumed.balance_weights, trainer.balance_weights)


@pytest.mark.parametrize(("balance", "words"), [({"every": -1, "alpha": 0.9}, "training.balance.every"),
                                                ({"every": 5, "alpha": 1.0}, "training.balance.alpha"),
                                                ({"every": 5, "beta": 1.0}, "training.balance must be")])
def test_bad_balance_options_are_one_clear_error(balance, words):
    p = small_problem()
    cfg = p.config
    cfg["training"]["balance"] = balance
    with pytest.raises(ConfigError, match=words):
        type(p)(cfg)


def _ls_problem(hard_initial=True):
    p = small_problem(hard_initial=hard_initial)
    cfg = p.config
    cfg["training"]["least_squares"] = {"every": 2, "ridge": 0.0}
    return type(p)(cfg)


def _output_layer_gradient(trainer):
    from elecsolver.training.least_squares import output_layer

    names = output_layer(trainer.model)
    params = dict(trainer.model.named_parameters())
    loss = trainer.loss_terms().sum()
    grads = torch.autograd.grad(loss, [params[n] for n in names])
    return float(torch.cat([g.reshape(-1) for g in grads]).norm()), float(loss)


@pytest.mark.parametrize("hard_initial", [True, False])
def test_after_the_least_squares_solve_the_output_layer_gradient_vanishes(hard_initial):
    torch.manual_seed(0)
    trainer = Trainer(_ls_problem(hard_initial), progress=False)  # float64; with and without the hard head
    for _ in range(3):
        trainer.train_step()
    g_before, loss_before = _output_layer_gradient(trainer)
    out = trainer.least_squares()
    g_after, loss_after = _output_layer_gradient(trainer)
    assert out["loss_before"] == pytest.approx(loss_before, rel=1e-10)
    assert out["loss_after"] == pytest.approx(loss_after, rel=1e-8)
    assert loss_after < 0.9 * loss_before  # the minimum over the layer (measured 0.80 -> 0.43 with the hard head)
    assert g_after < 1e-8 * g_before, (g_before, g_after)


def test_a_loss_not_quadratic_in_the_output_layer_is_refused():
    import dataclasses

    from elecsolver.training.least_squares import solve_output_layer

    torch.manual_seed(0)
    trainer = Trainer(_ls_problem(), progress=False)
    c = trainer.constraints[0]
    squared = dataclasses.replace(c, residual=lambda f, pts, nrm: c.residual(f, pts, nrm) ** 2)
    p = trainer.problem
    with pytest.raises(ConfigError, match="not quadratic in the output layer"):
        solve_output_layer(trainer.model, [squared], trainer._batches_now()[:1], [1.0], p.inputs, p.outputs, "jet",
                           lambda t: t)


def test_least_squares_with_subdomains_is_refused_before_training():
    from elecsolver.problems import REGISTRY

    cls = REGISTRY["electrostatics-dielectric-cylinder"]
    cfg = cls.preset_config("ci")
    cfg["training"]["least_squares"] = {"every": 10, "ridge": 1e-6}
    with pytest.raises(ConfigError, match="does not combine with subdomains"):
        Trainer(cls(cfg), progress=False)


def _ls_finish_problem(before_finish=True):
    p = _finish_problem()
    cfg = p.config
    cfg["training"]["least_squares"] = {"every": 0, "ridge": 0.0, "before_finish": before_finish}
    return type(p)(cfg)


def test_a_least_squares_solve_before_the_finish_happens_once_at_the_switch(tmp_path, monkeypatch):
    """least_squares.before_finish: the run equals one without it in which the output layer is solved by hand
    after the main steps (bit for bit), the solve happens once, and a run resumed inside the finish neither
    repeats it nor differs from the uninterrupted run."""
    for name in ("auto", "part"):
        (tmp_path / name).mkdir()
    calls = []
    solve = Trainer.least_squares
    monkeypatch.setattr(Trainer, "least_squares", lambda self: calls.append(self.step) or solve(self))
    torch.manual_seed(0)
    auto = Trainer(_ls_finish_problem(), progress=False, out_dir=tmp_path / "auto")
    auto.train()
    assert calls == [4]
    torch.manual_seed(0)
    by_hand = Trainer(_ls_finish_problem(before_finish=False), progress=False)
    by_hand.train(stop_after=4)
    g_before, _ = _output_layer_gradient(by_hand)
    solve(by_hand)
    g_after, _ = _output_layer_gradient(by_hand)
    assert g_after < 1e-8 * g_before  # the layer is at the minimum of the loss when the finish starts
    by_hand.train()
    flat = lambda t: torch.cat([p.detach().reshape(-1) for p in t.model.parameters()])  # noqa: E731
    assert torch.equal(flat(auto), flat(by_hand))
    calls.clear()
    torch.manual_seed(0)
    part = Trainer(_ls_finish_problem(), progress=False, out_dir=tmp_path / "part")
    part.train(stop_after=5)
    resumed = Trainer(_ls_finish_problem(), progress=False, out_dir=tmp_path / "part")
    resumed.load_checkpoint()
    resumed.train()
    assert calls == [4] and torch.equal(flat(resumed), flat(auto))


@pytest.mark.parametrize(("ls", "finish", "words"), [
    ({"before_finish": 1}, True, "before_finish must be true or false"),
    ({"before_finish": True}, False, "there is none: set training.finish"),
    ({"at_end": True}, True, "training.least_squares must be")])
def test_bad_least_squares_before_finish_options_are_one_clear_error(ls, finish, words):
    p = _finish_problem() if finish else small_problem()
    cfg = p.config
    cfg["training"]["least_squares"] = ls
    with pytest.raises(ConfigError, match=words):
        type(p)(cfg)


def _every_schedule(slabs: bool = False):
    """The small problem with every per-step schedule on: balancing, least squares (not with slabs, which refuse
    it), RAR, RAD and an L-BFGS finish (3 Adam steps, then 2 finish steps; with slabs, the 3 Adam steps split 1 / 2
    over two slabs, each slab with its finish)."""
    p = small_problem(rar=True, rad=True, balance=True, least_squares=not slabs, finish=True, slabs=slabs)
    cfg = p.config
    if not slabs:
        cfg["training"]["least_squares"]["before_finish"] = True
    return type(p)(cfg)


@pytest.mark.parametrize("slabs", [False, True])
def test_a_loop_of_advance_trains_as_train(slabs):
    """Trainer.advance (what a benchmark's own timed loop calls) runs the schedule Trainer.train runs around each
    step: the same parameters, losses and balance weights bit for bit."""
    flat = lambda t: torch.cat([p.detach().reshape(-1) for p in t.model.parameters()])  # noqa: E731
    torch.manual_seed(0)
    whole = Trainer(_every_schedule(slabs), progress=False)
    whole.train()
    torch.manual_seed(0)
    stepped = Trainer(_every_schedule(slabs), progress=False)
    total = whole.step
    assert total == (3 + 2 * 2 if slabs else 3 + 2)  # 3 Adam steps (1 + 2 with slabs), each finish 2
    losses = [stepped.advance()[0] for _ in range(total)]
    assert stepped.step == total and torch.equal(flat(whole), flat(stepped))
    assert torch.equal(whole.balance_weights, stepped.balance_weights)
    assert np.isfinite(losses).all()
    with pytest.raises(RuntimeError, match=f"has done all its {total} steps"):  # every slab's, with slabs
        stepped.advance()


def test_the_least_squares_optimizer_solves_the_output_layer_every_step():
    """training.optimizer = "least_squares": each step is a solve on that step's points (points redrawn every
    3 steps here), the hidden layers keep their initial weights, the output layer's gradient is zero to round-off
    after each step, and the logged loss is the solve's minimum."""
    from elecsolver.training.least_squares import output_layer

    p = small_problem(hard_initial=True, solve=True)
    p.config["training"]["least_squares"]["ridge"] = 0.0  # the plain minimum (a ridge moves it off zero gradient)
    torch.manual_seed(0)
    trainer = Trainer(type(p)(p.config), progress=False)
    last = set(output_layer(trainer.model))
    before = {n: q.detach().clone() for n, q in trainer.model.named_parameters()}
    g0, loss0 = _output_layer_gradient(trainer)
    solves = []
    plain = trainer.least_squares
    trainer.least_squares = lambda: solves.append(plain()) or solves[-1]
    for k in range(4):
        loss, _ = trainer.advance()
        trainer.step -= 1  # the gradient on the points that step solved on (step 3 draws new ones)
        g, after = _output_layer_gradient(trainer)
        trainer.step += 1
        assert g < 1e-8 * g0, (k, g, g0)
        assert loss == pytest.approx(solves[-1]["loss_after"], rel=1e-8) == pytest.approx(after, rel=1e-10)
    assert len(solves) == 4 and solves[0]["loss_after"] < 0.9 * loss0
    for n, q in trainer.model.named_parameters():
        assert torch.equal(q.detach(), before[n]) == (n not in last), n
    assert trainer.stepper.lr == 0.0 and trainer.optimizer is None


def test_the_least_squares_optimizer_is_refused_where_it_cannot_run():
    p = small_problem(solve=True)
    cfg = p.config
    cfg["training"].update(steps=4, slabs=2)
    with pytest.raises(ConfigError, match="does not combine with a least-squares solve"):
        type(p)(cfg)
    cfg["training"].update(slabs=1, compile=True)
    with pytest.raises(ConfigError, match="a least-squares step is a linear solve, not a gradient step to compile"):
        type(p)(cfg)
    cfg["training"].update(compile=False, optimizer="sgd")
    with pytest.raises(ConfigError, match="least_squares"):  # the error lists the names, this one among them
        type(p)(cfg)
