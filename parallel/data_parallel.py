"""Data parallelism over spatial shards: the process group and the communicator the trainer uses.

Each rank holds a spatially compact part of every constraint's points (elecsolver.sharding) and
computes its local sum of squared residuals over the *global* point count; gradients are then
all-reduced by SUM, so the step equals one process on all points (shared/DESIGN.md).
"""

from __future__ import annotations

import datetime
import logging
import os

import torch
import torch.distributed as dist

from .launch import LaunchError, LaunchInfo, discover, rendezvous, threads_per_rank

__all__ = ["DataParallelComm", "apply_data_parallel", "init_data_parallel", "shutdown"]

log = logging.getLogger(__name__)


class DataParallelComm:
    """The trainer's communicator over the default ``torch.distributed`` group.

    Attributes
    ----------
    rank, world : int
    device : torch.device
        Where collectives' tensors live (CPU for gloo, this rank's GPU for NCCL).
    """

    def __init__(self, info: LaunchInfo, device: torch.device):
        self.rank, self.world, self.info, self.device = info.rank, info.world, info, device

    def all_reduce_sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def broadcast_(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        dist.broadcast(tensor, src=src)
        return tensor

    def barrier(self) -> None:
        dist.barrier()


def init_data_parallel(device: str = "cpu", timeout_s: float = 1800.0):
    """Set threads, join the job's process group (gloo on CPU, NCCL on GPU) and return
    ``(comm, info, device)``; ``comm`` is None for a one-process run.

    Raises
    ------
    LaunchError
        If the ranks disagree on the world size or no rendezvous is found.
    """
    info = discover()
    if os.environ.get("OMP_NUM_THREADS"):  # the user's choice wins (torch reads it at start-up)
        log.info("using OMP_NUM_THREADS=%s threads per rank", os.environ["OMP_NUM_THREADS"])
    else:
        torch.set_num_threads(threads_per_rank(info))
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", info.local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(dev)
    if info.world == 1:
        return None, info, dev
    store = rendezvous(info)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    kwargs = {"store": store} if store is not None else {"init_method": "env://"}
    dist.init_process_group(backend, rank=info.rank, world_size=info.world,
                            timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    sizes = torch.tensor([info.world, -info.world], dtype=torch.int64, device=dev)
    dist.all_reduce(sizes, op=dist.ReduceOp.MAX)
    if int(sizes[0]) != info.world or int(-sizes[1]) != info.world:
        raise LaunchError(f"ranks disagree on the world size (between {int(-sizes[1])} and {int(sizes[0])})")
    log.info("rank %d of %d (%s, %s, %d threads)", info.rank, info.world, info.launcher, backend,
             torch.get_num_threads())
    return DataParallelComm(info, dev), info, dev


def apply_data_parallel(model: torch.nn.Module, comm: DataParallelComm | None):
    """Make ``model`` data parallel over ``comm`` and return the trainer's context.

    The parameters are broadcast from rank 0 (an identical start on every rank); the context's
    gradient-sync hook sums every gradient over the ranks in one flat all-reduce (parameters a rank did
    not touch count as zeros), so that with each rank's loss carrying the global denominators the step
    equals one process on all points.  ``comm=None`` (one process) gives the one-process context.
    """
    from elecsolver.training.context import RunContext

    if comm is None:
        return RunContext()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    return RunContext(comm.rank, comm.world, comm.all_reduce_sum_, comm.broadcast_, comm.barrier)


def shutdown(clean: bool = True) -> None:
    """Leave the process group, if one was joined.

    After a clean run (``clean=True``) all ranks meet at a barrier first: a rank that tears down
    gloo while a peer still holds the connection can make that peer's gloo thread abort the process
    at exit ("terminate called without an active exception", seen once in the 2-rank tests).  After
    an error (``clean=False``) there is no barrier, since the other ranks may never reach it.
    """
    if dist.is_available() and dist.is_initialized():
        try:
            if clean:
                dist.barrier()
        finally:
            dist.destroy_process_group()
