"""Input derivatives of an MLP: forward jets against nested reverse-mode autograd (CPU).

    python benchmarks/derivatives.py                        # widths 64/128/256, d = 2/3/4, N = 4096
    python benchmarks/derivatives.py --quick --threads 1    # widths 64/128, d = 2/3, N = 1024
    python benchmarks/derivatives.py --json results.json    # also write every number
    python benchmarks/derivatives.py --train-step           # only the training step's FLOP rate

Network: ``elecsolver.networks.MLP(d, 1, width, depth=4)`` with tanh, float32, N points drawn
uniformly from [-1, 1]^d.  Three derivative tasks:

* ``first``: all d first derivatives du/dx_k;
* ``laplacian``: sum_k d2u/dx_k^2 over all d inputs.  The jet path carries it as one summed channel
  (``evaluate(laplacian={every input: 1})``), the forward Laplacian of Li et al. 2023
  (arXiv:2307.08214): the second-order terms of all directions are added up layer by layer, so the
  cost does not grow with one channel per direction;
* ``hessian``: all d (d + 1) / 2 second derivatives d2u/dx_i dx_j, i <= j (``second=[...]``).

Methods, all through :func:`elecsolver.operators.evaluate`:

* ``autograd``: ``method="autograd"``, nested ``torch.autograd.grad(create_graph=True)`` (the
  reference path);
* ``jet``: ``method="jet"``, derivatives pushed forward through the layers;
* ``jet compiled``: a function points -> loss built on the jet path, wrapped in ``torch.compile``
  (``fullgraph=True``, falling back to graph breaks, else reported as n/a).  Its first call
  (compilation, forward and backward) is timed separately and excluded.

Per (task, d, width, method) the script reports the median wall time (``time.perf_counter``) of
``--repeats`` calls after warm-up, for

* ``fwd``: the derivative channels of the task, with autograd recording (as in training; never
  under ``torch.no_grad``, which the autograd path cannot run under); for the compiled jet, a call
  of the compiled loss function (the forward graph plus the loss reduction);
* ``fwd+bwd``: loss = mean of the squared derivative channels of the task (first derivatives,
  the Laplacian channel or the Hessian entries), then ``loss.backward()`` to the parameters,

and the speed ratio autograd time / method time (above 1: faster than autograd).

Peak memory.  torch's CPU allocations are invisible to ``tracemalloc``, so each (task, d, width,
method) forward+backward runs once more in a fresh child process (this script with a hidden
``--_child`` flag, same threads, same model and points).  The child builds model and points and
runs one warm-up forward+backward (for the compiled path: compilation and its first call), resets
the kernel's resident-set high-water mark (writes "5" to /proc/self/clear_refs), reads the current
resident set from /proc/self/statm as the baseline, runs one forward+backward and reports
``resource.getrusage(RUSAGE_SELF).ru_maxrss * 1024 - baseline`` in MiB, except where ru_maxrss is
above VmHWM of /proc/self/status (the counter the reset clears): Linux also folds into ru_maxrss
the peak of the memory map a process had before ``exec`` (for a child started by this script,
the parent's) and the peaks of exited threads, and the reset clears neither; VmHWM is then used
and the JSON (``peak_source``) says so.  The children run with
``MALLOC_MMAP_THRESHOLD_=131072`` so that glibc hands freed tensor memory back to the system at once
and the warm-up's freed buffers are not counted in the baseline.  Where the high-water mark cannot
be reset, the peak includes the warm-up (and compilation), and the output says so.  The number is
the extra resident memory of one training step: activations and saved tensors, gradients and
allocator slack, not the parameters or the points.

Training step FLOP rate (``--train-step`` alone, also run after the tables unless ``--no-train-step``).
The helmholtz-square problem (preset "quick": MLP 2 -> 150 x 3 -> 1 with sin, hard constraint,
N = 480 PDE points, float32, seed 0) is built as a ``Trainer``, once with ``training.compile`` and
once eager, and ``Trainer.train_step()`` (loss, backward, Adam update) is timed: median of
``--repeats`` steps (default 50, quick 20) after a warm-up (10 steps, quick 5; the compiled first
step, its compilation, is reported apart).  Its matmul FLOPs are counted analytically: the forward
pass is 2 C N sum_layers(in * out), with C the number of jet channels the residual needs (value,
2 first derivatives, 1 summed Laplacian: C = 4, read off the trainer's own jet) and N the points;
forward + backward = 3 x forward (the backward's two matmuls per layer, for the input and the weight
gradients, cost 2 x forward).  Elementwise work (activations and their derivatives, the jet rules,
the hard-constraint factor, Adam) is not counted, so the rate is a matmul-equivalent one.  The
reference is a large linear layer, Y = X W^T with X [M, K], W [N, K] (default 4096, 2048, 2048;
quick 1024, 1024, 1024; ``--ref-size``), forward + backward to X and W, timed the same way (median
of calls after a warm-up) and counted by the same formula, 3 x 2 M K N.  Reported: step ms,
GFLOP/s, the reference's GFLOP/s and the fraction (target >= 65 %).

Before any configuration is timed, a correctness guard (float64 copy of the network, N = 64)
checks that the jet and autograd paths give the same channels (value, derivatives) to 1e-10
relative, channel by channel, and aborts otherwise.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
from _common import cpu_model, fmt

from elecsolver.networks import MLP
from elecsolver.operators import evaluate

TASKS = {
    "first": "all first derivatives du/dx_k",
    "laplacian": "Laplacian sum_k d2u/dx_k^2 (summed jet channel)",
    "hessian": "full Hessian d2u/dx_i dx_j, i <= j",
}
METHODS = ("autograd", "jet", "jet compiled")
OUTPUTS = ("u",)
GUARD_TOL = 1e-10
GUARD_N = 64
SEED = 0
MIB = 2.0**20


# ---- problem set-up --------------------------------------------------------------------------------
def input_names(d: int) -> tuple[str, ...]:
    return tuple(f"x{k}" for k in range(d))


def build(d: int, width: int, n: int, seed: int = SEED) -> tuple[MLP, torch.Tensor]:
    """The tanh MLP(d, 1, width, depth=4) and N points in [-1, 1]^d, float32, from a fixed seed."""
    torch.manual_seed(seed)
    model = MLP(d, 1, width, depth=4, activation="tanh")
    gen = torch.Generator().manual_seed(seed + 1)
    points = torch.rand(n, d, generator=gen) * 2.0 - 1.0
    return model, points


def task_kwargs(task: str, names: tuple[str, ...]) -> dict:
    """The ``evaluate`` keywords that declare the task's derivatives."""
    if task == "first":
        return {}
    if task == "laplacian":
        return {"laplacian": {name: 1.0 for name in names}}
    return {"second": [(a, b) for i, a in enumerate(names) for b in names[i:]]}


def task_channels(jet, task: str) -> torch.Tensor:
    """The derivative channels the task asks for (what the loss is built from)."""
    if task == "first":
        return jet.first
    if task == "laplacian":
        return jet.lap
    return jet.second


def derivatives(model, points, task: str, method: str):
    """The jet (value and declared derivatives) of ``model`` at ``points`` by ``method``."""
    names = input_names(points.shape[1])
    return evaluate(model, points, names, OUTPUTS, method=method, **task_kwargs(task, names)).jet


def loss_of(model, points, task: str, method: str) -> torch.Tensor:
    """Mean of the squared derivative channels of the task."""
    return task_channels(derivatives(model, points, task, method), task).pow(2).mean()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


def warm_compiled(model, points, task: str):
    """Compile the jet loss and run its first forward+backward.

    Returns (function, mode, compile seconds, error); the function is None when both the
    full-graph and the graph-break compilation fail (error then holds both reasons).
    """
    errors = []
    for fullgraph in (True, False):
        mode = "fullgraph" if fullgraph else "graph breaks"
        torch._dynamo.reset()  # fresh caches per model: no recompile limit, no stale guards

        def fn(pts):
            return loss_of(model, pts, task, "jet")

        compiled = torch.compile(fn, fullgraph=fullgraph)
        t0 = time.perf_counter()
        try:
            model.zero_grad(set_to_none=True)
            compiled(points).backward()
            seconds = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 (compile failures of any kind are reported, not fatal)
            errors.append(f"{mode}: {type(exc).__name__}: {first_line(exc)}")
            continue
        return compiled, mode, seconds, None
    torch._dynamo.reset()
    return None, None, None, "; ".join(errors)


# ---- correctness guard ------------------------------------------------------------------------------
def guard(model, d: int, task: str) -> float:
    """Largest channel-wise relative difference jet vs autograd in float64; aborts above 1e-10."""
    m64 = copy.deepcopy(model).double()
    gen = torch.Generator().manual_seed(SEED + 2)
    pts = torch.rand(GUARD_N, d, generator=gen, dtype=torch.float64) * 2.0 - 1.0
    a = derivatives(m64, pts, task, "jet").channels.detach()
    b = derivatives(m64, pts, task, "autograd").channels.detach()
    if a.shape != b.shape:
        raise SystemExit(f"correctness guard: jet channels {tuple(a.shape)} vs autograd {tuple(b.shape)} "
                         f"(task {task}, d={d})")
    num = (a - b).flatten(1).norm(dim=1)
    den = b.flatten(1).norm(dim=1).clamp_min(torch.finfo(torch.float64).tiny)
    worst = float((num / den).max())
    if not worst <= GUARD_TOL:
        raise SystemExit(f"correctness guard failed: task {task}, d={d}, width={model.layers[0].out_features}: "
                         f"jet and autograd channels differ by {worst:.3e} relative (limit {GUARD_TOL:g}, "
                         f"float64, N={GUARD_N}); not timing a wrong derivative")
    return worst


# ---- timing -----------------------------------------------------------------------------------------
def median_ms(fn, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def time_method(model, points, task: str, method: str, repeats: int, warmup: int) -> dict:
    """fwd and fwd+bwd median ms of one method (plus compile details for the compiled jet)."""
    row: dict = {"fwd_ms": None, "fwd_bwd_ms": None, "compile_s": None, "compile_mode": None, "error": None}
    if method == "jet compiled":
        fn, mode, seconds, error = warm_compiled(model, points, task)
        row.update(compile_s=seconds, compile_mode=mode, error=error)
        if fn is None:
            return row
        eager = float(loss_of(model, points, task, "jet").detach())
        got = float(fn(points).detach())
        if abs(got - eager) > 1e-3 * abs(eager):
            row["error"] = f"compiled loss {got:.6e} differs from the eager jet loss {eager:.6e}"
            return row

        def fwd():
            return fn(points)

        def loss_fn():
            return fn(points)
    else:
        def fwd():
            return task_channels(derivatives(model, points, task, method), task)

        def loss_fn():
            return loss_of(model, points, task, method)

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        loss_fn().backward()

    row["fwd_ms"] = median_ms(fwd, repeats, warmup)
    row["fwd_bwd_ms"] = median_ms(fwd_bwd, repeats, warmup)
    model.zero_grad(set_to_none=True)
    return row


# ---- peak memory (child process) --------------------------------------------------------------------
def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hwm_bytes() -> int:
    """VmHWM of /proc/self/status: the resident-set high-water mark of this process's memory map."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> bool:
    """Reset the resident-set high-water mark (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def child(spec: dict) -> dict:
    """One forward+backward in this fresh process; peak resident memory above the baseline."""
    torch.set_num_threads(spec["threads"])
    model, points = build(spec["d"], spec["width"], spec["n"])
    task, method = spec["task"], spec["method"]
    compiled = None
    if method == "jet compiled":  # compiles and runs the first forward+backward
        compiled, _, _, error = warm_compiled(model, points, task)
        if error:
            return {"error": error}

    def step():
        model.zero_grad(set_to_none=True)
        loss = compiled(points) if compiled is not None else loss_of(model, points, task, method)
        loss.backward()

    if compiled is None:
        step()  # warm-up: one-time allocations (thread pools, caches) stay out of the peak
    model.zero_grad(set_to_none=True)
    gc.collect()
    reset = reset_peak()
    baseline = rss_bytes()
    step()
    peak, source = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss"
    hwm = hwm_bytes()
    if reset and 0 < hwm < peak:  # ru_maxrss keeps the pre-exec (parent's) and exited threads' peaks
        peak, source = hwm, "VmHWM"
    return {"peak_mib": (peak - baseline) / MIB, "baseline_mib": baseline / MIB, "reset": reset, "source": source}


def measure_peak(task: str, d: int, width: int, n: int, method: str, threads: int) -> dict:
    spec = {"task": task, "d": d, "width": width, "n": n, "method": method, "threads": threads}
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)],
                          capture_output=True, text=True, env=env, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"child exited {proc.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


# ---- training step FLOP rate -------------------------------------------------------------------------
STEP_TARGET = 0.65


def helmholtz_trainer(compile_step: bool):
    """The helmholtz-square Trainer (preset "quick", seed 0, float32)."""
    from elecsolver.problems import get_problem_class

    from elecsolver.trainer import Trainer

    cls = get_problem_class("helmholtz-square")
    config = cls.preset_config("quick")
    config["training"].update(seed=SEED, dtype="float32", compile=compile_step)
    return Trainer(cls(config), progress=False)


def step_flops(trainer) -> dict:
    """Matmul FLOPs of one training step: forward 2 C N sum(in * out), forward + backward 3x that."""
    [(name, points, _n_global)] = trainer.batches()
    constraint = trainer.constraints[0]
    with torch.no_grad():
        fields = evaluate(trainer.model, points, trainer.problem.inputs, trainer.problem.outputs, constraint.wrt,
                          second=constraint.second or None, laplacian=constraint.laplacian)
    channels = fields.jet.channels.shape[0]
    layers = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Linear)]
    macs = sum(m.in_features * m.out_features for m in layers)
    n = points.shape[0]
    forward = 2 * channels * n * macs
    return {"constraint": name, "points": n, "channels": channels, "layers": [[m.in_features, m.out_features]
            for m in layers], "forward_flop": forward, "step_flop": 3 * forward}


def reference_rate(m: int, k: int, n: int, repeats: int, warmup: int) -> dict:
    """A large linear layer's forward + backward (to input and weight): median ms and GFLOP/s."""
    gen = torch.Generator().manual_seed(SEED + 3)
    x = torch.randn(m, k, generator=gen).requires_grad_()
    w = (torch.randn(n, k, generator=gen) / k**0.5).requires_grad_()
    grad_out = torch.randn(m, n, generator=gen)

    def fwd_bwd():
        x.grad = w.grad = None
        torch.nn.functional.linear(x, w).backward(grad_out)

    ms = median_ms(fwd_bwd, repeats, warmup)
    flop = 3 * 2 * m * k * n
    return {"shape": [m, k, n], "ms": ms, "flop": flop, "gflops": flop / (ms * 1e-3) / 1e9}


def train_step_rate(repeats: int, warmup: int, ref_size: tuple[int, int, int], ref_repeats: int) -> dict:
    """The helmholtz-square training step (compiled and eager) against the reference matmul."""
    ref = reference_rate(*ref_size, ref_repeats, 1)
    rows = []
    flops = None
    for label, compile_step in (("compiled", True), ("eager", False)):
        torch._dynamo.reset()
        trainer = helmholtz_trainer(compile_step)
        flops = flops or step_flops(trainer)
        t0 = time.perf_counter()
        trainer.train_step()  # compiled: compilation and the first step
        first_s = time.perf_counter() - t0
        ms = median_ms(trainer.train_step, repeats, warmup)
        rate = flops["step_flop"] / (ms * 1e-3) / 1e9
        rows.append({"step": label, "ms": ms, "first_step_s": first_s, "gflops": rate,
                     "fraction": rate / ref["gflops"]})
    return {"flops": flops, "reference": ref, "rows": rows, "repeats": repeats, "warmup": warmup + 1,
            "target_fraction": STEP_TARGET}


def print_train_step(res: dict) -> None:
    f, ref = res["flops"], res["reference"]
    dims = " -> ".join([str(f["layers"][0][0])] + [str(o) for _, o in f["layers"]])
    m, k, n = ref["shape"]
    print(f"\n== training step: helmholtz-square (preset quick, seed {SEED}), MLP {dims}, N = {f['points']} "
          f"points, C = {f['channels']} jet channels, float32")
    print(f"matmul FLOPs per step: forward 2*C*N*sum(in*out) = {f['forward_flop'] / 1e6:.1f} MFLOP, "
          f"forward+backward 3x = {f['step_flop'] / 1e6:.1f} MFLOP (elementwise work not counted)")
    print(f"reference: linear [{m}, {k}] @ [{k}, {n}] forward+backward, 3*2*M*K*N = {ref['flop'] / 1e9:.2f} GFLOP "
          f"in {ref['ms']:.1f} ms: {ref['gflops']:.1f} GFLOP/s")
    print(f"Trainer.train_step(): median of {res['repeats']} steps after {res['warmup']} warm-up step(s)")
    print(f"{'step':<9} {'ms/step':>8} {'GFLOP/s':>8} {'of reference':>12}  first step")
    for r in res["rows"]:
        print(f"{r['step']:<9} {r['ms']:>8.3f} {r['gflops']:>8.2f} {100 * r['fraction']:>11.1f}%  "
              f"{r['first_step_s']:.2f} s" + (" (compilation)" if r["step"] == "compiled" else ""))
    best = max(res["rows"], key=lambda r: r["fraction"])
    verdict = "met" if best["fraction"] >= STEP_TARGET else "not met"
    print(f"target >= {100 * STEP_TARGET:.0f} % of the reference rate: {verdict} "
          f"({best['step']}: {100 * best['fraction']:.1f} %)")


# ---- output -----------------------------------------------------------------------------------------


HEADER = (f"{'d':>2} {'width':>5} {'method':<13} {'fwd ms':>9} {'fwd+bwd ms':>11} {'ratio fwd':>9} "
          f"{'ratio f+b':>9} {'peak MiB':>9}")


def ratio(x) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def table_line(r: dict) -> str:
    return (f"{r['d']:>2} {r['width']:>5} {r['method']:<13} {fmt(r['fwd_ms'], '.2f'):>9} "
            f"{fmt(r['fwd_bwd_ms'], '.2f'):>11} {ratio(r['ratio_fwd']):>9} {ratio(r['ratio_fwd_bwd']):>9} "
            f"{fmt(r['peak_mib'], '.1f'):>9}")


def summary(rows: list[dict], widths: list[int]) -> list[str]:
    """The Laplacian at d = 3, per width: eager and compiled jet against nested autograd."""
    out = []
    for width in widths:
        sel = {r["method"]: r for r in rows if r["task"] == "laplacian" and r["d"] == 3 and r["width"] == width}
        ref = sel.get("autograd")
        if ref is None:
            continue
        for method, label in (("jet", "jet"), ("jet compiled", "compiled jet")):
            r = sel.get(method)
            if r is None:
                continue
            speedup = r["ratio_fwd_bwd"]
            head = f"Laplacian at d=3, width {width}: {label}"
            if speedup is None:
                out.append(f"{head} n/a ({r['error'] or 'not timed'})")
                continue
            if speedup >= 1:
                speed = f"is {speedup:.2f}x faster than nested autograd (fwd+bwd)"
            else:
                speed = f"is {1 / speedup:.2f}x slower than nested autograd (fwd+bwd)"
            out.append(f"{head} {speed}, peak memory {fmt(r['peak_mib'], '.1f')} vs "
                       f"{fmt(ref['peak_mib'], '.1f')} MiB")
    return out


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="widths 64/128, d = 2/3, N = 1024, 3 repeats (a smoke run)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--json", metavar="PATH", help="also write all numbers to this JSON file")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per case (default 7, quick 3)")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated subset of " + ",".join(TASKS))
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile'd jet")
    parser.add_argument("--no-memory", action="store_true", help="skip the child processes for peak memory")
    parser.add_argument("--train-step", action="store_true",
                        help="only the helmholtz-square training step's FLOP rate (skip the derivative tables)")
    parser.add_argument("--no-train-step", action="store_true", help="skip the training step's FLOP rate")
    parser.add_argument("--ref-size", metavar="M,K,N", default=None,
                        help="reference linear layer [M, K] @ [K, N] (default 4096,2048,2048; quick 1024,1024,1024)")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._child:
        print(json.dumps(child(json.loads(args._child))))
        return []

    widths, dims, n = ([64, 128], [2, 3], 1024) if args.quick else ([64, 128, 256], [2, 3, 4], 4096)
    repeats = args.repeats or (3 if args.quick else 7)
    warmup = 1 if args.quick else 2
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or repeats < 1 or (args.threads is not None and args.threads < 1):
        parser.error(f"unknown task(s) {unknown}" if unknown else "--repeats and --threads must be >= 1")
    if args.train_step and args.no_train_step:
        parser.error("--train-step and --no-train-step exclude each other")
    try:
        ref_size = tuple(int(v) for v in (args.ref_size or ("1024,1024,1024" if args.quick else "4096,2048,2048"))
                         .split(","))
    except ValueError:
        ref_size = ()
    if len(ref_size) != 3 or min(ref_size) < 1:
        parser.error(f"--ref-size needs three positive integers M,K,N, got {args.ref_size!r}")
    methods = [m for m in METHODS if not (args.no_compile and m == "jet compiled")]
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()

    memory_note = ("peak MiB: fresh child process per case; warm-up forward+backward, high-water mark reset "
                   "(/proc/self/clear_refs), then ru_maxrss (VmHWM where ru_maxrss still holds the parent's "
                   "peak) of one forward+backward minus the RSS before it (/proc/self/statm)")
    print(f"torch {torch.__version__}, {threads} thread(s), CPU: {cpu_model()}")
    if not args.train_step:
        print(f"MLP(d, 1, width, depth=4), tanh, float32, N = {n} points; median of {repeats} runs after "
              f"{warmup} warm-up; ratio = autograd time / method time")
        print(memory_note if not args.no_memory else "peak memory not measured (--no-memory)")

    rows: list[dict] = []
    notes: list[str] = []
    for task in ([] if args.train_step else tasks):
        print(f"\n== {task}: {TASKS[task]}")
        print(HEADER)
        for d in dims:
            for width in widths:
                model, points = build(d, width, n)
                worst = guard(model, d, task)
                ref = None
                for method in methods:
                    r = {"task": task, "d": d, "width": width, "n": n, "method": method, "guard_rel": worst}
                    r.update(time_method(model, points, task, method, repeats, warmup))
                    mem = {} if args.no_memory or r["error"] else measure_peak(task, d, width, n, method, threads)
                    r["peak_mib"] = mem.get("peak_mib")
                    r["baseline_mib"] = mem.get("baseline_mib")
                    r["peak_reset"] = mem.get("reset")
                    r["peak_source"] = mem.get("source")
                    if mem.get("error"):
                        notes.append(f"{task} d={d} width={width} {method}: peak memory n/a ({mem['error']})")
                    elif mem and not mem.get("reset"):
                        notes.append(f"{task} d={d} width={width} {method}: high-water mark not reset, the peak "
                                     "includes the warm-up" + (" and compilation" if "compiled" in method else ""))
                    if method == "autograd":
                        ref = r
                    for key in ("fwd", "fwd_bwd"):
                        mine, base = r[f"{key}_ms"], ref and ref[f"{key}_ms"]
                        r[f"ratio_{key}"] = base / mine if mine and base else None
                    if r["error"]:
                        notes.append(f"{task} d={d} width={width} {method}: n/a ({r['error']})")
                    elif r["compile_s"] is not None:
                        notes.append(f"{task} d={d} width={width} {method}: compiled ({r['compile_mode']}) "
                                     f"in {r['compile_s']:.1f} s (first forward+backward; less when "
                                     "inductor's on-disk cache already holds the kernels)")
                    rows.append(r)
                    print(table_line(r), flush=True)

    if rows:
        print(f"\ncorrectness guard (float64, N = {GUARD_N}): jet and autograd channels agree to "
              f"{max(r['guard_rel'] for r in rows):.1e} relative or better in every case (limit {GUARD_TOL:g})")
    if notes:
        print("notes:")
        for line in notes:
            print("  " + line)
    lines = summary(rows, widths)
    if lines:
        print()
        for line in lines:
            print(line)
    step = None
    if not args.no_train_step:
        step_repeats = args.repeats or (20 if args.quick else 50)
        step = train_step_rate(step_repeats, 5 if args.quick else 10, ref_size, 3 if args.quick else 5)
        print_train_step(step)
    if args.json:
        meta = {"torch": torch.__version__, "threads": threads, "cpu": cpu_model(), "n": n, "widths": widths,
                "dims": dims, "repeats": repeats, "warmup": warmup, "dtype": "float32", "depth": 4,
                "activation": "tanh", "memory_method": None if args.no_memory else memory_note,
                "guard_tolerance": GUARD_TOL}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows, "summary": lines, "notes": notes, "train_step": step},
                      f, indent=1)
    return rows


if __name__ == "__main__":
    main()
