"""Same seed, two processes, same thread count: the same points and loss curve, bit for bit."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import hashlib, sys
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
from dp_worker import small_problem
from elecsolver.trainer import Trainer
tr = Trainer(small_problem(), progress=False)
h = hashlib.sha256()
for name, pts, n in tr.batches():
    h.update(pts.numpy().tobytes())
losses = [tr.train_step()[0] for _ in range(6)]
print(h.hexdigest(), " ".join(repr(x) for x in losses))
"""


def _once(here: str) -> str:
    return subprocess.run([sys.executable, "-c", SCRIPT, here], capture_output=True, text=True, check=True,
                          timeout=300).stdout.strip()


def test_same_seed_same_points_and_losses_bitwise():
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    a, b = _once(here), _once(here)
    assert a == b
    assert len(a.split()) == 7


def test_other_seed_other_points():
    from dp_worker import small_problem

    from elecsolver.config import apply_overrides
    from elecsolver.trainer import Trainer

    p1 = small_problem()
    p2 = type(p1)(apply_overrides(p1.config, ["training.seed=4"]))
    a = Trainer(p1, progress=False).batches()[0][1]
    b = Trainer(p2, progress=False).batches()[0][1]
    assert a.shape == b.shape and not bool((a == b).all())
