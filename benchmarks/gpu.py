"""The training step on one GPU: step times per preset, points per second against points per step, peak memory,
the FLOP rate against the device's measured ceiling, bf16 against fp32, and DeepXDE's Helmholtz demo beside
helmholtz-square.  Writes one JSON file.

    python benchmarks/gpu.py --out results/                 # on a GPU machine (tools/device_check.sh runs it)
    python benchmarks/gpu.py --device cpu --out /tmp/dry    # a dry run on the CPU: tiny sizes, every section once

Sections (each writes its part of the JSON as soon as it is done, so a run stopped by its time limit keeps what it
measured; a section that fails records its error and the others go on):

* ``machine``: the device, its memory and multiprocessors, torch, CUDA and the driver.
* ``ceilings``: what the device sustains, measured here (METHOD: measure the ceilings, do not take the datasheet's):
  an n x n x n matrix product in float32 (TF32 off, as training runs), TF32 and bf16, each the median of 10 timed
  products after 3 warm-ups on fresh random data; a device-to-device copy, bytes read plus written.
* ``presets``: per (problem, preset) the training step as ``Trainer`` runs it (``Trainer.advance``: resampling every
  ``sampling.resample_every`` steps, loss balancing, the schedule), eager, compiled (``training.compile``; the main
  job's full preset only, the others run the same kernels under CUDA graphs) and compiled with CUDA graphs
  (``training.cuda_graphs``); ms per step is the median of 3 windows of ``--window`` steps after ``--warmup``
  steps (the first compiles), each window timed from a synchronised device to a synchronised device; the first
  step's time (compilation) and the peak of ``torch.cuda.max_memory_allocated``.  For the compiled modes also the
  sum of the step's kernel times over 20 steps from the profiler (``torch.profiler``, device records), and for
  CUDA graphs the ratio of the step's wall time to it (launch gaps and host work on top of the kernels; where the
  profiler sees no kernels inside graphs, the compiled step's kernels, the same ones, stand in).
* ``scaling``: the full preset's network and loss on N points a step (the preset's mix of interior, source and
  boundary points scaled to N, N from 10^3 up to what fits in ``--mem-fraction`` of the memory), one Adam step on
  them, compiled with a dynamic point dimension (one compilation for every N); ms per step, points per second, peak
  memory, and the matrix FLOPs of the step (``torch.utils.flop_counter.FlopCounterMode`` at one N, linear in N)
  over the step time against the float32 ceiling.
* ``bf16``: the main job's ``ci`` preset, the same steps in fp32 and with bf16 autocast (``precision = "bf16"``,
  eager, since mixed precision does not compile): ms per step and the early-window relative L2 error after them.
* ``sync``: the host-device synchronisations of three eager steps of the main job (``torch.cuda.set_sync_debug_mode
  ("warn")``), with where they come from.
* ``deepxde``: ``benchmarks/vs_deepxde.py --device cuda`` (DeepXDE's Helmholtz demo and helmholtz-square with the
  same network, points, initial weights and optimizer, interleaved), its summary.
* ``planner``: the strategy planner's calibration, once the planner exists (null until then).

``--budget-s`` bounds the whole run: a section that would start after it is skipped (recorded as such).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import cpu_model  # noqa: E402

MPS = "maxwell-point-source-2d"
HS = "helmholtz-square"
# the full preset first: on a GPU it is the one that matters, and the budget may end before the others
PRESETS = [(MPS, "full"), (MPS, "quick"), (MPS, "ci"), (HS, "quick")]
MODES = ("eager", "compiled", "cuda_graphs")
FULL_BUDGET_S = 270.0  # the full preset's training time on one GPU, compilation included (target: at most 300 s)


# ---- helpers -------------------------------------------------------------------------------------------------------
def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


class Budget:
    def __init__(self, seconds: float):
        self.start, self.seconds = time.perf_counter(), seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)


def problem_of(name: str, preset: str, sets: list[str] | None = None):
    from elecsolver.config import apply_overrides
    from elecsolver.problems import get_problem_class

    cls = get_problem_class(name)
    return cls(apply_overrides(cls.preset_config(preset), sets or []))


def peak_mib(dev: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None


def reset_peak(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)


def fresh_compiler() -> None:
    import torch._dynamo

    torch._dynamo.reset()


# ---- sections ------------------------------------------------------------------------------------------------------
def machine(dev: torch.device) -> dict:
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "torch": torch.__version__, "cpu": cpu_model(),
           "cpu_count": os.cpu_count(), "device": str(dev)}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        out.update(gpu=p.name, capability=f"{p.major}.{p.minor}", memory_gib=round(p.total_memory / 2**30, 1),
                   multiprocessors=p.multi_processor_count, cuda=torch.version.cuda)
        with contextlib.suppress(Exception):
            q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            out["nvidia_smi"] = q.stdout.strip()
    return out


def _time_cuda(fn, dev: torch.device, reps: int = 10, warm: int = 3) -> float:
    """Median seconds of ``fn()`` (device events on a GPU, perf_counter on the CPU)."""
    for _ in range(warm):
        fn()
    sync(dev)
    times = []
    for _ in range(reps):
        if dev.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def ceilings(dev: torch.device, small: bool) -> dict:
    n = 1024 if small else 8192
    out = {"matmul_n": n}
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, False)):
        if dev.type == "cpu" and name != "fp32":
            continue
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            s = _time_cuda(lambda: a @ b, dev)
            out[f"{name}_matmul_tflops"] = 2 * n**3 / s / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        del a, b
    m = (2**24 if small else 2**29) // 4  # float32 elements: 64 MiB on the CPU, 2 GiB on a GPU
    x = torch.randn(m, device=dev)
    y = torch.empty_like(x)
    s = _time_cuda(lambda: y.copy_(x), dev)
    out["copy_gb_per_s"] = 2 * 4 * m / s / 1e9
    del x, y
    return out


def _window_ms(step, dev: torch.device, steps: int) -> float:
    sync(dev)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    return 1e3 * (time.perf_counter() - t) / steps


def _kernel_ms_per_step(step, dev: torch.device, steps: int) -> float | None:
    """Sum of the device kernels' times per step (ms), from the profiler."""
    if dev.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    sync(dev)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync(dev)
    total_us = 0.0
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            total_us += e.device_time if hasattr(e, "device_time") else e.cuda_time
    return total_us / 1e3 / steps


def preset_step(name: str, preset: str, mode: str, dev: torch.device, warmup: int, window: int) -> dict:
    from elecsolver.trainer import Trainer

    fresh_compiler()
    sets = [f"training.compile={str(mode != 'eager').lower()}", f"training.cuda_graphs={str(mode == 'cuda_graphs').lower()}"]
    problem = problem_of(name, preset, sets)
    reset_peak(dev)
    trainer = Trainer(problem, device=str(dev), progress=False)
    points = sum(b.n_global for b in trainer.points.at(0))
    sync(dev)
    t = time.perf_counter()
    trainer.advance_terms()
    sync(dev)
    first_s = time.perf_counter() - t
    for _ in range(warmup - 1):
        trainer.advance_terms()
    windows = [_window_ms(trainer.advance_terms, dev, window) for _ in range(3)]
    ms = statistics.median(windows)
    out = {"problem": name, "preset": preset, "mode": mode, "points_per_step": points, "first_step_s": first_s,
           "ms_per_step": ms, "windows_ms": windows, "points_per_s": points / ms * 1e3,
           "peak_mib": peak_mib(dev), "params": sum(p.numel() for p in trainer.params)}
    if mode != "eager" and dev.type == "cuda":
        try:  # the profiler's kernel records (inside CUDA graphs where it sees them)
            out["kernel_ms_per_step"] = _kernel_ms_per_step(trainer.advance_terms, dev, 20)
        except Exception as exc:
            out["kernel_ms_per_step_error"] = _err(exc)
        if mode == "cuda_graphs" and out.get("kernel_ms_per_step"):
            out["wall_over_kernels"] = ms / out["kernel_ms_per_step"]
    if (name, preset, mode) == (MPS, "full", "cuda_graphs"):
        # the steps that fit the full preset's training budget with this step time and this compilation (the number
        # for `tools/gpu_full_run.sh OUT --steps N`; docs/gpu.md)
        out["steps_in_budget"] = {"budget_s": FULL_BUDGET_S,
                                  "steps": int((FULL_BUDGET_S - first_s) / (ms / 1e3)) // 1000 * 1000}
    del trainer
    return out


def presets_section(dev: torch.device, args, budget: Budget, emit, pairs, rows: list) -> list:
    """Step times of the (problem, preset) ``pairs``, appended to ``rows``: every mode for the main job's full
    preset, eager and CUDA graphs for the others (compiled without graphs runs the same kernels)."""
    for name, preset in pairs:
        for mode in (MODES if (name, preset) == (MPS, "full") or dev.type == "cpu" else ("eager", "cuda_graphs")):
            if budget.left() < 20:
                rows.append({"problem": name, "preset": preset, "mode": mode, "skipped": "time budget"})
                continue
            try:
                rows.append(preset_step(name, preset, mode, dev, args.warmup, args.window))
            except Exception as exc:  # record and go on
                rows.append({"problem": name, "preset": preset, "mode": mode, "error": _err(exc)})
            print(json.dumps(rows[-1]), flush=True)
            emit(rows)
    # the CUDA-graph step against the sum of its kernels measured without graphs (the same kernels), where the
    # profiler saw too few kernels inside the graphs
    for row in rows:
        if row.get("mode") != "cuda_graphs" or "ms_per_step" not in row:
            continue
        plain = next((r for r in rows if r.get("mode") == "compiled" and r.get("problem") == row["problem"]
                      and r.get("preset") == row["preset"] and r.get("kernel_ms_per_step")), None)
        if plain:
            row["kernel_ms_per_step_without_graphs"] = plain["kernel_ms_per_step"]
            row["wall_over_kernels_without_graphs"] = row["ms_per_step"] / plain["kernel_ms_per_step"]
    emit(rows)
    return rows


def scaling_section(dev: torch.device, args, budget: Budget, fp32_tflops: float | None, emit) -> dict:
    """Points per second against points per step, the full preset's network (see the module docstring)."""
    from torch.utils.flop_counter import FlopCounterMode

    from elecsolver.config import merge
    from elecsolver.trainer import Trainer
    from elecsolver.training.loss import loss_terms
    from elecsolver.training.points import Points

    fresh_compiler()
    base_problem = problem_of(MPS, "full")
    trainer = Trainer(base_problem, device=str(dev), progress=False)
    model, params, constraints = trainer.model, trainer.params, trainer.constraints
    p = base_problem
    mix = {k: p.config["sampling"][k] for k in ("interior", "source", "boundary")}
    total0 = sum(mix.values())

    def terms(batches):
        return loss_terms(model, params, constraints, batches, p.inputs, p.outputs, "jet")

    compiled = torch.compile(terms, fullgraph=True, dynamic=True)
    opt = torch.optim.Adam(params, lr=1e-4)

    def batches_for(n: int):
        scale = n / total0
        counts = {k: max(1, int(round(v * scale))) for k, v in mix.items()}
        cls = type(p)
        pn = cls(merge(p.config, {"sampling": counts}))
        pts = Points(pn.constraints(), pn.sampling, 0, 1000, 0, 1, [0, 1], trainer.dtype, dev)
        return [(b.points, b.normals, b.weights, b.denom_t) for b in pts.at(0)], sum(b.n_global for b in pts.at(0))

    def step_fn(fn, batches):
        def step():
            opt.zero_grad(set_to_none=True)
            fn(batches).sum().backward()
            opt.step()
        return step

    # matrix FLOPs per point of one step (forward, backward, no optimizer), counted eagerly at a small N
    small, n_small = batches_for(2048 if dev.type == "cuda" else 512)
    counter = FlopCounterMode(display=False)
    with counter:
        opt.zero_grad(set_to_none=True)
        terms(small).sum().backward()
    flops_per_point = counter.get_total_flops() / n_small
    out = {"network": {k: p.config["network"][k] for k in ("kind", "width", "depth", "scales")},
           "mix": mix, "matrix_flops_per_point": flops_per_point, "fp32_ceiling_tflops": fp32_tflops, "rows": []}
    sizes = [1000 * 4**k for k in range(12)] if dev.type == "cuda" else [256, 1024]
    total_mem = torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None
    per_point = None
    for n in sizes:
        if budget.left() < 15:
            out["rows"].append({"points": n, "skipped": "time budget"})
            break
        if per_point and total_mem and per_point * n > args.mem_fraction * total_mem:
            out["stopped"] = f"{n} points would need about {per_point * n / 2**30:.0f} GiB"
            break
        try:
            batches, got = batches_for(n)
            row = {"points": got}
            for mode, fn in (("eager", terms), ("compiled", compiled)):
                reset_peak(dev)
                step = step_fn(fn, batches)
                t = time.perf_counter()
                step()
                sync(dev)
                first = time.perf_counter() - t
                reps = max(3, min(50, int(2e6 / got)))
                ms = statistics.median(_window_ms(step, dev, reps) for _ in range(3))
                row[mode] = {"ms_per_step": ms, "points_per_s": got / ms * 1e3, "first_step_s": first,
                             "peak_mib": peak_mib(dev)}
                tflops = flops_per_point * got / (ms / 1e3) / 1e12
                row[mode]["matrix_tflops"] = tflops
                if fp32_tflops:
                    row[mode]["fraction_of_fp32_ceiling"] = tflops / fp32_tflops
            if dev.type == "cuda":
                per_point = max(row[m]["peak_mib"] for m in ("eager", "compiled")) * 2**20 / got
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
        except torch.cuda.OutOfMemoryError as exc:
            out["rows"].append({"points": n, "error": "out of memory: " + str(exc).splitlines()[0]})
            break
        except Exception as exc:
            out["rows"].append({"points": n, "error": _err(exc)})
            break
        finally:
            reset_peak(dev)
        emit(out)
    done = [r for r in out["rows"] if "compiled" in r]
    if done:
        out["largest"] = done[-1]
    del trainer, model, opt
    emit(out)
    return out


def bf16_section(dev: torch.device, args, budget: Budget) -> dict:
    """The main job's ci preset, the same steps in fp32 and bf16 autocast (eager)."""
    from elecsolver.parallel.strategy import apply_parallelism
    from elecsolver.trainer import Trainer

    out = {"problem": MPS, "preset": "ci", "steps": args.bf16_steps, "runs": {}}
    problem = problem_of(MPS, "ci", [f"training.steps={args.bf16_steps}"])
    reference = problem.reference()
    for precision in ("fp32", "bf16"):
        if budget.left() < 20:
            out["runs"][precision] = {"skipped": "time budget"}
            continue
        model, ctx = apply_parallelism(problem, None, dev, {"precision": precision})
        tr = Trainer(problem, model, ctx, device=str(dev), progress=False)
        tr.train()
        wall = tr.wall_s  # the training loop's own clock: steps only, not its progress evaluations
        err = problem.metrics(tr.predict(), reference)
        out["runs"][precision] = {"wall_s": wall, "ms_per_step": 1e3 * wall / args.bf16_steps,
                                  "rel_l2": {w: {k: float(v) for k, v in e.items()} for w, e in err.items()}}
        print(json.dumps({precision: out["runs"][precision]}), flush=True)
    r = out["runs"]
    if all("ms_per_step" in r.get(k, {}) for k in ("fp32", "bf16")):
        out["time_ratio_bf16_over_fp32"] = r["bf16"]["ms_per_step"] / r["fp32"]["ms_per_step"]
    return out


def sync_section(dev: torch.device) -> dict:
    """Where three eager steps of the main job (quick preset) wait for the device."""
    if dev.type != "cuda":
        return {"skipped": "no CUDA device"}
    from elecsolver.trainer import Trainer

    tr = Trainer(problem_of(MPS, "quick"), device=str(dev), progress=False)
    tr.advance_terms()  # the first step (balancing at step 0, the first points) outside the record
    sync(dev)
    found: list[str] = []
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                tr.advance_terms()
            sync(dev)
        for w in caught:
            found.append(f"{Path(w.filename).name}:{w.lineno}: {str(w.message).splitlines()[0][:160]}")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return {"steps": 3, "count": len(found), "where": sorted(set(found))}


def deepxde_section(dev: torch.device, args, budget: Budget) -> dict:
    out_json = Path(args.out) / "_vs_deepxde.json"
    cmd = [sys.executable, str(HERE / "vs_deepxde.py"), "--device", str(dev.type), "--runs", str(args.dde_runs),
           "--steps", str(args.dde_steps), "--eval-every", str(max(args.dde_steps // 4, 1)), "--json", str(out_json)]
    if dev.type == "cuda":
        cmd += ["--cuda-graphs"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(30.0, budget.left()), check=False)
    out = {"command": " ".join(cmd[1:]), "wall_s": time.perf_counter() - t, "returncode": proc.returncode,
           "output_tail": (proc.stdout + proc.stderr)[-3000:]}
    if out_json.is_file():
        saved = json.loads(out_json.read_text())
        out["summary"] = saved.get("summary")
        out_json.unlink()
    return out


def _err(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{where}"[:500]


# ---- main ------------------------------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a dry run with tiny sizes)")
    ap.add_argument("--out", required=True, help="folder for the JSON file (created)")
    ap.add_argument("--name", help="file name (default gpu-<device>-<date>.json)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="time for all sections (default 240 s)")
    ap.add_argument("--sections", default="machine,ceilings,presets,scaling,bf16,sync,deepxde,planner",
                    help="comma-separated sections to run")
    ap.add_argument("--warmup", type=int, default=20, help="steps before the timed windows (default 20)")
    ap.add_argument("--window", type=int, default=50, help="steps per timed window (default 50)")
    ap.add_argument("--mem-fraction", type=float, default=0.6,
                    help="largest points per step: the predicted peak memory within this share (default 0.6)")
    ap.add_argument("--bf16-steps", type=int, default=1500, help="steps of the bf16 / fp32 comparison")
    ap.add_argument("--dde-runs", type=int, default=2, help="runs per system against DeepXDE (default 2)")
    ap.add_argument("--dde-steps", type=int, default=2000, help="steps per run against DeepXDE (default 2000)")
    ap.add_argument("--presets", default=",".join(f"{n}:{p}" for n, p in PRESETS),
                    help="problem:preset pairs to time (comma-separated)")
    args = ap.parse_args(argv)
    args.presets = [tuple(s.split(":")) for s in args.presets.split(",") if s]
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible; use --device cpu for a dry run")
    small = dev.type == "cpu"
    if small:  # a dry run: every section once, at tiny sizes, the small presets only
        args.warmup, args.window, args.bf16_steps, args.dde_steps, args.dde_runs = 2, 3, 30, 40, 1
        args.presets = [(n, p) for n, p in args.presets if p != "full"]
    budget = Budget(args.budget_s)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = machine(dev)
    name = args.name or f"gpu-{slug(info.get('gpu', 'cpu'))}-{info['date'][:10]}.json"
    path = out_dir / name
    result: dict = {"benchmark": "benchmarks/gpu.py", "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                    "machine": info, "budget_s": args.budget_s}

    def emit(part=None, key=None):
        if key is not None:
            result[key] = part
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(path)

    emit()
    fp32 = None

    def run(key, fn):
        t = time.perf_counter()
        if budget.left() < 10 and key not in ("planner",):
            emit({"skipped": "time budget"}, key)
            return None
        try:
            value = fn()
        except Exception as exc:
            value = {"error": _err(exc), "traceback": traceback.format_exc()[-2000:]}
        if isinstance(value, dict):
            value["section_s"] = time.perf_counter() - t
        emit(value, key)
        print(f"[gpu.py] {key}: {time.perf_counter() - t:.1f} s, {budget.left():.0f} s of the budget left", flush=True)
        return value

    if "ceilings" in sections:
        c = run("ceilings", lambda: ceilings(dev, small))
        fp32 = (c or {}).get("fp32_matmul_tflops")
    # in order of what matters most on a GPU, so that the budget cuts the least important: the full preset, the
    # scaling with points, DeepXDE, the other presets, bf16, the synchronisations
    rows: list = []
    first = [pair for pair in args.presets if pair == (MPS, "full")]
    rest = [pair for pair in args.presets if pair != (MPS, "full")]
    if "presets" in sections and first:
        run("presets", lambda: {"rows": presets_section(dev, args, budget,
                                                        lambda r: emit({"rows": r}, "presets"), first, rows)})
    if "scaling" in sections:
        run("scaling", lambda: scaling_section(dev, args, budget, fp32, lambda part: emit(part, "scaling")))
    if "deepxde" in sections:
        run("deepxde", lambda: deepxde_section(dev, args, budget))
    if "presets" in sections and rest:
        run("presets", lambda: {"rows": presets_section(dev, args, budget,
                                                        lambda r: emit({"rows": r}, "presets"), rest, rows)})
    if "bf16" in sections:
        run("bf16", lambda: bf16_section(dev, args, budget))
    if "sync" in sections:
        run("sync", lambda: sync_section(dev))
    if "planner" in sections:
        emit({"calibration": None, "reason": "the strategy planner has not landed; nothing to calibrate"}, "planner")
    result["wall_s"] = time.perf_counter() - budget.start
    emit()
    print(f"[gpu.py] wrote {path}", flush=True)
    return result


if __name__ == "__main__":
    main()
