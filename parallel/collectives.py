"""The collectives every part of ``parallel/`` calls: one implementation, with host staging where the backend needs it.

NCCL moves only CUDA tensors and needs one GPU per rank (two ranks on one device are refused at the first
collective); gloo moves CPU tensors and, of the CUDA ones, only through ``all_reduce`` and ``broadcast`` (the
backend table of the ``torch.distributed`` documentation).  :func:`choose_backend` picks NCCL when every rank of a
node has a GPU of its own and gloo otherwise (a CPU run, or several ranks sharing one GPU, e.g. the equality tests
on one GPU).  The functions here then copy a tensor whose device the group's backend cannot take to the device it
can (a CUDA tensor to the host under gloo, a CPU tensor to the current GPU under NCCL), run the collective there,
and copy the result back in place, so that callers hand over the tensors they hold wherever they live.  The copies
cost two transfers per call; they are what a shared GPU costs, and none are made when the devices already match.

Every call runs inside :func:`elecsolver.parallel.failure.collective`, so that a collective failing because another
rank failed names that rank and its error.
"""

from __future__ import annotations

import logging

import torch
import torch.distributed as dist

from .failure import collective

__all__ = ["all_gather", "all_reduce", "backend_device_type", "barrier", "broadcast", "choose_backend", "isend",
           "recv"]

log = logging.getLogger(__name__)


def choose_backend(device: torch.device, local_world: int, gpus: int | None = None) -> str:
    """The ``torch.distributed`` backend for ranks computing on ``device``, ``local_world`` of them on this node.

    Parameters
    ----------
    device : torch.device
        This rank's compute device.
    local_world : int
        Ranks on this node.
    gpus : int, optional
        GPUs visible on this node (default ``torch.cuda.device_count()``).

    Returns
    -------
    str
        "nccl" for CUDA with at least one GPU per rank of the node; "gloo" otherwise (CPU, or ranks sharing a GPU,
        which NCCL refuses: its collectives then go through the host, see the module docstring).
    """
    if device.type != "cuda":
        return "gloo"
    gpus = torch.cuda.device_count() if gpus is None else gpus
    return "nccl" if local_world <= gpus else "gloo"


def backend_device_type(group=None) -> str:
    """The device type the backend of ``group`` (default: the world group) moves tensors on: "cuda" for NCCL,
    "cpu" otherwise."""
    return "cuda" if dist.get_backend(group) == "nccl" else "cpu"


def _staged(tensor: torch.Tensor, group) -> torch.Tensor:
    """``tensor`` itself if the backend takes its device, else a copy on the device it takes."""
    want = backend_device_type(group)
    if tensor.device.type == want:
        return tensor
    return tensor.detach().to("cuda" if want == "cuda" else "cpu", copy=True)


def all_reduce(tensor: torch.Tensor, op=dist.ReduceOp.SUM, group=None) -> torch.Tensor:
    """Reduce ``tensor`` in place over ``group`` (default the world group) with ``op``; returns it."""
    buf = _staged(tensor, group)
    with collective():
        dist.all_reduce(buf, op=op, group=group)
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def broadcast(tensor: torch.Tensor, src: int, group=None) -> torch.Tensor:
    """Overwrite ``tensor`` in place with global rank ``src``'s; returns it."""
    buf = _staged(tensor, group)
    with collective():
        dist.broadcast(buf, src=src, group=group)
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def all_gather(tensor: torch.Tensor, group=None) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (same shape on every rank), in group-rank order, on ``tensor``'s device."""
    buf = _staged(tensor.contiguous(), group)
    parts = [torch.empty_like(buf) for _ in range(dist.get_world_size(group))]
    with collective():
        dist.all_gather(parts, buf, group=group)
    return [p.to(tensor.device) for p in parts] if buf.device != tensor.device else parts


def isend(tensor: torch.Tensor, dst: int, group=None):
    """Start sending ``tensor`` to global rank ``dst``; returns ``(work, buffer)``: keep the buffer alive until
    ``work.wait()`` has returned."""
    buf = _staged(tensor.detach().contiguous(), group)
    with collective():
        work = dist.isend(buf, dst=dst, group=group)
    return work, buf


def recv(tensor: torch.Tensor, src: int, group=None) -> torch.Tensor:
    """Receive into ``tensor`` (in place) from global rank ``src``; returns it."""
    buf = _staged(tensor, group)
    with collective():
        dist.irecv(buf, src=src, group=group).wait()
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def barrier(group=None) -> None:
    """Wait for every rank of ``group``."""
    with collective():
        dist.barrier(group=group)
