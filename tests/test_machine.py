"""Machine descriptions, the planner's ranking and --parallel auto, and parallel options carried by presets and
checkpoints: hand-computed model arithmetic, topology on known layouts, and the choices on known machines."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from elecsolver.parallel.machine import Machine, MachineError, load_machine, parse_size_mib, shipped
from elecsolver.parallel.planner import (
    Plan,
    PlanError,
    all_reduce_bytes,
    best_plan,
    bubble_fraction,
    constrained_plans,
    feasibility,
    predict_step_s,
    ranked,
    state_bytes,
)
from elecsolver.problems import get_problem_class

from elecsolver.config import apply_overrides

MPS = get_problem_class("maxwell-point-source-2d")


def _problem(*sets):
    return MPS(apply_overrides(MPS.preset_config("smoke"), list(sets)))


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 3))


def test_state_bytes_of_a_known_network():
    """2-64-64-3: (2 + 1) 64 + (64 + 1) 64 + (64 + 1) 3 = 4547 parameters, 18188 float32 bytes; gradients as many;
    Adam two moments; ZeRO over 4 ranks keeps a quarter of the moments; dp > 1 adds a flat gradient buffer."""
    net = _mlp()
    assert sum(p.numel() for p in net.parameters()) == 4547
    one = state_bytes(net, Plan(1))
    assert one == {"parameters": 18188, "gradients": 18188, "adam": 36376, "dp_buffer": 0}
    assert state_bytes(net, Plan(4, zero=True)) == {"parameters": 18188, "gradients": 18188, "adam": 9094,
                                                    "dp_buffer": 18188}
    assert state_bytes(net, Plan(1), dtype_bytes=8)["adam"] == 72752


def test_all_reduce_volume_and_pipeline_bubble():
    """Ring all-reduce: each rank sends 2 (p - 1) / p of the buffer (18188 bytes over 4 ranks: 27282); one rank sends
    nothing. 1F1B / GPipe with pp = 4 and 8 micro-batches: 3 idle slots of 11."""
    assert all_reduce_bytes(18188, 4) == pytest.approx(27282.0, rel=1e-15)
    assert all_reduce_bytes(18188, 2) == 18188 and all_reduce_bytes(18188, 1) == 0
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11, rel=1e-15)
    assert bubble_fraction(1, 8) == 0


def _machine(**kw):
    base = load_machine("h100-64x-infiniband")
    return dataclasses.replace(base, **kw)


def test_topology_places_tp_inside_a_node_and_prices_groups_that_span_nodes():
    """64 ranks, 8 a node, rank = (pp_i dp + dp_i) tp + tp_i: tp = 8 groups are nodes; dp over them crosses nodes;
    dp = 8 with tp = 1 and pp = 8 keeps dp inside a node and sends the pipeline between nodes."""
    m = load_machine("h100-64x-infiniband")
    intra, inter = m.intra_node, m.inter_node
    assert m.axis_links(8, 8, 1) == {"tp": intra, "dp": inter, "pp": intra}
    assert m.axis_links(4, 16, 1)["tp"] == inter
    assert m.axis_links(8, 1, 8) == {"tp": intra, "dp": intra, "pp": inter}
    assert m.axis_links(64, 1, 1)["dp"] == inter
    assert load_machine("h100-8x-nvlink").axis_links(8, 1, 1)["dp"] == load_machine("h100-8x-nvlink").intra_node
    groups = m.groups(2, 2, 2)
    assert groups["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and groups["pp"][0] == [0, 4]
    assert groups["dp"][0] == [0, 2]


def test_an_oversubscribed_host_takes_the_larger_of_span_and_work():
    """4 ranks on 2 cores, measured with all 4 busy (every time 2x a rank's with a core to itself): the step is
    max(span at the halved times, the ranks' summed busy time over 2 cores). Data parallel keeps every rank busy, so
    its work bound is the measured-rate prediction; a 4-stage pipeline idles in its bubble and the work bound wins
    over its span."""
    from elecsolver.parallel.machine import Link
    from elecsolver.parallel.planner import TimeCoefficients, _macs, _shards

    from elecsolver.training.trainer import build_model

    model = build_model(_problem(), torch.device("cpu"))
    co = TimeCoefficients(s_per_mac=1e-9, global_s=0.01, microbatch_s=0.002, recompute_factor=1.5, alpha_s=0.0,
                          beta_s_per_byte=0.0)
    free = _machine(compute=co, ranks_per_node=4, nodes=1, intra_node=Link(0.0, 0.0), inter_node=Link(0.0, 0.0))
    busy = dataclasses.replace(free, cores_per_node=2)
    assert free.oversubscription == 1.0 and busy.oversubscription == 2.0
    a = 10_000
    one = _shards(model, 1, 1)
    t_free = predict_step_s(Plan(4), one, a, co, 4, free)
    assert t_free == pytest.approx(0.01 + 1e-9 * _macs(model) * a / 4, rel=1e-12)
    # span t_free / 2; work: 4 ranks x t_free / 2 over 2 cores = t_free
    assert predict_step_s(Plan(4), one, a, co, 4, busy) == pytest.approx(t_free, rel=1e-12)
    four = _shards(model, 1, 4)
    slots = [1e-9 * _macs(st) * a / 8 for st in four]
    slots[-1] += 0.002  # a micro-batch's fixed cost, on the last stage
    span = (0.01 + 11 * max(slots)) / 2  # 8 micro-batches + 3 bubble slots, at half the measured times
    work = (8 * sum(slots) + 4 * 0.01) / 2 / 2
    assert predict_step_s(Plan(1, 1, 4, 8), four, a, co, 4, busy) == pytest.approx(max(span, work), rel=1e-12)
    assert predict_step_s(Plan(1, 1, 4, 8), four, a, co, 4, free) == pytest.approx(2 * span, rel=1e-12)
    # a collective's latency was measured with every rank busy, as the run is: it is not halved (two all-reduces:
    # the gradients and the loss terms)
    slow = dataclasses.replace(busy, intra_node=Link(0.05, 0.0), inter_node=Link(0.05, 0.0))
    assert predict_step_s(Plan(4), one, a, co, 4, slow) == pytest.approx(t_free / 2 + 2 * 0.05, rel=1e-12)


def test_step_time_prices_the_dp_all_reduce_on_the_link_it_crosses():
    problem = _problem()
    m = _machine(compute=dataclasses.replace(load_machine("h100-8x-nvlink").compute, global_s=0.0))
    from elecsolver.parallel.planner import _shards

    from elecsolver.training.trainer import build_model

    model = build_model(problem, torch.device("cpu"))
    stages = _shards(model, 1, 1)
    grads = sum(p.numel() for p in model.parameters()) * 4
    a = 1000
    local = m.compute.s_per_mac * sum(w.numel() for n, w in model.named_parameters()
                                      if n.endswith("weight") and w.dim() >= 2) * a / 64
    t64 = predict_step_s(Plan(64), stages, a, m.compute, 4, m)
    expect = local + 2 * m.inter_node.alpha_s + m.inter_node.beta_s_per_byte * all_reduce_bytes(grads, 64)
    assert t64 == pytest.approx(expect, rel=1e-12)
    one_node = dataclasses.replace(m, ranks_per_node=64, nodes=1)
    t64_one = predict_step_s(Plan(64), stages, a, m.compute, 4, one_node)
    assert t64_one == pytest.approx(local + 2 * m.intra_node.alpha_s + m.intra_node.beta_s_per_byte
                                    * all_reduce_bytes(grads, 64), rel=1e-12)


def test_shipped_descriptions_read_and_write_back():
    assert set(shipped()) >= {"cpu-2core", "h100-8x-nvlink", "h100-64x-infiniband"}
    for name in shipped():
        m = load_machine(name)
        assert isinstance(m, Machine) and m.memory_per_rank_mib > 0 and m.compute.s_per_mac > 0
    h = load_machine("h100-8x-nvlink")
    assert not h.measured and h.world == 8 and h.memory_per_rank_mib == pytest.approx(80e9 / 2**20)
    assert load_machine("h100-64x-infiniband").world == 64
    assert load_machine("cpu-2core").measured


def test_machine_round_trip(tmp_path):
    m = load_machine("h100-64x-infiniband")
    path = tmp_path / "m.toml"
    path.write_text(m.to_toml())
    back = load_machine(path)
    assert back.compute.s_per_mac == m.compute.s_per_mac and back.inter_node == m.inter_node
    assert back.memory_per_rank_mib == pytest.approx(m.memory_per_rank_mib, rel=1e-5)
    assert back.activations == m.activations and back.ranks_per_node == 8 and back.nodes == 8
    # a description of the earlier memory model (coefficients per width unit) is refused, not misread
    path.write_text(m.to_toml().replace("backward_peak = 6.97\n", "backward = 0.19\n"))
    with pytest.raises(MachineError, match=r"\[activations\] backward belong to an earlier memory model .* elecsolver "
                                           r"plan --calibrate"):
        load_machine(path)


@pytest.mark.parametrize("edit, words", [
    (("ranks_per_node = 8", "ranks_per_node = 0"), "ranks_per_node must be a positive integer, got 0"),
    (("memory_per_rank = \"80GB\"", "memory_per_rank = \"lots\""), "memory_per_rank must be a positive size"),
    (("s_per_mac = 3.3e-13", "s_per_mac = -1.0"), "compute.s_per_mac must be a positive number, got -1.0"),
    (("[inter_node]", "[between_nodes]"), "unknown key(s) ['between_nodes'] in the top level"),
    (("measured = false", "measured = \"no\""), "measured must be true"),
    (("plain = 4.5", "plian = 4.5"), "unknown key(s) ['plian'] in [activations] (did you mean 'plain'?)"),
    (("backward_peak = 6.97", "backward_peak = -0.19"),
     "activations.backward_peak must be a non-negative number, got -0.19"),
    (("recompute_peak = 11.0", ""), "needs activations.recompute_peak"),
    (("nodes = 8", "nodes = 8\nbogus_key = 1"), "unknown key(s) ['bogus_key'] in the top level; it has"),
    (("memory_per_rank = \"80GB\"", ""), "needs memory_per_rank"),
    (("global_s = 5.0e-3", ""), "needs compute.global_s"),
])
def test_bad_machine_descriptions_are_one_clear_error(tmp_path, edit, words):
    from elecsolver.parallel.machine import MACHINES_DIR

    text = (MACHINES_DIR / "h100-64x-infiniband.toml").read_text()
    assert edit[0] in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(MachineError) as err:
        load_machine(path)
    assert str(path) in str(err.value) and words in str(err.value)
    with pytest.raises(MachineError, match="no such file; give a machine description"):
        load_machine(tmp_path / "absent.toml")
    path.write_text(text.split("# one 400 Gb/s NDR")[0])  # 8 nodes and no [inter_node]
    with pytest.raises(MachineError, match=r"needs a \[inter_node\] section"):
        load_machine(path)


def test_sizes():
    assert parse_size_mib("4GiB") == 4096 and parse_size_mib("80GB") == pytest.approx(80e9 / 2**20)
    assert parse_size_mib("512MiB") == 512 and parse_size_mib("1048576") == 1
    for bad in ("", "4 parsecs", "-1GiB", None):
        with pytest.raises(ValueError, match="must be a positive size"):
            parse_size_mib(bad)


def test_constraints_keep_the_mesh_and_set_the_rest():
    plans = constrained_plans(4, {"tp": 2})
    assert plans and all(p.tp == 2 and p.dp * p.pp == 2 for p in plans)
    six = constrained_plans(4, {"pp": 2, "microbatches": 6, "precision": "fp32"})
    assert all(p.microbatches == 6 and p.precision == "fp32" for p in six) and len(set(six)) == len(six)
    assert {p.schedule for p in six} == {"1f1b", "gpipe"}
    assert constrained_plans(1, {"tp": 2}) == []
    zero = constrained_plans(2, {"zero": True})  # ZeRO shards over dp: a plan of one dp rank would ignore it
    assert zero and all(p.zero and p.dp == 2 for p in zero)
    assert constrained_plans(2, {"zero": True, "pp": 2}) == []
    with pytest.raises(PlanError, match="plans only"):
        constrained_plans(2, {"shards": 2})


def test_ranking_orders_by_predicted_time_and_the_best_plan_keeps_to_constraints():
    """On the 2-core description 2 ranks of the main job's smoke preset: every plan the ranking lists can run, in
    increasing predicted time; the best is data parallel at fp32; a tp constraint is kept; tp = 3 cannot fit."""
    problem = _problem()
    cpu = load_machine("cpu-2core")
    checks = feasibility(problem, 2, machine=cpu)
    order = ranked(checks)
    assert order and all(c.ok for c in order)
    assert [c.step_s for c in order] == sorted(c.step_s for c in order)
    assert all(c.memory_mib is not None for c in order)
    best = best_plan(problem, 2, cpu, {"precision": "fp32"})
    assert best.plan.dp == 2 and best.plan.precision == "fp32" and best.step_s == order[0].step_s
    assert best_plan(problem, 2, cpu, {"tp": 2}).plan.tp == 2
    with pytest.raises(PlanError, match=r"tp = 3 does not fit 2 rank\(s\)"):
        best_plan(problem, 2, cpu, {"tp": 3})


def test_plans_over_memory_are_never_proposed():
    problem = _problem()
    tiny = dataclasses.replace(load_machine("cpu-2core"), memory_per_rank_mib=0.01)
    assert ranked(feasibility(problem, 2, machine=tiny)) == []
    with pytest.raises(PlanError, match="rejected for memory") as err:
        best_plan(problem, 2, tiny)
    assert "drop or change a constraint" in str(err.value)


def test_auto_parallel_options(capsys):
    from elecsolver.cli import auto_parallel

    problem = _problem()
    opts = auto_parallel(problem, 2, {"auto": True, "timeout_s": 60.0, "zero": True}, "cpu-2core")
    assert opts["dp"] == 2 and opts["zero"] is True and opts["timeout_s"] == 60.0 and opts["precision"] == "fp32"
    assert "--parallel auto on 2 rank(s) of 2-core CPU host" in capsys.readouterr().err
    from elecsolver.parallel import ParallelOptions

    ParallelOptions.coerce(opts).validate(problem.training, 2)


def test_plan_command_ranks_on_a_machine():
    from conftest import run_main

    r = run_main("plan", "maxwell-point-source-2d", "--preset", "smoke", "--world-size", "8", "--machine",
                 "h100-8x-nvlink")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# maxwell-point-source-2d, 8 rank(s) on 8x H100 SXM 80GB") and \
        "(not measured)" in lines[0] and "ranked by predicted step time" in lines[0]
    times = [float(line.split("# ")[1].split(" ms")[0]) for line in lines[1:] if line.startswith("--")]
    assert times == sorted(times) and len(times) > 10


def test_calibration_fits_the_collectives_and_takes_the_median_rates(monkeypatch):
    """measure_machine with the processes faked: beta is the slope through the all-reduce medians, alpha the
    smallest message's latency, wait_s the median over the processes of the all-reduce after computing less the
    barrier-synchronised one, each rate the median over the processes."""
    from elecsolver.parallel import calibration

    alpha, beta = 2e-4, 1e-9
    coll = [{"bytes": b, "s": alpha + beta * b} for b in (1024, 16384, 262144, 4194304)]
    rates = [{"s_per_mac": s, "s_per_point": 1e-7, "global_s": 0.003, "microbatch_s": 0.006, "recompute_factor": 1.5}
             for s in (1e-10, 3e-10, 2e-10)]
    after = [{"after_compute_s": alpha + 1024 * beta + w} for w in (3e-3, 1e-3, 2e-3)]
    monkeypatch.setattr(calibration, "spawn_local", lambda cmd, world: [coll + [a, r] for a, r in zip(after, rates)])
    from elecsolver.parallel import planner

    coeffs = planner.MemoryCoefficients(8.0, 6.0, 10.0)
    monkeypatch.setattr(planner, "calibrate", lambda problem, points_scale=1.0: coeffs)
    m = calibration.measure_machine(_problem(), 3, progress=lambda *a: None)
    assert m.measured and m.ranks_per_node == 3 and m.nodes == 1
    assert m.intra_node.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert m.intra_node.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert m.intra_node.wait_s == m.compute.wait_s == pytest.approx(2e-3, rel=1e-9)
    assert m.compute.s_per_mac == 2e-10 and m.compute.recompute_factor == 1.5
    assert m.activations.plain == 8.0 and m.memory_per_rank_mib == pytest.approx(calibration.host_memory_mib() / 3)
    with pytest.raises(ValueError, match="at least 2 ranks"):
        calibration.measure_machine(_problem(), 1)


def test_calibration_fits_the_micro_batch_cost_to_a_pipeline(monkeypatch):
    """With two ranks the processes also time a two-stage pipeline with 2 and 8 micro-batches; microbatch_s is the
    value that predicts those steps: step times made with 9 ms give back 9 ms."""
    from elecsolver.parallel import calibration, planner

    coll = [{"bytes": b, "s": 2e-4 + 1e-9 * b} for b in (1024, 16384, 262144, 4194304)]
    rates = {"s_per_mac": 2e-10, "s_per_point": 1e-7, "global_s": 0.003, "microbatch_s": 0.006,
             "recompute_factor": 1.5}
    rows = [coll + [{"after_compute_s": 3e-3}, rates]] * 2
    coeffs = planner.MemoryCoefficients(8.0, 6.0, 10.0)
    monkeypatch.setattr(planner, "calibrate", lambda problem, points_scale=1.0: coeffs)
    monkeypatch.setattr(calibration, "spawn_local", lambda cmd, world: rows)
    problem = _problem()
    base = calibration.measure_machine(problem, 2, progress=lambda *a: None)
    assert base.compute.microbatch_s == 0.006  # no pipeline timed: the processes' own measure
    plans = calibration._pipeline_plans(problem, 2)
    assert [(p.dp, p.pp, p.microbatches) for p in plans] == [(1, 2, 2), (1, 2, 8)]
    true = dataclasses.replace(base, compute=dataclasses.replace(base.compute, microbatch_s=0.009))
    steps = {str(p.microbatches): feasibility(problem, 2, [p], machine=true)[0].step_s for p in plans}
    assert steps["8"] > steps["2"]
    monkeypatch.setattr(calibration, "spawn_local", lambda cmd, world: [r + [{"pipeline_s": steps}] for r in rows])
    fitted = calibration.measure_machine(problem, 2, progress=lambda *a: None)
    assert fitted.compute.microbatch_s == pytest.approx(0.009, rel=1e-3)
    assert calibration._pipeline_plans(problem, 3) == []  # an odd world: no two-stage pipeline of equal dp


def test_a_preset_holds_parallel_options_below_the_file_and_the_flags(tmp_path):
    from elecsolver.cli import _configure, _parallel_options, _parser

    class Prob(MPS):
        name = "maxwell-point-source-2d"
        presets = {**MPS.presets, "rc": {**MPS.presets["ci"], "parallel": {"recompute": True, "precision": "bf16"}}}

    args = _parser().parse_args(["run", "x", "--preset", "rc"])
    _configure(Prob, args)
    assert _parallel_options(args).recompute is True and _parallel_options(args).precision == "bf16"
    path = tmp_path / "f.toml"
    path.write_text('[parallel]\nprecision = "fp32"\n')
    args = _parser().parse_args(["run", "x", "--preset", "rc", "--config", str(path), "--precision", "fp16"])
    _configure(Prob, args)
    opts = _parallel_options(args)
    assert opts.recompute is True and opts.precision == "fp16"
    args = _parser().parse_args(["run", "x", "--preset", "rc", "--config", str(path)])
    _configure(Prob, args)
    assert _parallel_options(args).precision == "fp32"
    assert Prob.preset_config("rc") == MPS.preset_config("ci")  # the configuration itself holds no parallel section


def test_resume_refuses_other_parallel_options():
    from elecsolver.training.context import RunContext
    from elecsolver.training.trainer import ResumeError, check_parallel

    opts = {"dp": 2, "tp": 1, "pp": 1, "microbatches": 1, "zero": False, "precision": "fp32", "schedule": "1f1b",
            "recompute": False}
    ctx = RunContext(extra={"parallel": {**opts, "zero": True, "recompute": True}, "layout": {"dp": 2, "tp": 1,
                                                                                              "pp": 1}})
    with pytest.raises(ResumeError, match=r"other parallel options \(zero False -> True\)"):
        check_parallel({"parallel": opts, "layout": {"dp": 2, "tp": 1, "pp": 1}}, ctx)
    check_parallel({"parallel": {**opts, "zero": True}, "layout": {"dp": 2, "tp": 1, "pp": 1}}, ctx)  # recompute may
    check_parallel({"layout": None}, RunContext())  # a checkpoint without options: the layout alone


def test_calibrate_writes_a_description_the_planner_reads(tmp_path):
    """elecsolver plan --calibrate for real: two processes on this host measure at once, the description is written
    (measured, one node of 2 ranks, positive rates and a latency) and the plans are ranked with it."""
    from conftest import run_main

    path = tmp_path / "here.toml"
    r = run_main("plan", "maxwell-point-source-2d", "--preset", "smoke", "--world-size", "2", "--calibrate",
                 "--machine", str(path))
    assert r.returncode == 0, r.stderr
    m = load_machine(path)
    assert m.measured and (m.ranks_per_node, m.nodes) == (2, 1)
    assert m.intra_node.alpha_s > 0 and m.intra_node.beta_s_per_byte > 0 and m.compute.s_per_mac > 0
    assert m.compute.recompute_factor >= 1 and m.activations.plain > 0 and m.compute.s_per_point >= 0
    assert f"# wrote {path}" in r.stdout and "ranked by predicted step time" in r.stdout
    assert m.cores_per_node >= 1 and m.intra_node.wait_s >= 0 and "wait after computing" in r.stdout
    assert "two-stage pipeline" in r.stdout and m.compute.microbatch_s > 0 and m.activations.backward_peak > 0


def test_calibrate_refuses_an_unwritable_place_before_measuring(tmp_path):
    """One line, exit 2, before two processes spend half a minute measuring."""
    from conftest import run_main

    r = run_main("plan", "maxwell-point-source-2d", "--preset", "smoke", "--world-size", "2", "--calibrate",
                 "--machine", str(tmp_path / "no-such-folder" / "m.toml"))
    assert r.returncode == 2 and "cannot write the calibrated description" in r.stderr
    assert "calibrating" not in r.stdout + r.stderr and not (tmp_path / "no-such-folder").exists()


def test_set_reaches_the_parallel_section():
    from elecsolver.cli import _configure, _parallel_options, _parser

    args = _parser().parse_args(["run", "x", "--preset", "smoke", "--set", "parallel.recompute=true", "--set",
                                 "parallel.loss_scale.init_scale=1024", "--set", "training.steps=3"])
    problem = _configure(MPS, args)
    opts = _parallel_options(args)
    assert opts.recompute is True and opts.loss_scale["init_scale"] == 1024.0 and problem.training.steps == 3
    from elecsolver.locate import UsageError

    with pytest.raises(UsageError, match="parallel.recompute: expected a boolean"):
        _configure(MPS, _parser().parse_args(["run", "x", "--set", "parallel.recompute=3"]))


def test_resume_with_auto_keeps_the_checkpoints_plan(tmp_path, capsys):
    """--resume --parallel auto does not plan again: the checkpoint's dp, tp, pp, micro-batches, ZeRO and precision
    are kept, the other options given pass through."""
    from elecsolver.cli import _checkpoint_parallel

    state = {"package_version": "x", "config": {}, "model": {}, "step": 3,
             "parallel": {"dp": 1, "tp": 2, "pp": 1, "microbatches": 1, "schedule": "1f1b", "zero": False,
                          "recompute": True, "precision": "fp32", "timeout_s": 1800.0}}
    torch.save(state, tmp_path / "checkpoint.pt")
    opts = _checkpoint_parallel(tmp_path / "checkpoint.pt", {"auto": True, "timeout_s": 60.0}, quiet=False)
    assert opts == {"dp": 1, "tp": 2, "pp": 1, "microbatches": None, "schedule": "1f1b", "zero": False,
                    "recompute": True, "precision": "fp32", "timeout_s": 60.0}
    assert "the checkpoint's plan, --dp 1 --tp 2 --pp 1 --recompute" in capsys.readouterr().err
