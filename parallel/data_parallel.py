"""Data parallelism over spatial shards: the process group and the communicator the trainer uses.

Each rank holds a spatially compact part of every constraint's points (elecsolver.sharding) and
computes its local sum of squared residuals over the *global* point count; gradients are then
all-reduced by SUM, so the step equals one process on all points (shared/DESIGN.md).

A rank that fails makes the others stop within seconds, naming it and its error
(:mod:`elecsolver.parallel.failure`); :func:`shutdown` leaves in an order that lets every process exit
cleanly (see there).
"""

from __future__ import annotations

import datetime
import logging
import os
import sys

import torch
import torch.distributed as dist

from . import collectives, failure
from .failure import RankFailure, collective
from .launch import LaunchError, discover, rendezvous, threads_per_rank
from .mesh import DeviceMesh

__all__ = ["RankFailure", "apply_data_parallel", "init_data_parallel", "shutdown"]

log = logging.getLogger(__name__)


def init_data_parallel(device: str = "cpu", timeout_s: float = 1800.0):
    """Set threads, join the job's process group (gloo on CPU; on GPUs NCCL when every rank of a node has a GPU of its
    own, else gloo, see :func:`elecsolver.parallel.collectives.choose_backend`), start the failure watchdog
    (:mod:`elecsolver.parallel.failure`) and return ``(comm, info, device)``.

    ``comm`` is the job's communicator: a :class:`~elecsolver.parallel.mesh.DeviceMesh` of every rank on the data
    axis (``dp`` = world) that runs its collectives on the world group and creates no other (``new_groups=False``);
    None for a one-process run.

    ``timeout_s`` bounds joining and each collective (a rank may legitimately wait that long at a collective
    while rank 0 alone computes the reference solution or writes the outputs); a failed or dead rank is found
    by the watchdog within seconds instead.

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
    _import_group_capturing_modules()
    store, host = rendezvous(info, timeout_s=timeout_s)
    backend = collectives.choose_backend(dev, info.local_world)
    if dev.type == "cuda" and backend == "gloo":
        log.info("%d ranks share %d GPU(s) on this node; NCCL needs a GPU per rank, so the collectives run on gloo "
                 "through the host", info.local_world, torch.cuda.device_count())
    dist.init_process_group(backend, rank=info.rank, world_size=info.world,
                            timeout=datetime.timedelta(seconds=timeout_s), store=store)
    failure.start(store, info.rank, info.world, store_host=host)  # keeps the store beyond the group
    try:
        sizes = torch.tensor([info.world, -info.world], dtype=torch.int64, device=dev)
        collectives.all_reduce(sizes, op=dist.ReduceOp.MAX)
        if int(sizes[0]) != info.world or int(-sizes[1]) != info.world:
            raise LaunchError(f"ranks disagree on the world size (between {int(-sizes[1])} and {int(sizes[0])})")
    except BaseException:
        shutdown(clean=False)
        raise
    log.info("rank %d of %d (%s, %s, %d threads)", info.rank, info.world, info.launcher, backend,
             torch.get_num_threads())
    return DeviceMesh(info.world, 1, 1, rank=info.rank, world=info.world, timeout_s=timeout_s, new_groups=False), \
        info, dev


# Modules of torch that bind ``dist.group.WORLD`` as a default argument when they are first imported.  Imported
# after the group exists, they hold the group for the rest of the process, so destroy_process_group() cannot
# free it; its gloo threads then live on into the interpreter's teardown, where a worker thread that frees a
# finished collective (and with it a tensor's Python object) must take the GIL, is ended by the finalising
# interpreter (pthread_exit) and unwinds through a noexcept destructor: "terminate called without an active
# exception", SIGABRT, exit code -6, after all the work was done.  torch.optim imports torch._dynamo, which
# imports torch.distributed.nn.functional, when the first optimizer is built, i.e. after the group is joined.
# Imported before the group exists they bind None (the default group at call time).
_GROUP_CAPTURING = ("torch.distributed.nn.functional", "torch.distributed.optim.zero_redundancy_optimizer")


def _import_group_capturing_modules() -> None:
    import importlib

    for name in _GROUP_CAPTURING:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # a torch without it: nothing binds the group there
            log.debug("%s: %s", name, exc)


def apply_data_parallel(model: torch.nn.Module, comm: DeviceMesh | None):
    """Make ``model`` data parallel over ``comm`` and return the trainer's context.

    The parameters are broadcast from rank 0 (an identical start on every rank); the context's
    gradient-sync hook sums every gradient over the ranks in one flat all-reduce (parameters a rank did
    not touch count as zeros), so that with each rank's loss carrying the global denominators the step
    equals one process on all points.  ``comm=None`` (one process) gives the one-process context.
    """
    from elecsolver.training.context import RunContext

    if comm is None:
        return RunContext()
    ctx = RunContext.from_comm(comm)
    ctx.broadcast_model(model)
    return ctx


def shutdown(clean: bool = True) -> None:
    """Leave the process group, if one was joined, in an order that lets every process exit cleanly.

    After a clean run (``clean=True``): a closing barrier (every rank is done with every collective; a rank
    that fails there raises :class:`RankFailure` as any collective does), the watchdog stops and this rank says
    goodbye on the store, the group is destroyed, and the store host (rank 0) releases the store only after every
    rank has said goodbye, so that no rank loses the store while it still uses it.

    After an error (``clean=False``, called while the exception propagates, as in ``finally:``): no barrier (the
    other ranks may never reach it); this rank's error is recorded for the others (unless it is itself the
    consequence of another rank's failure, which is then named on stderr), then the same order without the
    barrier, the store host keeping the store for at most 10 s so that the others can read the record.

    The group's threads end when the last reference to it goes (here, unless the caller still holds subgroups,
    e.g. a device mesh; garbage left at exit is collected before the interpreter's teardown, see
    :mod:`elecsolver.parallel.failure`).
    """
    watch = failure.current()
    tp = sys.modules.get("elecsolver.parallel.tensor_parallel")
    if tp is not None:  # the groups its all-reduce operator names
        tp.GROUPS.clear()
    if not (dist.is_available() and dist.is_initialized()):
        if watch is not None:
            watch.close(clean)
        return
    try:
        if clean:
            try:
                with collective():
                    dist.barrier()
            except BaseException:
                clean = False
                raise
    finally:
        exc = None if clean else (sys.exc_info()[1] or RuntimeError("left the run early (shutdown(clean=False))"))
        if watch is not None:
            watch.retire(exc)
        dist.destroy_process_group()
        if watch is not None:
            watch.close(clean)
