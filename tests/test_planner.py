"""The planner's search space and constraints (elecsolver.parallel.planner): every plan of a world size, each
checked as the run itself would check it."""

from __future__ import annotations

import dataclasses

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


def _measured_mib(p, recompute: bool) -> float:
    """One step's peak of torch's CPU allocations plus what the step starts with (parameters, Adam's moments)."""
    import torch
    from elecsolver.parallel.profiling import peak_allocated_mib
    from elecsolver.parallel.strategy import apply_parallelism

    from elecsolver.trainer import Trainer

    m, c = apply_parallelism(p, None, torch.device("cpu"), {"recompute": recompute})
    t = Trainer(p, m, c, progress=False)
    t.batches()
    t.train_step()
    return peak_allocated_mib(t.train_step) + 3 * sum(q.numel() * q.element_size() for q in m.parameters()) / 2**20


def test_memory_model_calibrated_on_a_small_network_predicts_a_larger_one():
    """Activation coefficients measured at width 32 and half the main job's points predict the peak at width 64 and
    twice the points, plain and with recompute, within 5 % (measured: 0.6 % and 0.0 %; Aceso reports 12-16 %)."""
    import torch
    from elecsolver.parallel.planner import calibrate

    torch.set_num_threads(1)
    base = MPS.preset_config("quick")

    def problem(width, scale):
        counts = {k: int(base["sampling"][k] * scale) for k in ("interior", "source", "boundary", "initial")}
        return MPS(apply_overrides(base, [f"network.width={width}", "training.steps=4",
                                          *(f"sampling.{k}={v}" for k, v in counts.items())]))

    coeffs = calibrate(problem(32, 0.5))
    target = problem(64, 2.0)
    for recompute in (False, True):
        predicted = feasibility(target, 1, [Plan(1, recompute=recompute)], coefficients=coeffs)[0].memory_mib
        measured = _measured_mib(target, recompute)
        assert abs(predicted / measured - 1) < 0.05, (recompute, predicted, measured)


def test_memory_terms_of_the_plan():
    """Exact bookkeeping of predict_mib: ZeRO shards Adam's moments over dp; the dp gradient buffer comes after the
    activations are freed; a work item's backward adds its peak over the widest layer (B) to what is held then:
    one process differentiates its terms last first, GPipe its items, 1F1B holds pp - stage consecutive items; a
    stage before the last receives its output's gradient, a stage after the first holds what it received; recompute
    keeps one value a unit of each block's output."""
    from elecsolver.parallel.planner import (
        MemoryCoefficients,
        _block_units,
        _input_units,
        _kept_units,
        _shards,
        _width_units,
        backward_windows,
        predict_mib,
        predict_stage_mib,
    )

    from elecsolver.training.trainer import build_model

    p = _problem()
    model = build_model(p, __import__("torch").device("cpu"))
    co = MemoryCoefficients(plain=8.0, backward_peak=6.0, recompute_peak=10.0)
    one = _shards(model, 1, 1)
    params = sum(q.numel() for q in model.parameters()) * 4
    w, b = _width_units(model), _block_units(model)
    a = 10_000
    act = 8.0 * w * a + 6.0 * b * a  # one term: all of it held while its backward runs
    assert predict_mib(Plan(1), one, a, co) * 2**20 == pytest.approx(4 * params + act, rel=1e-12)
    plain, zero = (predict_mib(Plan(4, zero=z), one, a, co) * 2**20 for z in (False, True))
    assert plain - zero == pytest.approx(2 * params * (1 - 1 / 4), rel=1e-12)
    assert plain == pytest.approx(4 * params + act / 4, rel=1e-12)  # the dp buffer (params) is under act / 4
    tiny = predict_mib(Plan(4), one, 4, co) * 2**20
    assert tiny == pytest.approx(5 * params, rel=1e-12)  # ... and over a few points' activations
    assert predict_mib(Plan(1, recompute=True), one, a, co) * 2**20 == pytest.approx(
        4 * params + 4 * _kept_units(model) * a + 10.0 * b * a, rel=1e-12)
    # two terms of 6000 and 4000: the second is differentiated first, with both held
    two_terms = predict_mib(Plan(1), one, a, co, a_terms=[6000, 4000]) * 2**20
    assert two_terms == pytest.approx(4 * params + max(8.0 * w * a + 6.0 * b * 4000, 8.0 * w * 6000 + 6.0 * b * 6000),
                                      rel=1e-12)
    # work items 1500, 1000, 1500, 1000, ... (4 micro-batches of terms 6000 and 4000)
    assert backward_windows(Plan(1, 1, 2, 4, "1f1b"), 0, [6000, 4000])[:2] == [(2500, 1500), (2500, 1000)]
    assert backward_windows(Plan(1, 1, 2, 4, "1f1b"), 0, [6000, 4000])[-1] == (1000, 1000)
    assert backward_windows(Plan(1, 1, 2, 4, "1f1b"), 1, [6000, 4000])[:2] == [(1500, 1500), (1000, 1000)]
    assert backward_windows(Plan(1, 1, 2, 4, "gpipe"), 0, [6000, 4000])[:2] == [(10000, 1000), (9000, 1500)]
    two = _shards(model, 1, 2)
    w0, w1, b0, b1 = _width_units(two[0]), _width_units(two[1]), _block_units(two[0]), _block_units(two[1])
    p0, p1 = (sum(q.numel() for q in s.parameters()) * 4 for s in two)
    g = _input_units(two[1]) * 4  # float32: stage 0's output gradient, stage 1's received features
    f1b = predict_stage_mib(Plan(1, 1, 2, 4, "1f1b"), two, a, co, a_terms=[6000, 4000])
    assert f1b[0] * 2**20 == pytest.approx(4 * p0 + 8.0 * w0 * 2500 + (g + 6.0 * b0) * 1500, rel=1e-12)
    assert f1b[1] * 2**20 == pytest.approx(4 * p1 + (8.0 * w1 + g) * 1500 + 6.0 * b1 * 1500, rel=1e-12)
    gpipe = predict_stage_mib(Plan(1, 1, 2, 4, "gpipe"), two, a, co, a_terms=[6000, 4000])
    assert gpipe[0] * 2**20 == pytest.approx(4 * p0 + max(8.0 * w0 * 10000 + (g + 6.0 * b0) * 1000,
                                                           8.0 * w0 * 9000 + (g + 6.0 * b0) * 1500), rel=1e-12)
    rc = predict_stage_mib(Plan(1, 1, 2, 4, "1f1b", recompute=True), two, a, co, unsharded=two, a_terms=[6000, 4000])
    assert rc[0] * 2**20 == pytest.approx(4 * p0 + 4 * _kept_units(two[0]) * 2500 + (g + 10.0 * b0) * 1500, rel=1e-12)
    assert rc[1] * 2**20 == pytest.approx(4 * p1 + (4 * _kept_units(two[1]) + g) * 1500 + 10.0 * b1 * 1500, rel=1e-12)
    assert predict_mib(Plan(1, 1, 2, 4, "1f1b"), two, a, co, a_terms=[6000, 4000]) == max(f1b)


def test_a_stage_that_opens_with_an_activation_holds_its_units():
    """The cavity's 4-64-64-64-6 network cut into 4 stages by parameters: stage 1 is one linear layer, stages 2 and
    3 open with the activation of the layer before them. W counts every weight layer's and activation's outputs, B
    the widest, and recompute keeps each block's output (a weight layer and the activations after it)."""
    import torch
    from elecsolver.parallel.planner import _block_units, _kept_units, _layers, _shards, _width_units
    from elecsolver.problems import get_problem_class

    from elecsolver.training.trainer import build_model

    cls = get_problem_class("maxwell-cavity-3d")
    model = build_model(cls(cls.preset_config("quick")), torch.device("cpu"))
    assert [r[0] for r in _layers(model)] == [True, False] * 3 + [True]
    # W: linear outputs 64 + 64 + 64 + 6 and activations 3 x 64; kept: the four blocks' outputs
    assert (_width_units(model), _block_units(model), _kept_units(model)) == (390, 64, 198)
    stages = _shards(model, 1, 4)
    assert [_layers(s) for s in stages] == [[(True, 4, 64), (False, 64, 64)], [(True, 64, 64)],
                                            [(False, 64, 64), (True, 64, 64)], [(False, 64, 64), (True, 64, 6)]]
    assert [_width_units(s) for s in stages] == [128, 64, 128, 70]
    assert [_kept_units(s) for s in stages] == [64, 64, 128, 70]
    assert [_block_units(s) for s in stages] == [64, 64, 64, 64]
    # tp = 2: column-parallel layers and their activations hold 32 of 64 units; the backward starts on the last
    # (row-parallel) layer's sharded input, 32 units, not the widest layer's 64
    sharded = _shards(model, 2, 1)[0]
    assert _layers(sharded) == [(True, 4, 32), (False, 32, 32), (True, 32, 64), (False, 64, 64), (True, 64, 32),
                                (False, 32, 32), (True, 32, 6)]
    assert (_width_units(sharded), _block_units(sharded), _kept_units(sharded)) == (262, 32, 134)


def test_plan_command_with_a_memory_limit():
    r = run_main("plan", "maxwell-point-source-2d", "--preset", "smoke", "--world-size", "2", "--memory-per-rank",
                 "0.01MiB", "--rejected")
    assert r.returncode == 1 and "no plan can run on these ranks" in r.stderr  # none fits: a failure for scripts
    assert "# maxwell-point-source-2d, 2 rank(s): 0 of 54 plans can run" in r.stdout
    assert "# rejected: 4 for capability, 50 for memory" in r.stdout
    assert "MiB predicted on the largest rank, over 80% of 0.01 MiB" in r.stdout
    bad = run_main("plan", "maxwell-point-source-2d", "--world-size", "2", "--memory-per-rank", "4XB")
    assert bad.returncode == 2 and "--memory-per-rank must be a positive size such as 4GiB" in bad.stderr


def test_step_time_bookkeeping():
    """predict_step_s term by term: local compute divided by dp, the dp all-reduce (two messages with ZeRO),
    recompute's factor, m micro-batch slots of the slowest stage with its messages over 1 - the bubble of m x terms
    work items, the micro-batch's fixed cost on the last stage (not scaled by recompute), one all-reduce per
    tp-sharded layer, and the wait of every all-reduce a rank blocks on (tp's and dp's, not a pipeline's sends)."""
    import torch
    from elecsolver.parallel.planner import (
        TimeCoefficients,
        _input_units,
        _macs,
        _shards,
        _tp_widths,
        predict_step_s,
    )

    from elecsolver.training.trainer import build_model

    model = build_model(_problem(), torch.device("cpu"))
    co = TimeCoefficients(s_per_mac=1e-9, global_s=0.01, microbatch_s=0.002, recompute_factor=1.5, alpha_s=1e-4,
                          beta_s_per_byte=1e-9)
    a = 10_000
    one = _shards(model, 1, 1)
    local = 1e-9 * _macs(model) * a
    grads = sum(q.numel() for q in model.parameters()) * 4
    assert predict_step_s(Plan(1), one, a, co) == pytest.approx(0.01 + local, rel=1e-12)
    assert predict_step_s(Plan(1, recompute=True), one, a, co) == pytest.approx(0.01 + 1.5 * local, rel=1e-12)
    dp2 = predict_step_s(Plan(2), one, a, co)
    assert dp2 == pytest.approx(0.01 + local / 2 + 1e-4 + 1e-9 * grads + 1e-4, rel=1e-12)  # + the loss terms
    assert predict_step_s(Plan(2, zero=True), one, a, co) == pytest.approx(dp2 + 1e-4, rel=1e-12)
    two = _shards(model, 1, 2)
    slots = [1e-9 * _macs(st) * a / 4 for st in two]
    slots[1] += 0.002  # a micro-batch's fixed cost: the last stage's
    slots[0] += 2 * (1e-4 + 1e-9 * _input_units(two[1]) * (a / 4) * 4)
    assert predict_step_s(Plan(1, 1, 2, 4), two, a, co) == pytest.approx(0.01 + 5 * max(slots), rel=1e-12)
    tp = _shards(model, 2, 1)
    widths = _tp_widths(tp[0])
    assert len(widths) == 4  # two sharded pairs: two row outputs, two column inputs
    expect = 0.01 + 1e-9 * _macs(tp[0]) * a + sum(1e-4 + 1e-9 * w * a * 4 for w in widths)
    assert predict_step_s(Plan(1, 2), tp, a, co) == pytest.approx(expect, rel=1e-12)
    # each of 3 loss terms is its own pass: 3 messages per all-reduce and per pipeline send, the same bytes
    assert predict_step_s(Plan(1, 2), tp, a, co, terms=3) == pytest.approx(expect + 2 * 1e-4 * len(widths), rel=1e-12)
    assert predict_step_s(Plan(1, 1, 2, 4), two, a, co, terms=3) == pytest.approx(  # 12 items: a bubble of 1 / 13
        0.01 + 4 * 13 / 12 * max(slots[0] + 2 * 2 * 1e-4, slots[1]), rel=1e-12)
    # the per-point work: divided by dp, repeated by every tp rank, done by the last pipeline stage
    pt = dataclasses.replace(co, s_per_point=1e-6)
    assert predict_step_s(Plan(1, 2), tp, a, pt) == pytest.approx(expect + 1e-6 * a, rel=1e-12)
    assert predict_step_s(Plan(2), one, a, pt) == pytest.approx(dp2 + 1e-6 * a / 2, rel=1e-12)
    slots[1] += 1e-6 * a / 4
    assert predict_step_s(Plan(1, 1, 2, 4), two, a, pt) == pytest.approx(0.01 + 5 * max(slots), rel=1e-12)
    # recompute repeats a stage's forward, not the micro-batch's fixed cost (the residual and the loss)
    rc = [1.5 * 1e-9 * _macs(st) * a / 4 for st in two]
    rc[1] += 0.002
    rc[0] += 2 * (1e-4 + 1e-9 * _input_units(two[1]) * (a / 4) * 4)
    assert predict_step_s(Plan(1, 1, 2, 4, recompute=True), two, a, co) == pytest.approx(0.01 + 5 * max(rc), rel=1e-12)
    # a wait of 1 ms on every blocking all-reduce: dp's two (the gradients, the loss terms; ZeRO's three), tp's
    # one per sharded layer and loss term; none on a pipeline's sends
    w = dataclasses.replace(co, wait_s=1e-3)
    assert predict_step_s(Plan(2), one, a, w) == pytest.approx(dp2 + 2e-3, rel=1e-12)
    assert predict_step_s(Plan(2, zero=True), one, a, w) == pytest.approx(dp2 + 1e-4 + 3e-3, rel=1e-12)
    assert predict_step_s(Plan(1, 2), tp, a, w, terms=3) == pytest.approx(
        expect + 2 * 1e-4 * len(widths) + 3e-3 * len(widths), rel=1e-12)
    assert predict_step_s(Plan(1, 1, 2, 4), two, a, w) == predict_step_s(Plan(1, 1, 2, 4), two, a, co)
    # under recompute the row-parallel layers' forward all-reduces run again in the backward
    rows = _tp_widths(tp[0])[1::2]  # a sharded pair: the column layer's input, then the row layer's output
    assert sorted(_tp_widths(tp[0], recompute=True)) == sorted(widths + rows)
    assert predict_step_s(Plan(1, 2, recompute=True), tp, a, co) == pytest.approx(
        0.01 + 1.5 * 1e-9 * _macs(tp[0]) * a + sum(1e-4 + 1e-9 * w * a * 4 for w in widths + rows), rel=1e-12)


def test_time_calibration_recovers_the_rates(monkeypatch):
    """calibrate_time's algebra on step times made from known rates (the measurement replaced)."""
    import torch
    from elecsolver.parallel import planner

    from elecsolver.training.trainer import build_model

    p = _problem()
    a = planner.point_channels(p)
    s_mac, s_pt, g, mb, r = 3e-10, 2e-7, 0.004, 0.006, 1.4

    def fake(problem, recompute, world):  # the half-width network has its own multiply-adds
        macs = planner._macs(build_model(problem, torch.device("cpu")))
        local = s_mac * macs * a / world * (r if recompute else 1) + s_pt * a / world
        return g + local + (problem.training.accumulate - 1) * mb

    monkeypatch.setattr(planner, "_median_steps_s", lambda cases, steps: [fake(*c) for c in cases])
    co = planner.calibrate_time(p, 1e-4, 1e-9)
    assert (co.s_per_mac, co.s_per_point, co.global_s, co.microbatch_s, co.recompute_factor) == pytest.approx(
        (s_mac, s_pt, g, mb, r), rel=1e-9)


def test_the_allocation_peak_is_measured_without_the_profilers_lines_on_stderr(capfd):
    """peak_allocated_mib of one 4 MiB float32 tensor and its 4 MiB sum is 8 MiB, and the lines the profiler's C++
    side writes when it starts and stops ("USDT: ... profiler_start") do not reach stderr."""
    import sys

    import torch
    from elecsolver.parallel.profiling import peak_allocated_mib

    peak = peak_allocated_mib(lambda: torch.ones(1 << 20) + 1)
    print("still here", file=sys.stderr)
    err = capfd.readouterr().err
    assert abs(peak - 8.0) < 0.01, peak
    assert "profiler_" not in err and "still here" in err


def test_each_loss_term_counts_the_jet_channels_its_residual_reads():
    """The point source's residuals: Maxwell's equations read the value and the three first derivatives (x, y, t) of
    the fields at the interior and source points, 4 channels; the boundary condition reads the values alone, 1
    channel. The cavity's PDE reads x, y, z, t (5 channels), its PEC condition the values (1)."""
    from elecsolver.parallel.planner import point_channels, term_sizes

    p = MPS(MPS.preset_config("quick"))
    sizes = term_sizes(p)
    assert {k: c for k, (_, c) in sizes.items()} == {"pde": 4, "source": 4, "boundary": 1}
    assert point_channels(p) == sum(n * c for n, c in sizes.values()) == 750 * 4 + 200 * 4 + 100 * 1
    cavity = get_problem_class("maxwell-cavity-3d")
    assert {k: c for k, (_, c) in term_sizes(cavity(cavity.preset_config("quick"))).items()} == {"pde": 5, "pec": 1}


def test_allocations_give_the_peak_and_what_is_left():
    """allocations(fn): ones(2^20) + 1 in float32 holds the 4 MiB of ones and the 4 MiB of the sum at once (a peak
    of 8 MiB), and leaves the sum (4 MiB) when the ones are dropped."""
    import torch
    from elecsolver.parallel.profiling import allocations

    out, peak, end = allocations(lambda: torch.ones(1 << 20) + 1)
    assert float(out[0]) == 2.0 and abs(peak - 8.0) < 0.01 and abs(end - 4.0) < 0.01


def test_step_peak_takes_a_run_whose_allocations_balance():
    """step_peak_mib runs the step ``tries`` times and takes the first run that leaves nothing held: a first run
    that keeps 4 MiB (as a run that misses a free reads) peaks at 12 MiB, the balanced runs after it at the 8 MiB of
    ones(2^20) + 1; with no balanced run, the lowest peak; every run happens whatever the readings (ranks agree)."""
    import pytest
    import torch
    from elecsolver.parallel.profiling import step_peak_mib

    kept, calls = [], []

    def step():
        calls.append(1)
        if len(calls) == 1:
            kept.append(torch.ones(1 << 20))
        (torch.ones(1 << 20) + 1).sum()

    assert abs(step_peak_mib(step, tries=3) - 8.0) < 0.01 and len(calls) == 3
    leaks = []

    def leaky():
        leaks.append(torch.ones(1 << 18 if leaks else 1 << 20))  # 4 MiB, then 1 MiB each run
        (torch.ones(1 << 20) + 1).sum()

    assert abs(step_peak_mib(leaky, tries=2) - 9.0) < 0.01 and len(leaks) == 2
    with pytest.raises(ValueError, match="tries must be at least 1"):
        step_peak_mib(step, tries=0)
