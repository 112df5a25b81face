"""The one table of what combines with what (elecsolver.capabilities): every declared refusal is found, whichever
order the capabilities come in, by the table, by the parallel strategy's check and by the Trainer; pairs not declared
combine."""

from __future__ import annotations

import copy
import itertools

import pytest

from elecsolver.capabilities import CAPABILITIES, active, check, combinations, refusal
from elecsolver.config import ConfigError
from elecsolver.training.context import RunContext
from elecsolver.training.options import BASE_CONFIG, TrainingOptions


def test_every_declared_pair_is_refused_either_way_and_the_others_combine():
    declared = {frozenset((a, b)) for a, c in CAPABILITIES.items() for b in c.refuses}
    for a, b in itertools.combinations(CAPABILITIES, 2):
        for pair in ((a, b), (b, a)):
            why = refusal(pair)
            if frozenset(pair) in declared:
                assert why is not None and why.count("\n") == 0 and " does not combine with " in why, pair
                la, lb = CAPABILITIES[a].label, CAPABILITIES[b].label
                assert why.startswith((f"{la} does not combine with {lb} (", f"{lb} does not combine with {la} (")), \
                    why
            else:
                assert why is None, (pair, why)
    assert len(combinations()) == sum(len(c.refuses) for c in CAPABILITIES.values())
    # every name a refusal mentions is in the table, and no pair is declared twice (once on each side)
    for a, c in CAPABILITIES.items():
        for b in c.refuses:
            assert b in CAPABILITIES and a not in CAPABILITIES[b].refuses, (a, b)
    with pytest.raises(KeyError, match="unknown capabilities"):
        refusal(["warp-drive"])
    assert refusal([]) is None and refusal(["pp", "zero", "recompute", "bf16"]) is None


def _training(**sets) -> TrainingOptions:
    cfg = copy.deepcopy(BASE_CONFIG)
    cfg["training"].update(sets)
    return TrainingOptions.from_config(cfg)


def test_active_reads_the_strategy_and_the_training_block():
    assert active(parallel={"tp": 2, "pp": 1, "zero": True, "precision": "fp16"}) == {"tp", "zero", "fp16"}
    t = _training(optimizer="lbfgs", finish={"optimizer": "lbfgs", "steps": 5, "lr": 1.0}, accumulate=2)
    assert active(training=t) == {"lbfgs", "finish", "accumulate"}
    assert active(training=_training(optimizer="least_squares")) == {"ls_solver", "least_squares"}


@pytest.mark.parametrize(("parallel", "training", "words"), [
    ({"tp": 2}, {"compile": True, "cuda_graphs": True}, "training.cuda_graphs (--cuda-graphs) does not combine with "
                                                         "--tp (tp's all-reduces are inside the compiled graph"),
    ({"zero": True}, {"optimizer": "lbfgs"}, "training.optimizer='lbfgs' does not combine with --zero (ZeRO shards"),
    ({"precision": "fp16"}, {"optimizer": "lbfgs"}, "does not combine with --precision fp16 (fp16 scales the loss"),
    ({"tp": 2, "precision": "bf16"}, {}, "--tp does not combine with --precision bf16"),
    ({"pp": 2}, {"accumulate": 2}, "training.accumulate > 1 (--accumulate) does not combine with --pp"),
    ({"pp": 2}, {"least_squares": {"every": 5}}, "output layer (training.least_squares, or training.optimizer="
                                                 "'least_squares') does not combine with --pp"),
    ({"tp": 2}, {"finish": {"optimizer": "lbfgs", "steps": 5, "lr": 1.0}}, "training.finish (the L-BFGS finish) "
                                                                           "does not combine with --tp"),
    ({"pp": 2}, {"init_from": "somewhere"}, "training.init_from (--init-from) does not combine with --pp"),
    ({"zero": True}, {"slabs": 2}, "training.slabs > 1 does not combine with --zero"),
    ({"recompute": True}, {"derivatives": "autograd"}, "training.derivatives='autograd' does not combine with "
                                                       "--recompute"),
])
def test_the_strategy_check_refuses_in_one_line(parallel, training, words):
    from elecsolver.parallel import ParallelOptions

    opts = ParallelOptions(**parallel)
    world = opts.tp * opts.pp
    with pytest.raises(ConfigError) as err:
        opts.validate(_training(**training), world)
    assert str(err.value).startswith(words) or words in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_the_context_declares_what_its_hooks_apply():
    hook = object()
    assert RunContext().capabilities == set()
    assert RunContext(model_parallel=2).capabilities == {"tp"}
    assert RunContext(model_parallel=2, extra={"layout": {"dp": 1, "tp": 1, "pp": 2}},
                      make_forward_backward=hook).capabilities == {"pp"}
    assert RunContext(make_optimizer=hook, loss_scaler=hook, autocast=hook).capabilities == {"zero", "fp16"}
    assert RunContext(autocast=hook).capabilities == {"bf16"}


def test_the_trainer_refuses_what_its_context_adds():
    """A hand-made context with a sharded optimizer and a least-squares problem: the Trainer's one check."""
    from elecsolver.problems import REGISTRY

    from elecsolver.trainer import Trainer

    cls = REGISTRY["helmholtz-square"]
    cfg = cls.preset_config("smoke")
    cfg["training"]["least_squares"] = {"every": 2, "ridge": 1e-6}
    with pytest.raises(ConfigError, match=r"^a least-squares solve .* does not combine with --zero \(each rank"):
        Trainer(cls(cfg), context=RunContext(make_optimizer=lambda *a: None), progress=False)
    check(["least_squares"])  # alone it combines
