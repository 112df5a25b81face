"""The small context a trainer is handed: who it is among the ranks and how to talk to them.

The core never imports ``torch.distributed``: ``elecsolver.parallel`` composes a :class:`RunContext`
(from ``cli.py`` or :func:`elecsolver.train`) whose functions do the collectives; a one-process run
uses the default, where every collective is the identity.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["RunContext", "launched_world_size"]


def _identity(tensor: torch.Tensor, *args) -> torch.Tensor:
    return tensor


def _nothing(*args) -> None:
    return None


@dataclass
class RunContext:
    """Rank, world size and the collectives the trainer needs.

    Attributes
    ----------
    rank, world : int
        This rank and the number of data-parallel ranks.
    all_reduce_sum : callable
        ``all_reduce_sum(tensor) -> tensor``: sum over the data-parallel ranks, in place.
    broadcast : callable
        ``broadcast(tensor, src) -> tensor``: overwrite with rank ``src``'s, in place.
    barrier : callable
        Wait for every rank.
    sync_gradients : callable, optional
        ``sync_gradients(params)``: make every parameter's ``.grad`` the sum over ranks (parameters a rank
        did not touch count as zeros).  Default: one flat all-reduce of all gradients by ``all_reduce_sum``.
    is_writer : bool
        Whether this rank writes files (default: rank 0).

    The hooks below are how ``elecsolver.parallel`` changes the step from outside (all optional; None keeps
    the one-device behaviour):

    make_forward_backward : callable, optional
        ``make_forward_backward(constraints, inputs, outputs, method, compiled=False) -> fb`` with
        ``fb(batches, scale) -> Tensor [n_terms]``: run the loss on this rank's batches, accumulate ``scale`` times its
        gradient into ``.grad`` and return the detached, unscaled local terms (pipeline schedules; ``compiled``: with
        the compute between its sends and receives compiled).
    make_optimizer : callable, optional
        ``make_optimizer(params, options, compiled) -> Optimizer`` (optimizer-state sharding).
    optimizer_state_dict : callable, optional
        ``optimizer_state_dict(optimizer) -> dict or None``: collective; the full state on the checkpoint
        writer, None elsewhere (a sharded optimizer consolidates its shards).
    loss_scaler : object, optional
        With ``scale`` (float), ``check(params) -> bool`` (unscale the gradients, decide on every rank alike
        whether to step), ``state_dict()`` and ``load_state_dict()``: dynamic loss scaling.
    autocast : callable, optional
        ``autocast() -> context manager`` around every forward of the loss (mixed precision).
    gather_model : callable, optional
        ``gather_model(model) -> nn.Module``: collective; an ordinary one-device network equal to the
        (sharded or split) ``model``, for evaluation and export.
    load_model_state : callable, optional
        ``load_model_state(model, state)``: load the state of a one-device network into ``model``.
    check_model : nn.Module, optional
        A one-device network equal to the model, on which residual shapes are checked before training
        (for a model split into pipeline stages, which cannot run a whole residual alone).
    checkpoint_name : str
        File name of this rank's checkpoint (ranks holding different shards write different files).
    checkpoint_writer : bool, optional
        Whether this rank writes ``checkpoint_name`` (default: ``is_writer``).
    model_parallel : int
        Ranks that share one model replica (tensor x pipeline parallel; 1 for data parallelism only).
    stop_vote : callable, optional
        ``stop_vote(signum) -> signum``: collective over every rank of the launch; the largest pending stop request
        (:mod:`elecsolver.training.interrupt`), so that all ranks stop at the same step.  None: one process.
    solo : bool
        This process trains alone on purpose although a launcher started several (e.g. a one-process reference
        computed on rank 0); without it the Trainer refuses a one-rank context under a multi-rank launcher.
    """

    rank: int = 0
    world: int = 1
    all_reduce_sum: Callable[[torch.Tensor], torch.Tensor] = _identity
    broadcast: Callable[..., torch.Tensor] = _identity
    barrier: Callable[[], None] = _nothing
    sync_gradients: Callable[[list[torch.nn.Parameter]], None] | None = None
    is_writer: bool | None = None
    make_forward_backward: Callable | None = None
    make_optimizer: Callable | None = None
    optimizer_state_dict: Callable | None = None
    loss_scaler: object | None = None
    autocast: Callable | None = None
    gather_model: Callable | None = None
    load_model_state: Callable | None = None
    check_model: torch.nn.Module | None = None
    checkpoint_name: str = "checkpoint.pt"
    checkpoint_writer: bool | None = None
    model_parallel: int = 1
    stop_vote: Callable[[int], int] | None = None
    solo: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def capabilities(self) -> set[str]:
        """The parallel capabilities (:mod:`elecsolver.capabilities`) this context's hooks apply: "tp" / "pp" from
        the layout ``elecsolver.parallel`` records in ``extra`` (a model split without one counts as "tp", a
        forward-backward hook as "pp"), "zero" for a sharded optimizer, "fp16" for a loss scaler and "bf16" for
        autocast without one."""
        layout = self.extra.get("layout", {})
        on = {n for n in ("tp", "pp") if layout.get(n, 1) > 1}
        if self.make_forward_backward is not None:
            on.add("pp")
        if self.model_parallel > 1 and not on:
            on.add("tp")
        if self.make_optimizer is not None:
            on.add("zero")
        if self.loss_scaler is not None:
            on.add("fp16")
        elif self.autocast is not None:
            on.add("bf16")
        return on

    def __post_init__(self):
        if self.is_writer is None:
            self.is_writer = self.rank == 0
        if self.checkpoint_writer is None:
            self.checkpoint_writer = self.is_writer
        if self.sync_gradients is None:
            self.sync_gradients = self._flat_sum

    @classmethod
    def from_comm(cls, comm, **hooks) -> RunContext:
        """A data-parallel context over a device mesh (``elecsolver.parallel.DeviceMesh``, or any object with its
        ``dp_index``, ``dp``, ``all_reduce_sum(t, axis)``, ``broadcast(t, src_index, axis)`` and ``barrier()``):
        the collectives run over its ``"dp"`` axis; ``hooks`` are further fields.  None: one process."""
        if comm is None:
            return cls(**hooks)
        return cls(comm.dp_index, comm.dp, functools.partial(comm.all_reduce_sum, axis="dp"),
                   lambda t, src=0: comm.broadcast(t, src, "dp"), comm.barrier, **hooks)

    def broadcast_model(self, model: torch.nn.Module) -> None:
        """Overwrite ``model``'s parameters and buffers in place with data-parallel rank 0's: the one place where a
        run's ranks are given an identical start (a no-op on one process)."""
        if self.world == 1:
            return
        for t in list(model.parameters()) + list(model.buffers()):
            self.broadcast(t.data, 0)

    def _flat_sum(self, params: list[torch.nn.Parameter]) -> None:
        if self.world == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.all_reduce_sum(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n


_WORLD_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE")


def launched_world_size() -> int:
    """The number of ranks a launcher (torchrun, mpirun, srun with PMI) started, from its environment (1 if none)."""
    for var in _WORLD_VARS:
        try:
            n = int(os.environ.get(var, "1"))
        except ValueError:
            continue
        if n > 1:
            return n
    return 1
