"""The parallel strategy: which parallelism to apply, validated once, and applied to a one-device network from
outside in one order.

Order (as torchtitan applies its parallelisms; shared/DESIGN.md, "Packages"):

1. the network is built on every rank from the same seed (an identical start without communication);
2. pipeline parallel (``pp``) splits the body into stages (:mod:`elecsolver.parallel.pipeline`); every rank keeps
   its stage only;
3. tensor parallel (``tp``) shards the hidden layers of the stage (:mod:`elecsolver.parallel.tensor_parallel`);
4. mixed precision (``precision``) swaps the linear layers for ones whose derivative channels stay float32
   (:mod:`elecsolver.parallel.mixed_precision`);
5. recompute (``recompute``) checkpoints the body's blocks (:mod:`elecsolver.parallel.recompute`);
6. compile (``training.compile``) is applied by the trainer: the loss-and-gradient graph (with tp's collectives in
   it), or under pp each stage's compute between its sends and receives, and Adam's update (ZeRO's local one);
7. data parallel (``dp``): the parameters are broadcast over the dp group, gradients are summed over it, the points
   are sharded over it; ``zero`` shards Adam's state over it (ZeRO stage 1, ``ZeroRedundancyOptimizer``).

The trainer sees only the :class:`~elecsolver.training.context.RunContext` this module composes.
"""

from __future__ import annotations

import copy
import functools
import logging
from dataclasses import asdict, dataclass, field

import torch

from elecsolver.capabilities import active, refusal
from elecsolver.config import ConfigError
from elecsolver.training.context import RunContext

from .mesh import DeviceMesh, MeshError

__all__ = ["LOSS_SCALE_DEFAULTS", "ParallelOptions", "apply_parallelism"]

log = logging.getLogger(__name__)

LOSS_SCALE_DEFAULTS = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1000,
                       "max_overflows": 20}


@dataclass(frozen=True)
class ParallelOptions:
    """How to spread one training run over the ranks a launcher started.

    Parameters
    ----------
    dp : int, optional
        Data-parallel ranks (default: world / (tp pp)).
    tp, pp : int
        Tensor- and pipeline-parallel ranks (default 1).
    microbatches : int, optional
        Pipeline micro-batches per step, each constraint's points cut into this many row blocks (default 2 pp).
    schedule : {"1f1b", "gpipe"}
        Pipeline schedule.
    zero : bool
        Shard the optimizer state over the data-parallel ranks (ZeRO stage 1; Adam only).
    recompute : bool
        Recompute each body block's activations in the backward pass (activation checkpointing).
    recompute_block : int, optional
        Layers per recompute block (default: a linear layer with its activation).
    precision : {"fp32", "bf16", "fp16"}
        Autocast precision of the forward's matmuls on the value channel (derivative channels stay float32);
        "fp16" adds dynamic loss scaling.
    loss_scale : dict
        The loss scaler's ``init_scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``max_overflows`` (see :class:`~elecsolver.parallel.mixed_precision.DynamicLossScaler`).
    timeout_s : float
        Timeout of every process group's collectives, seconds.
    profile : bool
        Profile the first steps and print the split of step time between compute and communication.
    """

    dp: int | None = None
    tp: int = 1
    pp: int = 1
    microbatches: int | None = None
    schedule: str = "1f1b"
    zero: bool = False
    recompute: bool = False
    recompute_block: int | None = None
    precision: str = "fp32"
    loss_scale: dict = field(default_factory=dict)
    timeout_s: float = 1800.0
    profile: bool = False

    @classmethod
    def coerce(cls, value) -> ParallelOptions:
        """``value`` as options: None (defaults), a ParallelOptions, or a dict of its fields.

        Raises
        ------
        ConfigError
            For an unknown key.
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = set(cls.__dataclass_fields__)
            unknown = sorted(set(value) - known)
            if unknown:
                raise ConfigError(f"unknown parallel option(s) {unknown}; the options are {sorted(known)}")
            return cls(**value)
        raise ConfigError(f"parallel options must be a ParallelOptions or a dict, got {type(value).__name__}")

    @property
    def n_microbatches(self) -> int:
        return self.microbatches if self.microbatches is not None else (2 * self.pp if self.pp > 1 else 1)

    @property
    def model_parallel(self) -> bool:
        return self.tp > 1 or self.pp > 1

    def validate(self, training, world: int) -> None:
        """Check the options against each other, the training block and the world size.

        Raises
        ------
        ConfigError
            One line naming the clash and what to change.
        """
        from .mixed_precision import PRECISIONS
        from .pipeline import SCHEDULES

        for name in ("tp", "pp"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"--{name} must be a positive integer, got {v!r}")
        if self.microbatches is not None and (not isinstance(self.microbatches, int) or self.microbatches < 1):
            raise ConfigError(f"--microbatches must be a positive integer, got {self.microbatches!r}")
        if self.microbatches not in (None, 1) and self.pp == 1:
            raise ConfigError("--microbatches needs --pp > 1 (micro-batches feed pipeline stages); for gradient "
                              "accumulation on one stage use --accumulate")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"--schedule must be one of {list(SCHEDULES)}, got {self.schedule!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision must be one of {list(PRECISIONS)}, got {self.precision!r}")
        unknown = sorted(set(self.loss_scale) - set(LOSS_SCALE_DEFAULTS))
        if unknown:
            raise ConfigError(f"unknown loss_scale key(s) {unknown}; the keys are {sorted(LOSS_SCALE_DEFAULTS)}")
        if not self.timeout_s > 0:
            raise ConfigError(f"the process-group timeout must be positive, got {self.timeout_s}")
        try:
            DeviceMesh.sizes(self.dp, self.tp, self.pp, world)  # sizes only: no group is made here
        except MeshError as exc:
            raise ConfigError(str(exc)) from None
        why = refusal(active(parallel=self, training=training))  # elecsolver.capabilities: the one table
        if why is not None:
            raise ConfigError(why)

    def as_dict(self) -> dict:
        return asdict(self)


def apply_parallelism(problem, comm, device: torch.device, options=None) -> tuple[torch.nn.Module, RunContext]:
    """Build the problem's network on every rank and apply the strategy; returns ``(model, context)``.

    Parameters
    ----------
    problem : Problem
    comm : DeviceMesh or None
        From :func:`~elecsolver.parallel.data_parallel.init_data_parallel` (None: one process).
    device : torch.device
    options : ParallelOptions, dict or None

    Raises
    ------
    ConfigError
        For options that clash or do not fit the world size (one line; nothing is built).
    """
    from elecsolver.training.trainer import build_model

    opts = ParallelOptions.coerce(options)
    world, rank = (comm.world, comm.rank) if comm is not None else (1, 0)
    opts.validate(problem.training, world)
    mesh = DeviceMesh(opts.dp, opts.tp, opts.pp, rank=rank, world=world, timeout_s=opts.timeout_s)
    model = build_model(problem, device)  # the same seed on every rank: the same start
    hooks: dict = {}
    if mesh.pp > 1:
        from .pipeline import PipelineSchedule, split_network

        template = copy.deepcopy(model)
        hooks["check_model"] = template
        model = split_network(model, mesh.pp, mesh.pp_index)
        m, schedule = opts.n_microbatches, opts.schedule

        def make_fb(constraints, inputs, outputs, method, compiled=False, stage=model):
            return PipelineSchedule(stage, mesh, constraints, inputs, outputs, m, schedule, method, compiled)

        hooks["make_forward_backward"] = make_fb
    if mesh.tp > 1:
        from .tensor_parallel import apply_tensor_parallel

        model = apply_tensor_parallel(model, mesh)
    if mesh.tp > 1 or mesh.pp > 1:
        hooks["gather_model"] = functools.partial(_gather, mesh=mesh, template=hooks.get("check_model"))
    if opts.precision != "fp32":
        from .mixed_precision import DynamicLossScaler, apply_mixed_precision, autocast

        model = apply_mixed_precision(model, opts.precision)
        hooks["autocast"] = functools.partial(autocast, device.type, opts.precision)
        if opts.precision == "fp16":
            hooks["loss_scaler"] = DynamicLossScaler(**{**LOSS_SCALE_DEFAULTS, **opts.loss_scale},
                                                     all_reduce_max=functools.partial(mesh.all_reduce_max,
                                                                                      axis="world"))
    if opts.recompute:
        from .recompute import apply_recompute

        model = apply_recompute(model, opts.recompute_block)
    if "make_forward_backward" in hooks and "autocast" in hooks:
        make_fb, cast = hooks["make_forward_backward"], hooks["autocast"]

        def make_cast_fb(*args, make_fb=make_fb, cast=cast, **kwargs):
            fb = make_fb(*args, **kwargs)

            def run(batches, scale):
                with cast():
                    return fb(batches, scale)
            run.pipeline = fb  # the Trainer hands it the loss-term weights (training.balance)
            return run

        hooks["make_forward_backward"] = make_cast_fb
    # data parallel: gradients summed over the dp group (identical parameters: broadcast once the context exists)
    if opts.zero and mesh.dp > 1:
        hooks["make_optimizer"] = functools.partial(_zero_optimizer, group=mesh.group("dp"))
        hooks["optimizer_state_dict"] = functools.partial(_zero_state_dict, writer=mesh.dp_index == 0)
    elif opts.zero:
        log.warning("--zero with one data-parallel rank shards nothing; running plain Adam")
    if world > 1:
        hooks["stop_vote"] = functools.partial(_stop_vote, mesh=mesh)
    shard = (mesh.tp_index, mesh.pp_index)
    ctx = RunContext.from_comm(
        mesh, is_writer=mesh.rank == 0,
        checkpoint_name="checkpoint.pt" if shard == (0, 0) else f"checkpoint-tp{shard[0]}-pp{shard[1]}.pt",
        checkpoint_writer=mesh.dp_index == 0, model_parallel=mesh.tp * mesh.pp, **hooks)
    ctx.broadcast_model(model)  # identical parameters over the dp group (they already are: the same seed)
    ctx.extra.update(mesh=mesh, layout={"dp": mesh.dp, "tp": mesh.tp, "pp": mesh.pp},
                     parallel={**opts.as_dict(), "dp": mesh.dp, "microbatches": opts.n_microbatches})
    if world > 1:
        log.info("%s; %s", mesh.describe(), ", ".join(f"{k}={v}" for k, v in opts.as_dict().items()
                                                      if k not in ("loss_scale", "timeout_s")))
    return model, ctx


def _stop_vote(signum: int, mesh: DeviceMesh) -> int:
    """The largest pending stop request over every rank (collective; a signal that reached one rank stops all)."""
    flag = torch.tensor([signum], dtype=torch.int64)
    return int(mesh.all_reduce_max(flag, axis="world")[0])


def _gather(model, mesh: DeviceMesh, template=None):
    from .tensor_parallel import gather_tensor_parallel

    full = gather_tensor_parallel(model, mesh) if mesh.tp > 1 else model
    if mesh.pp > 1:
        from .pipeline import gather_pipeline

        full = gather_pipeline(full, mesh, template)
    return full


class _ShardAdam(torch.optim.Adam):
    """Adam over one rank's shard of the parameters (the local optimizer of ZeRO), built as one process builds Adam
    (:func:`~elecsolver.training.optim.make_optimizer`: a float64 step counter); with ``compiled`` its update is one
    torch.compile graph, between ZeRO's collectives (the parameter broadcasts after the update stay eager)."""

    def __init__(self, params, lr, compiled: bool = False):
        from elecsolver.training.optim import adam_state, compile_update

        super().__init__(params, lr=lr)
        adam_state(self, torch.device("cpu"))  # not capturable: the counter lives on the host, as eager Adam's
        self._compiled = compile_update(self, kind=torch.optim.Adam) if compiled else None

    def step(self, closure=None):
        if self._compiled is None:
            return super().step(closure)
        with torch.no_grad():
            self._compiled()
        return None


def _zero_optimizer(params, options, compiled, group):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    lr = torch.tensor(options.lr, dtype=torch.float64) if compiled else options.lr  # a graph input when compiled
    opt = ZeroRedundancyOptimizer(params, optimizer_class=functools.partial(_ShardAdam, compiled=compiled),
                                  process_group=group, lr=lr)
    opt.compiles_itself = True  # the Step compiles no update around ZeRO's collectives: the local one is compiled
    return opt


def _zero_state_dict(optimizer, writer: bool):
    optimizer.consolidate_state_dict(to=0)  # collective over the dp group; index 0 of the group receives
    return optimizer.state_dict() if writer else None
