"""A trained run, loaded back: its network evaluated at any points and, for a family, at any configuration.

``es.load(OUT)`` reads a finished run's folder (the configuration from ``checkpoint.pt``, the network's parameters
from it too) and returns a :class:`TrainedModel`:

- :meth:`TrainedModel.fields` -- the fields on the problem's output sites and times (a FieldSet, SI), at a
  configuration (``{"x0": 0.42, "f": 1.1e9}`` by parameter name, or ``{"source.x0": 0.42}`` by configuration key);
- :meth:`TrainedModel.at` -- the fields at any SI points;
- :meth:`TrainedModel.probe` -- time traces at a few places;
- :meth:`TrainedModel.reference` -- the problem's reference at a configuration.

A configuration outside the trained box is refused (:class:`~elecsolver.config.ConfigError`, one line) unless
``extrapolate=True``, which warns instead.  ``elecsolver query OUT --set source.x0=0.42 [--out DIR]`` writes the
same files as a run for one configuration (:func:`query`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from .config import ConfigError, apply_overrides

__all__ = ["TrainedModel", "load", "load_network_state", "query"]

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _checkpoint(out: Path) -> dict:
    path = out / "checkpoint.pt"
    if not path.is_file():
        raise ConfigError(f"{out} holds no trained run (no checkpoint.pt); give the folder a finished "
                          "`elecsolver run` wrote")
    state = torch.load(path, map_location="cpu", weights_only=False)
    if "model" not in state or "config" not in state:
        raise ConfigError(f"{path} is not a checkpoint of a one-device run (a run in time slabs or split over ranks); "
                          "query a run of training.slabs = 1 without --tp or --pp")
    return state


def load_network_state(problem, path: str | os.PathLike) -> dict:
    """The network parameters of the run in folder (or checkpoint file) ``path``, checked against ``problem``'s
    network: the state dict to load.

    Raises
    ------
    ConfigError
        If there is no such run, or its network has other parameters or shapes than ``problem``'s (the message
        names the first difference and the keys that set it).
    """
    path = Path(path)
    state = _checkpoint(path if path.is_dir() else path.parent) if path.is_dir() or path.name == "checkpoint.pt" \
        else None
    if state is None:
        raise ConfigError(f"{path}: give the folder of a finished run (it holds checkpoint.pt)")
    theirs = state["model"]
    mine = problem.build_network().state_dict()
    for name, t in mine.items():
        other = theirs.get(name)
        if other is None or tuple(other.shape) != tuple(t.shape):
            got = "missing" if other is None else f"shape {list(other.shape)}"
            raise ConfigError(f"{path}: its network ({state.get('problem')}) does not fit this run's: {name} is {got} "
                              f"there and {list(t.shape)} here; use the same problem inputs and network.* settings "
                              "(width, depth, kind, scales) as the run you start from")
    extra = sorted(set(theirs) - set(mine))
    if extra:
        raise ConfigError(f"{path}: its network has parameters this run's lacks ({extra[:3]}); use the same network.* "
                          "settings as the run you start from")
    return theirs


class TrainedModel:
    """A trained problem's network, evaluated at SI points and configurations.

    Parameters
    ----------
    problem_class : type
        The run's Problem subclass.
    config : dict
        The run's configuration.
    state : dict
        The network's state dict.
    device : str
        "cpu" or "cuda".
    """

    def __init__(self, problem_class, config: dict, state: Mapping, device: str = "cpu"):
        self.problem_class, self.config, self.device = problem_class, config, torch.device(device)
        self.problem = problem_class(config)
        self.dtype = DTYPES[self.problem.training.dtype]
        self.network = self.problem.build_network().to(device=self.device, dtype=self.dtype)
        self.network.load_state_dict(state)
        self.network.eval()

    # configurations ----------------------------------------------------------------------------
    @property
    def parameters(self):
        """The problem's parameters (:class:`elecsolver.axes.Parameter`), empty for a single configuration."""
        return list(self.problem.parameters)

    def configured(self, configuration: Mapping[str, float] | None = None, *, extrapolate: bool = False):
        """The problem at ``configuration`` ({parameter name or configuration key: SI value}; missing ones keep the
        run's).

        Raises
        ------
        ConfigError
            For a name that is no parameter, or a value outside the trained box without ``extrapolate``.
        """
        if not configuration:
            return self.problem
        sets = []
        by_name = {p.name: p for p in self.problem.parameters}
        by_key = {p.key: p for p in self.problem.parameters if p.key}
        for name, value in configuration.items():
            p = by_name.get(name) or by_key.get(name)
            if p is None:
                names = sorted([*by_name, *by_key])
                raise ConfigError(f"{name!r} is no parameter of {self.problem.name}; its parameters are "
                                  f"{names if names else 'none (a single configuration)'}")
            if p.key is None:
                raise ConfigError(f"parameter {p.name!r} has no configuration key; it cannot be set")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise ConfigError(f"{p.key} must be a number ({p.unit}), got {value!r}")
            sets.append((p.key, float(value)))
        config = apply_overrides(self.config, [f"{k}={v!r}" for k, v in sets])
        problem = self.problem_class(config, extrapolate=True)
        outside = [p for p in problem.parameters if not p.contains(problem.configuration[p.name])]
        if outside:
            what = ", ".join(f"{p.key} = {p.quantity(problem.configuration[p.name])} (trained on "
                             f"{p.range_text()})" for p in outside)
            if not extrapolate:
                raise ConfigError(f"{what} lies outside the trained box; choose a value inside it, or pass "
                                  "--extrapolate (extrapolate=True) to evaluate the network there anyway")
            warnings.warn(f"extrapolating: {what}", stacklevel=2)
        return problem

    # evaluation ----------------------------------------------------------------------------------
    @torch.no_grad()
    def at(self, points_si: np.ndarray, configuration: Mapping[str, float] | None = None, *,
           extrapolate: bool = False) -> dict[str, np.ndarray]:
        """The fields at SI points [N, k] (x, y[, z][, t] in m and s) of a configuration: {field: [N]} in SI
        (complex for a complex field).

        Raises
        ------
        ConfigError, ValueError
            For a bad configuration (see :meth:`configured`) or points of the wrong shape.
        """
        problem = self.configured(configuration, extrapolate=extrapolate)
        pts = np.asarray(points_si, dtype=np.float64)
        k = len(problem.field_inputs)
        if pts.ndim != 2 or pts.shape[1] != k:
            raise ValueError(f"points must have shape [N, {k}] (columns {problem.field_inputs}, SI), got "
                             f"{list(pts.shape)}")
        x = torch.as_tensor(problem.training_units(problem.with_configuration(pts)), dtype=self.dtype,
                            device=self.device)
        out = self.network(x).double().cpu().numpy()
        vals = out * np.array([problem.scales.of_unit(problem.units[problem.fields[i]]) for i in problem._copies()])
        result = {}
        for name in problem.fields:
            if name in problem.complex_fields:
                result[name] = vals[:, problem.outputs.index(f"{name}.re")] + 1j * vals[:, problem.outputs.index(
                    f"{name}.im")]
            elif name in problem.outputs:
                result[name] = vals[:, problem.outputs.index(name)]
        return result

    def probe(self, places, times, configuration: Mapping[str, float] | None = None, *,
              extrapolate: bool = False) -> dict[str, np.ndarray]:
        """Time traces at ``places`` [K, dim] (m) and ``times`` [nt] (s): {field: [K, nt]} SI.

        Raises
        ------
        ValueError
            For a static problem or places of the wrong shape.
        """
        problem = self.configured(configuration, extrapolate=extrapolate)
        if not problem.time_dependent:
            raise ValueError(f"{problem.name} has no time axis; evaluate it with at()")
        places = np.atleast_2d(np.asarray(places, dtype=np.float64))
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        dim = problem.space_domain.dim
        if places.shape[1] != dim:
            raise ValueError(f"places must have shape [K, {dim}] (m), got {list(places.shape)}")
        k, nt = places.shape[0], times.size
        pts = np.concatenate([np.repeat(places, nt, axis=0), np.tile(times, k)[:, None]], axis=1)
        values = self.at(pts, configuration, extrapolate=True)
        return {name: v.reshape(k, nt) for name, v in values.items()}

    @torch.no_grad()
    def fields(self, configuration: Mapping[str, float] | None = None, times=None, *, extrapolate: bool = False):
        """The fields on the problem's output sites and times (``times``: a subset, s) at a configuration, a
        FieldSet (SI) that carries the configuration (``FieldSet.parameters``)."""
        from .evaluation import evaluate_fieldset

        problem = self.configured(configuration, extrapolate=extrapolate)
        return evaluate_fieldset(self.network, problem, times, self.device, self.dtype)

    def reference(self, configuration: Mapping[str, float] | None = None, *, extrapolate: bool = False):
        """The problem's reference fields at a configuration (None without a reference)."""
        return self.configured(configuration, extrapolate=extrapolate).reference()


def load(out: str | os.PathLike, problem=None, device: str = "cpu") -> TrainedModel:
    """The trained run in folder ``out`` (written by ``elecsolver run`` or ``es.train``).

    Parameters
    ----------
    out : path
        The run's folder (it holds checkpoint.pt).
    problem : Problem subclass or str, optional
        The problem class (or a registered name, ``file.py[:Class]``); default: the registered problem the run
        names.
    device : str

    Raises
    ------
    ConfigError
        For a folder without a finished one-device run, or a problem that is not registered (give ``problem=``).
    """
    out = Path(out)
    state = _checkpoint(out)
    if problem is None or isinstance(problem, str):
        from .locate import UsageError, load_problem_class

        try:
            problem = load_problem_class(problem or state["problem"])
        except UsageError as exc:
            raise ConfigError(f"{out}: {exc}; give the problem class (es.load(out, problem=MyProblem), or "
                              "elecsolver query OUT --problem my_problem.py)") from None
    return TrainedModel(problem, state["config"], state["model"], device)


def query(out: str | os.PathLike, overrides: list[str], dest: str | os.PathLike | None = None, *,
          extrapolate: bool = False, device: str = "cpu", problem=None) -> dict:
    """Evaluate a trained run at the configuration ``overrides`` ("key=value" with the parameters' keys, e.g.
    ``source.x0=0.42``) and write the files of a run (fields.h5 + fields.xdmf, metrics.json, PNGs; scored against
    the reference at that configuration where the problem has one) into ``dest`` (default ``out/query``).

    Returns
    -------
    dict
        The metrics written (``configuration`` holds the parameters' SI values).

    Raises
    ------
    ConfigError
        For a key that is no parameter, a value that is not a number or lies outside the box without
        ``extrapolate``, or a folder without a trained run; nothing is written.
    """
    from ._version import __version__
    from .fields import write
    from .io.atomic import write_json

    model = load(out, problem, device)
    configuration = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: give KEY=VALUE, e.g. --set source.x0=0.42")
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {key} takes a number") from None
        configuration[key.strip()] = value
    problem = model.configured(configuration, extrapolate=extrapolate)
    reference = problem.reference()
    fields = model.fields(configuration, extrapolate=True)
    dest = Path(dest) if dest is not None else Path(out) / "query"
    metrics = {"problem": problem.name, "query_of": str(Path(out)), "configuration": problem.parameter_record(),
               "rel_l2": problem.metrics(fields, reference) if reference is not None else {},
               "package_version": __version__, "device": str(model.device)}
    dest.mkdir(parents=True, exist_ok=True)
    attrs = {"problem": problem.name, "config": problem.config, "scales": problem.scales.as_dict(), "metrics": metrics}
    write(fields, dest / "fields.h5", reference=reference, attrs=attrs)
    write(fields, dest, reference=reference, format="png")
    write_json(dest / "metrics.json", metrics)
    log.info("wrote %s", dest)
    return metrics
