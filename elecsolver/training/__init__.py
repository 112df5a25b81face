"""Training in parts: points (sampling, sharding, refinement), loss (a pure function of the parameters and
the batches), step (backward, a gradient-sync hook from outside, a gradient check, the optimizer by name)
and the loop (schedule, callbacks for logs, checkpoints and progress).  Import the parts from their modules:
:mod:`.options`, :mod:`.points`, :mod:`.loss`, :mod:`.step`, :mod:`.trainer`, :mod:`.context`."""
