"""Mixed precision for jet networks: a low-precision value channel, float32 derivative channels, and
dynamic loss scaling.

Why the derivative channels stay in float32
-------------------------------------------
A jet carries the value and its input derivatives through the same layers (shared/DESIGN.md, "Why
jets").  The derivative channels grow with the weights: after a layer ``sin(W x + b)`` the second
derivative is ``-sin(a) W_i W_j``, so a sin (SIREN-like) network whose first-layer weights are about 400
has second derivatives of about 400^2 = 1.6e5 -- beyond the float16 maximum 65504, where a naive
all-float16 jet turns them into inf (and the residual into nan).  bfloat16 has float32's range but only
8 significant bits (unit roundoff 2^-8 = 3.9e-3), which a PDE residual -- a difference of large
second derivatives -- cannot afford.  The policy here, applied by :func:`apply_mixed_precision`:

- the value channel's matmul (channel 0, [N, in] -> [N, out], with the bias) runs under autocast in the
  low precision (float16 or bfloat16) when autocast is on for the device;
- the derivative channels' matmul (channels 1 ... C-1: first and second derivatives, the summed
  Laplacian channel) runs in float32 (float64 for a float64 model) with autocast disabled, on the float32
  master weights;
- the jet leaves the layer as one float32 tensor (the low-precision value is widened by the
  concatenation), so activations, heads and residuals compute in float32 on a value rounded once per
  layer to the low precision;
- master weights stay float32 (the very Parameter objects of the original layers: optimizers, state
  dicts and checkpoints are unchanged); gradients arrive in float32.

Cost: two matmuls (and a concatenation) per linear layer instead of one over all channels, and only the
value channel -- 1 of the C = 1 + K + P + L channels -- gets the low-precision throughput, so the
speed-up of the linear layers is at most C / (C - 1 + 1 / r) < C / (C - 1) for a low-precision speed-up r
(1.5 for u, u_x, u_xx; less with more channels); what fp16/bf16 buys here is mostly the memory
and bandwidth of the value path and, on GPUs, tensor cores for it.

Accuracy: the value is rounded to the low precision before every activation, so a pre-activation a is
known to about |a| u (u = 2^-11 = 4.9e-4 for float16, 2^-8 = 3.9e-3 for bfloat16) and sin(a), cos(a)
and every derivative channel built from them carry a phase error of that size.  A high-frequency first
layer (|a| of hundreds, the case where fp16 derivative overflow bites) therefore loses the phase
entirely in fp16 and bf16 alike: for such networks use ``--precision fp32``.  Mixed precision suits
networks whose pre-activations stay O(1) - O(10).

The backward of the low-precision value matmul runs in that precision, where small gradients underflow
and large ones overflow; :class:`DynamicLossScaler` multiplies the loss by a scale s before backward,
divides the gradients by s after, and skips a step (on every rank alike) whose gradients are not
finite (Micikevicius et al., "Mixed precision training", ICLR 2018, sec. 3.2; the dynamic schedule of
MindSpore's ``DynamicLossScaleManager`` and ``torch.amp.GradScaler``).  For fp32 and bf16 runs (float32's
exponent range) a scaler is optional; fp16 needs one.

Autocast on CPU (checked with torch 2.13, CPU build): ``torch.autocast("cpu", dtype=torch.float16)`` and
``dtype=torch.bfloat16`` are both supported; matmul / linear run in the low precision and return it,
and their backward returns float32 gradients to float32 parameters.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from elecsolver.jets import Jet
from elecsolver.networks import FourierFeatures, GroupedJetLinear, JetLinear, grouped_matmul

__all__ = [
    "PRECISIONS",
    "DynamicLossScaler",
    "LossScaleError",
    "MixedPrecisionFourierFeatures",
    "MixedPrecisionGroupedJetLinear",
    "MixedPrecisionJetLinear",
    "apply_mixed_precision",
    "autocast",
    "low_dtype",
]

PRECISIONS = ("fp32", "bf16", "fp16")

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    return precision


def low_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of ``precision``: None for "fp32", torch.bfloat16 for "bf16", torch.float16 for "fp16".

    Raises
    ------
    ValueError
        For a precision not in :data:`PRECISIONS`.
    """
    return _DTYPES.get(_check_precision(precision))


def autocast(device_type: str | torch.device, precision: str):
    """The context manager to run the forward (the loss terms) in.

    Parameters
    ----------
    device_type : str or torch.device
        "cpu", "cuda", ... (a device's ``type`` is used).
    precision : {"fp32", "bf16", "fp16"}

    Returns
    -------
    context manager
        ``contextlib.nullcontext()`` for "fp32"; ``torch.autocast(device_type, dtype=torch.bfloat16 or
        torch.float16)`` otherwise.  On CPU both low precisions are supported (torch 2.13); whether a
        GPU runs bf16 fast depends on the GPU (torch.autocast warns and disables itself where it is not
        supported).

    Raises
    ------
    ValueError
        For an unknown precision, or a device type without autocast support.
    """
    dtype = low_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    dev = getattr(device_type, "type", device_type)
    if not torch.amp.autocast_mode.is_autocast_available(dev):
        raise ValueError(f"autocast is not available on device type {dev!r}; use precision 'fp32'")
    return torch.autocast(dev, dtype=dtype)


def _split_value(channels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """channels [C, N, f] -> value [N, f], derivative channels [C - 1, N, f]."""
    v, rest = torch.split(channels, [1, channels.shape[0] - 1], dim=0)
    return v[0], rest


def _wide(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the derivative channels' matmul: at least float32."""
    return torch.promote_types(dtype, torch.float32)


class _MixedPrecisionLayer:
    """What the precision-aware layers share: the precision and the value channel's autocast."""

    precision: str

    @classmethod
    def from_module(cls, layer: nn.Module, precision: str):
        """A precision-aware layer holding ``layer``'s very Parameter and buffer objects (so optimizers and state
        dicts are unchanged) and its other attributes (feature counts, groups).

        Raises
        ------
        ValueError
            For a precision other than "bf16" or "fp16".
        """
        if precision not in _DTYPES:
            raise ValueError(f"a mixed-precision layer needs precision 'bf16' or 'fp16', got {precision!r}")
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        for k, v in vars(layer).items():
            if not k.startswith("_"):
                setattr(new, k, v)
        for k, p in layer._parameters.items():  # None entries too (a linear layer without bias)
            new.register_parameter(k, p)
        for k, b in layer.named_buffers(recurse=False):
            new.register_buffer(k, b)
        new.precision = precision
        return new

    @property
    def low_dtype(self) -> torch.dtype:
        return _DTYPES[self.precision]

    def _value_context(self, device: torch.device):
        """Autocast in the layer's low precision while autocast is on for ``device`` (the caller's
        :func:`autocast`); outside it the value channel runs in the master precision too."""
        if torch.is_autocast_enabled(device.type):
            return torch.autocast(device.type, dtype=self.low_dtype)
        return contextlib.nullcontext()

    @staticmethod
    def _wide_context(device: torch.device):
        return torch.autocast(device.type, enabled=False)


class MixedPrecisionJetLinear(_MixedPrecisionLayer, JetLinear):
    """:class:`~elecsolver.networks.JetLinear` with the mixed-precision jet policy of this module.

    On a jet [C, N, in]: the value channel [N, in] -> [N, out] (with the bias) under autocast in the low
    precision, the derivative channels [C - 1, N, in] -> [C - 1, N, out] in float32 (at least) with autocast
    off; the result is one tensor [C, N, out] of the wider dtype.  On a plain tensor [N, in]: nn.Linear as
    usual (autocast applies if it is on).  Build it with :meth:`from_module`, which shares the weights.
    """


    def forward(self, x):
        if not isinstance(x, Jet):
            return super().forward(x)
        value, rest = _split_value(x.channels)
        with self._value_context(value.device):
            v = nn.functional.linear(value, self.weight, self.bias)              # [N, out], low precision
        with self._wide_context(rest.device):
            dt = _wide(torch.promote_types(rest.dtype, self.weight.dtype))
            r = torch.matmul(rest.to(dt), self.weight.to(dt).t())                 # [C - 1, N, out]
        return x.like(torch.cat([v.unsqueeze(0).to(r.dtype), r], dim=0))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, precision={self.precision}"


class MixedPrecisionGroupedJetLinear(_MixedPrecisionLayer, GroupedJetLinear):
    """:class:`~elecsolver.networks.GroupedJetLinear` with the mixed-precision jet policy of this module.

    Jets [C, N, G in] -> [C, N, G out]: the value channel under autocast in the low precision, the
    derivative channels in float32 (at least) with autocast off.  Plain tensors: as the original (autocast
    applies if it is on).  Build it with :meth:`from_module`, which shares the weights.
    """


    def forward(self, x):
        if not isinstance(x, Jet):
            return super().forward(x)
        value, rest = _split_value(x.channels)
        with self._value_context(value.device):
            v = (self._matmul(value) + self.bias).flatten(-2)                      # [N, G out], low precision
        with self._wide_context(rest.device):
            dt = _wide(torch.promote_types(rest.dtype, self.weight.dtype))
            r = grouped_matmul(rest.to(dt), self.weight.to(dt)).flatten(-2)       # [C - 1, N, G out]
        return x.like(torch.cat([v.unsqueeze(0).to(r.dtype), r], dim=0))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, precision={self.precision}"


class MixedPrecisionFourierFeatures(_MixedPrecisionLayer, FourierFeatures):
    """:class:`~elecsolver.networks.FourierFeatures` that runs its jet entirely in float32 (autocast off).

    Its matmul x B^T is d-wide (tiny) and feeds sin / cos directly, whose phase needs more than 11 bits;
    and B^2 in the second-derivative channels can pass 65504 as the first layer of a sin network does.
    Plain tensors are also mapped with autocast off.  The buffer B is shared with the original.
    """


    def forward(self, x):
        t = x.channels if isinstance(x, Jet) else x
        with self._wide_context(t.device):
            dt = _wide(t.dtype)
            return super().forward(x.like(t.to(dt)) if isinstance(x, Jet) else t.to(dt))


_REPLACE: dict[type, type] = {
    JetLinear: MixedPrecisionJetLinear,
    GroupedJetLinear: MixedPrecisionGroupedJetLinear,
    FourierFeatures: MixedPrecisionFourierFeatures,
}


def _convert(module: nn.Module, precision: str) -> nn.Module:
    if isinstance(module, _MixedPrecisionLayer):
        module.precision = precision
        return module
    cls = _REPLACE.get(type(module))  # exact types: a subclass (e.g. a sharded layer) has its own forward
    return module if cls is None else cls.from_module(module, precision)


def apply_mixed_precision(model: nn.Module, precision: str) -> nn.Module:
    """Make ``model``'s linear jet layers precision-aware, in place; returns the model.

    For "bf16" and "fp16" every :class:`~elecsolver.networks.JetLinear` and
    :class:`~elecsolver.networks.GroupedJetLinear` (exact types, at any depth) is replaced by its
    ``MixedPrecision*`` version -- value channel in the low precision under autocast, derivative channels
    in float32 with autocast off (see the module docstring for the policy, its cost and its accuracy) --
    and every :class:`~elecsolver.networks.FourierFeatures` by a version that runs in float32.  The new
    layers hold the same Parameter (and buffer) objects, so ``model.parameters()``, an optimizer built on
    them and ``model.state_dict()`` (keys and tensors) are unchanged.  Forward hooks registered on a
    replaced layer are not carried over.  Applying it again changes the precision of the converted layers.
    For "fp32" the model is returned unchanged.

    The layers only act differently under autocast: run the forward inside :func:`autocast` (outside it
    the converted model computes in its own dtype, two matmuls per layer).  Layers of other types
    (activations, heads, a user module in ``FuncJet``) follow autocast's own rules; an ``nn.Linear``
    inside a ``FuncJet`` runs every channel in the low precision.

    Parameters
    ----------
    model : nn.Module
        Any module tree (a :class:`~elecsolver.networks.Network`, an ``nn.Sequential`` body, or a single
        layer, in which case the returned module is its replacement).
    precision : {"fp32", "bf16", "fp16"}

    Returns
    -------
    nn.Module
        ``model`` itself, or the replacement when ``model`` is itself a replaced layer.

    Raises
    ------
    ValueError
        For an unknown precision.
    """
    _check_precision(precision)
    if precision == "fp32":
        return model
    root = _convert(model, precision)
    stack = [root]
    while stack:
        parent = stack.pop()
        for name, child in list(parent._modules.items()):
            if child is None:
                continue
            new = _convert(child, precision)
            if new is not child:
                parent._modules[name] = new
            stack.append(new)
    return root


class LossScaleError(FloatingPointError):
    """The gradients overflowed for ``max_overflows`` steps in a row although the loss scale was backed off
    each time: the loss or its derivatives themselves overflow the precision, not the scaled gradients."""


class DynamicLossScaler:
    """Dynamic loss scaling with a decision shared by every rank.

    The training step multiplies the loss by :attr:`scale` before backward and calls :meth:`check` after the
    gradient sync; :meth:`check` divides every gradient by the scale and returns whether to take the step.
    The schedule is that of Micikevicius et al., "Mixed precision training", ICLR 2018 (sec. 3.2) as in
    MindSpore's ``DynamicLossScaleManager(init_loss_scale, scale_factor, scale_window)`` and
    ``torch.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval)``: on an overflow the
    scale is multiplied by ``backoff_factor`` and the step is skipped; after ``growth_interval`` steps in a
    row without overflow it is multiplied by ``growth_factor``.  As GradScaler (and unlike MindSpore, which
    keeps the scale >= 1) there is no floor; instead ``max_overflows`` overflows in a row stop the run with
    :class:`LossScaleError`, since then not the scaled gradients but the loss itself is out of range.

    Parameters
    ----------
    init_scale : float
        The first scale s (dimensionless, > 0, finite); 2^16 by default (GradScaler's; MindSpore uses 2^24).
        Powers of two make the scaling and unscaling exact.
    growth_factor : float
        > 1: s *= growth_factor after ``growth_interval`` good steps in a row (MindSpore's ``scale_factor``).
    backoff_factor : float
        In (0, 1): s *= backoff_factor on an overflow (MindSpore: 1 / ``scale_factor``).
    growth_interval : int
        >= 1, the number of good steps in a row before growing (MindSpore's ``scale_window``).
    max_overflows : int
        >= 1: the overflow that makes this many in a row raises :class:`LossScaleError`.
    all_reduce_max : callable, optional
        ``all_reduce_max(tensor)``: an in-place MAX all-reduce over ALL ranks of the job (every data, tensor
        and pipeline rank, e.g. ``DeviceMesh.all_reduce_max`` over "world" or
        ``torch.distributed.all_reduce(t, op=ReduceOp.MAX)``); its tensor lives on the gradients' device.
        None: one process.

    Attributes
    ----------
    scale : float
        The current loss scale.
    good_steps : int
        Steps without overflow since the last overflow or growth.
    consecutive_overflows : int
        Overflows in a row (0 after a good step).
    total_overflows : int
        All skipped steps so far.

    Raises
    ------
    ValueError
        For a parameter out of its range.
    """

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 1000, max_overflows: int = 20,
                 all_reduce_max: Callable[[torch.Tensor], object] | None = None):
        init_scale, growth_factor, backoff_factor = float(init_scale), float(growth_factor), float(backoff_factor)
        if not (math.isfinite(init_scale) and init_scale > 0):
            raise ValueError(f"init_scale must be positive and finite, got {init_scale}")
        if not (math.isfinite(growth_factor) and growth_factor > 1):
            raise ValueError(f"growth_factor must be > 1, got {growth_factor}")
        if not 0 < backoff_factor < 1:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(f"growth_interval must be an integer >= 1, got {growth_interval}")
        if int(max_overflows) != max_overflows or max_overflows < 1:
            raise ValueError(f"max_overflows must be an integer >= 1, got {max_overflows}")
        self.init_scale = init_scale
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval, self.max_overflows = int(growth_interval), int(max_overflows)
        self.all_reduce_max = all_reduce_max
        self.scale = init_scale
        self.good_steps = 0
        self.consecutive_overflows = 0
        self.total_overflows = 0

    def check(self, params: Iterable[torch.nn.Parameter]) -> bool:
        """Unscale the gradients in place and decide, on every rank alike, whether to step.

        Every ``p.grad`` that is not None is divided by :attr:`scale`; then this rank's flag (1 if any
        gradient element is inf or nan, else 0) is MAX-reduced over all ranks.  On an overflow anywhere the
        scale is backed off and False is returned: the caller skips the update (parameters untouched; the
        gradients are left unscaled, as they are).  Otherwise the overflow count is reset, the scale grows
        after ``growth_interval`` good steps in a row, and True is returned.  A collective when
        ``all_reduce_max`` is given: every rank must call it at the same step.

        Parameters
        ----------
        params : iterable of Parameter
            This rank's parameters (after the gradient sync).

        Returns
        -------
        bool
            True to take the optimizer step, False to skip it; the same on every rank.

        Raises
        ------
        LossScaleError
            On the ``max_overflows``-th overflow in a row (on every rank alike).
        """
        grads = [p.grad for p in params if p.grad is not None]
        scale = self.scale
        if grads:
            found = torch.zeros((), dtype=torch.float32, device=grads[0].device)
            for g in grads:
                g.div_(scale)
                found = torch.maximum(found, (~torch.isfinite(g)).any().to(device=found.device, dtype=found.dtype))
            flag = found.reshape(1)
        else:
            flag = torch.zeros(1, dtype=torch.float32)
        if self.all_reduce_max is not None:
            self.all_reduce_max(flag)
        overflow = bool(flag.item() > 0)
        if overflow:
            self.scale = scale * self.backoff_factor
            self.good_steps = 0
            self.consecutive_overflows += 1
            self.total_overflows += 1
            if self.consecutive_overflows >= self.max_overflows:
                raise LossScaleError(
                    f"non-finite gradients in {self.consecutive_overflows} steps in a row although the loss scale "
                    f"was backed off each time: the loss or its derivatives overflow even at loss scale {scale:g}, so "
                    "the scaled gradients are not the cause (float16's range, max 65504, is too small for this "
                    "problem, or the run diverged); use --precision bf16 or --precision fp32, or a lower "
                    "learning rate")
            return False
        self.consecutive_overflows = 0
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            grown = self.scale * self.growth_factor
            if math.isfinite(grown) and grown <= torch.finfo(torch.float32).max:
                self.scale = grown
            self.good_steps = 0
        return True

    def state_dict(self) -> dict:
        """The scale, the counters and the hyperparameters (plain Python numbers)."""
        return {"scale": self.scale, "good_steps": self.good_steps,
                "consecutive_overflows": self.consecutive_overflows, "total_overflows": self.total_overflows,
                "init_scale": self.init_scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "max_overflows": self.max_overflows}

    def load_state_dict(self, state: dict) -> None:
        """Restore the scale and the counters of :meth:`state_dict`; the hyperparameters stay those this
        scaler was built with (the options of the resumed run win).

        Raises
        ------
        KeyError
            If ``state`` lacks "scale".
        ValueError
            If the scale is not positive and finite.
        """
        scale = float(state["scale"])
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"a loss-scaler state needs a positive finite scale, got {scale}")
        self.scale = scale
        self.good_steps = int(state.get("good_steps", 0))
        self.consecutive_overflows = int(state.get("consecutive_overflows", 0))
        self.total_overflows = int(state.get("total_overflows", 0))

    def __repr__(self) -> str:
        return (f"DynamicLossScaler(scale={self.scale:g}, growth_factor={self.growth_factor:g}, "
                f"backoff_factor={self.backoff_factor:g}, growth_interval={self.growth_interval}, "
                f"max_overflows={self.max_overflows})")
