"""Configuration overrides: dotted keys, JSON values, types kept, one clear error otherwise."""

from __future__ import annotations

import pytest
from elecsolver.problems.maxwell_point_source_2d import MaxwellPointSource2D

from elecsolver.config import ConfigError, apply_overrides, config_hash


def test_overrides_parse_json_and_keep_types():
    base = MaxwellPointSource2D.preset_config("ci")
    cfg = apply_overrides(base, ["source.x0=0.3", "source.frequency=1.2e9", "source.sigma=2.5e-3",
                                 "network.scales=[1, 2]", "network.kind=mlp", "training.steps=7"])
    assert cfg["source"]["x0"] == 0.3 and cfg["source"]["frequency"] == 1.2e9
    assert cfg["network"]["scales"] == [1, 2] and cfg["network"]["kind"] == "mlp"
    assert cfg["training"]["steps"] == 7 and isinstance(cfg["training"]["steps"], int)
    assert base["source"]["x0"] == 0.4975  # input not mutated
    assert isinstance(apply_overrides(base, ["source.amplitude=2"])["source"]["amplitude"], float)
    # an entry that is null by default (an option off) takes a value; its block validates it
    assert base["training"]["slab_share"] is None
    assert apply_overrides(base, ["training.slab_share=[0.6, 0.4]"])["training"]["slab_share"] == [0.6, 0.4]
    # every key the training block reads has a default, so --set reaches it (least_squares.before_finish had none)
    cfg = apply_overrides(base, ["training.least_squares.before_finish=true", "training.finish.optimizer=lbfgs",
                                 "training.finish.steps=3", "training.slabs=1"])
    assert cfg["training"]["least_squares"] == {"every": 0, "ridge": None, "before_finish": True}
    p = MaxwellPointSource2D(cfg)  # and the training block accepts it
    # the ridge's default: 1e-6 for solves between gradient steps, 0 where every step is a solve
    assert p.training.least_squares["ridge"] == 1e-6
    solve = MaxwellPointSource2D(apply_overrides(base, ["training.optimizer=least_squares", "training.slabs=1"]))
    assert solve.training.least_squares["ridge"] == 0.0


@pytest.mark.parametrize("item,match", [
    ("no.such.key=1", "unknown configuration key"),
    ("source.nope=1", "unknown configuration key"),
    ("training.stpes=3", r"unknown configuration key 'training.stpes' \(did you mean 'steps'\?\): training has"),
    ("source.sigma=true", "expected a number"),
    ("training.steps=1.5", "expected an integer"),
    ("network.hard_initial=1", "expected a boolean"),
    ("source=1", "source is a section"),
    ("training.slab_share={\"a\": 1}", "training.slab_share: this entry is null .off. by default and takes one value"),
    ("source.sigma", "KEY=VALUE"),
])
def test_bad_overrides(item, match):
    with pytest.raises(ConfigError, match=match):
        apply_overrides(MaxwellPointSource2D.preset_config("ci"), [item])


@pytest.mark.parametrize("omega", ["0", "-5", "NaN", "1e300"])
def test_a_bad_first_omega_is_one_clear_error(omega):
    """network.first_omega scales the first layer's initial weights: zero, negative, NaN or beyond 1e6 is refused
    (zero trained nothing, a negative value crashed inside torch's initialiser, 1e300 overflowed float32 there)."""
    cfg = apply_overrides(MaxwellPointSource2D.preset_config("ci"), [f"network.first_omega={omega}"]) \
        if omega != "NaN" else {**MaxwellPointSource2D.preset_config("ci")}
    if omega == "NaN":
        cfg["network"] = {**cfg["network"], "first_omega": float("nan")}
    # NaN is caught by the check every configuration passes (a non-finite value, named with its key)
    message = r"network\.first_omega = NaN: not a finite number" if omega == "NaN" else \
        r"network.first_omega must be a number in \(0, 1e\+06\]"
    with pytest.raises(ConfigError, match=message):
        MaxwellPointSource2D(cfg)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset"):
        MaxwellPointSource2D.preset_config("nope")


def test_hash_is_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
