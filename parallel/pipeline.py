"""Pipeline parallelism for jet networks: stages of the flat body, and GPipe / 1F1B schedules over them.

A :class:`~elecsolver.networks.Network` is a flat ``nn.Sequential`` body plus heads (``y = head(y, x)``).
:func:`split_network` cuts the body into ``pp`` contiguous chunks (balanced by parameter count); the last
stage also holds the heads.  Because the input derivatives travel forward in the jet (shared/DESIGN.md,
"Why jets"), the loss needs only a first-order backward, so a stage boundary carries exactly one tensor each
way: the jet's ``channels`` [C, n, width] forward and their gradient backward (C = 1 + K + P + L is fixed by
the constraint's declared derivatives, width by the cut; both are known to the receiver, which allocates).

:class:`PipelineSchedule` runs every (micro-batch, constraint) work item through the stages and accumulates
into each stage's ``.grad`` exactly the gradient of ``scale * loss_terms(full_model, ...).sum()``
(:func:`elecsolver.training.loss.loss_terms`): every micro-batch term carries the constraint's global
denominator, so micro-batch terms just add.  Two schedules:

* ``"gpipe"``: all forwards, then all backwards in reverse order (Huang et al., "GPipe: efficient training of giant neural
  networks using pipeline parallelism", NeurIPS 2019);
* ``"1f1b"``: ``pp - stage - 1`` warm-up forwards, then alternately one forward and one backward, then the
  cool-down backwards (Narayanan et al., "PipeDream: generalized pipeline parallelism for DNN training",
  SOSP 2019; the non-interleaved schedule of Narayanan et al., SC 2021 / Megatron-LM), which keeps at most
  ``pp - stage`` work items' activations alive.

Point-to-point traffic is ``torch.distributed.isend`` (completed at the end of the call) and ``irecv(...)
.wait()`` over the mesh's ``"pp"`` group, so the crossing sends of 1F1B's steady state cannot deadlock.
:func:`full_state_dict`, :func:`load_full_state_dict` and :func:`gather_pipeline` convert between the stages
and the unsplit network (checkpoints, evaluation, export).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from elecsolver.jets import Jet
from elecsolver.operators import evaluate
from elecsolver.training.loss import constraint_residual

from . import collectives

__all__ = [
    "SCHEDULES",
    "PipelineSchedule",
    "PipelineStage",
    "full_state_dict",
    "gather_pipeline",
    "load_full_state_dict",
    "partition_layers",
    "split_network",
]

SCHEDULES = ("gpipe", "1f1b")

# dtypes a stage boundary can carry, with the code the shape probe sends for each
_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------------
# splitting
# ---------------------------------------------------------------------------------------------------

def _n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def partition_layers(costs: Sequence[int], n_stages: int, last_extra: int = 0) -> list[tuple[int, int]]:
    """Contiguous partition of layers with ``costs`` into ``n_stages`` chunks minimising the largest chunk.

    The minimised quantity is, per stage, ``(L + 1) * (its parameters) + (its layer count)``
    (``last_extra`` parameters added to the last stage, e.g. the heads'), so parameter count decides and the
    layer count only breaks ties (parameter-free layers such as activations spread evenly).  Exact dynamic
    programme, O(n_stages L^2).

    Parameters
    ----------
    costs : sequence of int
        Parameter count of each layer, length L.
    n_stages : int
    last_extra : int
        Parameters the last stage holds besides its layers.

    Returns
    -------
    list of (start, stop)
        Half-open layer ranges, in stage order, each non-empty, covering 0..L.

    Raises
    ------
    ValueError
        If ``n_stages`` < 1 or exceeds L.
    """
    n = len(costs)
    if not isinstance(n_stages, int) or n_stages < 1:
        raise ValueError(f"the number of pipeline stages must be a positive integer, got {n_stages!r}")
    if n < n_stages:
        raise ValueError(f"cannot cut a body of {n} layers into {n_stages} pipeline stages (every stage needs at "
                         f"least one layer); use --pp {max(n, 1)} or less, or a deeper network")
    w = [(n + 1) * int(c) + 1 for c in costs]
    prefix = [0]
    for x in w:
        prefix.append(prefix[-1] + x)
    inf = float("inf")
    # best[k][i]: the smallest largest-chunk cost of the first i layers in k chunks; cut[k][i]: its last cut
    best = [[inf] * (n + 1) for _ in range(n_stages + 1)]
    cut = [[0] * (n + 1) for _ in range(n_stages + 1)]
    best[0][0] = 0
    for k in range(1, n_stages + 1):
        for i in range(k, n + 1):
            extra = (n + 1) * last_extra if (k == n_stages and i == n) else 0
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j] + extra)
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, j
    bounds, i = [], n
    for k in range(n_stages, 0, -1):
        j = cut[k][i]
        bounds.append((j, i))
        i = j
    return bounds[::-1]


class PipelineStage(nn.Module):
    """One pipeline stage of a :class:`~elecsolver.networks.Network`: a contiguous chunk of its body layers
    (and, on the last stage, its heads).

    The layers are the network's own modules (shared, not copied), registered under their names in the full
    network (``body.4.weight``, ``heads.0.*``), so the stage's ``state_dict`` is the full one's restriction.

    Parameters
    ----------
    layers : sequence of (int, nn.Module)
        (index in the full body, layer), consecutive.
    heads : sequence of nn.Module
        The network's heads (last stage only; empty otherwise).
    stage, n_stages : int
        This stage's position and the number of stages.
    bounds : list of (int, int)
        Every stage's half-open range of body layers.
    full_keys : list of str
        The unsplit network's state-dict keys, in its order (for :func:`full_state_dict`).

    Attributes
    ----------
    is_first, is_last : bool

    Shapes: ``forward(y, x)`` maps [N, w_in] (or a jet [C, N, w_in]) to [N, w_out] (the same kind); on the
    last stage the heads make it [N, c] and need ``x``, the network input ([N, d] or its jet).
    """

    def __init__(self, layers: Sequence[tuple[int, nn.Module]], heads: Sequence[nn.Module], stage: int,
                 n_stages: int, bounds: Sequence[tuple[int, int]], full_keys: Sequence[str]):
        super().__init__()
        self.body = nn.Sequential(OrderedDict((str(i), layer) for i, layer in layers))
        if stage == n_stages - 1:
            self.heads = nn.ModuleList(heads)
        self.stage, self.n_stages = int(stage), int(n_stages)
        self.bounds = [tuple(b) for b in bounds]
        self.full_keys = list(full_keys)

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.n_stages - 1

    def forward(self, y, x=None):
        """This stage's layers on ``y``; on the last stage then the heads, ``y = head(y, x)``.

        Raises
        ------
        ValueError
            If the last stage has heads and ``x`` is None.
        """
        y = self.body(y)
        if self.is_last and len(self.heads):
            if x is None:
                raise ValueError("the last pipeline stage applies the heads, which need the network input x")
            for head in self.heads:
                y = head(y, x)
        return y

    def extra_repr(self) -> str:
        start, stop = self.bounds[self.stage]
        return f"stage={self.stage}/{self.n_stages}, body layers {start}..{stop - 1}"


def split_network(model: nn.Module, n_stages: int, stage: int) -> PipelineStage:
    """Pipeline stage ``stage`` of ``n_stages`` of ``model``.

    The body is cut into ``n_stages`` contiguous chunks balanced by parameter count (the heads' parameters
    count towards the last stage; see :func:`partition_layers`), every stage holding at least one layer.

    Parameters
    ----------
    model : Network
        With a flat ``nn.Sequential`` ``body`` and ``heads``; no parameters or buffers elsewhere.
    n_stages : int
        Pipeline size (the mesh's ``pp``).
    stage : int
        This rank's position in the pipeline, in [0, n_stages).

    Returns
    -------
    PipelineStage
        Sharing its layers (and parameters) with ``model``.

    Raises
    ------
    ValueError
        If the body has fewer layers than stages, ``stage`` is out of range, or the model holds state outside
        its body and heads (it would be lost).
    TypeError
        If the model has no flat ``nn.Sequential`` body.
    """
    body = getattr(model, "body", None)
    if not isinstance(body, nn.Sequential):
        raise TypeError(f"pipeline parallelism needs a network with a flat nn.Sequential body "
                         f"(elecsolver.networks.Network), got {type(model).__name__}")
    heads = list(getattr(model, "heads", ()))
    if not isinstance(stage, int) or not 0 <= stage < max(int(n_stages), 1):
        raise ValueError(f"pipeline stage {stage!r} is not in [0, {n_stages})")
    full_keys = list(model.state_dict().keys())
    stray = [k for k in full_keys if not k.startswith(("body.", "heads."))]
    if stray:
        raise ValueError(f"the network holds state outside its body and heads ({stray[:3]}); pipeline stages "
                         "would lose it; move those modules into the body or a head")
    layers = list(body)
    bounds = partition_layers([_n_params(m) for m in layers], n_stages,
                              sum(_n_params(h) for h in heads))
    costs = [_n_params(m) for m in layers]
    costs[-1] += sum(_n_params(h) for h in heads)
    without = [k for k, (a, b) in enumerate(bounds) if sum(costs[a:b]) == 0]
    if without:
        trainable = sum(1 for c in costs if c > 0)
        raise ValueError(f"pipeline stage(s) {without} of {n_stages} would hold no parameters (the body has "
                         f"{trainable} layers with parameters); use --pp {trainable} or less, or a deeper network")
    start, stop = bounds[stage]
    names = list(body._modules.keys())
    if names != [str(i) for i in range(len(layers))]:
        raise ValueError("the body's layers must be named 0, 1, ... (an nn.Sequential built from a list)")
    return PipelineStage([(i, layers[i]) for i in range(start, stop)], heads, stage, n_stages, bounds,
                         full_keys)


# ---------------------------------------------------------------------------------------------------
# state
# ---------------------------------------------------------------------------------------------------

def full_state_dict(stage: PipelineStage, mesh=None) -> dict:
    """The unsplit network's state dict, assembled from every stage (collective over the ``"pp"`` group).

    Parameters
    ----------
    stage : PipelineStage
    mesh : DeviceMesh, optional
        None (or pp = 1): this stage must be the only one.

    Returns
    -------
    dict
        name -> detached CPU tensor, in the unsplit network's key order; equal on every stage.

    Raises
    ------
    ValueError
        If a stage is missing from the group (pp = 1 with a split network, or a key no stage holds).
    """
    mine = {k: v.detach().cpu().clone() for k, v in stage.state_dict().items()}
    group = None if mesh is None else mesh.group("pp")
    if group is None:
        parts = [mine]
    else:
        parts = [None] * mesh.size("pp")
        dist.all_gather_object(parts, mine, group=group)
    merged = {}
    for part in parts:
        merged.update(part)
    missing = [k for k in stage.full_keys if k not in merged]
    if missing:
        raise ValueError(f"no pipeline stage holds {missing[:3]} ({len(missing)} keys); gather over the mesh "
                         f"whose pp group holds all {stage.n_stages} stages")
    return {k: merged[k] for k in stage.full_keys}


def load_full_state_dict(stage: PipelineStage, state_dict: dict) -> None:
    """Load the unsplit network's ``state_dict`` into ``stage`` (the stage's own entries; others ignored).

    Raises
    ------
    KeyError
        If ``state_dict`` lacks one of this stage's entries, or holds a key the unsplit network does not
        have (a state dict of another network).
    RuntimeError
        On a shape mismatch (from ``load_state_dict``).
    """
    unknown = [k for k in state_dict if k not in stage.full_keys]
    if unknown:
        raise KeyError(f"the state dict holds {unknown[:3]}, which the unsplit network does not have: a state "
                       "dict of another network?")
    own = stage.state_dict().keys()
    missing = [k for k in own if k not in state_dict]
    if missing:
        raise KeyError(f"the state dict lacks {missing[:3]} of pipeline stage {stage.stage}")
    stage.load_state_dict({k: state_dict[k] for k in own}, strict=True)


def gather_pipeline(stage: PipelineStage, mesh, template: nn.Module) -> nn.Module:
    """A full single-device model with the pipeline's current parameters (collective over ``"pp"``).

    Parameters
    ----------
    stage : PipelineStage
    mesh : DeviceMesh or None
    template : nn.Module
        A freshly built unsplit network of the same configuration; loaded in place (keeping its device and
        dtype) and returned.

    Raises
    ------
    RuntimeError
        If ``template``'s keys or shapes differ (``load_state_dict(strict=True)``).
    """
    template.load_state_dict(full_state_dict(stage, mesh), strict=True)
    return template


# ---------------------------------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------------------------------

class _Seeded(Exception):
    """Carries the seeded input jet out of :func:`evaluate` (see :func:`_seed`)."""

    def __init__(self, jet: Jet):
        super().__init__("seeded")
        self.jet = jet


class _Capture(nn.Module):
    def forward(self, x):
        raise _Seeded(x)


_CAPTURE = _Capture()


def _seed(c, points: torch.Tensor, inputs: Sequence[str], outputs: Sequence[str]) -> Jet:
    """The input jet that ``evaluate(model, points, ..., c.wrt, second=c.second or None,
    laplacian=c.laplacian)`` feeds to the model: taken from ``evaluate`` itself, so the columns, their
    order and the validation are identical to the single-device loss."""
    try:
        evaluate(_CAPTURE, points, inputs, outputs, c.wrt, "jet", second=c.second or None,
                 laplacian=c.laplacian)
    except _Seeded as seeded:
        return seeded.jet
    raise RuntimeError("evaluate did not run the model")  # pragma: no cover


class _LastStage(nn.Module):
    """The last stage seen as a model of the network input, for :func:`constraint_residual`: the body input
    is the received jet (or, on a one-stage pipeline, the input itself); the heads get the input jet."""

    def __init__(self, stage: PipelineStage, received: torch.Tensor | None):
        super().__init__()
        self.stage, self.received = stage, received

    def forward(self, x):
        y = x if self.received is None else x.like(self.received)
        return self.stage(y, x)


class PipelineSchedule:
    """Forward and backward of every micro-batch of every constraint through the pipeline (GPipe or 1F1B).

    Every rank of one pipeline (the mesh's ``"pp"`` group) builds one, with its own stage; the constructor
    exchanges the stage boundaries' widths (a collective over ``"pp"``).

    Parameters
    ----------
    stage : PipelineStage
        This rank's stage (``stage.stage == mesh.index("pp")``).
    mesh : DeviceMesh or None
        None for a one-stage pipeline.
    constraints : sequence of Constraint
        As for :func:`~elecsolver.training.loss.loss_terms`.
    inputs, outputs : sequence of str
        The problem's input column and field component names.
    microbatches : int
        M >= 1: every constraint's points are split into M row blocks (``torch.tensor_split``).
    schedule : {"gpipe", "1f1b"}
    method : {"jet"}
        The derivative method; only jets cross stage boundaries (nested autograd cannot, shared/DESIGN.md).
    compiled : bool
        Compile each work item's compute on this stage (:meth:`_stage_compute`: the stage's layers, and on the last
        stage the residual and the weighted term) with ``torch.compile(fullgraph=True)``; the sends and receives
        between them stay eager.  One graph per loss term (its declared derivatives fix the jet's channels), with
        the point dimension dynamic (micro-batches of unequal size do not recompile).

    Raises
    ------
    ValueError
        For an unknown schedule or method, M < 1, or a stage that does not match the mesh.

    Work items are (micro-batch m, constraint c) in the order m = 0..M-1 outer, constraints with points in
    their order inner, the same on every stage.  A boundary carries ``channels`` [C, n_m, width] in the
    stage's dtype (C = 1 + K + P + L from the constraint's declared derivatives, width from the cut).
    """

    def __init__(self, stage: PipelineStage, mesh, constraints: Sequence, inputs: Sequence[str],
                 outputs: Sequence[str], microbatches: int, schedule: str = "gpipe", method: str = "jet",
                 compiled: bool = False):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown pipeline schedule {schedule!r}; choose one of {SCHEDULES}")
        if method != "jet":
            raise ValueError(f"pipeline parallelism needs derivatives by jets (method='jet'), got {method!r}: "
                             "nested autograd cannot cross a stage boundary")
        if not isinstance(microbatches, int) or microbatches < 1:
            raise ValueError(f"--microbatches must be a positive integer, got {microbatches!r}")
        pp = 1 if mesh is None else mesh.size("pp")
        index = 0 if mesh is None else mesh.index("pp")
        if pp != stage.n_stages or index != stage.stage:
            raise ValueError(f"pipeline stage {stage.stage} of {stage.n_stages} does not match the mesh "
                             f"(position {index} of pp = {pp}); split with split_network(model, mesh.size('pp'), "
                             "mesh.index('pp'))")
        self.stage, self.mesh = stage, mesh
        self.constraints, self.inputs, self.outputs = list(constraints), tuple(inputs), tuple(outputs)
        self.microbatches, self.schedule, self.method = microbatches, schedule, method
        self.compiled = bool(compiled)
        self._compute = torch.compile(self._stage_compute, fullgraph=True, dynamic=True) if compiled \
            else self._stage_compute
        # the loss-term weights of training.balance, set by the Trainer (None: all 1)
        self.term_weights: list[float] | None = None
        self.params = [p for p in stage.parameters() if p.requires_grad]
        self.group = None if mesh is None else mesh.group("pp")
        ranks = [0] if mesh is None else mesh.ranks("pp")
        self.prev_rank = None if stage.is_first else ranks[stage.stage - 1]
        self.next_rank = None if stage.is_last else ranks[stage.stage + 1]
        self.last_index = pp - 1
        self._pending: list = []
        self._grad_sent: list | None = None  # the last gradient send (see _backward)
        self.width_in, self.dtype_in, self.width_out, self.dtype_out = self._probe()

    # ----- boundaries ----------------------------------------------------------------------------
    def _stage_dtype(self) -> torch.dtype:
        for t in list(self.stage.parameters()) + list(self.stage.buffers()):
            if t.is_floating_point():
                return t.dtype
        return torch.get_default_dtype()

    def _device(self) -> torch.device:
        for t in list(self.stage.parameters()) + list(self.stage.buffers()):
            return t.device
        return torch.device("cpu")

    def _probe(self):
        """Run the stage on one zero row to learn its output width; send (width, dtype) to the next stage."""
        dev = self._device()
        if self.stage.is_first:
            width_in, dtype_in = len(self.inputs), self._stage_dtype()
        else:
            meta = torch.zeros(2, dtype=torch.int64, device=dev)
            self._recv(meta, self.prev_rank)
            width_in, dtype_in = int(meta[0]), _DTYPES[int(meta[1])]
        if self.stage.is_last:
            return width_in, dtype_in, None, None
        with torch.no_grad():
            y = self.stage.body(torch.zeros(1, width_in, dtype=dtype_in, device=dev))
        if y.dtype not in _DTYPES:
            raise ValueError(f"pipeline stage {self.stage.stage} outputs {y.dtype}, which a boundary cannot carry")
        self._send(torch.tensor([y.shape[-1], _DTYPES.index(y.dtype)], dtype=torch.int64, device=dev),
                   self.next_rank)
        self._finish_sends()
        return width_in, dtype_in, int(y.shape[-1]), y.dtype

    def _send(self, tensor: torch.Tensor, dst: int) -> list:
        entry = list(collectives.isend(tensor, dst, self.group))  # [work, buffer]: the buffer lives until released
        self._pending.append(entry)
        return entry

    def _release(self, entry: list | None) -> None:
        """Wait for one send and drop its buffer (a send whose peer has provably received it returns at once)."""
        if entry is None:
            return
        entry[0].wait()
        self._pending = [e for e in self._pending if e is not entry]

    def _recv(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        return collectives.recv(tensor, src, self.group)

    def _finish_sends(self) -> None:
        for work, _ in self._pending:
            work.wait()
        self._pending.clear()

    # ----- work items ----------------------------------------------------------------------------
    def _items(self, batches: Sequence[tuple]) -> tuple[list[tuple], list[int]]:
        if len(batches) != len(self.constraints):
            raise ValueError(f"got {len(batches)} batches for {len(self.constraints)} constraints")
        m = self.microbatches
        active, empty = [], []
        short = [(c.name, int(pts.shape[0])) for c, (pts, _, _, _) in zip(self.constraints, batches)
                 if 0 < int(pts.shape[0]) < m]
        if short:
            fewest = min(n for _, n in short)
            names = ", ".join(f"{name!r} ({n})" for name, n in short)
            raise ValueError(f"loss terms with fewer points on this rank than the {m} pipeline micro-batches: "
                             f"{names}; use --microbatches {fewest} or less, or more points for them")
        for ci, (pts, _, _, _) in enumerate(batches):
            (empty if int(pts.shape[0]) == 0 else active).append(ci)
        splits = {}
        for ci in active:
            pts, nrm, w, denom = batches[ci]
            parts = [torch.tensor_split(t, m) if t is not None else [None] * m for t in (pts, nrm, w)]
            splits[ci] = (parts, denom)
        items = []
        for k in range(m):
            for ci in active:
                (p, nr, wt), denom = splits[ci]
                items.append((ci, p[k], nr[k], wt[k], denom))
        return items, empty

    def _forward(self, item, terms: torch.Tensor):
        ci, pts, nrm, w, denom = item
        c, st = self.constraints[ci], self.stage
        x = _seed(c, pts, self.inputs, self.outputs)
        received = None
        if not st.is_first:
            received = torch.empty(x.spec.n_channels, pts.shape[0], self.width_in, dtype=self.dtype_in,
                                   device=pts.device)
            self._recv(received, self.prev_rank)
            received.requires_grad_(True)
        if st.is_last:
            lam = 1.0 if self.term_weights is None else self.term_weights[ci]
            if self.compiled:  # the balancing weight outside the graph: a changed float would recompile it
                term = self._compute(ci, x, pts, nrm, w, denom, received, 1.0)
                term = term * lam if lam != 1.0 else term
            else:
                term = self._stage_compute(ci, x, pts, nrm, w, denom, received, lam)
            terms[ci] += term.detach().to(terms.dtype)
            return received, term, None
        y = self._compute(ci, x, pts, nrm, w, denom, received, 1.0)
        shape = (x.spec.n_channels, pts.shape[0], self.width_out)
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != shape or y.dtype != self.dtype_out:
            got = (tuple(y.shape), y.dtype) if isinstance(y, torch.Tensor) else type(y).__name__
            raise TypeError(f"pipeline stage {st.stage} must map the jet to channels {shape} of {self.dtype_out} "
                            f"(the layout announced to the next stage), got {got}: a layer without jet rules, one "
                            "that changes the carried derivatives, or points of another dtype than the network's?")
        return received, y, self._send(y, self.next_rank)

    def _stage_compute(self, ci: int, x: Jet, pts, nrm, w, denom, received, lam: float) -> torch.Tensor:
        """One work item's compute on this stage, between its receive and its send (what ``compiled`` compiles):
        on the last stage the weighted loss term (0-d), elsewhere the body's output channels [C, n, width]."""
        c, st = self.constraints[ci], self.stage
        if st.is_last:
            r = constraint_residual(_LastStage(st, received), c, pts, nrm, self.inputs, self.outputs, "jet")
            sq = r.pow(2).sum(1)
            if w is not None:
                sq = sq * w
            return (c.weight * lam) * sq.sum() / denom
        y = st.body(x if received is None else x.like(received))
        if not isinstance(y, Jet) or y.spec != x.spec:
            return y  # refused by the caller
        return y.channels

    def _backward(self, saved, scale) -> None:
        """Backward of one work item.  Its sends are released as soon as they are known to be done, so that a
        work item's boundary tensors do not outlive it (1F1B keeps at most ``pp - stage`` items' activations): the
        activation send once the gradient for it has come back (the next stage received it before computing that
        gradient), the previous gradient send at the next backward (the previous stage reaches that receive without
        waiting for anything else from this stage)."""
        received, out, sent = saved
        self._release(self._grad_sent)
        self._grad_sent = None
        if self.stage.is_last:
            if out.requires_grad:
                torch.autograd.backward(out * scale)
        else:
            grad = torch.empty_like(out)
            self._recv(grad, self.next_rank)
            self._release(sent)
            if out.requires_grad:
                torch.autograd.backward(out, grad)
        if received is not None:
            g = received.grad if received.grad is not None else torch.zeros_like(received)
            received.grad = None
            self._grad_sent = self._send(g, self.prev_rank)

    def check_batches(self, batches: Sequence[tuple]) -> None:
        """Raise the ValueError :meth:`__call__` would raise for these batches (too few points for the
        micro-batches), without running anything."""
        self._items(batches)

    def __call__(self, batches: Sequence[tuple], scale=1.0) -> torch.Tensor:
        """Forward and backward of all work items; gradients accumulate into the stage parameters' ``.grad``.

        Parameters
        ----------
        batches : sequence of (points [n, d], normals [n, s] or None, weights [n] or None, denominator)
            One per constraint, the same on every stage of the pipeline (this rank's data shard); the
            denominator is the global sum of weights (float or 0-d tensor).
        scale : float or 0-d tensor
            The gradient is that of ``scale * loss_terms(...).sum()`` (a loss scale).

        Returns
        -------
        torch.Tensor
            [n_constraints], detached and unscaled, equal to ``loss_terms`` of the unsplit network up to
            rounding, identical on every stage (broadcast from the last).  A constraint without points here
            gives 0 (its zero term still touches every parameter, as in ``loss_terms``).

        Raises
        ------
        ValueError
            If a constraint has 0 < n < M points (naming it, n and M), or ``batches`` does not match the
            constraints.
        """
        items, empty = self._items(batches)
        ref = batches[0][0] if batches else torch.zeros(0)
        terms = torch.zeros(len(self.constraints), dtype=ref.dtype, device=ref.device)
        n = len(items)
        try:
            if self.schedule == "gpipe":
                saved = [self._forward(it, terms) for it in items]
                for k in reversed(range(n)):
                    self._backward(saved[k], scale)
                    saved[k] = None
            else:
                warmup = min(self.stage.n_stages - self.stage.stage - 1, n)
                queue = [self._forward(items[k], terms) for k in range(warmup)]
                for k in range(warmup, n):
                    queue.append(self._forward(items[k], terms))
                    self._backward(queue.pop(0), scale)
                while queue:
                    self._backward(queue.pop(0), scale)
            if empty and self.params:
                (sum(p.sum() for p in self.params) * 0.0 * scale).backward()
        except BaseException:
            self._pending.clear()  # a peer may never receive them: waiting could hang
            self._grad_sent = None
            raise
        self._finish_sends()
        self._grad_sent = None
        if self.mesh is not None:
            self.mesh.broadcast(terms, src_index=self.last_index, axis="pp")
        return terms
