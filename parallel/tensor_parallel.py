"""Tensor (op-sharded) parallelism for jet networks: Megatron-LM's column/row-parallel linear pairs.

Source: Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model
Parallelism", arXiv:1909.08053 (2019), sec. 3.  A pair of linear layers separated only by elementwise
layers, ``Y = sigma(X A) B``, is split so that ``A`` is sharded by columns (output features) and ``B`` by
rows (input features): each rank of the tensor-parallel ("tp") group computes ``sigma(X A_r) B_r`` with no
communication in between (sigma is elementwise, so it acts on the local features alone) and one all-reduce
SUM gives ``Y``.  The two conjugate autograd functions are Megatron's f and g:

- :func:`copy_to_tp` (f): forward identity, backward all-reduce SUM of the input gradient;
- :func:`reduce_from_tp` (g): forward all-reduce SUM, backward identity.

Jets (elecsolver.jets) carry the input derivatives forward, so a linear map sends every channel
(value, first and second derivatives, the summed Laplacian channel) through the same weights and the
elementwise activation's chain rule needs only the local features of each channel.  Hence one collective
per layer call reduces the whole ``[C, N, out]`` tensor of all jet channels at once, and the loss is an
ordinary function of the parameters: only a first-order backward through f and g is ever needed.

What is sharded (:func:`apply_tensor_parallel`): in the flat body (``Network.body``, an ``nn.Sequential``)
consecutive linear layers of one kind (``JetLinear`` / ``GroupedJetLinear``) separated only by
``Activation`` layers are paired, the first of a pair column parallel, the second row parallel; an unpaired
linear (typically the small output layer of an odd count of linears) and every other layer stay replicated
on all tp ranks: ``InputScaling``, ``FourierFeatures``, ``ScaleReplicate``, ``GroupSum``, the heads, and
nested modules such as the ``Residual`` blocks of kind "resnet" (their inner linears are not sharded).

Gradients: a sharded parameter's gradient is complete on its rank (it is the gradient of the shard);
a replicated parameter's gradient is complete and identical on every tp rank (the layers around it see
replicated activations; f sums the input gradients over the tp group).  So the trainer sums gradients over
the "dp" group only, never over "tp".

Collectives: every tp rank must run the same forward/backward (the same layers on the same points), since
each sharded layer call is a collective over the tp group of the mesh.  The mesh
(:class:`elecsolver.parallel.mesh.DeviceMesh`) is the only source of process groups.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import ClassVar

import torch
import torch.distributed as dist
from torch import nn

from elecsolver.jets import Jet
from elecsolver.networks import Activation, GroupedJetLinear, JetLinear, grouped_matmul

from . import collectives

__all__ = [
    "ColumnParallelGroupedJetLinear",
    "ColumnParallelJetLinear",
    "RowParallelGroupedJetLinear",
    "RowParallelJetLinear",
    "apply_tensor_parallel",
    "copy_to_tp",
    "gather_tensor_parallel",
    "load_full_state_dict",
    "reduce_from_tp",
    "sharded_modules",
]


class _TPGroup:
    """The tp process group, held by reference: a copied module (``copy.deepcopy``) shares the group
    instead of trying to copy it (a ProcessGroup cannot be copied or pickled)."""

    __slots__ = ("group", "key", "rank", "size")

    def __init__(self, group, size: int, rank: int):
        self.group, self.size, self.rank = group, int(size), int(rank)
        self.key = None if group is None else _key(group)  # what the layers hand the all-reduce (see GROUPS)

    def __deepcopy__(self, memo):
        return self

    def __repr__(self) -> str:
        return f"tp {self.rank}/{self.size}"


# The all-reduce is an opaque custom operator that names its group by a key into this table: torch.compile keeps it
# as one node of the compiled graph (no graph break) and calls it eagerly, instead of tracing the process group
# into its own functional collectives, which kept the group's threads alive past shutdown.
# elecsolver.parallel.data_parallel.shutdown clears the table.
GROUPS: dict[str, object] = {}


def _key(group) -> str:
    """Register ``group`` in :data:`GROUPS` (outside any compiled code) and return its key."""
    key = f"group-{id(group)}"
    GROUPS[key] = group
    return key


@torch.library.custom_op("elecsolver::all_reduce_sum", mutates_args=())
def _all_reduce_op(t: torch.Tensor, key: str) -> torch.Tensor:
    out = t.contiguous().clone()
    collectives.all_reduce(out, dist.ReduceOp.SUM, GROUPS[key])
    return out


@_all_reduce_op.register_fake
def _(t, key):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _all_reduce(t: torch.Tensor, group) -> torch.Tensor:
    """Sum over ``group``: a key of :data:`GROUPS` (what the layers pass, so that compiled code holds a string, not a
    process group), a process group, or None (one rank: a copy)."""
    if group is None:
        return t.contiguous().clone()
    return _all_reduce_op(t, group if isinstance(group, str) else _key(group))


class _CopyToTP(torch.autograd.Function):
    """Megatron-LM's f: identity forward, all-reduce SUM backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.group), None


class _ReduceFromTP(torch.autograd.Function):
    """Megatron-LM's g: all-reduce SUM forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def copy_to_tp(x: torch.Tensor, group) -> torch.Tensor:
    """Megatron-LM's f (arXiv:1909.08053, sec. 3): the identity forward; backward, the gradient is
    all-reduced (SUM) over ``group``, so that a replicated input feeding sharded layers gets the full
    gradient on every rank.

    Parameters
    ----------
    x : torch.Tensor
        Any shape and floating dtype (for jets the whole ``[C, N, features]`` channel tensor: one collective).
    group : ProcessGroup, str or None
        The tp group (``mesh.group("tp")``) or its key in :data:`GROUPS` (what the sharded layers pass); None (one
        rank) makes both directions the identity.

    Returns
    -------
    torch.Tensor
        Same shape and dtype as ``x`` (a view of it).
    """
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group) -> torch.Tensor:
    """Megatron-LM's g (arXiv:1909.08053, sec. 3): all-reduce (SUM) over ``group`` forward (into a new
    tensor; ``x`` is not modified), the identity backward.

    Parameters
    ----------
    x : torch.Tensor
        Any shape and floating dtype; every rank of ``group`` must call with the same shape and dtype.
    group : ProcessGroup, str or None
        The tp group or its key in :data:`GROUPS`; None (one rank) gives a copy of ``x``.

    Returns
    -------
    torch.Tensor
        The sum over the group, same shape and dtype as ``x``.
    """
    return _ReduceFromTP.apply(x, group)


def _add_bias_value(out: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``bias`` added to channel 0 of a jet's channel tensor [C, ...] (the value; derivatives have none)."""
    if bias is None:
        return out
    v, rest = torch.split(out, [1, out.shape[0] - 1], dim=0)
    return torch.cat([v + bias, rest], dim=0)


def _add_bias_value_(out: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``bias`` added in place to channel 0 of ``out`` [C, ...], which is returned: for the all-reduced sum of a
    row-parallel layer, which becomes the layer's output instead of being copied into a new one.  Besides the copy,
    this keeps the sum alive past the collective: a tensor dropped at once could be freed last by gloo's worker
    thread, which the profiler's memory events miss (:func:`~elecsolver.parallel.profiling.step_peak_mib`)."""
    if bias is not None:
        out[:1].add_(bias)
    return out


def _shard(t: torch.Tensor, dim: int, size: int, rank: int) -> torch.Tensor:
    n = t.shape[dim] // size
    return t.detach().narrow(dim, rank * n, n).clone().contiguous()


class _TPLinearBase(nn.Module):
    """Common parts of the four tp layers: the group, the shard layout and the gather/slice rules.

    ``_layout`` maps a parameter name to the dimension it is sharded along (absent: replicated).
    """

    _layout: ClassVar[dict[str, int]] = {}

    def _setup(self, tp: _TPGroup) -> None:
        self.tp = tp
        for name, dim in self._layout.items():
            p = getattr(self, name)
            if p is not None:
                p.tp_shard_dim = dim  # read by optimizers/clipping that must tell shards from replicas

    @property
    def tp_size(self) -> int:
        return self.tp.size

    @property
    def tp_rank(self) -> int:
        return self.tp.rank

    def shard_of(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """This rank's slice of the unsharded parameter ``name`` ("weight" or "bias"), a new tensor."""
        if name not in self._layout:
            return full.detach().clone()
        return _shard(full, self._layout[name], self.tp_size, self.tp_rank)

    def gather(self, name: str, *, grad: bool = False) -> torch.Tensor | None:
        """The unsharded parameter ``name`` (or its gradient), all-gathered over the tp group (collective)."""
        p = getattr(self, name)
        if p is None:
            return None
        t = p.grad if grad else p.detach()
        if grad and t is None:  # every rank must take part; a missing gradient counts as zeros
            t = torch.zeros_like(p)
        t = t.detach().contiguous()
        if name not in self._layout or self.tp.group is None:
            return t.clone()
        return torch.cat(collectives.all_gather(t, self.tp.group), dim=self._layout[name])

    def full_layer(self, *, grad: bool = False) -> nn.Module:
        """The unsharded layer (``JetLinear`` or ``GroupedJetLinear``) with the gathered parameters (and, with
        ``grad=True``, the gathered gradients in ``.grad``).  Collective over the tp group."""
        w, b = self.gather("weight"), self.gather("bias")
        if isinstance(self, (ColumnParallelGroupedJetLinear, RowParallelGroupedJetLinear)):
            out = _full_grouped(self.groups, self.in_features, self.out_features, w, b)
        else:
            out = _full_linear(self.in_features, self.out_features, w, b)
        if grad:
            _set_grads(out, self.gather("weight", grad=True), self.gather("bias", grad=True))
        return out


class ColumnParallelJetLinear(_TPLinearBase):
    """A ``JetLinear`` sharded by output features (Megatron-LM's column-parallel linear, arXiv:1909.08053,
    sec. 3): rank r of the tp group holds rows ``r*out/tp ... (r+1)*out/tp - 1`` of the weight and bias.
    The (replicated) input passes through :func:`copy_to_tp`, so its gradient is summed over the group.

    Parameters
    ----------
    full : JetLinear
        The initialised unsharded layer; its weight is sliced (the full weight is not kept).
    tp : _TPGroup
        The group reference (built by :func:`apply_tensor_parallel` from the mesh).

    Attributes
    ----------
    weight : Parameter [out/tp, in]
    bias : Parameter [out/tp] or None
    in_features, out_features : int
        The unsharded sizes.

    Shapes: [N, in] -> [N, out/tp]; jets [C, N, in] -> [C, N, out/tp] (C = 1+K+P+L), same dtype as the input.

    Raises
    ------
    ValueError
        If tp does not divide ``out_features``.
    """

    _layout: ClassVar[dict[str, int]] = {"weight": 0, "bias": 0}

    def __init__(self, full: nn.Linear, tp: _TPGroup):
        super().__init__()
        if full.out_features % tp.size:
            raise ValueError(f"column-parallel linear: out_features={full.out_features} is not a multiple "
                             f"of tp={tp.size}")
        self.in_features, self.out_features = full.in_features, full.out_features
        self.weight = nn.Parameter(_shard(full.weight, 0, tp.size, tp.rank))
        self.bias = None if full.bias is None else nn.Parameter(_shard(full.bias, 0, tp.size, tp.rank))
        self._setup(tp)

    def forward(self, x):
        if isinstance(x, Jet):
            ch = copy_to_tp(x.channels, self.tp.key)
            return x.like(_add_bias_value(torch.matmul(ch, self.weight.t()), self.bias))
        return nn.functional.linear(copy_to_tp(x, self.tp.key), self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"(local {self.out_features // self.tp_size}), bias={self.bias is not None}, {self.tp!r}")


class RowParallelJetLinear(_TPLinearBase):
    """A ``JetLinear`` sharded by input features (Megatron-LM's row-parallel linear, arXiv:1909.08053,
    sec. 3): rank r holds columns ``r*in/tp ... (r+1)*in/tp - 1`` of the weight and takes the matching
    (already sharded) input features; the partial products of all jet channels are summed over the group
    in one :func:`reduce_from_tp` and the full (replicated) bias is added to channel 0 only.

    Parameters
    ----------
    full : JetLinear
        The initialised unsharded layer.
    tp : _TPGroup

    Attributes
    ----------
    weight : Parameter [out, in/tp]
    bias : Parameter [out] or None (replicated on every tp rank)

    Shapes: [N, in/tp] -> [N, out]; jets [C, N, in/tp] -> [C, N, out] (replicated on every tp rank).

    Raises
    ------
    ValueError
        If tp does not divide ``in_features``.
    """

    _layout: ClassVar[dict[str, int]] = {"weight": 1}

    def __init__(self, full: nn.Linear, tp: _TPGroup):
        super().__init__()
        if full.in_features % tp.size:
            raise ValueError(f"row-parallel linear: in_features={full.in_features} is not a multiple "
                             f"of tp={tp.size}")
        self.in_features, self.out_features = full.in_features, full.out_features
        self.weight = nn.Parameter(_shard(full.weight, 1, tp.size, tp.rank))
        self.bias = None if full.bias is None else nn.Parameter(full.bias.detach().clone())
        self._setup(tp)

    def forward(self, x):
        if isinstance(x, Jet):
            out = reduce_from_tp(torch.matmul(x.channels, self.weight.t()), self.tp.key)
            return x.like(_add_bias_value_(out, self.bias))
        out = reduce_from_tp(torch.matmul(x, self.weight.t()), self.tp.key)
        return out if self.bias is None else out.add_(self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} (local {self.in_features // self.tp_size}), "
                f"out_features={self.out_features}, bias={self.bias is not None}, {self.tp!r}")


class ColumnParallelGroupedJetLinear(_TPLinearBase):
    """A ``GroupedJetLinear`` (G block-diagonal linears) with the output features of every group sharded:
    rank r holds rows ``r*out/tp ... (r+1)*out/tp - 1`` of each group's weight and bias, so its output is G
    contiguous groups of out/tp features (what the next elementwise layer and a row-parallel grouped layer
    expect).  Megatron-LM's column parallelism (arXiv:1909.08053, sec. 3) applied per group.

    Parameters
    ----------
    full : GroupedJetLinear
    tp : _TPGroup

    Attributes
    ----------
    weight : Parameter [G, out/tp, in]
    bias : Parameter [G, out/tp]
    groups, in_features, out_features : int
        The unsharded sizes (per group).

    Shapes: [N, G in] -> [N, G out/tp]; jets [C, N, G in] -> [C, N, G out/tp].

    Raises
    ------
    ValueError
        If tp does not divide ``out_features``.
    """

    _layout: ClassVar[dict[str, int]] = {"weight": 1, "bias": 1}

    def __init__(self, full: GroupedJetLinear, tp: _TPGroup):
        super().__init__()
        if full.out_features % tp.size:
            raise ValueError(f"column-parallel grouped linear: out_features={full.out_features} is not a "
                             f"multiple of tp={tp.size}")
        self.groups, self.in_features, self.out_features = full.groups, full.in_features, full.out_features
        self.weight = nn.Parameter(_shard(full.weight, 1, tp.size, tp.rank))
        self.bias = nn.Parameter(_shard(full.bias, 1, tp.size, tp.rank))
        self._setup(tp)

    def _matmul(self, t: torch.Tensor) -> torch.Tensor:  # [..., G in] -> [..., G, out/tp]
        return grouped_matmul(t, self.weight)

    def forward(self, x):
        if isinstance(x, Jet):
            out = self._matmul(copy_to_tp(x.channels, self.tp.key))     # [C, N, G, out/tp]
            return x.like(_add_bias_value(out, self.bias).flatten(-2))
        return (self._matmul(copy_to_tp(x, self.tp.key)) + self.bias).flatten(-2)

    def extra_repr(self) -> str:
        return (f"groups={self.groups}, in_features={self.in_features}, out_features={self.out_features} "
                f"(local {self.out_features // self.tp_size}), {self.tp!r}")


class RowParallelGroupedJetLinear(_TPLinearBase):
    """A ``GroupedJetLinear`` with the input features of every group sharded: rank r holds columns
    ``r*in/tp ... (r+1)*in/tp - 1`` of each group's weight and takes G contiguous groups of in/tp features;
    the partial products of all jet channels are summed in one :func:`reduce_from_tp` and the full
    (replicated) bias [G, out] is added to channel 0 only.  Megatron-LM's row parallelism
    (arXiv:1909.08053, sec. 3) applied per group.

    Parameters
    ----------
    full : GroupedJetLinear
    tp : _TPGroup

    Attributes
    ----------
    weight : Parameter [G, out, in/tp]
    bias : Parameter [G, out] (replicated)

    Shapes: [N, G in/tp] -> [N, G out]; jets [C, N, G in/tp] -> [C, N, G out] (replicated on every tp rank).

    Raises
    ------
    ValueError
        If tp does not divide ``in_features``.
    """

    _layout: ClassVar[dict[str, int]] = {"weight": 2}

    def __init__(self, full: GroupedJetLinear, tp: _TPGroup):
        super().__init__()
        if full.in_features % tp.size:
            raise ValueError(f"row-parallel grouped linear: in_features={full.in_features} is not a multiple "
                             f"of tp={tp.size}")
        self.groups, self.in_features, self.out_features = full.groups, full.in_features, full.out_features
        self.weight = nn.Parameter(_shard(full.weight, 2, tp.size, tp.rank))
        self.bias = nn.Parameter(full.bias.detach().clone())
        self._setup(tp)

    def _matmul(self, t: torch.Tensor) -> torch.Tensor:  # [..., G in/tp] -> [..., G, out] (partial sums)
        return grouped_matmul(t, self.weight)

    def forward(self, x):
        if isinstance(x, Jet):
            out = reduce_from_tp(self._matmul(x.channels), self.tp.key)  # [C, N, G, out]
            return x.like(_add_bias_value_(out, self.bias).flatten(-2))
        return reduce_from_tp(self._matmul(x), self.tp.key).add_(self.bias).flatten(-2)

    def extra_repr(self) -> str:
        return (f"groups={self.groups}, in_features={self.in_features} "
                f"(local {self.in_features // self.tp_size}), out_features={self.out_features}, {self.tp!r}")


_TP_LAYERS = (ColumnParallelJetLinear, RowParallelJetLinear, ColumnParallelGroupedJetLinear,
              RowParallelGroupedJetLinear)


def _full_linear(n_in: int, n_out: int, w: torch.Tensor, b: torch.Tensor | None) -> JetLinear:
    with torch.random.fork_rng(devices=[]):  # the constructor's random init must not move the global stream
        lin = JetLinear(n_in, n_out, bias=b is not None)
    lin.weight = nn.Parameter(w.clone())
    if b is not None:
        lin.bias = nn.Parameter(b.clone())
    return lin


def _full_grouped(g: int, n_in: int, n_out: int, w: torch.Tensor, b: torch.Tensor) -> GroupedJetLinear:
    with torch.random.fork_rng(devices=[]):
        lin = GroupedJetLinear(g, n_in, n_out)
    lin.weight = nn.Parameter(w.clone())
    lin.bias = nn.Parameter(b.clone())
    return lin


def _set_grads(layer: nn.Module, gw: torch.Tensor, gb: torch.Tensor | None) -> None:
    layer.weight.grad = gw
    if gb is not None:
        layer.bias.grad = gb


# ---- the transform ----------------------------------------------------------------------------------------
def _body_of(model: nn.Module) -> tuple[nn.Sequential, str]:
    if isinstance(model, nn.Sequential):
        return model, ""
    if isinstance(getattr(model, "body", None), nn.Sequential):  # a Network or a pipeline stage
        return model.body, "body."
    raise TypeError(f"tensor parallelism applies to an elecsolver.networks.Network, a pipeline stage or a flat "
                    f"nn.Sequential body, got {type(model).__name__}")


def _kind(layer: nn.Module) -> str | None:
    if isinstance(layer, GroupedJetLinear):
        return f"grouped-{layer.groups}"
    if isinstance(layer, JetLinear):
        return "linear"
    return None


def _pairs(body: nn.Sequential) -> list[tuple[int, int]]:
    """(column, row) index pairs: consecutive linears of one kind with only Activation layers between."""
    pairs, pending = [], None
    for i, layer in enumerate(body):
        kind = _kind(layer)
        if kind is not None:
            if pending is not None and _kind(body[pending]) == kind:
                pairs.append((pending, i))
                pending = None
            else:
                pending = i
        elif not isinstance(layer, Activation):
            pending = None  # anything but an elementwise layer breaks a pair (it needs all features)
    return pairs


def _describe(layer: nn.Module) -> str:
    if isinstance(layer, GroupedJetLinear):
        return f"GroupedJetLinear {layer.groups} x ({layer.in_features} -> {layer.out_features})"
    return f"JetLinear {layer.in_features} -> {layer.out_features}"


def apply_tensor_parallel(model: nn.Module, mesh) -> nn.Module:
    """Shard the linear layers of ``model``'s flat body over the mesh's tp group, in place (Megatron-LM's
    column/row pairs, arXiv:1909.08053, sec. 3).

    Walking the body (``model.body`` for a :class:`~elecsolver.networks.Network`, else ``model`` itself if it
    is an ``nn.Sequential``) in order, two consecutive linear layers of one kind (``JetLinear``, or
    ``GroupedJetLinear`` with the same number of groups) separated only by ``Activation`` layers become a
    :class:`ColumnParallelJetLinear` / :class:`RowParallelJetLinear` pair (grouped:
    :class:`ColumnParallelGroupedJetLinear` / :class:`RowParallelGroupedJetLinear`).  An unpaired linear (the
    output layer after an odd number of linears) and every other layer stay replicated, including nested
    modules such as kind "resnet"'s ``Residual`` blocks.  Shards are sliced from the already-initialised full
    layers, so the tp model is the same function, with the same parameter names, as the model it came from
    (and as the one-process model built from the same seed); each rank keeps only its shards.

    Parameters
    ----------
    model : Network or nn.Sequential
        Built identically on every tp rank (same seed, dtype and device).
    mesh : DeviceMesh
        Only ``mesh.size("tp")``, ``mesh.index("tp")`` and ``mesh.group("tp")`` are used.

    Returns
    -------
    nn.Module
        ``model`` itself (unchanged when tp == 1).

    Raises
    ------
    ValueError
        If tp does not divide a sharded feature dimension (naming the layer, the width, tp and the setting
        to change); nothing is changed then.
    TypeError
        If ``model`` is neither a Network nor an nn.Sequential.
    """
    tp_size = mesh.size("tp")
    if tp_size == 1:
        return model
    body, prefix = _body_of(model)
    pairs = _pairs(body)
    for col, row in pairs:  # check all before changing anything
        for idx, role, width in ((col, "output", body[col].out_features),
                                 (row, "input", body[row].in_features)):
            if width % tp_size:
                raise ValueError(
                    f"tensor parallelism over tp={tp_size} cannot shard layer {prefix}{idx} "
                    f"({_describe(body[idx])}): its {role} width {width} is not a multiple of tp={tp_size}; "
                    f"set network.width to a multiple of {tp_size} "
                    f"(e.g. {width + tp_size - width % tp_size}) or choose a tp that divides {width}")
    tp = _TPGroup(mesh.group("tp"), tp_size, mesh.index("tp"))
    for col, row in pairs:
        grouped = isinstance(body[col], GroupedJetLinear)
        body[col] = (ColumnParallelGroupedJetLinear if grouped else ColumnParallelJetLinear)(body[col], tp)
        body[row] = (RowParallelGroupedJetLinear if grouped else RowParallelJetLinear)(body[row], tp)
    return model


def sharded_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The tensor-parallel layers of ``model`` by qualified name (empty for an unsharded model)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, _TP_LAYERS)}


def _check_mesh(model: nn.Module, mesh) -> dict[str, nn.Module]:
    mods = sharded_modules(model)
    for name, m in mods.items():
        if m.tp_size != mesh.size("tp") or m.tp_rank != mesh.index("tp"):
            raise ValueError(f"layer {name} is sharded as {m.tp!r}, but the mesh has tp {mesh.index('tp')}/"
                             f"{mesh.size('tp')}")
    return mods


def _set_submodule(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, leaf, module)


def gather_tensor_parallel(model: nn.Module, mesh, *, grad: bool = False) -> nn.Module:
    """An ordinary single-device copy of a tensor-parallel model: every sharded layer rebuilt as the full
    ``JetLinear`` / ``GroupedJetLinear`` from the all-gathered shards, everything else deep-copied.  For
    evaluation, export and checkpoints; its parameter names and shapes are those of the unsharded network,
    so its ``state_dict`` loads into a one-process model (and, through :func:`load_full_state_dict`, back into
    a sharded one).  ``model`` itself is not changed.

    Collective over the tp group: every tp rank must call it (in the same order of layers); each gets the
    full model.

    Parameters
    ----------
    model : nn.Module
        A model transformed by :func:`apply_tensor_parallel` (an unsharded one is simply deep-copied).
    mesh : DeviceMesh
    grad : bool
        Also gather the gradients into the copy's ``.grad`` (a missing shard gradient counts as zeros);
        default False: the copy has no gradients.

    Returns
    -------
    nn.Module
        Same dtype and device as ``model``.

    Raises
    ------
    ValueError
        If the layers were sharded over another tp size or rank than ``mesh``'s.
    """
    mods = _check_mesh(model, mesh)
    full = {name: m.full_layer(grad=grad) for name, m in mods.items()}  # collectives, in module order
    # deep-copy without the shards (they are replaced anyway): memo maps each sharded layer to its full layer
    memo = {id(m): full[name] for name, m in mods.items()}
    out = copy.deepcopy(model, memo)
    for name, m in full.items():
        _set_submodule(out, name, m)  # a no-op where memo already put it, kept for layers shared twice
    if grad:  # deepcopy does not copy .grad: the replicated parameters' gradients (complete on every rank)
        orig = dict(model.named_parameters())
        for name, p in out.named_parameters():
            g = orig[name].grad if name in orig else None
            if p.grad is None and g is not None and g.shape == p.shape:
                p.grad = g.detach().clone()
    else:
        for p in out.parameters():
            p.grad = None
    return out


def load_full_state_dict(model: nn.Module, state_dict: Mapping[str, torch.Tensor], mesh, strict: bool = True):
    """Load a state dict of the unsharded network into the tensor-parallel ``model``: each rank copies its
    slice of every sharded parameter (no communication) and the replicated entries as they are.

    Parameters
    ----------
    model : nn.Module
        Transformed by :func:`apply_tensor_parallel`.
    state_dict : mapping str -> Tensor
        Keys and full shapes of the unsharded network (e.g. from :func:`gather_tensor_parallel` or a
        one-process checkpoint).
    mesh : DeviceMesh
    strict : bool
        As ``nn.Module.load_state_dict``.

    Returns
    -------
    The ``load_state_dict`` result (missing and unexpected keys).

    Raises
    ------
    ValueError
        If a sharded entry's shape is not the full shape of its layer, or the mesh differs from the sharding.
    RuntimeError
        From ``load_state_dict`` for missing or unexpected keys (``strict``) or other shape mismatches.
    """
    mods = _check_mesh(model, mesh)
    local = dict(state_dict)
    for name, m in mods.items():
        for pname in ("weight", "bias"):
            key = f"{name}.{pname}" if name else pname
            if key not in local or getattr(m, pname) is None:
                continue
            full = local[key]
            shape = list(getattr(m, pname).shape)
            if pname in m._layout:
                shape[m._layout[pname]] *= m.tp_size
            if list(full.shape) != shape:
                raise ValueError(f"{key}: the unsharded network has shape {tuple(shape)}, the state dict "
                                 f"{tuple(full.shape)}")
            local[key] = m.shard_of(pname, full)
    return model.load_state_dict(local, strict=strict)
