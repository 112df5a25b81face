"""The device mesh: the world's ranks laid out as pp x dp x tp, with one named process group per axis.

Layout (tensor parallel innermost, so that a tensor-parallel group sits on neighbouring ranks, i.e. on one
node when ranks are placed by node):

    rank = (pp_index * dp + dp_index) * tp + tp_index

- ``"tp"``: the ranks that share one layer's shards (same pipeline stage and data shard);
- ``"pp"``: the ranks that hold the stages of one pipeline (same data shard and tensor shard);
- ``"dp"``: the ranks that hold the same parameters (same stage and tensor shard) on different points;
  gradients are summed over it and the points are sharded over it.

This module is the only place in the package that creates process groups (``init_data_parallel`` joins
the world group, and its communicator is a mesh over it that creates none).  Every group gets an explicit timeout.  Cf. torch.distributed.device_mesh and
torchtitan's ParallelDims; the mesh here is kept small and explicit so that the equality tests can
name every group.  Its collectives run inside :func:`elecsolver.parallel.failure.collective`, so that one failing
because another rank failed says which rank and why.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import torch.distributed as dist

from . import collectives

__all__ = ["AXES", "DeviceMesh", "MeshError"]

AXES = ("pp", "dp", "tp")


class MeshError(ValueError):
    """The requested dp x tp x pp does not fit the world (the message names the three numbers)."""


def _check_sizes(dp: int, tp: int, pp: int, world: int) -> None:
    for name, n in (("dp", dp), ("tp", tp), ("pp", pp)):
        if not isinstance(n, int) or n < 1:
            raise MeshError(f"--{name} must be a positive integer, got {n!r}")
    if dp * tp * pp != world:
        started = f"{world} rank{'s were' if world != 1 else ' was'} started"
        if world % (tp * pp):
            fix = (f"--tp {tp} --pp {pp} needs a multiple of {tp * pp} ranks: start {tp * pp} x k ranks, or choose --tp "
                   f"and --pp whose product divides {world}")
        else:
            fix = f"omit --dp to let it be ranks / (tp x pp) = {world // (tp * pp)}"
        raise MeshError(f"dp x tp x pp = {dp} x {tp} x {pp} = {dp * tp * pp}, but {started}; {fix}")


@dataclass
class DeviceMesh:
    """dp x tp x pp ranks and their named process groups.

    Parameters
    ----------
    dp, tp, pp : int
        Sizes of the data-, tensor- and pipeline-parallel axes; ``dp=None`` means world / (tp pp).
    rank, world : int
        This process and the number of ranks (default: from ``torch.distributed`` when initialised, else 0 of 1).
    timeout_s : float
        Timeout of every group's collectives (seconds).
    new_groups : bool
        Create a process group per axis (default).  False: create none and run every collective on the world group
        (the job's communicator, :func:`~elecsolver.parallel.data_parallel.init_data_parallel`); then only an axis
        of one rank or of the whole world may be used.

    Raises
    ------
    MeshError
        If dp x tp x pp differs from the world size, or a size is not a positive integer.
    """

    dp: int | None = None
    tp: int = 1
    pp: int = 1
    rank: int | None = None
    world: int | None = None
    timeout_s: float = 1800.0
    new_groups: bool = True
    _groups: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        initialised = dist.is_available() and dist.is_initialized()
        if self.world is None:
            self.world = dist.get_world_size() if initialised else 1
        if self.rank is None:
            self.rank = dist.get_rank() if initialised else 0
        self.dp, self.tp, self.pp = self.sizes(self.dp, self.tp, self.pp, self.world)
        rest, self.tp_index = divmod(self.rank, self.tp)
        self.pp_index, self.dp_index = divmod(rest, self.dp)
        if self.world > 1:
            if not initialised:
                raise MeshError("a mesh over several ranks needs the world process group: call "
                                "elecsolver.parallel.init_data_parallel() first")
            if self.new_groups:
                self._make_groups()
            else:  # the world group itself (None in torch.distributed's calls) for every axis that spans the world
                self._groups = {a: None for a in (*AXES, "world") if self.size(a) == self.world}

    @staticmethod
    def sizes(dp: int | None, tp: int, pp: int, world: int) -> tuple[int, int, int]:
        """(dp, tp, pp) with ``dp=None`` resolved to world / (tp pp), checked against ``world`` (no groups made).

        Raises
        ------
        MeshError
            As the constructor.
        """
        if dp is None:
            dp = max(1, world // (tp * pp)) if isinstance(tp, int) and isinstance(pp, int) and tp * pp > 0 else 1
        _check_sizes(dp, tp, pp, world)
        return dp, tp, pp

    # layout ---------------------------------------------------------------------------------------
    def global_rank(self, pp_index: int, dp_index: int, tp_index: int) -> int:
        return (pp_index * self.dp + dp_index) * self.tp + tp_index

    def ranks(self, axis: str) -> list[int]:
        """The global ranks of this rank's group along ``axis`` ("dp", "tp", "pp" or "world"), in axis order."""
        c = {"pp": self.pp_index, "dp": self.dp_index, "tp": self.tp_index}
        if axis == "world":
            return list(range(self.world))
        if axis not in c:
            raise KeyError(f"unknown mesh axis {axis!r}; the axes are {AXES} and 'world'")
        out = []
        for k in range(self.size(axis)):
            cc = dict(c, **{axis: k})
            out.append(self.global_rank(cc["pp"], cc["dp"], cc["tp"]))
        return out

    def size(self, axis: str) -> int:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "world": self.world}[axis]

    def index(self, axis: str) -> int:
        """This rank's position along ``axis``."""
        return {"dp": self.dp_index, "tp": self.tp_index, "pp": self.pp_index, "world": self.rank}[axis]

    def group(self, axis: str):
        """The process group of this rank along ``axis`` (None for a one-rank axis or a one-process run).

        Raises
        ------
        MeshError
            For an axis of several ranks on a mesh made with ``new_groups=False`` (it holds no group objects).
        """
        if self.size(axis) == 1:
            return None
        if not self.new_groups:
            raise MeshError(f"a mesh made with new_groups=False holds no group for axis {axis!r}; build a DeviceMesh "
                            "with new_groups=True")
        return self._groups[axis]

    def _make_groups(self) -> None:
        timeout = datetime.timedelta(seconds=self.timeout_s)
        # every rank must create every group, in the same order (torch.distributed.new_group's contract)
        for axis in ("tp", "dp", "pp"):
            if self.size(axis) == 1:
                continue
            for ranks in self._all_groups(axis):
                g = dist.new_group(ranks, timeout=timeout)
                if self.rank in ranks:
                    self._groups[axis] = g
        self._groups["world"] = dist.new_group(list(range(self.world)), timeout=timeout)

    def _all_groups(self, axis: str) -> list[list[int]]:
        others = [a for a in AXES if a != axis]
        out = []
        for i in range(self.size(others[0])):
            for j in range(self.size(others[1])):
                ranks = []
                for k in range(self.size(axis)):
                    c = {others[0]: i, others[1]: j, axis: k}
                    ranks.append(self.global_rank(c["pp"], c["dp"], c["tp"]))
                out.append(ranks)
        return out

    # collectives over an axis: every one in the package goes through these or through elecsolver.parallel.collectives
    def _axis_group(self, axis: str):
        """(whether ``axis`` has several ranks, its group for torch.distributed: None is the world group)."""
        if self.size(axis) == 1:
            return False, None
        if axis not in self._groups:
            raise MeshError(f"this mesh made no process group for axis {axis!r} (new_groups=False spans the world "
                            "only); build a DeviceMesh with new_groups=True")
        return True, self._groups[axis]

    def all_reduce_sum(self, tensor, axis: str = "dp"):
        """Sum ``tensor`` in place over the ranks of ``axis``; returns it."""
        several, g = self._axis_group(axis)
        if several:
            collectives.all_reduce(tensor, dist.ReduceOp.SUM, g)
        return tensor

    def all_reduce_max(self, tensor, axis: str = "world"):
        """Maximum of ``tensor`` in place over the ranks of ``axis``; returns it."""
        several, g = self._axis_group(axis)
        if several:
            collectives.all_reduce(tensor, dist.ReduceOp.MAX, g)
        return tensor

    def broadcast(self, tensor, src_index: int = 0, axis: str = "dp"):
        """Overwrite ``tensor`` in place with that of the rank at position ``src_index`` along ``axis``."""
        several, g = self._axis_group(axis)
        if several:
            collectives.broadcast(tensor, self.ranks(axis)[src_index], g)
        return tensor

    def barrier(self) -> None:
        several, g = self._axis_group("world")
        if several:
            collectives.barrier(g)

    def describe(self) -> str:
        return (f"rank {self.rank} of {self.world}: dp {self.dp_index}/{self.dp}, tp {self.tp_index}/{self.tp}, "
                f"pp {self.pp_index}/{self.pp}")
