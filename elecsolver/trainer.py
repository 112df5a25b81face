"""Training loop: sampling, sharding, loss, first-order backward, gradient reduction, checkpoints.

The loss of constraint c on rank r is

    L_c^r = lambda_c * sum_{i in shard r} w_i |res_c(x_i)|^2 / sum_{i in all shards} w_i

with w_i the measure point i stands for (w_i = 1 for a cloud without weights, which gives the local
sum over the global count N_c), so that summing over ranks gives the single-process loss exactly;
gradients are all-reduced by SUM (shared/DESIGN.md, "The data path").  Every rank draws the global
cloud from the seed, so the denominators need no communication.

Residual-based adaptive refinement (RAR; Lu, Meng, Mao & Karniadakis, SIAM Rev. 63 (2021) 208,
sec. 2.8) is optional: every ``sampling.rar_every`` steps a candidate pool of ``sampling.rar_pool``
points is drawn for each constraint in ``sampling.rar_constraints``, its residuals are computed
shard by shard and summed over ranks, and the ``sampling.rar_add`` points of largest residual (ties
broken by index, so every rank picks the same) join that constraint for the rest of the run.  They
are resharded with the cloud and kept in checkpoints.  A rank holding no point of a constraint contributes zeros,
and parameters it does not touch get zero gradients before the reduction, so every rank takes the
same optimizer step.

Compiled mode (``training.compile``): the loss terms (network, jets, residuals, weighted sums) are
one ``torch.compile`` graph with ``fullgraph=True`` (a graph break is an error, not a silent slow
path); its backward is compiled with it (AOTAutograd), and the optimizer step is a second compiled
function.  The learning rate is a 0-d tensor that the schedule updates in place, and the points and
denominators are graph inputs, so neither a moving learning rate nor resampling recompiles (a
change of the number of points per rank does, once, after which the point dimension is dynamic).
Gradient reduction stays eager between the two.  Compiled and eager losses agree to float32
round-off (tests: 1e-5 over 10 steps); the nested-autograd path cannot be compiled and is refused.
"""

from __future__ import annotations

import csv
import inspect
import logging
import math
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import __version__
from .comm import Communicator, SingleProcess
from .config import ConfigError
from .operators import evaluate
from .problem import Constraint, Problem
from .sampling import PointCloud, derive_seed
from .sharding import shard_indices

__all__ = ["ResumeError", "Trainer"]

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class ResumeError(ValueError):
    """A checkpoint that does not belong to this run (other configuration or package version)."""


class Trainer:
    """Train a problem's network on its constraints.

    Parameters
    ----------
    problem : Problem
        The problem; ``problem.config["training"]`` holds steps, seed, dtype, lr, lr_final,
        log_every, checkpoint_every, derivatives ("jet" or "autograd") and optionally compile
        (bool, default False: run the loss-and-gradient and the optimizer step through
        ``torch.compile``, see the module docstring).
    comm : Communicator, optional
        Data-parallel group (default: one process).
    device : str
        "cpu" or "cuda[:k]".
    out_dir : path, optional
        Where the checkpoint and the convergence CSV go (rank 0 writes); None: nowhere.
    reference : dict, optional
        Reference fields on the problem's output grid (SI; [nt, ny, nx], or [ny, nx] for a static
        problem) for the error metrics logged during training (rank 0).
    shard_sizes : dict, optional
        Constraint name -> points per rank, to force an uneven split (tests); default balanced.
    progress : bool
        Show a progress bar on rank 0.
    """

    def __init__(self, problem: Problem, comm: Communicator | None = None, device: str = "cpu",
                 out_dir: str | os.PathLike | None = None, reference: dict | None = None,
                 shard_sizes: dict[str, list[int]] | None = None, progress: bool = True):
        problem.validate()
        self.problem, self.comm = problem, comm or SingleProcess()
        self.cfg = problem.config["training"]
        self.device = torch.device(device)
        self.dtype = DTYPES[self.cfg["dtype"]]
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.reference, self.shard_sizes, self.progress = reference, shard_sizes or {}, progress
        torch.manual_seed(self.cfg["seed"])
        self.model = problem.build_network().to(device=self.device, dtype=self.dtype)
        for p in self.model.parameters():  # identical start on every rank
            self.comm.broadcast_(p.data, 0)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.compiled = bool(self.cfg.get("compile", False))
        if self.compiled and self.cfg["derivatives"] != "jet":
            raise ConfigError("training.compile (--compile) needs jet derivatives, but training.derivatives is "
                              "'autograd' (nested autograd cannot be compiled); drop one of the two")
        # compiled: the learning rate is a tensor, so the schedule moving it is data, not a new graph
        lr = torch.tensor(self.cfg["lr"], dtype=torch.float64) if self.compiled else self.cfg["lr"]
        self.optimizer = torch.optim.Adam(self.params, lr=lr)
        steps, ratio = self.cfg["steps"], self.cfg["lr_final"] / self.cfg["lr"]
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda k: ratio ** (min(k, steps) / steps))
        self._terms_fn, self._step_fn = self._terms, self.optimizer.step
        if self.compiled:
            mode = self.cfg.get("compile_mode") or None
            self._terms_fn = torch.compile(self._terms, fullgraph=True, mode=mode)
            # Adam's update itself, without the wrappers around it (the scheduler's step counter, the
            # profiler hook, and the grad-mode switch with its deliberate graph breaks); it runs under
            # torch.no_grad() (see train_step), which is what that switch provides.
            # Adam's state created here, with a float64 step counter: created lazily inside the graph
            # it is a float32 tensor, and 1 - beta2^step in float32 loses ~1e-5 of the update at the
            # first steps (eager Adam computes it from a Python float), so compiled and eager runs
            # would drift apart by far more than round-off
            for p in self.params:
                self.optimizer.state[p].update(step=torch.tensor(0.0, dtype=torch.float64),
                                               exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            update = inspect.unwrap(type(self.optimizer).step)
            optimizer = self.optimizer
            self._step_fn = torch.compile(lambda: update(optimizer), fullgraph=True)
        self.constraints = problem.constraints()
        self.step = 0
        self.wall_s = 0.0
        self.points_processed = 0
        self.history: list[dict] = []
        self._round = None
        self._batches: list = []
        self.added: dict[str, PointCloud] = {}  # RAR points per constraint, kept across rounds

    # points ---------------------------------------------------------------------------------
    def _local(self, cloud: PointCloud, sizes=None) -> tuple[np.ndarray, PointCloud]:
        """This rank's spatial shard of a global cloud: (indices, sub-cloud)."""
        spatial = cloud.points[:, : max(1, cloud.points.shape[1] - 1)]
        idx = shard_indices(spatial, self.comm.rank, self.comm.world, sizes)
        return idx, cloud.subset(idx)

    def _tensor(self, a: np.ndarray | None) -> torch.Tensor | None:
        return None if a is None else torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def _points_for_round(self, round_: int) -> None:
        """Sample every constraint's global cloud for this resampling round and keep this rank's shard."""
        self._batches = []
        seed = self.cfg["seed"]
        for c in self.constraints:
            start = round_ * self.problem.config["sampling"]["resample_every"]
            cloud = c.sample(seed * 1_000_003 + round_, start / self.cfg["steps"])
            if c.name in self.added:
                cloud = _concat(cloud, self.added[c.name])
            _, local = self._local(cloud, self.shard_sizes.get(c.name))
            denom = float(len(cloud)) if cloud.weights is None else float(np.sum(cloud.weights))
            self._batches.append(_Batch(c, self._tensor(local.points), self._tensor(local.normals),
                                        self._tensor(local.weights), len(cloud), denom,
                                        self._tensor(np.array(max(denom, 1e-300)))))
        self._round = round_

    def points(self) -> list[tuple[str, torch.Tensor, int]]:
        """This rank's points per constraint: (name, local points [n, d], global count)."""
        self._ensure_points()
        return [(b.constraint.name, b.points, b.n_global) for b in self._batches]

    def _ensure_points(self) -> None:
        round_ = self.step // self.problem.config["sampling"]["resample_every"]
        if round_ != self._round:
            self._points_for_round(round_)

    # one step ---------------------------------------------------------------------------------
    def loss_terms(self) -> torch.Tensor:
        """This rank's share of every weighted loss term, [n_constraints] (sums to the loss over ranks)."""
        self._ensure_points()
        batches = [(b.points, b.normals, b.weights, b.denom_t if self.compiled else max(b.denom, 1e-300))
                   for b in self._batches]
        return self._terms_fn(batches)

    def _terms(self, batches: list) -> torch.Tensor:
        """The loss terms from (points, normals, weights, denominator) per constraint (compiled in
        ``training.compile`` mode: the tensors are graph inputs, so new points reuse the graph)."""
        terms = []
        for c, (pts, nrm, w, denom) in zip(self.constraints, batches):
            if pts.shape[0] == 0:
                terms.append(sum(p.sum() for p in self.params) * 0.0)
                continue
            sq = self._residual(c, pts, nrm).pow(2).sum(1)
            if w is not None:
                sq = sq * w
            terms.append(c.weight * sq.sum() / denom)
        return torch.stack(terms)

    def _residual(self, c: Constraint, pts: torch.Tensor, nrm: torch.Tensor | None) -> torch.Tensor:
        f = evaluate(self.model, pts, self.problem.inputs, self.problem.outputs, c.wrt,
                     method=self.cfg["derivatives"], second=c.second or None, laplacian=c.laplacian)
        return c.residual(f, pts, nrm)

    # adaptive refinement --------------------------------------------------------------------------
    def refine(self) -> dict[str, int]:
        """One RAR round (see the module docstring); returns the points added per constraint."""
        smp = self.problem.config["sampling"]
        added = {}
        for i, c in enumerate(self.constraints):
            if c.name not in smp.get("rar_constraints", ()):
                continue
            pool = c.sample(derive_seed(self.cfg["seed"], "rar", c.name, self.step), self.step / self.cfg["steps"])
            idx, local = self._local(pool)
            score = torch.zeros(len(pool), dtype=torch.float64, device=self.device)
            if len(idx):
                r = self._residual(c, self._tensor(local.points), self._tensor(local.normals)).detach()
                score[torch.as_tensor(idx, device=self.device)] = r.pow(2).sum(1).double()
            self.comm.all_reduce_sum_(score)
            order = np.argsort(-score.cpu().numpy(), kind="stable")[: smp["rar_add"]]
            new = pool.subset(np.sort(order))
            if new.weights is not None:  # added points stand for the mean measure of a pool point
                new.weights = np.full(len(new), float(np.mean(pool.weights)))
            self.added[c.name] = _concat(self.added[c.name], new) if c.name in self.added else new
            added[c.name] = len(new)
        self._round = None  # reshard with the new points
        log.info("step %d: adaptive refinement added %s", self.step, added)
        return added

    def train_step(self) -> tuple[float, list[float]]:
        """One optimizer step; returns the global loss and its terms (equal on every rank)."""
        # compiled: gradients are assigned, not accumulated into zeroed buffers (fewer kernels)
        self.optimizer.zero_grad(set_to_none=self.compiled)
        terms = self.loss_terms()
        terms.sum().backward()
        self._all_reduce_gradients()
        with torch.no_grad():
            self._step_fn()
        self.optimizer._opt_called = True  # what the scheduler's step wrapper records (compiled mode bypasses it)
        self.scheduler.step()
        reduced = self.comm.all_reduce_sum_(terms.detach().clone())
        self.points_processed += sum(b.n_global for b in self._batches)
        self.step += 1
        values = reduced.tolist()
        return float(sum(values)), values

    def _all_reduce_gradients(self) -> None:
        if self.comm.world == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.comm.all_reduce_sum_(flat)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    # evaluation -------------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, frames: int | None = None, chunk: int = 65536) -> dict[str, np.ndarray]:
        """Network fields on the problem's output grid, SI units, each [nt, ny, nx] (or ``frames``)."""
        pts = self.problem.grid_points(frames)
        outs = []
        for i in range(0, pts.shape[0], chunk):
            x = torch.as_tensor(pts[i : i + chunk], dtype=self.dtype, device=self.device)
            outs.append(self.model(x).double().cpu().numpy())
        return self.problem.to_si(np.concatenate(outs, axis=0))

    # loop ---------------------------------------------------------------------------------------
    def train(self, stop_after: int | None = None) -> None:
        """Train up to ``training.steps`` (or up to step ``stop_after``, then checkpoint and return)."""
        total = self.cfg["steps"]
        end = total if stop_after is None else min(stop_after, total)
        bar = None
        if self.progress and self.comm.rank == 0 and self.step < end:
            import sys

            from tqdm.auto import tqdm

            # a terminal gets a live bar; a log file gets an update every 30 s, not every step
            interval = 0.1 if sys.stderr.isatty() else 30.0
            bar = tqdm(total=total, initial=self.step, desc=self.problem.name, unit="step", dynamic_ncols=True,
                       mininterval=interval, maxinterval=max(10.0, interval))
        try:
            while self.step < end:
                t0 = time.perf_counter()
                loss, terms = self.train_step()
                rar_every = self.problem.config["sampling"].get("rar_every", 0)
                if rar_every and self.step % rar_every == 0 and self.step < total:
                    self.refine()
                self.wall_s += time.perf_counter() - t0
                if not math.isfinite(loss):
                    raise FloatingPointError(f"the loss became {loss} at step {self.step}; lower training.lr")
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.3e}")
                if self.step % self.cfg["log_every"] == 0 or self.step == end:
                    self._log(loss, terms)
                if self.step % self.cfg["checkpoint_every"] == 0 or self.step == end:
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()

    def _log(self, loss: float, terms: list[float]) -> None:
        if self.comm.rank != 0:
            return
        row = {"step": self.step, "loss": loss}
        row.update({f"loss_{c.name}": v for c, v in zip(self.constraints, terms)})
        row["lr"] = float(self.scheduler.get_last_lr()[0])
        row["wall_s"] = self.wall_s
        if self.reference is not None:
            pred = self.predict(self.problem.progress_frames())
            for k, v in self.problem.progress_metrics(pred, self.reference).items():
                row[f"rel_l2_{k}"] = v
        self.history.append(row)
        log.info("step %d: %s", self.step, ", ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "step"))
        if self.out_dir is not None:
            _atomic_write_csv(self.out_dir / "convergence.csv", self.history)

    # checkpoints ----------------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.out_dir is None else self.out_dir / "checkpoint.pt"

    def state_dict(self) -> dict:
        """Everything a resume needs to continue bit for bit."""
        return {
            "package_version": __version__,
            "problem": self.problem.name,
            "config": self.problem.config,
            "world": self.comm.world,
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate(),
            "wall_s": self.wall_s,
            "points_processed": self.points_processed,
            "history": self.history,
            "sampling_round": self._round,
            "rar_points": {k: (v.points, v.normals, v.weights) for k, v in self.added.items()},
        }

    def save_checkpoint(self) -> None:
        """Write ``checkpoint.pt`` atomically into ``out_dir`` (rank 0 only)."""
        if self.comm.rank != 0 or self.checkpoint_path is None:
            return
        path = self.checkpoint_path
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".checkpoint", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save(self.state_dict(), fh)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load_checkpoint(self, path: str | os.PathLike | None = None) -> None:
        """Continue from a checkpoint written by :meth:`save_checkpoint`.

        Raises
        ------
        ResumeError
            If there is no checkpoint, or it was written by another package version or with
            another configuration (the differing keys are named).
        """
        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.exists():
            raise ResumeError(f"--resume: no checkpoint at {path}; run without --resume to start fresh")
        state = torch.load(path, map_location=self.device, weights_only=False)
        if state["package_version"] != __version__:
            raise ResumeError(f"--resume: the checkpoint was written by elecsolver {state['package_version']}, "
                              f"this is {__version__}; start a fresh run")
        if state["config"] != self.problem.config or state["problem"] != self.problem.name:
            diff = _diff_keys(state["config"], self.problem.config)
            raise ResumeError(f"--resume: the configuration differs from the checkpoint's in {', '.join(diff)}; "
                              "use the same preset, --steps, --seed, --dtype and --set values")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.step, self.wall_s = state["step"], state["wall_s"]
        self.points_processed, self.history = state["points_processed"], state["history"]
        self.added = {k: PointCloud(*v) for k, v in state["rar_points"].items()}
        self._round = None


@dataclass
class _Batch:
    """This rank's share of one constraint for the current sampling round."""

    constraint: Constraint
    points: torch.Tensor            # [n, d]
    normals: torch.Tensor | None    # [n, s]
    weights: torch.Tensor | None    # [n]
    n_global: int                   # points over all ranks
    denom: float                    # sum of weights over all ranks
    denom_t: torch.Tensor           # the same as a 0-d tensor (an input of the compiled graph)


def _concat(a: PointCloud, b: PointCloud) -> PointCloud:
    """Rows of ``a`` then ``b`` (normals and weights must be present in both or neither)."""
    def cat(x, y):
        return None if x is None or y is None else np.concatenate([x, y])

    return PointCloud(np.concatenate([a.points, b.points]), cat(a.normals, b.normals), cat(a.weights, b.weights))


def _diff_keys(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def _atomic_write_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}", suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)
