"""The planner's search space and constraints (elecsolver.parallel.planner): every plan of a world size, each
checked as the run itself would check it."""

from __future__ import annotations

import pytest
from conftest import run_main
from elecsolver.parallel import ParallelOptions
from elecsolver.parallel.planner import Plan, candidate_plans, feasibility
from elecsolver.problems import get_problem_class

from elecsolver.config import ConfigError, apply_overrides

MPS = get_problem_class("maxwell-point-source-2d")


def _problem(*sets):
    return MPS(apply_overrides(MPS.preset_config("smoke"), list(sets)))


def test_candidate_plans_cover_every_layout_once():
    plans = candidate_plans(4)
    # (dp, tp, pp) = (4,1,1) (2,2,1): 2 ZeRO x 2 recompute x 3 precisions; (2,1,2): 6 pipelines x 12;
    # (1,4,1): 6; (1,2,2) and (1,1,4): 6 pipelines x 6; 2 ranks: 12 + 6 + 36
    assert len(plans) == 12 + 12 + 72 + 6 + 36 + 36 == 174 and len(set(plans)) == 174
    assert all(p.dp * p.tp * p.pp == 4 for p in plans)
    assert {(p.dp, p.tp, p.pp) for p in plans} == {(4, 1, 1), (2, 2, 1), (2, 1, 2), (1, 4, 1), (1, 2, 2), (1, 1, 4)}
    assert all(p.microbatches in (p.pp, 2 * p.pp, 4 * p.pp) for p in plans if p.pp > 1)
    assert not any(p.zero for p in plans if p.dp == 1)
    assert len(candidate_plans(1)) == 6
    with pytest.raises(ValueError, match="positive integer"):
        candidate_plans(0)


def test_capability_verdicts_are_the_strategy_checks_own():
    """Every plan the planner accepts passes ParallelOptions.validate, and every plan it rejects for a capability
    fails it with the same line (here with the L-BFGS finish on, which refuses tp, pp, ZeRO and mixed precision)."""
    p = _problem("training.finish.optimizer=\"lbfgs\"", "training.finish.steps=2")
    checks = feasibility(p, 4)
    assert sum(c.ok for c in checks) == 2  # --dp 4 with and without --recompute
    for c in checks:
        opts = ParallelOptions(**c.plan.options())
        if c.ok or c.reason[0] != "capability":
            opts.validate(p.training, 4)
        else:
            with pytest.raises(ConfigError) as err:
                opts.validate(p.training, 4)
            assert str(err.value) == c.reason[1]


def test_divisibility_and_points_reasons():
    p = _problem("network.width=30", "sampling.boundary=20")
    checks = {c.plan: c for c in feasibility(p, 8, [Plan(2, 4, 1), Plan(1, 2, 4, 4), Plan(1, 1, 8, 8),
                                                  Plan(2, 1, 4, 16), Plan(2, 2, 2, 4)])}
    kind, why = checks[Plan(2, 4, 1)].reason
    assert kind == "divisibility" and "width 30 is not a multiple of tp=4" in why
    kind, why = checks[Plan(1, 1, 8, 8)].reason  # the smoke network's body has 5 layers with parameters
    assert kind == "divisibility" and "use --pp 5 or less" in why
    kind, why = checks[Plan(2, 1, 4, 16)].reason  # 20 boundary points, 10 a data-parallel rank
    assert kind == "points" and "'boundary' (10)" in why and "16 micro-batches" in why
    assert checks[Plan(1, 2, 4, 4)].ok and checks[Plan(2, 2, 2, 4)].ok


def test_plan_command(tmp_path):
    r = run_main("plan", "maxwell-point-source-2d", "--preset", "smoke", "--world-size", "2", "--rejected")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# maxwell-point-source-2d, 2 rank(s): 50 of 54 plans can run")
    assert "--dp 2 --tp 1 --pp 1 --zero" in lines and "# rejected: 4 for capability" in lines
    assert "--dp 1 --tp 2 --pp 1 --precision bf16  # capability: --tp does not combine with --precision bf16 (" \
        in r.stdout
    bad = run_main("plan", "maxwell-point-source-2d", "--world-size", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--world-size must be a positive integer" in bad.stderr
