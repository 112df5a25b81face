"""Command line (``elecsolver problems``, ``elecsolver run PROBLEM [options]``) and :func:`train`.

This is the one module that composes the core, ``elecsolver.parallel`` and ``elecsolver.problems``.
PROBLEM is a registered name, a Python file defining one :class:`~elecsolver.problem.Problem` subclass
(``path/to/my_problem.py``, or ``path/to/file.py:ClassName`` when it defines several) or an importable
``package.module:ClassName``.  Bad input is reported as one line on stderr with exit code 2, before
anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from .export import writes_png
from .locate import UsageError, load_problem_class

__all__ = ["UsageError", "config_toml", "load_problem_class", "main", "parallel_defaults", "run", "run_problem", "script_main", "train"]

log = logging.getLogger("elecsolver")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit code 2 (argparse prints usage too)
        raise UsageError(message)


def _run_options(r: argparse.ArgumentParser) -> None:
    r.add_argument("--preset", help="training preset of the problem (e.g. ci, quick; docs/problems.md lists each problem's); "
                   "default: the problem's default")
    r.add_argument("--steps", type=int, help="training steps of training.optimizer (a finish, training.finish, adds its own)")
    r.add_argument("--seed", type=int, help="random seed of points and initial parameters")
    r.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    r.add_argument("--dtype", choices=("float32", "float64"), help="floating-point precision")
    r.add_argument("--out", default="out", help="output folder (default ./out)")
    r.add_argument("--config", metavar="FILE.toml",
                   help="configuration file (TOML; 'elecsolver config PROBLEM' prints one): any configuration key, "
                        "preset = \"...\" and a [parallel] section; --set and the flags below override it")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="change a configuration entry by dotted key; VALUE is a JSON literal (a bare word is a "
                        "string: --set network.kind=mlp)")
    r.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    r.add_argument("--stop-after", type=int, metavar="STEP",
                   help="train only up to this step, checkpoint and exit (continue later with --resume)")
    r.add_argument("--compile", action="store_true",
                   help="run the training step through torch.compile (same numbers as eager, faster steps; "
                        "the first step compiles, tens of seconds)")
    r.add_argument("--cuda-graphs", action="store_true",
                   help="with --device cuda: --compile, and capture the compiled step as CUDA graphs (mode "
                        "reduce-overhead; no effect on a CPU)")
    r.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    r.add_argument("--init-from", metavar="DIR",
                   help="start from the network of the finished run in DIR (the same network; e.g. fine-tune a "
                        "trained family at one configuration, with --set sampling.parameters=fixed)")
    g = r.add_argument_group("parallelism (docs/parallel.md; dp x tp x pp must equal the number of ranks)")
    g.add_argument("--dp", type=int, help="data-parallel ranks (default: ranks / (tp x pp))")
    g.add_argument("--tp", type=int, help="tensor-parallel ranks: hidden layers sharded; hidden widths must be multiples of tp (default 1)")
    g.add_argument("--pp", type=int, help="pipeline stages: the body cut into pp parts (default 1)")
    g.add_argument("--microbatches", type=int, help="pipeline micro-batches per step (default 2 x pp)")
    g.add_argument("--schedule", help="pipeline schedule: 1f1b (default) or gpipe")
    g.add_argument("--zero", action="store_true", default=None, help="shard Adam's state over the data-parallel ranks (ZeRO-1)")
    g.add_argument("--recompute", action="store_true", default=None,
                   help="recompute activations in the backward pass (less memory, 1.2-1.65x the step time; docs/parallel.md)")
    g.add_argument("--precision",
                   help="fp32 (default), bf16 or fp16 (autocast on the value channel; fp16 scales the loss)")
    g.add_argument("--accumulate", type=int, metavar="K",
                   help="gradient accumulation: each step in K micro-steps (same step, memory of 1/K of the batch)")
    g.add_argument("--parallel", choices=("auto",), help="auto: the planner picks dp, tp, pp, micro-batches, schedule, "
                   "ZeRO and recompute (the fastest predicted plan that fits; the flags above given with it are kept "
                   "as constraints; precision stays fp32 unless --precision is given)")
    g.add_argument("--machine", metavar="FILE|NAME", help="the machine description --parallel auto plans for (TOML "
                   "from 'elecsolver plan --calibrate', or a shipped one; default: the shipped cpu-2core)")
    g.add_argument("--profile", action="store_true", default=None,
                   help="profile the first steps: split of step time between compute and communication")


def _parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = _Parser(prog="elecsolver", description="Physics-informed neural networks for electromagnetics.")
    p.add_argument("--version", action="version", version=f"elecsolver {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("problems", help="list the registered problems, one a line")
    c = sub.add_parser("config", help="print a problem's resolved configuration as TOML (for --config)")
    c.add_argument("problem", help="a registered name, file.py[:Class] or package.module:Class")
    c.add_argument("--preset", help="the preset to resolve (default: the problem's default)")
    c.add_argument("--config", metavar="FILE.toml", help="a configuration file applied on top of the preset")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="change a configuration entry by dotted key; VALUE is a JSON literal (a bare word is a "
                        "string: --set network.kind=mlp)")
    pl = sub.add_parser("plan", help="list the parallel plans a problem can run on N ranks, and why the others "
                        "cannot (docs/parallel.md)")
    pl.add_argument("problem", help="a registered name, file.py[:Class] or package.module:Class")
    pl.add_argument("--world-size", type=int, required=True, metavar="N", help="ranks the run will have")
    pl.add_argument("--preset", help="the preset to plan for (default: the problem's default)")
    pl.add_argument("--config", metavar="FILE.toml", help="a configuration file applied on top of the preset")
    pl.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="change a configuration entry by dotted key; VALUE is a JSON literal (a bare word is a "
                         "string: --set network.kind=mlp)")
    pl.add_argument("--memory-per-rank", metavar="SIZE", help="memory of one rank, e.g. 4GiB or 512MiB: measure this "
                    "problem's activation coefficients (two short steps here) and reject plans predicted above 80 %% "
                    "of it")
    pl.add_argument("--machine", metavar="FILE|NAME", help="a machine description (TOML; docs/parallel.md): rank the "
                    "plans by predicted step time on it and reject those over 80 %% of its memory per rank; shipped: "
                    "cpu-2core, h100-8x-nvlink, h100-64x-infiniband")
    pl.add_argument("--calibrate", action="store_true", help="measure this host with --world-size processes at once "
                    "(collectives, step rates, activation memory; about a minute), write the description to --machine "
                    "(default machine.toml) and plan with it")
    pl.add_argument("--rejected", action="store_true", help="also list every rejected plan with its reason")
    r = sub.add_parser("run", help="train a problem and write its fields, metrics and snapshots")
    r.add_argument("problem", help="a name from 'elecsolver problems', a file my_problem.py[:Class] or "
                   "package.module:Class")
    _run_options(r)
    q = sub.add_parser("query", help="evaluate a trained run (a family: at a configuration) and write its files")
    q.add_argument("run", help="the folder of a finished run")
    q.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the configuration by its key, e.g. source.x0=0.42 (SI units)")
    q.add_argument("--out", help="output folder (default RUN/query)")
    q.add_argument("--extrapolate", action="store_true",
                   help="evaluate a configuration outside the trained box (warns instead of refusing)")
    q.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    q.add_argument("--problem", help="the problem (file.py[:Class]) when the run's is not registered")
    v = sub.add_parser("invert", help="recover a trained family's parameters from probe traces")
    v.add_argument("run", help="the folder of a finished run of a family")
    v.add_argument("--probes", required=True, metavar="FILE.npz",
                   help="places [K, dim] (m), times [nt] (s) and one [K, nt] array per measured field (SI), e.g. Hz; "
                        "without a time axis no times and one [K] array per field (complex for a complex field)")
    v.add_argument("--unknowns", help="comma-separated parameters to recover (default: all)")
    v.add_argument("--starts", type=int, default=8, help="starting points of the search (default 8)")
    v.add_argument("--json", metavar="PATH", help="also write the result here")
    v.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    v.add_argument("--problem", help="the problem (file.py[:Class]) when the run's is not registered")
    return p


# problems ----------------------------------------------------------------------------------------
def parallel_defaults() -> dict:
    """The ``[parallel]`` section's keys and defaults (:class:`elecsolver.parallel.ParallelOptions`)."""
    import dataclasses

    from .parallel.strategy import LOSS_SCALE_DEFAULTS, ParallelOptions

    return {**dataclasses.asdict(ParallelOptions()), "loss_scale": dict(LOSS_SCALE_DEFAULTS)}


def _configure(cls, args):
    """A validated problem from the class, configuration file, preset and options (no side effects).  Sets
    ``args.preset`` to the preset used and ``args.parallel_file`` to the file's ``[parallel]`` entries."""
    from .config import ConfigError, apply_file, apply_overrides, read_toml

    try:
        preset = args.preset
        args.parallel_file = {}
        path = getattr(args, "config", None)
        parsed = read_toml(path) if path is not None else None  # read once: the preset it names, then its entries
        if parsed is not None:
            named = parsed[0].get("preset")
            preset = preset or (named if isinstance(named, str) else None)
        preset = preset or cls.default_preset
        config = cls.preset_config(preset)
        args.parallel_file = cls.preset_parallel(preset)  # the preset's options, under the file's and the flags
        unknown = sorted(set(args.parallel_file) - set(parallel_defaults()))
        if unknown:
            raise ConfigError(f"preset {preset!r} of {cls.name}: unknown parallel option(s) {unknown}; the options "
                              f"are {sorted(parallel_defaults())}")
        if path is not None:
            defaults = {**parallel_defaults(), **args.parallel_file}
            config, extra = apply_file(config, path, extras={"preset": preset, "parallel": defaults}, parsed=parsed)
            args.parallel_file = {k: v for k, v in extra["parallel"].items() if v != parallel_defaults()[k]}
        args.preset = preset
        training = config["training"]
        if getattr(args, "steps", None) is not None:
            if args.steps < 1:
                raise UsageError(f"--steps must be >= 1, got {args.steps}")
            training["steps"] = args.steps
        if getattr(args, "seed", None) is not None:
            training["seed"] = args.seed
        if getattr(args, "dtype", None) is not None:
            training["dtype"] = args.dtype
        if getattr(args, "accumulate", None) is not None:
            training["accumulate"] = args.accumulate
        ours = [o for o in args.overrides if o.partition("=")[0].strip().startswith("parallel.")]
        config = apply_overrides(config, [o for o in args.overrides if o not in ours])
        if ours:  # --set parallel.KEY=VALUE: the [parallel] section's keys, over the preset's and the file's
            merged = apply_overrides({"parallel": {**parallel_defaults(), **args.parallel_file}}, ours)["parallel"]
            args.parallel_file = {k: v for k, v in merged.items() if v != parallel_defaults()[k]}
        if getattr(args, "compile", False) or getattr(args, "cuda_graphs", False):
            config["training"]["compile"] = True
        if getattr(args, "cuda_graphs", False):
            config["training"]["cuda_graphs"] = True
        if getattr(args, "init_from", None):
            config["training"]["init_from"] = str(args.init_from)
        return cls(config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def config_toml(problem, preset: str, parallel=None, command: str | None = None) -> str:
    """The configuration of ``problem`` as the TOML text ``--config`` reads back: ``preset``, every section, and
    ``[parallel]`` (``parallel``: ParallelOptions, a dict or None for the defaults)."""
    import dataclasses

    from ._version import __version__
    from .config import to_toml
    from .parallel.strategy import ParallelOptions

    options = dataclasses.asdict(ParallelOptions.coerce(parallel))
    options["loss_scale"] = {**parallel_defaults()["loss_scale"], **options["loss_scale"]}
    header = (f"{problem.name}: elecsolver {__version__}\n"
              f"run it with: {command or f'elecsolver run {problem.name} --config FILE.toml'}\n"
              "units are SI (m, s, Hz, V/m, A/m) unless a key's documentation says otherwise")
    return to_toml({**problem.config, "parallel": options}, header, top={"preset": preset})


def _check_out_dir(out: Path) -> None:
    import tempfile

    for parent in [out, *out.parents]:
        if parent.exists():
            if not parent.is_dir():
                what = "is" if parent == out else f"lies under {parent}, which is"
                raise UsageError(f"--out {out} {what} an existing file, not a folder; choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"--out {out}: {parent} is not writable by this user; choose another folder")
            try:  # what access() cannot tell (a read-only mount, /proc, root on a squashed share): try it
                os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".elecsolver-check-"))
            except OSError as exc:
                raise UsageError(f"--out {out}: cannot create a folder in {parent} ({exc.strerror}); choose another "
                                 "folder") from None
            break


def _check_args(args) -> Path:
    if args.stop_after is not None and args.stop_after < 1:
        raise UsageError(f"--stop-after must be >= 1, got {args.stop_after}")
    if not (args.device == "cpu" or args.device.startswith("cuda")):
        raise UsageError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is visible to this process; use --device cpu")
    out = Path(args.out)
    _check_out_dir(out)
    if args.resume and not (out / "checkpoint.pt").is_file():
        raise UsageError(f"--resume: no checkpoint in {out}; run without --resume to start fresh")
    return out


def _setup_logging(rank: int, quiet: bool) -> None:
    """Rank 0 logs INFO to stderr (WARNING with --quiet); other ranks only warnings.  Every rank's INFO log also
    goes to its own file once the output folder exists (:func:`_log_to_file`)."""
    level = logging.WARNING if quiet or rank != 0 else logging.INFO
    prefix = f"[rank {rank}] " if rank else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", force=True)
    for h in logging.getLogger().handlers:
        h.setLevel(level)


def _log_to_file(out: Path, rank: int) -> Path:
    """Add ``out/logs/rank<r>.log`` (INFO and above, this rank) to the root logger; returns its path."""
    path = out / "logs" / f"rank{rank}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_elecsolver_rank_file", False):
            root.removeHandler(h)
            h.close()
    handler = logging.FileHandler(path, mode="a")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s",
                                           datefmt="%H:%M:%S"))
    handler._elecsolver_rank_file = True
    root.addHandler(handler)
    return path


# training ------------------------------------------------------------------------------------------
def _parallel_options(args):
    """The configuration file's ``[parallel]`` entries, with the command line's flags over them."""
    from .config import ConfigError
    from .parallel.strategy import ParallelOptions

    flags = {k: getattr(args, k) for k in ("dp", "tp", "pp", "microbatches", "schedule", "zero", "recompute",
                                           "precision", "profile")}
    given = {**getattr(args, "parallel_file", {}), **{k: v for k, v in flags.items() if v is not None}}
    if getattr(args, "parallel", None) == "auto":
        return {"auto": True, **given}
    if getattr(args, "machine", None) is not None:
        raise UsageError("--machine is read by --parallel auto; add --parallel auto, or leave --machine out")
    try:
        return ParallelOptions(**given)
    except (TypeError, ConfigError) as exc:
        raise UsageError(str(exc)) from None


DEFAULT_MACHINE = "cpu-2core"


def auto_parallel(problem, world: int, parallel=None, machine=None, quiet: bool = False) -> dict:
    """The parallel options ``--parallel auto`` runs: the fastest plan the planner predicts for ``problem`` on
    ``world`` ranks of ``machine`` that fits 80 % of its memory per rank, keeping the Plan fields given in
    ``parallel`` (a dict; its ``auto`` key aside) as constraints and passing its other options through. Precision is
    a constraint at fp32 unless given (it changes the numbers, not only the speed). Every rank computes the same
    plan (no measurement, only the description). Logged on the writer rank.

    Raises
    ------
    ConfigError
        If no plan keeps to the constraints (:class:`~elecsolver.parallel.planner.PlanError`), or the machine
        description cannot be read (:class:`~elecsolver.parallel.machine.MachineError`).
    """
    from .parallel.machine import Machine, load_machine
    from .parallel.planner import Plan, best_plan

    given = {k: v for k, v in (parallel if isinstance(parallel, dict) else {}).items() if k != "auto"}
    described = machine if isinstance(machine, Machine) else load_machine(machine or DEFAULT_MACHINE)
    constraints = {k: v for k, v in given.items() if k in Plan.__dataclass_fields__ and v is not None}
    constraints.setdefault("precision", "fp32")
    choice = best_plan(problem, world, described, constraints)
    if not quiet and _launch_rank() == 0:
        print(f"elecsolver: --parallel auto on {world} rank(s) of {described.name}"
              f"{'' if described.measured else ' (not measured)'}: {choice.plan.flags()} "
              f"(predicted {choice.step_s * 1e3:.3g} ms a step, {choice.memory_mib:.3g} MiB on the largest rank; "
              "elecsolver plan --machine lists the others)", file=sys.stderr)
    return {**{k: v for k, v in given.items() if k not in Plan.__dataclass_fields__}, **choice.plan.options()}


def _checkpoint_parallel(path: Path, parallel, quiet: bool):
    """``--resume --parallel auto``: the plan the checkpoint was written under (the planner is not asked again: a
    resume must keep dp, tp, pp, micro-batches, ZeRO and precision); ``parallel`` as it is when the checkpoint has no
    record of its options."""
    from .parallel.planner import Plan
    from .training.trainer import read_checkpoint

    recorded = read_checkpoint(path).get("parallel")
    if not recorded:
        return parallel
    given = {k: v for k, v in (parallel if isinstance(parallel, dict) else {}).items() if k != "auto"}
    plan = {k: recorded[k] for k in Plan.__dataclass_fields__ if k in recorded}
    if plan.get("pp", 1) == 1:
        plan["microbatches"] = None
    if not quiet and _launch_rank() == 0:
        flags = Plan(**{**plan, "microbatches": plan.get("microbatches") or 1}).flags()
        print(f"elecsolver: --parallel auto with --resume: the checkpoint's plan, {flags}", file=sys.stderr)
    return {**{k: v for k, v in given.items() if k not in Plan.__dataclass_fields__}, **plan}


def train(problem, *, out: str | os.PathLike = "out", device: str = "cpu", preset: str | None = None,
          resume: bool = False, stop_after: int | None = None, quiet: bool = False, parallel=None,
          machine=None, callbacks=()) -> dict | None:
    """Train ``problem`` and write its outputs: data parallel over the ranks a launcher started.

    Under ``mpirun``, ``torchrun`` or ``srun`` every rank calls this with the same problem; the ranks join
    one process group (``elecsolver.parallel``), each trains on its spatial shard of the points, and the
    writer rank computes the reference and writes ``out/`` (fields.h5 + fields.xdmf, metrics.json, PNGs,
    convergence.csv, checkpoint.pt, config.toml, logs/).  One process: the same without the group.

    Parameters
    ----------
    problem : Problem
    out : path
        Output folder (created on the writer rank).
    device : str
        "cpu" or "cuda".
    preset : str, optional
        Recorded in metrics.json and OUT/config.toml (None: the preset whose configuration ``problem.config`` is,
        else "custom").
    resume : bool
        Continue from ``out/checkpoint.pt``.
    stop_after : int, optional
        Train up to this step, checkpoint and return None.
    quiet : bool
        No progress bar, warnings only.
    parallel : ParallelOptions or dict, optional
        Tensor / pipeline / data parallel sizes, ZeRO, recompute, precision, profiling
        (:class:`elecsolver.parallel.ParallelOptions`; default: data parallel over all ranks, fp32); or ``"auto"``,
        or a dict with ``"auto": True`` whose other entries are kept as constraints: the planner's fastest
        predicted plan that fits (:func:`auto_parallel`).
    machine : str or Machine, optional
        With ``parallel="auto"``: the machine description to plan for (a TOML path, a shipped name, or a
        :class:`~elecsolver.parallel.machine.Machine`; default the shipped ``cpu-2core``).
    callbacks : list of Callback, optional
        Hooks of one's own in the training loop (:mod:`elecsolver.training.callbacks`), the same on every rank; a
        run that one of them stops (``trainer.should_stop``) returns None with its checkpoint written, as
        ``stop_after`` does.

    Returns
    -------
    dict or None
        The metrics (writer rank, finished run), else None.

    Raises
    ------
    ResumeError, LaunchError
        For a checkpoint that does not fit or ranks that cannot meet.
    ConfigError
        For parallel options that clash or do not fit the number of ranks (before any group is joined).
    Interrupted
        On SIGINT, SIGTERM or SIGUSR1 during training: every rank stopped after the same step and the checkpoint is
        written (:mod:`elecsolver.training.interrupt`; ``exit_code`` is 128 + the signal, the command exits with it).
    """
    from .config import ConfigError
    from .parallel.strategy import ParallelOptions
    from .training.context import launched_world_size
    from .training.interrupt import stop_requests

    out = Path(out)
    if preset is None:  # a problem built in Python: the preset its configuration is, else "custom"
        preset = _preset_of(problem)
    _refuse_other_problems_outputs(out, problem.name)
    total = problem.training.total_steps
    if stop_after is not None and stop_after > total:
        raise ConfigError(f"--stop-after {stop_after} lies beyond the run's last step ({total}: training.steps plus "
                          "the finish's): it would never stop there; give a step up to that, or more --steps")
    if (parallel == "auto" or (isinstance(parallel, dict) and parallel.get("auto"))) and resume and \
            (out / "checkpoint.pt").exists():
        parallel = _checkpoint_parallel(out / "checkpoint.pt", parallel, quiet)
    if parallel == "auto" or (isinstance(parallel, dict) and parallel.get("auto")):
        parallel = auto_parallel(problem, launched_world_size(), parallel, machine, quiet)
    elif machine is not None:
        raise ConfigError("machine is read by parallel='auto' (--parallel auto); give that, or leave machine out")
    options = ParallelOptions.coerce(parallel)
    options.validate(problem.training, launched_world_size())  # one clear line before any rank waits for another
    with stop_requests():  # SIGINT / SIGTERM / SIGUSR1: stop after a step with a checkpoint (Interrupted)
        return _train(problem, out, device, preset, resume, stop_after, quiet, options, callbacks)


def _train(problem, out, device, preset, resume, stop_after, quiet, options, callbacks=()):
    from .config import ConfigError
    from .export import export_run
    from .parallel.data_parallel import init_data_parallel, shutdown
    from .parallel.strategy import apply_parallelism
    from .training.interrupt import Interrupted
    from .training.trainer import Trainer

    comm, info, dev = init_data_parallel(device, timeout_s=options.timeout_s)
    _setup_logging(info.rank, quiet)
    try:
        try:
            model, context = apply_parallelism(problem, comm, dev, options)
        except ValueError as exc:  # a layout the network does not fit (widths, stages): the same on every rank
            raise ConfigError(str(exc)) from None
        trainer = Trainer(problem, model, context, device=str(dev), out_dir=out, progress=not quiet,
                          callbacks=callbacks)  # checks every residual: nothing is written before this
        if resume:  # a checkpoint of another configuration is refused before anything is written
            trainer.load_checkpoint()  # this rank's shard file under tp / pp
            if stop_after is not None and stop_after <= trainer.step:  # the same on every rank
                raise ConfigError(f"--stop-after {stop_after} is at or before the checkpoint's step {trainer.step}: "
                                  "nothing to train; give a later step, or leave --stop-after out to finish the run")
        # the reference (an FDTD run can take minutes) after every refusal, so that they come at once, and before
        # any write, so that a reference that cannot be computed leaves nothing behind
        reference = problem.reference() if info.rank == 0 else None
        trainer.reference = reference
        stale = []
        if context.is_writer:
            from .io.atomic import remove_stale

            out.mkdir(parents=True, exist_ok=True)
            stale = remove_stale(out)  # a killed run's unfinished writes; the files they were to replace are intact
            from .io.atomic import write_text

            base = preset if preset in type(problem).presets else type(problem).default_preset  # the file has every key
            write_text(out / "config.toml", config_toml(problem, base, options,
                                                        f"elecsolver run {_run_target(problem)} --config "
                                                        f"{out / 'config.toml'}"))
        context.barrier()
        _log_to_file(out, info.rank)
        mesh = context.extra.get("mesh")
        log.info("%s", mesh.describe() if mesh is not None else f"rank {info.rank} of {info.world}")
        if context.is_writer and stale:
            log.info("removed %d unfinished write(s) of an earlier, killed run: %s", len(stale), ", ".join(stale))
        if resume:
            log.info("resuming %s at step %d of %d", problem.name, trainer.step, problem.training.total_steps)
        if options.profile:
            from .parallel.profiling import profile_steps

            profile_steps(trainer, stop_after)
        trainer.train(stop_after=stop_after)
        if trainer.step < problem.training.total_steps:
            log.info("stopped at step %d; continue with --resume", trainer.step)
            if context.is_writer and quiet:  # --quiet hides the log line; say it once on stdout
                print(f"stopped at step {trainer.step} of {problem.training.total_steps}; continue with --resume",
                      flush=True)
            return None
        trainer.gather()  # collective: the writer evaluates a one-device copy of a sharded or split network
        metrics = export_run(trainer, reference, out, preset) if context.is_writer else None
        context.barrier()
        return metrics
    finally:  # no closing barrier while an exception propagates: the other ranks may never arrive
        exc = sys.exc_info()[0]
        shutdown(clean=exc is None or issubclass(exc, Interrupted))  # every rank stopped at the same step


def _preset_of(problem) -> str:
    """The name of the preset whose configuration ``problem.config`` is, else "custom"."""
    cls = type(problem)
    return next((name for name in cls.presets if cls.preset_config(name) == problem.config), "custom")


def _run_target(problem) -> str:
    """What ``elecsolver run`` takes to find ``problem``'s class: its registered name, else ``FILE.py:Class``."""
    import inspect

    from .problems import REGISTRY

    cls = type(problem)
    if REGISTRY.get(problem.name) is cls:
        return problem.name
    try:
        return f"{inspect.getfile(cls)}:{cls.__name__}"
    except TypeError:  # a class typed into an interactive session has no file
        return f"FILE.py:{cls.__name__}"


def _refuse_other_problems_outputs(out: Path, name: str) -> None:
    """Refuse an output folder that holds another problem's finished run (its metrics.json names it): the new run's
    files would replace some of the old ones and leave the rest (snapshots of other fields and times) beside them."""
    from .config import ConfigError

    try:
        other = json.loads((out / "metrics.json").read_text()).get("problem")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(other, str) and other != name:
        raise ConfigError(f"--out {out} holds the outputs of another problem ({other!r}); give {name!r} a folder of "
                          "its own, or delete that one first")


def _query(args) -> dict:
    """``elecsolver query``: see :func:`elecsolver.query.query`."""
    from .config import ConfigError
    from .query import query

    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is visible to this process; use --device cpu")
    dest = Path(args.out) if args.out else Path(args.run) / "query"
    _check_out_dir(dest)
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = query(args.run, args.overrides, dest, extrapolate=args.extrapolate, device=args.device,
                        problem=args.problem)
        for w in caught:
            if "extrapolating" in str(w.message):
                print(f"elecsolver: warning: {w.message}", file=sys.stderr)
        return out
    except ConfigError:
        raise
    except (ValueError, KeyError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None


def _invert(args) -> None:
    """``elecsolver invert``: see :func:`elecsolver.inverse.invert`; prints the configuration found."""
    import numpy as np

    from .inverse import invert
    from .io.atomic import write_json
    from .query import load

    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1, got {args.starts}")
    path = Path(args.probes)
    try:
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise UsageError(f"--probes {path}: cannot read it as an .npz file ({exc})") from None
    model = load(args.run, args.problem, args.device)
    timed = model.problem.time_dependent
    missing = [k for k in (("places", "times") if timed else ("places",)) if k not in arrays]
    if missing:
        raise UsageError(f"--probes {path} lacks {missing}: give places [K, dim] (m), " +
                         ("times [nt] (s) and one [K, nt] array per measured field" if timed else
                          "and one [K] array per measured field (complex for a complex field)"))
    unknowns = [u.strip() for u in args.unknowns.split(",") if u.strip()] if args.unknowns else None
    data = {k: v for k, v in arrays.items() if k not in ("places", "times")}
    out = invert(model, arrays["places"], arrays.get("times"), data, unknowns=unknowns, starts=args.starts)
    params = {p.name: p for p in model.problem.parameters}
    print("recovered: " + ", ".join(f"{k} = {params[k].quantity(out['configuration'][k])}" for k in out["unknowns"])
          + f" (relative misfit {out['misfit']:.3e}, {out['wall_s']:.2f} s)")
    if args.json:
        write_json(Path(args.json), out)
    return None


def run(args, cls=None) -> dict | None:
    """Train and export as ``elecsolver run`` does; returns the metrics (writer rank) or None."""
    cls = cls if cls is not None else load_problem_class(args.problem)
    problem = _configure(cls, args)
    out = _check_args(args)
    parallel = _parallel_options(args)
    metrics = train(problem, out=out, device=args.device, preset=args.preset, resume=args.resume,
                    stop_after=args.stop_after, quiet=args.quiet, parallel=parallel, machine=args.machine)
    if metrics is not None:  # the writer rank of a finished run; said with --quiet too
        png = ", PNG snapshots" if writes_png(problem.config) else ""
        print(f"outputs in {out}{os.sep}: fields.h5 + fields.xdmf, metrics.json, convergence.csv, checkpoint.pt, "
              f"config.toml, logs/{png}", flush=True)
    return metrics


def _report(metrics: dict | None) -> None:
    if metrics and metrics.get("rel_l2"):
        rel = metrics["rel_l2"]
        print("relative L2 error  " + "  ".join(
            f"{w}: " + ", ".join(f"{k} {_percent(v)}" for k, v in rel[w].items()) for w in rel)
              + ("  (the smoke preset: a few steps to see every stage run; these errors mean nothing)"
                 if metrics.get("preset") == "smoke" else ""))


def _percent(v: float) -> str:
    """An error in %, three decimals; below 0.01 % in scientific notation (a random-feature solve reaches 1e-8)."""
    return f"{v:.3%}" if not (0 < abs(v) < 1e-4) else f"{100 * v:.2e}%"


def _guarded(fn) -> int:
    from .config import ConfigError
    from .io.atomic import WriteError
    from .parallel.failure import RankFailure
    from .parallel.launch import LaunchError
    from .training.interrupt import Interrupted
    from .training.trainer import ResumeError

    try:
        result = fn()
        if isinstance(result, int) and not isinstance(result, bool):  # an exit code (elecsolver plan: none can run)
            return result
        _report(result)
        return 0
    except (UsageError, ConfigError) as exc:  # the same on every rank: said once
        if _launch_rank() == 0:
            print(f"elecsolver: error: {exc}", file=sys.stderr)
        return 2
    except (ResumeError, LaunchError) as exc:
        print(f"elecsolver: error: {exc}", file=sys.stderr)
        return 2
    except RankFailure as exc:  # another rank failed (its own error is on its stderr): one line here
        print(f"elecsolver: error: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:  # every rank stopped at the same step and the checkpoint is written: said once
        if _launch_rank() == 0:
            print(f"elecsolver: {exc}", file=sys.stderr)
        return exc.exit_code
    except FloatingPointError as exc:  # the training diverged: one line; the checkpoints written before stay
        print(f"elecsolver: error: {exc}", file=sys.stderr)
        return 1
    except WriteError as exc:  # a write that failed while running (a full disk, a folder removed): files are atomic
        print(f"elecsolver: error: {exc}; the files written before are intact (each file is written whole or not "
              "at all)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before or after training (inside it, a stop request ends the step)
        print("elecsolver: interrupted by SIGINT (outside training: no checkpoint written)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed by its reader (elecsolver plan ... | head): stop quietly, as a
        # process killed by SIGPIPE would; stdout goes to /dev/null so that the flush at exit does not fail again
        # (the Python docs' "Note on SIGPIPE", signal module)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13


def _launch_rank() -> int:
    from .parallel.launch import LaunchError, discover

    try:
        return discover().rank
    except LaunchError:
        return 0


def _mib_of(text: str) -> float:
    """A size such as 4GiB, 512MiB or 80GB in MiB (:func:`elecsolver.parallel.machine.parse_size_mib`).

    Raises
    ------
    UsageError
        For anything else.
    """
    from .parallel.machine import parse_size_mib

    try:
        return parse_size_mib(text, "--memory-per-rank")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def _quiet_native_stderr():
    """Send file descriptor 2 to /dev/null for the block: the lines C++ libraries print there (the profiler's
    start-up) that say nothing to a user."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _plan(args) -> int | None:
    """``elecsolver plan``: the feasible plans as the flags that run them, then (``--rejected``) the others with their
    reasons, and a count of each kind of reason. With ``--memory-per-rank`` each plan gets its predicted memory; with
    ``--machine`` (or ``--calibrate``) also its predicted step time, and the plans are ranked, fastest first."""
    from collections import Counter

    from .parallel.machine import load_machine
    from .parallel.planner import feasibility, ranked

    if args.world_size is None or args.world_size < 1:
        raise UsageError(f"--world-size must be a positive integer, got {args.world_size}")
    limit = _mib_of(args.memory_per_rank) if args.memory_per_rank is not None else None
    problem = _configure(load_problem_class(args.problem), args)
    machine = None
    if args.calibrate:
        from .io.atomic import write_text
        from .parallel.calibration import measure_machine

        if args.world_size < 2:
            raise UsageError("--calibrate measures collectives: give --world-size 2 or more")
        path = Path(args.machine or "machine.toml")
        if not path.parent.is_dir() or path.is_dir() or not os.access(path.parent, os.W_OK):
            raise UsageError(f"--machine {path}: cannot write the calibrated description there; give a file in a "
                             "folder that exists and is writable")
        machine = measure_machine(problem, args.world_size, spec=args.problem)
        write_text(path, machine.to_toml())
        print(f"# wrote {path}: alpha {machine.intra_node.alpha_s * 1e6:.0f} us, wait after computing "
              f"{machine.intra_node.wait_s * 1e6:.0f} us, beta {machine.intra_node.beta_s_per_byte * 1e9:.3g} ns/B, "
              f"{machine.compute.s_per_mac:.3g} s per multiply-add")
    elif args.machine is not None:
        machine = load_machine(args.machine)
    coeffs = None
    if limit is not None and machine is None:  # measured at up to 4000 points a step: activations are linear in them
        from elecsolver.parallel.calibration import measure_activations

        with _quiet_native_stderr():  # the profiler's start-up lines, written below Python
            coeffs = measure_activations(problem)
    checks = feasibility(problem, args.world_size, memory_mib=limit, coefficients=coeffs, machine=machine)
    ok = ranked(checks) if machine is not None else [c for c in checks if c.ok]
    on = ""
    if machine is not None:
        on = f" on {machine.name}{'' if machine.measured else ' (not measured)'}"
    order = "ranked by predicted step time" if machine is not None else "not ranked: give --machine to rank them"
    print(f"# {problem.name}, {args.world_size} rank(s){on}: {len(ok)} of {len(checks)} plans can run ({order})")
    if machine is not None and args.world_size > machine.world:
        print(f"# note: {args.world_size} ranks are more than the description's {machine.world}; planned as "
              f"{-(-args.world_size // machine.ranks_per_node)} nodes of {machine.ranks_per_node} alike")
    if machine is not None and limit is not None:
        print(f"# note: --memory-per-rank {args.memory_per_rank} replaces the description's "
              f"{machine.memory_per_rank_mib:.4g} MiB")
    for c in ok:
        notes = [f"{c.step_s * 1e3:.3g} ms"] if c.step_s is not None else []
        notes += [f"{c.memory_mib:.4g} MiB"] if c.memory_mib is not None else []
        print(c.plan.flags() + (f"  # {', '.join(notes)} predicted" if notes else ""))
    kinds = Counter(c.reason[0] for c in checks if not c.ok)
    if kinds:
        print("# rejected: " + ", ".join(f"{n} for {k}" for k, n in sorted(kinds.items())))
    if args.rejected:
        for c in checks:
            if not c.ok:
                print(f"{c.plan.flags()}  # {c.reason[0]}: {c.reason[1]}")
    if not ok:
        print("elecsolver: no plan can run on these ranks (the reasons above; --rejected lists each)", file=sys.stderr)
        return 1
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``elecsolver`` command; returns the exit code."""
    def go():
        args = _parser().parse_args(argv)
        if args.command == "query":
            return _query(args)
        if args.command == "invert":
            return _invert(args)
        if args.command == "config":
            problem = _configure(load_problem_class(args.problem), args)
            print(config_toml(problem, args.preset, getattr(args, "parallel_file", None) or None), end="")
            return None
        if args.command == "plan":
            return _plan(args)
        if args.command == "problems":
            from .problems import REGISTRY

            for name in sorted(REGISTRY):
                print(name)
            return None
        return run(args)

    return _guarded(go)


def run_problem(cls, argv: list[str] | None = None) -> dict | None:
    """Run the problem class ``cls`` with the options of ``elecsolver run`` (``argv`` without the problem);
    returns the metrics (writer rank) or None.

    Raises
    ------
    UsageError, ConfigError, ResumeError, LaunchError
        For bad input (nothing written).
    """
    p = _Parser(prog=Path(sys.argv[0]).name, description=(cls.__doc__ or cls.name).strip().splitlines()[0])
    _run_options(p)
    return run(p.parse_args(argv), cls)


def script_main(cls, argv: list[str] | None = None) -> int:
    """``python my_problem.py [options]``: run ``cls`` with the options of ``elecsolver run``; the exit code."""
    return _guarded(lambda: run_problem(cls, argv))


if __name__ == "__main__":
    sys.exit(main())
