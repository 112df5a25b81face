"""Rank discovery, rendezvous and thread placement for runs under mpirun, torchrun or srun.

Rank and world size come from, in order: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE); Open MPI (OMPI_COMM_WORLD_*); MPICH / Intel MPI Hydra (PMI_RANK, PMI_SIZE,
MPI_LOCALRANKID, MPI_LOCALNRANKS); PMIx (PMIX_RANK with the Open MPI sizes); SLURM (SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID, only inside a job step, i.e. a task launched by srun).  No variables:
one process.

The rendezvous uses MASTER_ADDR/MASTER_PORT when set (torchrun sets them): rank 0 hosts a TCP store
there, or, under torchrun, every rank joins the agent's store, as ``env://`` initialisation does.
Otherwise, under an MPI launcher, rank 0 picks a free TCP port on its host and tells the others
through MPI (mpi4py, the ``mpi`` extra); without mpi4py, ranks on one machine meet through a file
store named after the launcher's job id.  Every rank then checks that all agree on the world size.
The store is returned to the caller (not left inside the process group), so that it outlives the
group: :mod:`elecsolver.parallel.failure` keeps using it for failure records and heartbeats.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LaunchError", "LaunchInfo", "discover", "threads_per_rank"]

log = logging.getLogger(__name__)


class LaunchError(RuntimeError):
    """The launcher's variables are inconsistent or no rendezvous could be found."""


@dataclass(frozen=True)
class LaunchInfo:
    """Where this process sits: global rank/world, rank/ranks on this node, and the launcher."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    launcher: str


_SOURCES = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("pmix", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    text = env.get(name)
    if text is None:
        return default
    try:
        return int(text.split("(")[0].split(",")[0])
    except ValueError:
        raise LaunchError(f"environment variable {name}={text!r} is not an integer") from None


def discover(env: Mapping[str, str] | None = None) -> LaunchInfo:
    """Rank, world size and node-local placement from the launcher's environment variables.

    Raises
    ------
    LaunchError
        If a launcher's variables are malformed or inconsistent (rank outside [0, world)).
    """
    env = os.environ if env is None else env
    for launcher, r, w, lr, lw in _SOURCES:
        if r not in env or w not in env:
            continue
        if launcher == "slurm" and "SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env:
            continue  # inside an allocation but not launched by srun: one process
        rank, world = _int(env, r), _int(env, w)
        local_rank = _int(env, lr, rank)
        local_world = _int(env, lw, world)
        if not (0 <= rank < world) or not (0 <= local_rank < local_world <= world):
            raise LaunchError(f"{launcher} variables give rank {rank} of {world} (local {local_rank} of "
                              f"{local_world}); check the launcher")
        return LaunchInfo(rank, world, local_rank, local_world, launcher)
    return LaunchInfo(0, 1, 0, 1, "none")


def threads_per_rank(info: LaunchInfo) -> int:
    """Intra-op threads for this rank: its own cores when the launcher bound it to a subset, else
    the node's cores divided by the ranks on the node (never fewer than one)."""
    total = os.cpu_count() or 1
    try:
        mine = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        mine = total
    if mine < total:
        return max(1, mine)
    return max(1, total // info.local_world)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _job_id(env: Mapping[str, str]) -> str | None:
    for name in ("TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_KVS_NAME",
                 "SLURM_JOB_ID"):
        if env.get(name):
            step = env.get("SLURM_STEP_ID", "") if name == "SLURM_JOB_ID" else ""
            return "".join(ch if ch.isalnum() else "_" for ch in env[name] + step)
    return None


def rendezvous(info: LaunchInfo, env: Mapping[str, str] | None = None, timeout_s: float = 1800.0):
    """The ``torch.distributed`` store of this job and the rank that hosts it: ``(store, host)``, ``host`` 0 for a
    TCP store served by rank 0, None for torchrun's agent store or a file store (see the module docstring for the
    order tried).  ``timeout_s`` bounds the wait for the other ranks to join and every store operation.

    Raises
    ------
    LaunchError
        If no rendezvous can be found; the message says which variables to set.
    """
    import torch.distributed as dist

    env = os.environ if env is None else env
    timeout = datetime.timedelta(seconds=timeout_s)
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        addr, port = env["MASTER_ADDR"], _int(env, "MASTER_PORT")
        if env.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):  # torchrun: its agent serves the store (a new
            return dist.TCPStore(addr, port, info.world, False, timeout), None  # one for every restart)
        store = dist.TCPStore(addr, port, info.world, info.rank == 0, timeout, multi_tenant=True)
        return store, 0
    if info.launcher in ("openmpi", "mpich", "pmix", "slurm"):
        try:
            from mpi4py import MPI
        except ImportError:
            MPI = None
        if MPI is not None:
            comm = MPI.COMM_WORLD
            sizes = comm.allgather(info.world)
            if comm.Get_size() != info.world or len(set(sizes)) != 1:
                raise LaunchError(f"ranks disagree on the world size: MPI says {comm.Get_size()}, "
                                  f"the environment says {sorted(set(sizes))}")
            addr_port = (socket.gethostname() if info.local_world < info.world else "127.0.0.1", _free_port())
            addr, port = comm.bcast(addr_port if info.rank == 0 else None, root=0)
            return dist.TCPStore(addr, port, info.world, info.rank == 0, timeout), 0
    job = _job_id(env)
    if job is not None and info.local_world == info.world:
        path = os.path.join(tempfile.gettempdir(), f"elecsolver-rdzv-{job}")
        store = dist.FileStore(path, info.world)
        store.set_timeout(timeout)
        return store, None
    raise LaunchError("cannot find a rendezvous for this multi-process run: set MASTER_ADDR and MASTER_PORT, "
                      "or install the mpi extra (pip install 'elecsolver[mpi]')")
