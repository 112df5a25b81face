"""Points: every constraint's collocation cloud per sampling round, this rank's spatial shard of it, and
residual-based adaptive refinement (RAR).

Every rank draws the global cloud of a round from the run seed (``derive_seed(seed, "points", name,
round)``, the one seeding scheme), so the loss denominators need no communication; the spatial columns
the problem declares (every input but t) are split by recursive coordinate bisection
(:mod:`elecsolver.sharding`).  RAR (Lu, Meng, Mao & Karniadakis, SIAM Rev. 63 (2021) 208, sec. 2.8):
every ``sampling.rar_every`` steps a candidate pool of ``sampling.rar_pool`` points is drawn for each
constraint in ``sampling.rar_constraints``, its residuals are computed shard by shard and summed over
ranks, and the ``sampling.rar_add`` points of largest residual (ties broken by index, so every rank picks
the same) join that constraint for the rest of the run; they are kept in checkpoints.

RAD, residual-based adaptive distribution (Wu, Zhu, Tan, Kartha & Lu, Comput. Methods Appl. Mech. Engrg. 403
(2023) 115671, eq. 2): every ``sampling.rad_every`` steps, for each constraint in ``sampling.rad_constraints``
with N points, a pool S of M = ``sampling.rad_candidates`` x N fresh candidates is drawn; with eps = |r| at the
candidates (summed over ranks as for RAR), the constraint's N points are drawn from S, independently and with
replacement, with probability p_i = (eps_i^k / mean(eps^k) + c) / (M (1 + c)) (k = ``sampling.rad_k``,
c = ``sampling.rad_c``; k = 1, c = 1 is the paper's default; c -> inf is uniform sampling).  The generator is
seeded from the run seed, the constraint and the step, so every rank draws the same set.  That set replaces the
constraint's cloud (and its resampling) until the next RAD round; a point stands for the mean measure of a
candidate where the cloud carries weights.  The sets are kept in checkpoints.

Local sampling (``sampling.shard = "local"``; the default ``"exact"`` is the above): no rank draws the
global cloud.  Each constraint's sampler runs inside :func:`elecsolver.sampling.local_part` ``(rank,
world)``, so every geometry draw it makes returns only this rank's part of its set (equal-measure parts
from the geometry, see :mod:`elecsolver.geometry.base`), with the balanced share ``Part.count(N)`` of the
N points asked for, drawn from ``Part.seed(derive_seed(seed, "points", name, round))`` (reproducible, one
seed per rank and round), and reports the global count N and the weight measure / N of its points.  The
union over the ranks is distributed like a global draw, with the same global count, the same per-point
weights and so the same global denominators: ``n_global`` = the sum of the draws' N and ``denom`` = the
sum of N * weight (= the sets' measures; the count where the cloud has no weights), identical on every rank
with no communication.  The points differ from the exact mode's (and with the rank count), the loss does in
expectation only.  RAR and ``shard_sizes`` are refused in this mode (ConfigError); a set with no local
parts (a CSG result's boundary) is cut from its whole cloud (O(N), exact).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..config import ConfigError
from ..problem import Constraint
from ..sampling import PointCloud, derive_seed, local_part
from ..sharding import shard_indices

__all__ = ["Batch", "Points", "rad_choice", "rad_density"]


@dataclass
class Batch:
    """This rank's share of one constraint for the current sampling round."""

    constraint: Constraint
    points: torch.Tensor            # [n, d]
    normals: torch.Tensor | None    # [n, s]
    weights: torch.Tensor | None    # [n]
    n_global: int                   # points over all ranks
    denom: float                    # sum of weights over all ranks
    denom_t: torch.Tensor           # the same as a 0-d tensor (an input of the compiled graph)


class Points:
    """Collocation points of every constraint, resampled every ``sampling.resample_every`` steps.

    Parameters
    ----------
    constraints : sequence of Constraint
    sampling : SamplingOptions
    seed, steps : int
        Run seed and total steps (for the curriculum's progress).
    rank, world : int
    spatial : sequence of int
        Input columns the shards split along.
    dtype, device
        Of the tensors handed to the loss.
    shard_sizes : dict, optional
        Constraint name -> points per rank, to force an uneven split (tests; exact mode only).

    Raises
    ------
    ConfigError
        For ``shard_sizes`` with ``sampling.shard = "local"``.
    """

    def __init__(self, constraints: Sequence[Constraint], sampling, seed: int, steps: int, rank: int, world: int,
                 spatial: Sequence[int], dtype: torch.dtype, device: torch.device,
                 shard_sizes: dict[str, list[int]] | None = None):
        self.constraints, self.sampling, self.seed, self.steps = list(constraints), sampling, seed, steps
        self.rank, self.world, self.spatial = rank, world, list(spatial)
        self.dtype, self.device, self.shard_sizes = dtype, device, shard_sizes or {}
        self.round: int | None = None
        self.batches: list[Batch] = []
        self.added: dict[str, PointCloud] = {}
        self.redistributed: dict[str, PointCloud] = {}
        self.local = getattr(sampling, "shard", "exact") == "local"
        # on a GPU the host draws the next round's clouds in a thread while the device trains on this round's (the
        # same draws, from the same seeds, only earlier); the tensors are made on the calling thread
        self.prefetch = self.device.type == "cuda" and not self.local
        self._next: tuple[int, object] | None = None  # (round, future of _draw(round))
        self._executor = None
        if self.local and self.shard_sizes:
            raise ConfigError("shard_sizes (forced uneven shards) needs sampling.shard='exact'; in 'local' mode every "
                              "rank draws its own equal-measure part")

    def tensor(self, a: np.ndarray | None) -> torch.Tensor | None:
        """``a`` on the training device in the training dtype (None for None).  To a GPU through pinned host memory
        without waiting: the host draws the next round's points while the device still trains on this one's."""
        if a is None:
            return None
        if self.device.type != "cuda":
            return torch.as_tensor(a, dtype=self.dtype, device=self.device)
        host = torch.as_tensor(a, dtype=self.dtype).pin_memory()
        return host.to(self.device, non_blocking=True)

    def shard(self, cloud: PointCloud, sizes=None) -> tuple[np.ndarray, PointCloud]:
        """This rank's spatial shard of a global cloud: (indices, sub-cloud)."""
        idx = shard_indices(cloud.points[:, self.spatial], self.rank, self.world, sizes)
        return idx, cloud.subset(idx)

    def cloud(self, c: Constraint, round_: int) -> PointCloud:
        """The global cloud of constraint ``c`` in sampling round ``round_`` (RAR points included), as the exact
        mode draws it (the local mode never draws it)."""
        start = round_ * self.sampling.resample_every
        if c.name in self.redistributed:
            cloud = self.redistributed[c.name]
        else:
            cloud = c.sample(derive_seed(self.seed, "points", c.name, round_), start / self.steps)
        return _concat(cloud, self.added[c.name]) if c.name in self.added else cloud

    def local_batch(self, c: Constraint, round_: int) -> Batch:
        """This rank's part of constraint ``c`` in round ``round_``, drawn locally (``sampling.shard = "local"``).

        Raises
        ------
        ConfigError
            If the constraint's sampler does not draw from geometry domains, or changes what it drew.
        """
        start = round_ * self.sampling.resample_every
        with local_part(self.rank, self.world) as draws:
            local = c.sample(derive_seed(self.seed, "points", c.name, round_), start / self.steps)
        if not draws or sum(d.n_local for d in draws) != len(local):
            raise ConfigError(f"loss term {c.name!r}: its sampler does not draw its points from geometry domains (or "
                              "changes what it draws), so it has no local parts; use sampling.shard='exact'")
        n_global = sum(d.n_global for d in draws)
        denom = float(n_global) if local.weights is None else float(sum(d.n_global * d.weight for d in draws))
        return Batch(c, self.tensor(local.points), self.tensor(local.normals), self.tensor(local.weights), n_global,
                     denom, self.tensor(np.array(max(denom, 1e-300))))

    def _draw(self, round_: int) -> list[tuple[PointCloud, int, float]]:
        """This rank's shard of every constraint's global cloud in round ``round_``, with the global count and
        denominator (exact mode; numpy only, so that it can run in a thread)."""
        out = []
        for c in self.constraints:
            cloud = self.cloud(c, round_)
            _, local = self.shard(cloud, self.shard_sizes.get(c.name))
            denom = float(len(cloud)) if cloud.weights is None else float(np.sum(cloud.weights))
            out.append((local, len(cloud), denom))
        return out

    def _drawn(self, round_: int) -> list[tuple[PointCloud, int, float]]:
        """:meth:`_draw` of ``round_``, taken from the prefetch when it holds that round; then the next round's
        prefetch is started (on a GPU)."""
        parts = None
        if self._next is not None and self._next[0] == round_:
            parts = self._next[1].result()
        self._next = None
        if parts is None:
            parts = self._draw(round_)
        if self.prefetch:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor(1, thread_name_prefix="elecsolver-points")
            self._next = (round_ + 1, self._executor.submit(self._draw, round_ + 1))
        return parts

    def _forget_prefetch(self) -> None:
        """Drop a prefetched round (the sets it was drawn from changed); it is drawn again when needed."""
        self._next = None

    def at(self, step: int) -> list[Batch]:
        """The batches of the round that ``step`` belongs to (sampled when the round changes)."""
        round_ = step // self.sampling.resample_every
        if round_ != self.round:
            if self.local:
                self.batches = [self.local_batch(c, round_) for c in self.constraints]
            else:
                self.batches = [Batch(c, self.tensor(local.points), self.tensor(local.normals),
                                      self.tensor(local.weights), n_global, denom,
                                      self.tensor(np.array(max(denom, 1e-300))))
                                for c, (local, n_global, denom) in zip(self.constraints, self._drawn(round_))]
            self.round = round_
        return self.batches

    def refine(self, step: int, score: Callable[[Constraint, torch.Tensor, torch.Tensor | None], torch.Tensor],
               all_reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, int]:
        """One RAR round; ``score(c, points, normals)`` gives the local squared residuals [n]; returns the
        points added per constraint.

        Raises
        ------
        ConfigError
            In local mode (``sampling.shard = "local"``), which has no global pool to rank.
        """
        if self.local:
            raise ConfigError("adaptive refinement (RAR) needs sampling.shard='exact'; set sampling.rar_every=0 to "
                              "sample locally")
        added = {}
        for c in self.constraints:
            if c.name not in self.sampling.rar_constraints:
                continue
            pool, _ = self._pool(c, "rar", step, lambda n: self.sampling.rar_pool)
            total = self._global_scores(c, pool, score, all_reduce_sum)
            order = np.argsort(-total, kind="stable")[: self.sampling.rar_add]
            new = _mean_measure(pool.subset(np.sort(order)), pool)
            self.added[c.name] = _concat(self.added[c.name], new) if c.name in self.added else new
            added[c.name] = len(new)
        self.round = None  # reshard with the new points
        self._forget_prefetch()
        return added

    def redistribute(self, step: int, score: Callable[[Constraint, torch.Tensor, torch.Tensor | None], torch.Tensor],
                     all_reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, int]:
        """One RAD round (see the module docstring); ``score(c, points, normals)`` gives the local squared
        residuals [n]; returns the points drawn per constraint.

        Raises
        ------
        ConfigError
            In local mode (``sampling.shard = "local"``), which has no global pool to score.
        """
        if self.local:
            raise ConfigError("residual-based redistribution (RAD) needs sampling.shard='exact'; set "
                              "sampling.rad_every=0 to sample locally")
        o, drawn = self.sampling, {}
        for c in self.constraints:
            if c.name not in o.rad_constraints:
                continue
            pool, n = self._pool(c, "rad", step, lambda n: o.rad_candidates * n)
            total = self._global_scores(c, pool, score, all_reduce_sum)
            pick = rad_choice(np.sqrt(total), n, o.rad_k, o.rad_c,
                              derive_seed(self.seed, "rad-draw", c.name, step))
            new = _mean_measure(pool.subset(pick), pool)
            self.redistributed[c.name] = new
            drawn[c.name] = len(new)
        self.round = None  # reshard with the new points
        self._forget_prefetch()
        return drawn

    def _global_scores(self, c: Constraint, pool: PointCloud, score: Callable, all_reduce_sum: Callable) -> np.ndarray:
        """``score`` of every pool point (float64 [len(pool)]), each rank scoring its shard, summed over ranks."""
        idx, local = self.shard(pool)
        total = torch.zeros(len(pool), dtype=torch.float64, device=self.device)
        if len(idx):
            s = score(c, self.tensor(local.points), self.tensor(local.normals)).detach()
            total[torch.as_tensor(idx, device=self.device)] = s.double()
        all_reduce_sum(total)
        return total.cpu().numpy()

    def _pool(self, c: Constraint, kind: str, step: int, size: Callable[[int], int]) -> tuple[PointCloud, int]:
        """Fresh candidates of constraint ``c`` and the size N of one draw: its draws for ``(kind, step)``,
        concatenated and cut to ``size(N)`` (the first draw's seed is ``derive_seed(seed, kind, name, step)``, the
        j-th's adds j)."""
        progress = step / self.steps
        pool = c.sample(derive_seed(self.seed, kind, c.name, step), progress)
        n = len(pool)
        want, j = size(n), 1
        while len(pool) < want:
            pool = _concat(pool, c.sample(derive_seed(self.seed, kind, c.name, step, j), progress))
            j += 1
        return (pool.subset(np.arange(want)) if len(pool) > want else pool), n

    def state_dict(self) -> dict:
        return {"round": self.round, "rar_points": {k: (v.points, v.normals, v.weights) for k, v in self.added.items()},
                "rad_points": {k: (v.points, v.normals, v.weights) for k, v in self.redistributed.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.added = {k: PointCloud(*v) for k, v in state["rar_points"].items()}
        self.redistributed = {k: PointCloud(*v) for k, v in state.get("rad_points", {}).items()}
        self.round = None
        self._forget_prefetch()


def rad_density(eps: np.ndarray, k: float, c: float) -> np.ndarray:
    """RAD's probabilities over candidates with residual magnitudes ``eps`` [M] (Wu et al. 2023, eq. 2):
    (eps^k / mean(eps^k) + c), normalised to sum 1; uniform where every eps^k is 0.  float64 [M].

    Raises
    ------
    ValueError
        For a negative or non-finite residual magnitude.
    """
    eps = np.asarray(eps, dtype=np.float64)
    if not (np.isfinite(eps).all() and (eps >= 0).all()):
        raise ValueError("RAD needs finite residual magnitudes >= 0; the residual is not finite (lower training.lr)")
    power = eps**k
    mean = power.mean()
    weight = power / mean + c if mean > 0 else np.ones_like(power)
    return weight / weight.sum()


def rad_choice(eps: np.ndarray, n: int, k: float, c: float, seed: int) -> np.ndarray:
    """``n`` candidate indices drawn independently with replacement from :func:`rad_density`, sorted
    (int64 [n]); the same on every rank for the same ``seed``."""
    p = rad_density(eps, k, c)
    return np.sort(np.random.default_rng(seed).choice(len(p), size=n, replace=True, p=p))


def _mean_measure(new: PointCloud, pool: PointCloud) -> PointCloud:
    """``new`` (points picked from ``pool``) with each point standing for the mean measure of a pool point."""
    if new.weights is not None:
        new.weights = np.full(len(new), float(np.mean(pool.weights)))
    return new


def _concat(a: PointCloud, b: PointCloud) -> PointCloud:
    """Rows of ``a`` then ``b`` (normals and weights must be present in both or neither)."""
    def cat(x, y):
        return None if x is None or y is None else np.concatenate([x, y])

    return PointCloud(np.concatenate([a.points, b.points]), cat(a.normals, b.normals), cat(a.weights, b.weights))
