"""Inverse problems through a trained family: the configuration that explains measured field traces.

Given probe places, times and measured values of some fields (e.g. Hz at 4 probes over 4 ns; or, for a
time-harmonic family, the complex Ez at 8 receivers and no times), :func:`invert` finds the parameters of a trained
family (:mod:`elecsolver.query`) that minimise the relative misfit

    J(p) = sum_fields sum_(probes, times) |u(x_k, t_j; p) - d_kj|^2 / sum |d_kj|^2

over the trained box, by gradient descent through the network's inputs (the network is differentiated with
respect to its parameter columns by reverse mode, as for its weights): every one of ``starts`` points of a
scrambled Sobol design in the box runs ``adam_steps`` Adam steps at once, in the box scaled to [0, 1] and held
inside it, in float32 (the search only has to reach the basin); the best is polished by L-BFGS (strong-Wolfe line
search) in float64.  Parameters not among
``unknowns`` keep the run's configuration (or the value given in ``known``).

``elecsolver invert RUN --probes probes.npz [--unknowns x0,y0,f]`` does the same from the command line: the file
holds ``places`` [K, dim] (m), ``times`` [nt] (s; left out for a problem without a time axis) and one array [K, nt]
(or [K]) per measured field (SI, complex for a complex field), e.g. ``Hz``.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .config import ConfigError

__all__ = ["invert"]


def _check_data(model, places, times, data) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    problem = model.problem
    dim = problem.space_domain.dim
    places = np.asarray(places, dtype=np.float64)
    if places.ndim != 2 or places.shape[1] != dim or places.shape[0] < 1:
        raise ConfigError(f"probes: places must have shape [K, {dim}] (m), K >= 1, got {list(places.shape)}")
    if problem.time_dependent:
        if times is None:
            raise ConfigError(f"probes: {problem.name} is time-dependent; give the sample times [nt] (s)")
        times = np.asarray(times, dtype=np.float64)
        if times.ndim != 1 or times.size < 1 or not np.all(np.isfinite(times)):
            raise ConfigError(f"probes: times must be a 1-D array of finite times (s), got shape {list(times.shape)}")
        shape, what = (places.shape[0], times.size), "[K, nt]"
    else:
        if times is not None:
            raise ConfigError(f"probes: {problem.name} has no time axis; give no times (one value per probe place)")
        shape, what = (places.shape[0],), "[K]"
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"probes: give measured values of at least one of the fields {problem.fields}")
    out = {}
    for name, values in data.items():
        if name not in problem.fields:
            raise ConfigError(f"probes: {name!r} is no field of {problem.name}; its fields are {problem.fields}")
        v = np.asarray(values)
        if np.iscomplexobj(v) and name not in problem.complex_fields:
            raise ConfigError(f"probes: {name} is a real field; its values must be real")
        if name in problem.complex_fields and not np.iscomplexobj(v):
            raise ConfigError(f"probes: {name} is a complex field (a phasor); give complex values, real and "
                              "imaginary parts")
        v = v.astype(np.complex128 if name in problem.complex_fields else np.float64)
        if v.shape != shape:
            raise ConfigError(f"probes: {name} must have shape {what} = {list(shape)} (one row per probe place), "
                              f"got {list(v.shape)}")
        if not np.all(np.isfinite(v)) or not np.any(v):
            raise ConfigError(f"probes: {name} must be finite and not all zero")
        out[name] = v
    return places, times, out


def invert(model, places, times, data: Mapping[str, np.ndarray], *, unknowns: Sequence[str] | None = None,
           known: Mapping[str, float] | None = None, starts: int = 8, adam_steps: int = 40, lbfgs_steps: int = 30,
           lr: float = 0.1, seed: int = 0, search_dtype: str = "float32") -> dict:
    """The configuration of a trained family that best explains probe traces.

    Parameters
    ----------
    model : TrainedModel
        From :func:`elecsolver.load`; its problem has parameters.
    places : array [K, dim]
        Probe places in m.
    times : array [nt] or None
        Sample times in s (None for a problem without a time axis, e.g. a time-harmonic one).
    data : dict
        {field: measured values [K, nt] (or [K] without a time axis), SI; complex for a complex field}.
    unknowns : sequence of str, optional
        The parameters to recover, by name or configuration key (default: all).
    known : dict, optional
        Values of the other parameters (default: the run's configuration).
    starts, adam_steps, lbfgs_steps, lr, seed
        The multi-start design, the iteration counts and Adam's step in the box scaled to [0, 1] (see the module
        docstring).
    search_dtype : {"float32", "float64"}
        The precision of the Adam search (the polish is float64 either way); float32 took 0.65 s against float64's
        1.08 s per inversion of the point-source family on 2 CPU cores, with the same answers
        (benchmarks/inversion_search.json).

    Returns
    -------
    dict
        ``configuration`` {name: SI value} (every parameter), ``misfit`` (relative, J above), ``starts`` [(start
        configuration, misfit after Adam)], ``wall_s``.

    Raises
    ------
    ConfigError
        For a model without parameters, an unknown name, probes of the wrong shape (the message says which), or
        a ``search_dtype`` other than "float32" and "float64".
    """
    t_start = time.perf_counter()
    problem = model.problem
    if search_dtype not in ("float32", "float64"):
        raise ConfigError(f"search_dtype must be 'float32' or 'float64', got {search_dtype!r}")
    if not problem.parameters:
        raise ConfigError(f"{problem.name} has no parameters: nothing to invert for (train a family)")
    places, times, data = _check_data(model, places, times, data)
    params = list(problem.parameters)
    lookup = {p.name: i for i, p in enumerate(params)} | {p.key: i for i, p in enumerate(params) if p.key}
    names = [p.name for p in params] if unknowns is None else list(unknowns)
    bad = [n for n in names if n not in lookup]
    if bad or not names:
        raise ConfigError(f"unknowns {bad or names} are no parameters of {problem.name}; choose from "
                          f"{[p.name for p in params]}")
    free = sorted({lookup[n] for n in names})
    base = dict(problem.configuration)
    for k, v in (known or {}).items():
        if k not in lookup:
            raise ConfigError(f"known: {k!r} is no parameter of {problem.name}")
        p = params[lookup[k]]
        if not p.contains(float(v)):
            raise ConfigError(f"known: {k} = {p.quantity(float(v))} lies outside the trained range "
                              f"{p.range_text()}; the family answers only inside its box")
        base[p.name] = float(v)
    dev = model.device
    scales = problem._axis_scales()
    k_field = len(problem.field_inputs)
    lo = torch.tensor([params[i].lower for i in free], dtype=torch.float64, device=dev)
    hi = torch.tensor([params[i].upper for i in free], dtype=torch.float64, device=dev)
    # the probe points (space, t) in training units, and the fixed parameter columns
    if times is None:
        st = places
    else:
        k_probes, nt = places.shape[0], times.size
        st = np.concatenate([np.repeat(places, nt, axis=0), np.tile(times, k_probes)[:, None]], axis=1)
    st = torch.as_tensor(st / scales[:k_field], dtype=torch.float64, device=dev)
    fixed = torch.as_tensor([base[p.name] / scales[k_field + i] for i, p in enumerate(params)], dtype=torch.float64,
                            device=dev)
    free_scale = torch.as_tensor(scales[k_field:][free], dtype=torch.float64, device=dev)
    cols, columns = [], []  # the network's output channels and the measured values in training units
    for f, v in data.items():
        u = problem.scales.of_unit(problem.units[f])
        if f in problem.complex_fields:  # the channels f.re and f.im
            cols += [problem.outputs.index(f"{f}.re"), problem.outputs.index(f"{f}.im")]
            columns += [v.real.reshape(-1) / u, v.imag.reshape(-1) / u]
        else:
            cols.append(problem.outputs.index(f))
            columns.append(v.reshape(-1) / u)
    target = torch.as_tensor(np.stack(columns, 1), device=dev)
    norm = float((target**2).sum())

    def misfit_in(dtype):
        """J(u) through a copy of the network in ``dtype``: u [S, F] in [0, 1] -> J [S]."""
        net = copy.deepcopy(model.network).to(dtype)
        lo_, hi_, fixed_, scale_, st_, target_ = (t.to(dtype) for t in (lo, hi, fixed, free_scale, st, target))

        def misfit(u):
            p_si = lo_ + u * (hi_ - lo_)
            s = u.shape[0]
            cols_all = fixed_.expand(s, -1).clone()
            cols_all[:, free] = p_si / scale_
            x = torch.cat([st_.expand(s, -1, -1), cols_all[:, None, :].expand(-1, st_.shape[0], -1)], 2)
            y = net(x.reshape(-1, x.shape[-1])).reshape(s, st_.shape[0], -1)[:, :, cols]
            return ((y - target_) ** 2).sum((1, 2)) / norm

        return misfit

    from .sampling import derive_seed, unit_samples

    u0 = torch.as_tensor(unit_samples(starts, len(free), "sobol", derive_seed(seed, "invert")), device=dev)
    search = misfit_in(getattr(torch, search_dtype))  # float32: 1.7x the speed of float64 on a CPU
    u = u0.to(getattr(torch, search_dtype), copy=True).requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    for _ in range(adam_steps):
        opt.zero_grad()
        search(u).sum().backward()
        opt.step()
        with torch.no_grad():
            u.clamp_(0.0, 1.0)
    # the polish in float64 converges to round-off of the misfit
    misfit = search if search_dtype == "float64" else misfit_in(torch.float64)
    with torch.no_grad():
        after = misfit(u.detach().double())
    best = int(torch.argmin(after))
    ub = u[best : best + 1].detach().double().clone().requires_grad_(True)
    lbfgs = torch.optim.LBFGS([ub], lr=1.0, max_iter=lbfgs_steps, tolerance_grad=1e-14, tolerance_change=1e-18,
                              history_size=20, line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        j = misfit(ub.clamp(0.0, 1.0)).sum()
        j.backward()
        return j

    lbfgs.step(closure)
    with torch.no_grad():
        ub.clamp_(0.0, 1.0)
        final = float(misfit(ub)[0])
    found = dict(base)
    values = (lo + ub[0].detach() * (hi - lo)).cpu().numpy()
    for i, v in zip(free, values):
        found[params[i].name] = float(v)
    edge = [params[i].name for i, w in zip(free, ub[0].detach().cpu().numpy()) if min(w, 1.0 - w) < 1e-6]
    if edge or final > 0.1:
        warnings.warn(f"the best fit has a relative misfit of {final:.3g}"
                      + (f" and lies on the edge of the trained box ({', '.join(edge)})" if edge else "")
                      + ": the data may not come from a configuration inside it", stacklevel=2)
    start_values = (lo + u0 * (hi - lo)).cpu().numpy()
    return {"configuration": found, "misfit": final, "unknowns": [params[i].name for i in free],
            "starts": [({params[i].name: float(v) for i, v in zip(free, row)}, float(m))
                       for row, m in zip(start_values, after.cpu().numpy())],
            "wall_s": time.perf_counter() - t_start}
