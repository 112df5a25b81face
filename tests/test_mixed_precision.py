"""Mixed precision: fp16/bf16 value channel with float32 derivative channels, and dynamic loss scaling.

The sin network of mp_worker.py has first-layer weights of magnitude 400-440, so its second derivatives are
about 1e5, beyond float16's maximum 65504: a naive all-float16 jet overflows, the mixed-precision layers do
not.  Points lie in x in [-0.005, 0.005] so that the first-layer pre-activations stay |a| <= ~3.2: the
low-precision value channel gives every sin / cos a phase error of about |a| u (see
elecsolver.parallel.mixed_precision, "Accuracy"), which at |a| ~ 400 (x in [-1, 1]) would swamp any useful
tolerance -- test_large_preactivations_lose_the_phase documents that limitation.

Tolerances (normwise relative to float32): each low-precision matmul rounds its inputs, weights and output
to the low precision (unit roundoff u), about 3 u relative on the pre-activation of each layer; over the
3 layers that adds up to about 9 u, carried through sin / cos and the float32 derivative factors (W_1 ~ 400,
exact in float32) at O(1) amplification, so tol = 10 u: 10 * 2^-11 = 4.9e-3 (fp16) and 10 * 2^-8 = 3.9e-2
(bf16).  Observed: at most 1.6e-3 = 3.2 u (fp16) and 8.6e-3 = 2.2 u (bf16).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import free_port
from elecsolver.parallel.mixed_precision import (
    PRECISIONS,
    DynamicLossScaler,
    LossScaleError,
    MixedPrecisionFourierFeatures,
    MixedPrecisionGroupedJetLinear,
    MixedPrecisionJetLinear,
    apply_mixed_precision,
    autocast,
)
from mp_worker import HALF_WIDTH, jet_channels, sin_network
from torch import nn

from elecsolver.networks import (
    Activation,
    FourierFeatures,
    GroupedJetLinear,
    GroupSum,
    JetLinear,
    ScaleReplicate,
)

HERE = Path(__file__).resolve().parent
U = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOL = {p: 10 * u for p, u in U.items()}
FP16_MAX = torch.finfo(torch.float16).max


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def _points(n: int = 33) -> torch.Tensor:
    return torch.linspace(-HALF_WIDTH, HALF_WIDTH, n).unsqueeze(1)


# ---- autocast --------------------------------------------------------------------------------------------

def test_autocast_contexts():
    assert PRECISIONS == ("fp32", "bf16", "fp16")
    a, w = torch.randn(4, 3), torch.randn(5, 3)
    with autocast("cpu", "fp32"):
        assert (a @ w.t()).dtype == torch.float32
    # CPU autocast supports float16 as well as bfloat16 (torch 2.13)
    for precision, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        with autocast(torch.device("cpu"), precision):
            assert (a @ w.t()).dtype == dtype
    with pytest.raises(ValueError, match="unknown precision"):
        autocast("cpu", "fp8")


# ---- the jet policy ----------------------------------------------------------------------------------------

def test_naive_fp16_jet_overflows():
    """All channels in float16: the second derivative (~1e5) overflows, both with a .half() model and with
    the plain layers under autocast (their one matmul over all channels runs in float16)."""
    net, x = sin_network(), _points()
    ref = jet_channels(net, x)
    assert ref[2].abs().max() > FP16_MAX and torch.isfinite(ref).all()   # a real ~1e5 second derivative
    half = jet_channels(copy.deepcopy(net).half(), x.half())
    assert torch.isfinite(half[:2]).all() and not torch.isfinite(half[2]).all()
    # where it happens: after the first sin the second-derivative channel is -sin(a) W^2 ~ 1.6e5 -> inf
    from elecsolver.jets import seed_jet
    hidden = copy.deepcopy(net).half().body[:2](seed_jet(x.half(), [0], [(0, 0)]))
    assert torch.isinf(hidden.channels[2]).any()
    with autocast("cpu", "fp16"):
        naive = jet_channels(copy.deepcopy(net), x)
    assert torch.isfinite(naive[:2]).all() and not torch.isfinite(naive[2]).all()


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_jet_is_finite_and_accurate(precision):
    net, x = sin_network(), _points()
    ref = jet_channels(net, x)
    mixed = apply_mixed_precision(copy.deepcopy(net), precision)
    with autocast("cpu", precision):
        out = jet_channels(mixed, x)
        plain = mixed(x)                                    # plain tensors: autocast as usual
    assert plain.dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert out[2].abs().max() > FP16_MAX                # finite although beyond float16's range
    for c, name in enumerate(["u", "du/dx", "d2u/dx2"]):
        assert _rel(out[c], ref[c]) < TOL[precision], (name, _rel(out[c], ref[c]))
    assert _rel(out[0], ref[0]) > U[precision] / 10          # and the value really went through low precision


def test_large_preactivations_lose_the_phase():
    """The documented limitation: with x in [-1, 1] the pre-activations reach ~440, where float16 spacing is
    0.25 -- the fields carry percent-level errors (fp32 is the precision for such networks)."""
    net, x = sin_network(), torch.linspace(-1, 1, 33).unsqueeze(1)
    ref = jet_channels(net, x)
    with autocast("cpu", "fp16"):
        out = jet_channels(apply_mixed_precision(copy.deepcopy(net), "fp16"), x)
    assert torch.isfinite(out).all()
    assert _rel(out[0], ref[0]) > 10 * TOL["fp16"]


def test_outside_autocast_the_converted_model_is_float32():
    net, x = sin_network(), _points()
    ref = jet_channels(net, x)
    out = jet_channels(apply_mixed_precision(copy.deepcopy(net), "fp16"), x)
    assert _rel(out, ref) < 1e-6


def test_same_parameters_and_state_dict():
    body = nn.Sequential(ScaleReplicate([1.0, 3.0]), GroupedJetLinear(2, 1, 8), Activation("sin"),
                         GroupedJetLinear(2, 8, 1), GroupSum(2))
    net = nn.Sequential(sin_network(), body)
    body_ref = copy.deepcopy(body)
    params = list(net.parameters())
    state = {k: v.clone() for k, v in net.state_dict().items()}
    out = apply_mixed_precision(net, "fp16")
    assert out is net
    assert [id(p) for p in out.parameters()] == [id(p) for p in params]
    assert list(out.state_dict()) == list(state)
    assert all(torch.equal(v, state[k]) for k, v in out.state_dict().items())
    kinds = [type(m) for m in out.modules()]
    assert JetLinear not in kinds and GroupedJetLinear not in kinds
    assert kinds.count(MixedPrecisionJetLinear) == 3 and kinds.count(MixedPrecisionGroupedJetLinear) == 2
    # the grouped layers agree with float32 too (a flat multiscale body)
    x = _points()
    ref = jet_channels(body_ref, x)
    with autocast("cpu", "fp16"):
        got = jet_channels(body, x)
    assert torch.isfinite(got).all() and _rel(got, ref) < TOL["fp16"]
    # fp32: unchanged; a single layer is replaced and returned; precision re-applies; unknown precision
    lin = JetLinear(2, 3)
    assert apply_mixed_precision(lin, "fp32") is lin
    new = apply_mixed_precision(lin, "bf16")
    assert isinstance(new, MixedPrecisionJetLinear) and new.weight is lin.weight and new.bias is lin.bias
    assert apply_mixed_precision(new, "fp16") is new and new.precision == "fp16"
    with pytest.raises(ValueError, match="unknown precision"):
        apply_mixed_precision(lin, "half")


def test_fourier_features_run_in_float32():
    """A Fourier feature layer with frequencies ~400 (second derivatives ~1.6e5) runs its jet in float32."""
    torch.manual_seed(1)
    ff = FourierFeatures(1, 4, matrix=torch.tensor([[400.0], [-410.0], [3.0], [1.0]]))
    net = nn.Sequential(ff, JetLinear(8, 1))
    ref_net, state = copy.deepcopy(net), {k: v.clone() for k, v in net.state_dict().items()}
    apply_mixed_precision(net, "fp16")
    assert isinstance(net[0], MixedPrecisionFourierFeatures) and net[0].B is ff.B
    assert all(torch.equal(v, state[k]) for k, v in net.state_dict().items())
    x = _points()
    ref = jet_channels(ref_net, x)
    with autocast("cpu", "fp16"):
        naive = jet_channels(ref_net, x)
        got = jet_channels(net, x)
    assert not torch.isfinite(naive[2]).all()
    assert torch.isfinite(got).all() and _rel(got[2], ref[2]) < TOL["fp16"]


def test_gradients_flow_to_float32_master_weights():
    net, x = apply_mixed_precision(sin_network(), "fp16"), _points(8)
    with autocast("cpu", "fp16"):
        ch = jet_channels(net, x)
    (ch[0].pow(2).mean() + (ch[2] / 400.0 ** 2).pow(2).mean()).backward()
    for p in net.parameters():
        assert p.dtype == torch.float32 and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()


# ---- the loss scaler (one process) -------------------------------------------------------------------------

def _params_with_grad(value: float) -> list[torch.nn.Parameter]:
    p = torch.nn.Parameter(torch.zeros(3))
    p.grad = torch.full((3,), value)
    return [p]


def test_overflows_in_a_row_raise():
    scaler = DynamicLossScaler(init_scale=2.0 ** 10, max_overflows=4)
    for k in range(3):
        assert scaler.check(_params_with_grad(float("inf"))) is False
        assert scaler.scale == 2.0 ** (9 - k) and scaler.consecutive_overflows == k + 1
    assert scaler.check(_params_with_grad(1.0)) is True          # a good step resets the count
    assert scaler.consecutive_overflows == 0
    for _ in range(3):
        assert scaler.check(_params_with_grad(float("nan"))) is False
    with pytest.raises(LossScaleError, match=r"overflow even at loss scale 16,.*--precision bf16 or --precision fp32"):
        scaler.check(_params_with_grad(float("inf")))
    assert issubclass(LossScaleError, FloatingPointError)


def test_growth_after_interval():
    scaler = DynamicLossScaler(init_scale=4.0, growth_interval=3)
    ok = [scaler.check(_params_with_grad(1.0)) for _ in range(2)]
    assert ok == [True, True] and scaler.scale == 4.0
    assert scaler.check(_params_with_grad(float("inf"))) is False and scaler.scale == 2.0   # resets the run
    for _ in range(2):
        scaler.check(_params_with_grad(1.0))
    assert scaler.scale == 2.0
    scaler.check(_params_with_grad(1.0))
    assert scaler.scale == 4.0 and scaler.good_steps == 0
    state = scaler.state_dict()
    other = DynamicLossScaler(growth_interval=3)
    other.load_state_dict(state)
    assert other.scale == 4.0 and other.total_overflows == 1
    with pytest.raises(ValueError):
        DynamicLossScaler(backoff_factor=1.5)


@pytest.mark.parametrize("init_scale", [2.0 ** 16, 1000.0])
def test_unscaled_gradients_equal_unscaled_loss_gradients(init_scale):
    net, x = sin_network(dtype=torch.float64), _points(8).double()

    def loss():
        ch = jet_channels(net, x)
        return ch[0].pow(2).mean() + (ch[1] / 400.0).pow(2).mean() + (ch[2] / 400.0 ** 2).pow(2).mean()

    loss().backward()
    ref = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    scaler = DynamicLossScaler(init_scale=init_scale)
    (loss() * scaler.scale).backward()
    assert scaler.check(net.parameters()) is True
    for p, g in zip(net.parameters(), ref):
        assert _rel(p.grad, g) < 1e-12


# ---- two ranks ---------------------------------------------------------------------------------------------

def test_two_ranks_skip_together(tmp_path):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, str(HERE / "mp_worker.py"), str(tmp_path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        text, _ = p.communicate(timeout=120)
        assert p.returncode == 0, text
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    # step 1: only rank 1's own gradients overflow, yet both ranks skip and halve the scale
    assert r0["local_nonfinite"][0] is False and r1["local_nonfinite"][0] is True
    for r in (r0, r1):
        assert r["decisions"] == [False, True]
        assert r["scales"] == [2.0 ** 16, 2.0 ** 15, 2.0 ** 15]
        assert torch.equal(r["p1"], r["p0"])                  # bit-identical: the step was skipped
        assert not torch.equal(r["p2"], r["p1"])              # step 2 updates
        assert torch.isfinite(r["p2"]).all()
        assert r["raised_at"] == 1 and "overflow even at loss scale" in r["message"]   # the same step on both
    for key in ("p0", "p1", "p2"):
        assert torch.equal(r0[key], r1[key])
