"""The small protocol the trainer uses to talk to other ranks.

The core never imports ``torch.distributed``; ``parallel/`` supplies an implementation of
:class:`Communicator` for data-parallel runs.  :class:`SingleProcess` is the one-process default.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["Communicator", "SingleProcess"]


class Communicator(Protocol):
    """What the trainer needs from a data-parallel group."""

    rank: int
    world: int

    def all_reduce_sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over ranks, in place; return it."""

    def broadcast_(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Overwrite ``tensor`` with rank ``src``'s, in place; return it."""

    def barrier(self) -> None:
        """Wait for every rank."""


class SingleProcess:
    """A group of one: every collective is the identity."""

    rank = 0
    world = 1

    def all_reduce_sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def broadcast_(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        return tensor

    def barrier(self) -> None:
        return None
