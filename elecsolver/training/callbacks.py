"""The training loop's callbacks: every training feature is a hook of one loop, not a branch of the trainer.

:meth:`Trainer.advance <elecsolver.training.trainer.Trainer.advance>` and :meth:`Trainer.train
<elecsolver.training.trainer.Trainer.train>` run, for every step::

    cb.before_step(trainer)        for each callback: the next time slab, the finish, balancing, least squares
    the optimizer step             trainer.step += 1
    cb.after_step(trainer)         for each callback: RAR, RAD, the progress bar
    cb.on_read(trainer, loss, terms, end)
                                   for each callback, when the loss is read back (every step on a CPU; on a GPU
                                   when a callback's ``wants_read`` asks, or every Trainer.SYNC_EVERY steps):
                                   the log row, the checkpoint, the bar's loss

and ``on_train_start`` / ``on_train_end`` around each call of ``train``.  The callbacks run in list order:
:func:`~elecsolver.training.trainer.default_callbacks` puts the time slabs before the finish, the finish before the balancing, the log
before the checkpoint (the checkpoint holds the logged row).  A callback names the capability it turns on
(:mod:`elecsolver.capabilities`: what it does not combine with is declared there, once) and keeps its state in
the checkpoint under its class name (``state_dict`` / ``load_state_dict``, called in list order before the
network's state is loaded, so that a callback can rebuild what the network's state loads into).

The steps a callback counts are those of the trainer's current segment, :attr:`Trainer.segment_step
<elecsolver.training.trainer.Trainer.segment_step>` against :attr:`Trainer.segment_options
<elecsolver.training.trainer.Trainer.segment_options>`: the whole run, or with ``training.slabs`` > 1 the time
slab being trained (each slab has its own schedule, balancing and finish).

A callback of one's own is a subclass of :class:`Callback` passed as ``Trainer(..., callbacks=[...])`` (or
``elecsolver.train(problem, callbacks=[...])``, which also runs under mpirun); it runs after the default ones but
before the checkpoint and the progress bar (example: ``examples/callbacks.py``).
"""

from __future__ import annotations

import csv
import io
import logging
import sys
from dataclasses import replace
from typing import ClassVar

import torch

from ..io.atomic import write_text

__all__ = ["Balance", "Callback", "Checkpoint", "Finish", "LeastSquares", "Log", "ProgressBar", "Redistribute",
           "Refine"]

log = logging.getLogger("elecsolver.trainer")


class Callback:
    """A hook of the training loop; every method does nothing by default.

    Attributes
    ----------
    capability : str or None
        The name in :data:`elecsolver.capabilities.CAPABILITIES` that this feature turns on, None for a feature
        that combines with every parallel transform and training feature.
    """

    capability: ClassVar[str | None] = None

    @classmethod
    def wanted(cls, problem) -> bool:
        """Whether ``problem``'s configuration turns this feature on (:func:`~elecsolver.training.trainer.
        default_callbacks` builds those)."""
        return False

    def first_segment(self, trainer, problem, model):
        """The problem and network the run trains first (a time slab's, for :class:`~elecsolver.training.slabs.
        Slabs`); called once, by the trainer's constructor, before anything is built on them."""
        return problem, model

    def on_train_start(self, trainer, end: int) -> None:
        """At the start of each :meth:`~elecsolver.training.trainer.Trainer.train` call, which trains up to step
        ``end`` (counted over the run)."""

    def before_step(self, trainer) -> None:
        """Before the optimizer step; ``trainer.segment_step`` is the number of steps done in the segment."""

    def after_step(self, trainer) -> None:
        """After the optimizer step; ``trainer.step`` and ``trainer.segment_step`` already count it."""

    def wants_read(self, trainer, end: int) -> bool:
        """Whether the loss must be read back from the device after this step (a synchronisation on a GPU)."""
        return False

    def on_read(self, trainer, loss: float, terms: list[float], end: int) -> None:
        """The global loss (float) and its terms (one per loss term, in ``trainer.constraints``' order), read
        back after this step; every rank gets the same values and calls this (it may be collective).  Setting
        ``trainer.should_stop = True`` (here or in any hook) ends the ``train`` call after this step, with a
        checkpoint; over several ranks at the next step where the ranks agree on a stop (every
        :data:`~elecsolver.training.interrupt.CHECK_EVERY` steps), all of them at the same step."""

    def on_train_end(self, trainer) -> None:
        """When a :meth:`~elecsolver.training.trainer.Trainer.train` call returns or raises."""

    def state_dict(self, trainer) -> dict:
        """What a resume needs of this callback (picklable), saved in the checkpoint under the class name."""
        return {}

    def load_state_dict(self, trainer, state: dict | None) -> None:
        """Restore :meth:`state_dict`'s ``state`` (None when the checkpoint has none for this class).

        Raises
        ------
        elecsolver.trainer.ResumeError
            When the checkpoint does not fit this callback.
        """


# the training schedule -----------------------------------------------------------------------------------------
class Finish(Callback):
    """The switch to the quasi-Newton finish (``training.finish``) after ``training.steps`` steps: an L-BFGS
    :class:`~elecsolver.training.step.Step` over the same parameters at ``finish.lr``, constant, on the points of
    the last main step; with ``training.least_squares.before_finish`` a least-squares solve of the output layer
    first (once: a resume inside the finish does not redo it)."""

    capability = "finish"

    @classmethod
    def wanted(cls, problem) -> bool:
        return bool(problem.training.finish_steps)

    def before_step(self, trainer) -> None:
        main = trainer.segment_options.steps
        if trainer.segment_step >= main and not trainer.in_finish:
            if trainer.segment_step == main and trainer.segment_options.least_squares["before_finish"]:
                trainer.least_squares()
            self.enter(trainer)

    @staticmethod
    def enter(trainer) -> None:
        from .step import Step

        o = trainer.segment_options
        f = o.finish
        options = replace(o, optimizer=f["optimizer"], lr=f["lr"], lr_final=f["lr"], schedule="constant",
                          compile=False, steps=o.finish_steps)
        trainer.stepper = Step(trainer.params, options, trainer._finish_terms_fn, trainer._batches_now,
                               trainer.ctx.sync_gradients, trainer.ctx.all_reduce_sum)
        log.info("step %d: quasi-Newton finish, %d %s steps on the points of step %d", trainer.step,
                 o.finish_steps, f["optimizer"], trainer.step_offset + o.steps - 1)

    def state_dict(self, trainer) -> dict:
        return {"in_finish": trainer.in_finish}

    def load_state_dict(self, trainer, state) -> None:
        if state and state["in_finish"] and not trainer.in_finish:
            self.enter(trainer)


class Balance(Callback):
    """The loss-term weights from gradient norms every ``training.balance.every`` steps of the main phase
    (:meth:`~elecsolver.training.trainer.Trainer.balance`); the weights are in the trainer's state."""

    @classmethod
    def wanted(cls, problem) -> bool:
        return bool(problem.training.balance["every"])

    def before_step(self, trainer) -> None:
        every, k = trainer.segment_options.balance["every"], trainer.segment_step
        if every and k % every == 0 and k < trainer.segment_options.steps:
            trainer.balance()


class LeastSquares(Callback):
    """A least-squares solve of the output layer every ``training.least_squares.every`` steps of the main phase,
    after the first (:meth:`~elecsolver.training.trainer.Trainer.least_squares`)."""

    capability = "least_squares"

    @classmethod
    def wanted(cls, problem) -> bool:
        return bool(problem.training.least_squares["every"])

    def before_step(self, trainer) -> None:
        every, k = trainer.segment_options.least_squares["every"], trainer.segment_step
        if every and k % every == 0 and 0 < k < trainer.segment_options.steps:
            trainer.least_squares()


class _PointsRound(Callback):
    """A round on the points after every ``sampling.<every>`` steps of the main phase: the trainer's method
    ``method`` (collective)."""

    every: ClassVar[str]
    method: ClassVar[str]

    @classmethod
    def wanted(cls, problem) -> bool:
        return bool(getattr(problem.sampling, cls.every))

    def after_step(self, trainer) -> None:
        every, k = getattr(trainer.problem.sampling, self.every), trainer.segment_step
        if every and k % every == 0 and k < trainer.segment_options.steps:
            getattr(trainer, self.method)()


class Refine(_PointsRound):
    """Residual-based adaptive refinement (RAR, ``sampling.rar_every``) after every so many steps of the main
    phase (:meth:`~elecsolver.training.trainer.Trainer.refine`); the added points are in the trainer's state."""

    every, method = "rar_every", "refine"


class Redistribute(_PointsRound):
    """Residual-based adaptive distribution (RAD, ``sampling.rad_every``) after every so many steps of the main
    phase (:meth:`~elecsolver.training.trainer.Trainer.redistribute`)."""

    every, method = "rad_every", "redistribute"


# what the run leaves behind ------------------------------------------------------------------------------------
class _Periodic(Callback):
    """An action (``act``) after every ``training.<every>`` steps counted over the run, at the loop's last step
    ``end`` and at a segment's last step (the end of a time slab); it asks for the loss to be read then."""

    every: ClassVar[str]

    @classmethod
    def wanted(cls, problem) -> bool:
        return True

    def wants_read(self, trainer, end: int) -> bool:
        every = getattr(trainer.options, self.every)
        return (every > 0 and trainer.step % every == 0) or trainer.step == end \
            or trainer.segment_step == trainer.segment_options.total_steps

    def on_read(self, trainer, loss, terms, end) -> None:
        if self.wants_read(trainer, end):
            self.act(trainer, loss, terms)

    def act(self, trainer, loss: float, terms: list[float]) -> None:
        raise NotImplementedError


class Log(_Periodic):
    """A row every ``training.log_every`` steps: the loss and its terms, the learning rate, the balancing weights,
    the wall time (s) and, with a reference, the relative L2 error of each field; logged, appended to
    ``trainer.history`` and written to ``out_dir/convergence.csv`` (and, with ``training.tensorboard``, to
    ``out_dir/tb`` as scalars and field images) by the writer rank.  Collective under tensor or pipeline
    parallelism (the network is gathered for the errors)."""

    every = "log_every"

    def __init__(self):
        self._tb = None  # the TensorBoard writer, opened at the first logged step

    def act(self, trainer, loss: float, terms: list[float]) -> None:
        """Log one row now (see the class); collective."""
        self._log_shares(trainer)
        ctx = trainer.ctx
        if ctx.gather_model is not None:
            trainer.gather()  # collective: every rank, whether or not it holds the reference
        if not ctx.is_writer:
            return
        row = {"step": trainer.step, "loss": loss}
        row.update({f"loss_{c.name}": v for c, v in zip(trainer.constraints, terms)})
        row["lr"] = trainer.stepper.lr
        if trainer.options.balance["every"]:
            row.update({f"weight_{c.name}": float(w) for c, w in zip(trainer.constraints, trainer.balance_weights)})
        row["wall_s"] = trainer.wall_s
        pred = None
        problem = trainer.problem
        if trainer.reference is not None:
            times = problem.progress_times()
            pred = trainer.predict(times)
            ref = trainer.reference if times is None else trainer.reference.select_times(slice(0, len(times)))
            for k, v in problem.progress_metrics(pred, ref).items():
                row[f"rel_l2_{k}"] = v
        trainer.history.append(row)
        log.info("step %d: %s", trainer.step, ", ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "step"))
        if trainer.out_dir is not None:
            trainer.out_dir.mkdir(parents=True, exist_ok=True)
            write_text(trainer.out_dir / "convergence.csv", _csv(trainer.history))
            if trainer.options.tensorboard:
                from .tensorboard import TensorBoardLog

                if self._tb is None:
                    self._tb = TensorBoardLog(trainer.out_dir / "tb")
                self._tb.scalars(row)
                self._tb.images(pred if pred is not None else trainer.predict(problem.progress_times()), row["step"])
                self._tb.flush()

    @staticmethod
    def _log_shares(trainer) -> None:
        """Log this rank's share of the loss; warn (writer) when every data-parallel rank reports the same share,
        the symptom of every rank holding the same points instead of its own shard.  Collective."""
        local, ctx = trainer.stepper.local_terms, trainer.ctx
        if local is None or ctx.world == 1:
            return
        mine = float(local.sum())
        shares = torch.zeros(ctx.world, dtype=torch.float64, device=local.device)
        shares[ctx.rank] = mine
        ctx.all_reduce_sum(shares)
        log.info("step %d: local loss share %.6g (data-parallel rank %d of %d)", trainer.step, mine, ctx.rank,
                 ctx.world)
        if ctx.is_writer and mine != 0.0 and bool((shares == shares[0]).all()):
            log.warning("step %d: every data-parallel rank reports the same local loss share %.6g: the ranks "
                        "probably hold the same points instead of their own shards (check how points are "
                        "sampled and sharded)", trainer.step, mine)


class Checkpoint(_Periodic):
    """The checkpoint every ``training.checkpoint_every`` steps, at the end of each ``train`` call and of each time
    slab (:meth:`~elecsolver.training.trainer.Trainer.save_checkpoint`; nothing without an ``out_dir``)."""

    every = "checkpoint_every"

    def act(self, trainer, loss, terms) -> None:
        trainer.save_checkpoint()


class ProgressBar(Callback):
    """A tqdm bar over the run's steps with the last loss read, on the writer rank when stderr is a terminal (a log
    file or pipe gets the log lines instead)."""

    def __init__(self, enabled: bool = True):
        self.enabled, self.bar = enabled, None

    @classmethod
    def wanted(cls, problem) -> bool:
        return True

    def on_train_start(self, trainer, end) -> None:
        if self.enabled and trainer.ctx.is_writer and trainer.step < end and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=end, initial=trainer.step, desc=trainer.problem.name, unit="step",
                            mininterval=0.1)

    def after_step(self, trainer) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def on_read(self, trainer, loss, terms, end) -> None:
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.3e}")

    def on_train_end(self, trainer) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _csv(rows: list[dict]) -> str:
    names: list[str] = []
    for r in rows:
        names += [k for k in r if k not in names]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=names)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
