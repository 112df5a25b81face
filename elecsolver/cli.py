"""Command line: ``elecsolver problems`` and ``elecsolver run PROBLEM [options]``.

This is the one module that composes the core, ``parallel/`` and ``problems/``.  Bad input is
reported as one line on stderr with exit code 2, before anything is written.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

__all__ = ["UsageError", "main", "run"]

log = logging.getLogger("elecsolver")


class UsageError(ValueError):
    """Bad command-line input: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit code 2 (argparse prints usage too)
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="elecsolver", description="Physics-informed neural networks for electromagnetics.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("problems", help="list the registered problems, one a line")
    r = sub.add_parser("run", help="train a problem and write its fields, metrics and snapshots")
    r.add_argument("problem", help="a name from 'elecsolver problems'")
    r.add_argument("--preset", help="training preset of the problem (e.g. ci, quick; the README lists each problem's); "
                        "default: the problem's default")
    r.add_argument("--steps", type=int, help="total number of training steps")
    r.add_argument("--seed", type=int, help="random seed of points and initial parameters")
    r.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    r.add_argument("--dtype", choices=("float32", "float64"), help="floating-point precision")
    r.add_argument("--out", default="out", help="output folder (default ./out)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="change a configuration entry by dotted key; VALUE is a JSON literal")
    r.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    r.add_argument("--stop-after", type=int, metavar="STEP",
                   help="train only up to this step, checkpoint and exit (continue later with --resume)")
    r.add_argument("--compile", action="store_true",
                   help="run the training step through torch.compile (same numbers as eager, faster steps; "
                        "the first step compiles, tens of seconds)")
    r.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    return p


def _check_out_dir(out: Path) -> None:
    for parent in [out, *out.parents]:
        if parent.exists():
            if not parent.is_dir():
                what = "is" if parent == out else f"lies under {parent}, which is"
                raise UsageError(f"--out {out} {what} an existing file, not a folder; choose another path")
            break


def _build(args):
    """Resolve problem, preset and overrides into a validated problem (no side effects)."""
    from elecsolver.config import ConfigError, apply_overrides
    from elecsolver.problems import get_problem_class

    try:
        cls = get_problem_class(args.problem)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    try:
        config = cls.preset_config(args.preset)
        training = config["training"]
        if args.steps is not None:
            if args.steps < 1:
                raise UsageError(f"--steps must be >= 1, got {args.steps}")
            training["steps"] = args.steps
        if args.seed is not None:
            training["seed"] = args.seed
        if args.dtype is not None:
            training["dtype"] = args.dtype
        config = apply_overrides(config, args.overrides)
        if args.compile:
            config["training"]["compile"] = True
        if config["training"].get("compile") and config["training"].get("derivatives") == "autograd":
            raise UsageError("--compile (training.compile) needs jet derivatives, but training.derivatives is "
                             "'autograd' (nested autograd cannot be compiled); drop one of the two")
        problem = cls(config)
        problem.validate()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
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
    return problem, out


def _setup_logging(rank: int, quiet: bool) -> None:
    level = logging.WARNING if quiet or rank != 0 else logging.INFO
    prefix = f"[rank {rank}] " if rank else ""
    logging.basicConfig(level=level, format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", force=True)


def run(args) -> dict | None:
    """Train and export as ``elecsolver run`` does; returns the metrics (rank 0) or None."""
    from elecsolver.export import export_run
    from elecsolver.trainer import Trainer
    from elecsolver.parallel.data_parallel import init_data_parallel, shutdown

    problem, out = _build(args)
    comm, info, device = init_data_parallel(args.device)
    _setup_logging(info.rank, args.quiet)
    try:
        if info.rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            reference = problem.reference()
        else:
            reference = None
        trainer = Trainer(problem, comm=comm, device=str(device), out_dir=out, reference=reference,
                          progress=not args.quiet)
        if args.resume:
            trainer.load_checkpoint(out / "checkpoint.pt")
            log.info("resuming %s at step %d of %d", problem.name, trainer.step, problem.config["training"]["steps"])
        trainer.train(stop_after=args.stop_after)
        if trainer.step < problem.config["training"]["steps"]:
            log.info("stopped at step %d; continue with --resume", trainer.step)
            return None
        metrics = export_run(trainer, reference, out, args.preset or type(problem).default_preset) \
            if info.rank == 0 else None
        if comm is not None:
            comm.barrier()
        return metrics
    finally:  # no closing barrier while an exception propagates: the other ranks may never arrive
        shutdown(clean=sys.exc_info()[0] is None)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``elecsolver`` command; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        if args.command == "problems":
            from elecsolver.problems import REGISTRY

            for name in sorted(REGISTRY):
                print(name)
            return 0
        metrics = run(args)
        if metrics is not None:
            rel = metrics["rel_l2"]
            print("relative L2 error  " + "  ".join(
                f"{w}: " + ", ".join(f"{k} {v:.3%}" for k, v in rel[w].items()) for w in rel))
        return 0
    except UsageError as exc:
        print(f"elecsolver: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # ResumeError and LaunchError are user errors too
        from elecsolver.trainer import ResumeError
        from elecsolver.parallel.launch import LaunchError

        if isinstance(exc, (ResumeError, LaunchError)):
            print(f"elecsolver: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
