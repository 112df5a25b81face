"""Hooks of one's own in the training loop: stop a run once its field is accurate enough, and keep a loss trace.

    python examples/callbacks.py                      # helmholtz-square's ci preset, stop at 5 % error in Ez
    python examples/callbacks.py --target 0.2 --log-every 50

The training loop runs every feature (balancing, the finish, RAR / RAD, time slabs, the log, the checkpoint) as
a callback (``elecsolver.training.callbacks``); a script adds its own with ``es.Trainer(..., callbacks=[...])``.
Here ``StopAtError`` reads the relative L2 error that the log callback has just computed against the problem's
reference (the analytic mode of the square) and ends the run when it is below ``--target``; the checkpoint is then
written, so ``elecsolver run ... --resume`` could continue it.  ``LossTrace`` keeps the loss read after every step
and saves it with the checkpoint.  Both run on every rank with the same values, so under mpirun every rank stops
at the same step.
"""

from __future__ import annotations

import argparse
import tempfile

from elecsolver.problems import get_problem_class

import elecsolver as es
from elecsolver.training.callbacks import Callback


class StopAtError(Callback):
    """End the run at the first logged step whose relative L2 error of ``field`` is below ``target``."""

    def __init__(self, field: str, target: float):
        self.key, self.target = f"rel_l2_full_{field}", target
        self.reached: tuple[int, float] | None = None

    def on_read(self, trainer, loss, terms, end):
        row = trainer.history[-1] if trainer.history else {}
        if row.get("step") == trainer.step and row.get(self.key, 1.0) < self.target:
            self.reached = (trainer.step, row[self.key])
            trainer.should_stop = True


class LossTrace(Callback):
    """The loss after every step, kept in the checkpoint (a resumed run continues the trace)."""

    def __init__(self):
        self.trace: list[float] = []

    def on_read(self, trainer, loss, terms, end):
        self.trace.append(loss)

    def state_dict(self, trainer):
        return {"trace": list(self.trace)}

    def load_state_dict(self, trainer, state):
        self.trace = list(state["trace"]) if state else []


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=0.05, help="relative L2 error of Ez to stop at (default 0.05)")
    ap.add_argument("--log-every", type=int, default=100, help="steps between logged errors (default 100)")
    args = ap.parse_args(argv)
    cls = get_problem_class("helmholtz-square")
    config = cls.preset_config("ci")  # 2000 steps at most
    config["training"]["log_every"] = args.log_every
    problem = cls(config)
    stop, trace = StopAtError("Ez", args.target), LossTrace()
    with tempfile.TemporaryDirectory() as out:
        trainer = es.Trainer(problem, out_dir=out, reference=problem.reference(), progress=False,
                             callbacks=[stop, trace])
        trainer.train()
    if stop.reached is None:
        print(f"not reached: Ez's relative L2 error is {trainer.history[-1]['rel_l2_full_Ez']:.3g} after all "
              f"{trainer.step} steps")
    else:
        print(f"stopped at step {stop.reached[0]} of {problem.training.total_steps}: relative L2 error of Ez "
              f"{stop.reached[1]:.3g} < {args.target} after {trainer.wall_s:.1f} s of training")
    print(f"loss {trace.trace[0]:.3e} at step 1 -> {trace.trace[-1]:.3e} at step {len(trace.trace)}")
    return {"step": trainer.step, "reached": stop.reached, "trace": trace.trace, "history": trainer.history}


if __name__ == "__main__":
    main()
