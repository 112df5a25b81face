"""Recompute (activation checkpointing) for jet networks, per block of body layers.

A block's intermediate tensors (every jet channel of every layer inside it, and what an activation keeps for its
backward: sigma', sigma'' and the products of the chain rule) are not stored in the forward pass; the block is run
again from its input during the backward pass (Chen, Xu, Zhang & Guestrin, "Training deep nets with sublinear memory
cost", arXiv:1604.06174, 2016), with ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``.  Because input
derivatives travel forward in the jet, the loss needs only a first-order backward, which is what non-reentrant
checkpointing supports; the gradients are the same to round-off (the recomputed forward is the same arithmetic).

The body keeps its layers and their names (``body.3.weight`` stays ``body.3.weight``), so state dicts, pipeline
splits and checkpoints are unchanged: only the body's ``forward`` changes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from elecsolver.jets import Jet
from elecsolver.networks import Activation

__all__ = ["RecomputeSequential", "apply_recompute", "blocks_of"]


def blocks_of(layers: Sequence[nn.Module], size: int | None = None) -> list[tuple[int, int]]:
    """Layer ranges (start, stop) of the recompute blocks.

    ``size=None``: one block per layer followed by its activations (a linear layer and its activation, the
    unit whose jet intermediates dominate the memory); an integer: blocks of ``size`` consecutive layers.

    Raises
    ------
    ValueError
        If ``size`` < 1.
    """
    n = len(layers)
    if size is not None:
        if size < 1:
            raise ValueError(f"a recompute block needs at least one layer, got {size}")
        return [(a, min(a + size, n)) for a in range(0, n, size)]
    out, start = [], 0
    for i in range(1, n + 1):
        if i == n or not isinstance(layers[i], Activation):
            out.append((start, i))
            start = i
    return out


class RecomputeSequential(nn.Sequential):
    """An ``nn.Sequential`` whose forward runs each block of layers under non-reentrant checkpointing while
    gradients are being recorded (and as usual otherwise, e.g. at evaluation under ``torch.no_grad``).

    Parameters
    ----------
    layers : sequence of nn.Module, or mapping name -> nn.Module
        The body's layers (kept as children under their names, by default their indices).
    block : int, optional
        Layers per block (default: see :func:`blocks_of`).

    Shapes: as the wrapped body ([N, d] -> [N, c], jets [C, N, d] -> [C, N, c]).
    """

    def __init__(self, layers: Sequence[nn.Module] | Mapping[str, nn.Module], block: int | None = None):
        named = OrderedDict(layers) if isinstance(layers, Mapping) else \
            OrderedDict((str(k), layer) for k, layer in enumerate(layers))
        super().__init__(named)  # the layers keep their names (a pipeline stage's are its global indices)
        self.blocks = blocks_of(list(named.values()), block)

    def _run(self, start: int, stop: int, x):
        for k in range(start, stop):
            x = self[k](x)
        return x

    def forward(self, x):
        if not torch.is_grad_enabled():
            return self._run(0, len(self), x)
        for a, b in self.blocks:
            if isinstance(x, Jet):
                like = x

                def fn(channels, a=a, b=b, like=like):
                    return self._run(a, b, like.like(channels)).channels

                x = like.like(checkpoint(fn, x.channels, use_reentrant=False))
            else:
                x = checkpoint(lambda t, a=a, b=b: self._run(a, b, t), x, use_reentrant=False)
        return x

    def extra_repr(self) -> str:
        return f"recompute blocks={self.blocks}"


def apply_recompute(model: nn.Module, block: int | None = None) -> nn.Module:
    """Make ``model``'s body (``model.body`` of a Network or a pipeline stage, else ``model`` if it is an
    ``nn.Sequential``) recompute its blocks in the backward pass; returns ``model`` (changed in place; an
    ``nn.Sequential`` passed directly is returned as a new RecomputeSequential with the same layers).

    Raises
    ------
    TypeError
        If there is no ``nn.Sequential`` body.
    """
    body = getattr(model, "body", model)
    if not isinstance(body, nn.Sequential):
        raise TypeError(f"recompute needs a flat nn.Sequential body, got {type(body).__name__}")
    new = RecomputeSequential(OrderedDict(body.named_children()), block)
    if body is model:
        return new
    model.body = new
    return model
