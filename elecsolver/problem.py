"""A problem is a declaration; this base class owns the mechanics.

A leaf subclass declares, in :meth:`Problem.setup` (which reads ``self.config``, SI units):

- ``domain``: where the fields live, from :mod:`elecsolver.geometry` (a spatial domain for a static or
  time-harmonic problem, ``TimeDomain(space, t0, t1)`` for a time-dependent one);
- ``pde``: a PDE object of :mod:`elecsolver.physics` (it names the fields and their units);
- ``conditions``: boundary conditions bound to boundary tags of the domain, and initial values;
- ``scales``: a :class:`~elecsolver.scales.Scales` (default: L = 1 m, E0 = 1 V/m, T = L/c0, H0 = E0/eta0);
- ``output`` (sites: :class:`~elecsolver.fields.GridSites` or :class:`~elecsolver.fields.MeshSites`, SI)
  and ``times`` (s, or None);
- optionally ``regions`` ({name: spatial Domain}: extra PDE collocation clouds, e.g. dense points near a
  source), ``input_features`` (a function of the inputs in training units, [N, d] -> [N, m], appended to
  the network's inputs: :class:`~elecsolver.networks.InputFeatures`, e.g. the kink of a material interface),
  ``heads`` (output transforms in training units, e.g. a near-field ansatz), ``windows``
  ({name: t_max in s or None}: the error windows of the metrics), ``progress_window``, ``derived``
  ({name: :class:`Derived`}: outputs computed from the fields, e.g. a total field) and a closed form
  :meth:`exact` (SI, torch tensors in, {field: tensor} out) or an overridden :meth:`reference`;
- optionally ``subdomains`` ({name: spatial Domain}, e.g. a dielectric rod) and ``interfaces``
  (:class:`~elecsolver.physics.Interface` on their boundaries): the network then carries one copy of the
  fields per subdomain and one for the rest of the domain (``"background"``), channels ``"u@rod"``,
  ``"u@background"``; the PDE and the conditions read at each point the copy of the subdomain it lies in
  (:class:`~elecsolver.operators.SubdomainFields`), an interface term holds the PDE's continuity conditions
  between the two copies on each side (``PDE.interface_residual``: for Poisson, u and eps_r du/dn), and the
  output takes each site's copy.  This is how a material jump is handled: a coefficient that jumps
  (:func:`~elecsolver.physics.materials.piecewise`) in one smooth network would leave the flux condition
  unenforced.

The base validates the shared configuration blocks (one place: :mod:`elecsolver.training.options`),
derives the inputs (the domain's axes, then t), nondimensionalises (``scales``), samples every
constraint from the domain and its tags, builds the network (body from ``network``, heads from the
declarations) and evaluates the output sites.  A subclass adds checks in :meth:`check`; it never re-lists
choices other modules own.

Complex fields: a time-harmonic PDE names its complex components in ``complex_fields`` (and its
``time_convention``, e.g. "exp(-i omega t)"); the network carries each as two real channels
``"<name>.re"``, ``"<name>.im"`` (``Problem.outputs`` lists the channels, ``Problem.fields`` the fields),
:class:`~elecsolver.operators.Fields` hands residuals the complex values and derivatives, a complex residual
enters the loss as |r|^2 = (Re r)^2 + (Im r)^2, and the output FieldSet holds complex128 fields.
"""

from __future__ import annotations

import copy
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from .axes import Axis, Parameter
from .capabilities import active, check
from .config import ConfigError, check_finite, merge
from .geometry import Domain, TimeDomain
from .operators import Fields, SubdomainFields
from .physics.base import PDE, Condition, Context, Derivatives, axis_scale
from .sampling import PointCloud
from .scales import Scales
from .training.options import BASE_CONFIG, NetworkOptions, SamplingOptions, TrainingOptions, physical_memory

__all__ = ["Constraint", "Derived", "Problem", "ProblemError"]

_AXES = ("x", "y", "z")
BACKGROUND = "background"  # the subdomain of every point outside the declared ``subdomains``


class ProblemError(ConfigError):
    """A declaration or configuration a problem cannot be built from (one line naming what to fix)."""


@dataclass
class Constraint:
    """One loss term: a point cloud and the residual that must vanish on it.

    Attributes
    ----------
    name : str
        Label of the loss term ("pde", "pec", ...).
    sample : callable
        ``sample(seed, progress) -> PointCloud``: the global cloud (all ranks), nondimensional, float64;
        ``progress`` in [0, 1] is the fraction of training done (for curricula).
    residual : callable
        ``residual(fields, points, normals) -> Tensor [N, m]``.
    wrt, second, laplacian
        The derivatives the residual reads (see :class:`~elecsolver.physics.base.Derivatives`).
    weight : float
        Term weight in the loss.
    """

    name: str
    sample: Callable[[int, float], PointCloud]
    residual: Callable[[Fields, torch.Tensor, torch.Tensor | None], torch.Tensor]
    wrt: tuple[str, ...] = ()
    weight: float = 1.0
    second: tuple[tuple[str, str], ...] = ()
    laplacian: dict[str, float] | None = None


@dataclass(frozen=True)
class Derived:
    """An output field computed from the PDE's fields at the output sites (e.g. the total field = the
    scattered field the network solves for + the known incident field).

    Attributes
    ----------
    unit : str
        Its SI unit.
    fn : callable
        ``fn(fields, *coords) -> array [n]``: ``fields`` maps every PDE field to its SI values [n] (numpy,
        complex128 for a complex field), ``coords`` are the SI coordinates [n] (m, then s) in the problem's
        input order.  It is applied alike to the network's fields and to the reference, so that both carry it
        and the metrics score it.
    """

    unit: str
    fn: Callable[..., np.ndarray]


class Problem:
    """Base class of a problem; see the module docstring for what a subclass declares.

    Class attributes
    ----------------
    name : str
        Registry name (``elecsolver run NAME``).
    defaults : dict
        The problem's own configuration sections and its changes to the shared blocks (``training``,
        ``sampling``, ``network``); merged over :data:`elecsolver.training.options.BASE_CONFIG`.
    presets : dict
        Preset name -> nested changes to the default configuration.
    default_preset : str
    bounds : dict
        Preset -> {window: {field: relative L2 bound}}: the errors a preset is held to (the registry test
        runs the ``ci`` preset of every registered problem against its bounds).

    Parameters
    ----------
    config : dict, optional
        Full configuration (default: the default preset's).
    extrapolate : bool
        Accept a configuration (the parameters' values, see :attr:`configuration`) outside the trained box.

    Raises
    ------
    ConfigError
        For an invalid configuration or declaration (one line naming the key or object).
    """

    name: ClassVar[str] = "problem"
    defaults: ClassVar[dict] = {}
    presets: ClassVar[dict[str, dict]] = {"quick": {}}
    default_preset: ClassVar[str] = "quick"
    bounds: ClassVar[dict[str, dict[str, dict[str, float]]]] = {}

    # declarations (set in setup)
    domain: Domain
    pde: PDE
    conditions: list[Condition]
    scales: Scales
    output: object
    times: np.ndarray | None
    regions: dict[str, Domain]
    heads: list[nn.Module]
    windows: dict[str, float | None]
    progress_window: str | None

    def __init__(self, config: dict | None = None, *, extrapolate: bool = False):
        self.config = copy.deepcopy(config) if config is not None else self.preset_config()
        check_finite(self.config)
        _check_output_counts(self.config)
        self.training = TrainingOptions.from_config(self.config)
        self.sampling = SamplingOptions.from_config(self.config)
        self.network = NetworkOptions.from_config(self.config)
        self.conditions, self.scales, self.times, self.regions, self.heads = [], Scales(), None, {}, []
        self.input_features = None
        self.windows, self.progress_window, self.output = {"full": None}, None, None
        self.derived, self.subdomains, self.interfaces = {}, {}, []
        self.parameters: list[Parameter] = []
        self.extrapolate = bool(extrapolate)
        try:
            self.setup()
            self._check_parameters()
            self.check()
            self._finish()
        except ConfigError:
            raise
        except ValueError as exc:
            raise ProblemError(f"{self.name}: {exc}") from None

    # configuration ---------------------------------------------------------------------------
    @classmethod
    def _base_config(cls) -> dict:
        return _merge_new(BASE_CONFIG, cls.defaults)

    @classmethod
    def key_meanings(cls) -> dict[str, str]:
        """{dotted key: meaning} from the "Configuration keys" sections of the class docstrings (a subclass's
        entries over its bases'); the configuration reference prints them.  A section reads::

            Configuration keys
            ------------------
            source.x0 : source centre x
            window.t : [0, t_end] of the time window, continued on
                lines indented deeper
        """
        out: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
            section = re.search(r"^Configuration keys\n-+\n(.*?)(?=\n\S[^\n]*\n-+\n|\Z)", doc, re.M | re.S)
            for key, text in re.findall(r"^(\S+) : (.*?)(?=\n\S|\Z)", section.group(1) if section else "",
                                        re.M | re.S):
                out[key] = " ".join(text.split())
        return out

    @classmethod
    def default_config(cls) -> dict:
        """The full configuration with every key a user can ``--set`` (``loss`` lists the declared terms)."""
        return cls._with_loss(cls._base_config())

    @classmethod
    def preset_config(cls, preset: str | None = None) -> dict:
        """The default configuration with a preset's changes applied.

        Raises
        ------
        ConfigError
            For an unknown preset.
        """
        entry = cls._preset_entry(preset)
        if entry is SMOKE:
            base = cls.preset_config("ci" if "ci" in cls.presets else None)
            return merge(base, smoke_changes(base))
        changes = {k: v for k, v in entry.items() if k != "parallel"}
        return cls._with_loss(merge(cls._base_config(), changes))

    @classmethod
    def preset_parallel(cls, preset: str | None = None) -> dict:
        """The parallel options a preset holds under its ``"parallel"`` key (the fields of
        :class:`elecsolver.parallel.ParallelOptions`, e.g. ``{"recompute": True}``), below a configuration file's
        ``[parallel]`` section and the command line's flags; ``{}`` when it holds none.

        Raises
        ------
        ConfigError
            For an unknown preset.
        """
        entry = cls._preset_entry(preset)
        return dict(entry.get("parallel", {})) if isinstance(entry, dict) else {}

    @classmethod
    def _preset_entry(cls, preset: str | None):
        """The preset's entry in ``presets`` (None: the default preset); ConfigError for an unknown one."""
        preset = preset or cls.default_preset
        if preset not in cls.presets:
            raise ConfigError(f"unknown preset {preset!r} for {cls.name}; choose one of {sorted(cls.presets)}")
        return cls.presets[preset]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "smoke" not in cls.presets:  # every problem has one, derived from its ci preset (or its default)
            cls.presets = {**cls.presets, "smoke": SMOKE}

    @classmethod
    def _with_loss(cls, config: dict) -> dict:
        """``config`` with a ``loss`` section {term: weight} for every declared loss term."""
        if "loss" in config:
            return config
        probe = cls.__new__(cls)
        Problem.__init__(probe, {**config, "loss": {}})
        out = copy.deepcopy(config)
        out["loss"] = {c.name: c.weight for c in probe.constraints()}
        return out

    def setup(self) -> None:
        """Declare domain, pde, conditions, scales, output, times (and optional regions, heads, windows)."""
        raise NotImplementedError

    def check(self) -> None:
        """Extra checks of a subclass (raise ValueError or ConfigError naming the key)."""

    # derived ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        if not isinstance(getattr(self, "domain", None), Domain):
            raise ValueError("setup() must set self.domain to an elecsolver.geometry domain")
        if not isinstance(getattr(self, "pde", None), PDE):
            raise ValueError("setup() must set self.pde to an elecsolver.physics PDE")
        fields, units = getattr(self.pde, "fields", None), getattr(self.pde, "units", None)
        if not (isinstance(fields, tuple) and fields and all(isinstance(n, str) for n in fields)):
            raise ValueError(f"{type(self.pde).__name__}.fields must be a tuple of component names like ('u',), "
                             f"got {fields!r}")
        if not (isinstance(units, Mapping) and all(isinstance(units.get(n), str) for n in fields)):
            raise ValueError(f"{type(self.pde).__name__}.units must be a dict {{component: SI unit}} for {fields}, "
                             f"e.g. {{{fields[0]!r}: 'V/m'}}, got {units!r}")
        space = self.space_domain
        self.axes = (*(Axis(a, "space", "m") for a in _AXES[: space.dim]),
                     *((Axis("t", "time", "s"),) if self.time_dependent else ()),
                     *(p.axis for p in self.parameters))
        self.inputs = tuple(a.name for a in self.axes)
        # the inputs the PDE and the conditions differentiate along (the jets carry no parameter direction)
        self.field_inputs = tuple(a.name for a in self.axes if a.kind != "parameter")
        self.pde.check_inputs(self.field_inputs)
        self.fields = tuple(self.pde.fields)
        self.complex_fields = tuple(getattr(self.pde, "complex_fields", ()))
        unknown = [n for n in self.complex_fields if n not in self.fields]
        if unknown:
            raise ValueError(f"{type(self.pde).__name__}.complex_fields names {unknown}, which are no fields of "
                             f"{self.fields}")
        self._check_subdomains()
        # the network's real output channels: a complex field u is carried as "u.re" and "u.im", and with
        # subdomains as one such block per subdomain ("u@rod", "u@background")
        self.outputs = tuple(ch for name, copy_name in self._blocks()
                             for ch in ((f"{copy_name}.re", f"{copy_name}.im") if name in self.complex_fields
                                        else (copy_name,)))
        self.time_convention = getattr(self.pde, "time_convention", None) if self.complex_fields else None
        for name, d in self.derived.items():
            if not isinstance(d, Derived) or name in self.fields:
                raise ValueError(f"derived[{name!r}] must be an elecsolver.Derived(unit, fn) whose name is not a "
                                 f"PDE field {self.fields}")
        self.units = {**{a.name: a.unit for a in self.axes}, **self.pde.units}
        self.context = Context(self.inputs, self.scales, dict(self.pde.units), self.pde,
                               {p.name: p.unit for p in self.parameters})
        names = [self.pde.name, *self.regions, *(c.name for c in self.conditions), *(i.name for i in self.interfaces)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"loss terms {dup} are declared twice; give each condition its own name=")
        tags = set(space.boundary_tags())
        for c in self.conditions:
            if not isinstance(c, Condition):
                raise ValueError(f"conditions must be elecsolver.physics conditions, got {c!r}")
            if c.where == "initial" and not self.time_dependent:
                raise ValueError(f"condition {c.name!r} holds at t = t0, but the domain is not a TimeDomain")
            unknown = sorted(set(c.on or ()) - tags)
            if unknown:
                raise ValueError(f"condition {c.name!r} is on tags {unknown}, but the domain's boundary tags are "
                                 f"{sorted(tags)}")
        initial = [c for c in self.conditions if c.where == "initial"]
        if self.hard_initial and len(initial) > 1:
            raise ValueError(f"network.hard_initial imposes one initial state, but {[c.name for c in initial]} "
                             "are declared; keep one")
        self.hard_pec  # noqa: B018 (raises for a domain or condition it cannot impose)
        self._check_extent_in_scales()
        self._check_output_extent()
        self._check_points_per_wavelength()
        terms = [self.pde.name, *self.regions, *(c.name for c in self.conditions), *(i.name for i in self.interfaces)]
        for key in ("rar_constraints", "rad_constraints"):
            unknown = sorted(set(getattr(self.sampling, key)) - set(terms))
            if unknown:
                raise ConfigError(f"sampling.{key} names {unknown}, which are no loss terms; choose from {terms}")

    def _check_extent_in_scales(self) -> None:
        """Refuse a domain or time window of more than MAX_SCALES length (time) scales along an axis, or of a
        non-finite size: in training units such inputs overflow the network's first layer or leave it a span no
        network resolves.  The message names the configuration's keys furthest from their defaults."""
        lo, hi = self.space_domain.bbox()
        spans = [(n, float(hi[k] - lo[k]), self.scales.length, "m", "length") for k, n in enumerate(_AXES[:len(lo)])]
        if self.time_dependent:
            spans.append(("t", float(self.domain.t1 - self.domain.t0), self.scales.time, "s", "time"))
        for axis, span, scale, unit, kind in spans:
            ratio = span / scale if scale > 0 else math.inf
            if math.isfinite(ratio) and ratio <= MAX_SCALES:
                continue
            raise ConfigError(f"the domain spans {span:.3g} {unit} along {axis}, {ratio:.3g} times its {kind} scale "
                              f"{scale:.3g} {unit}; a network resolves at most {MAX_SCALES:.0e} scales along an "
                              f"axis: {self._furthest_from_defaults()}")

    def _furthest_from_defaults(self) -> str:
        """'check KEY = VALUE (default D), ...' for up to three numeric keys of the problem's own sections whose values
        are furthest (in decades) from the defaults."""
        base, out = type(self).default_config(), []
        for section, keys in self.config.items():
            if section in GENERIC_SECTIONS or not isinstance(keys, dict) or not isinstance(base.get(section), dict):
                continue
            for k, v in keys.items():
                d = base[section].get(k)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not isinstance(d, (int, float)) or v == d:
                    continue
                far = abs(math.log10(abs(v) / abs(d))) if v and d else math.inf
                out.append((far, f"{section}.{k} = {v:.4g} (default {d:.4g})"))
        if not out:
            return "check the problem's geometry and its scales"
        return "check " + ", ".join(t for _, t in sorted(out, key=lambda o: -o[0])[:3])

    def _check_output_extent(self) -> None:
        """Refuse output sites beyond the spatial domain's bounding box: the network would be evaluated where the
        problem is not defined.  Sites inside the box but outside the domain (a hole, a PEC body) are masked
        (:meth:`output_mask`) and left out of every metric."""
        from .fields.sites import GridSites

        if not isinstance(self.output, GridSites):
            return
        dom = self.space_domain
        lo, hi = dom.bbox()
        names = list(self.output.names)[: dom.dim]
        tol = 1e-9 * dom.size()
        axes = [np.asarray(self.output.axes[n], dtype=float) for n in names]
        if all(a.min() >= lo[k] - tol and a.max() <= hi[k] + tol for k, a in enumerate(axes)):
            return
        sites = ", ".join(f"{n} in [{a.min():.4g}, {a.max():.4g}]" for n, a in zip(names, axes))
        box = ", ".join(f"{n} in [{lo[k]:.4g}, {hi[k]:.4g}]" for k, n in enumerate(names))
        raise ConfigError(f"the output sites span {sites} m, beyond the domain's {box} m: the problem is not defined "
                          "there; put the output grid inside the domain")

    @property
    def subdomain_order(self) -> tuple[str, ...]:
        """The subdomains' names, then "background" (empty without subdomains)."""
        return (*self.subdomains, BACKGROUND) if self.subdomains else ()

    def _check_subdomains(self) -> None:
        from .physics.base import Interface

        space = self.space_domain
        if self.interfaces and not self.subdomains:
            raise ValueError("interfaces need subdomains: declare self.subdomains = {name: Domain}")
        for name, sub in self.subdomains.items():
            if not (isinstance(name, str) and name.isidentifier() and name != BACKGROUND):
                raise ValueError(f"subdomains: {name!r} is no name (an identifier other than {BACKGROUND!r})")
            if not isinstance(sub, Domain) or sub.dim != space.dim:
                raise ValueError(f"subdomains[{name!r}] must be a {space.dim}D elecsolver.geometry domain, got {sub!r}")
            try:
                sub.level_set(torch.zeros(1, space.dim, dtype=torch.float64))
            except NotImplementedError as exc:
                raise ValueError(f"subdomains[{name!r}]: {exc}") from None
        for i in self.interfaces:
            if not isinstance(i, Interface):
                raise ValueError(f"interfaces must be elecsolver.Interface objects, got {i!r}")
            if i.subdomain not in self.subdomains:
                raise ValueError(f"interface {i.name!r} is on subdomain {i.subdomain!r}, but the subdomains are "
                                 f"{sorted(self.subdomains)}")
            outside = i.outside or BACKGROUND
            if outside not in self.subdomain_order or outside == i.subdomain:
                raise ValueError(f"interface {i.name!r}: outside={i.outside!r} must name another subdomain of "
                                 f"{self.subdomain_order}")
            sub = self.subdomains[i.subdomain]
            unknown = sorted(set(i.on or ()) - set(sub.boundary_tags()))
            if unknown:
                raise ValueError(f"interface {i.name!r} is on tags {unknown}, but subdomain {i.subdomain!r} has the "
                                 f"boundary tags {sorted(sub.boundary_tags())}")
            # every face of an interface needs the domain on its far side
            tags = list(i.on or sub.boundary_tags())
            tol = 1e-9 * space.size()
            inside = {t: float(np.mean(space.signed_distance(sub.sample_boundary(64, "uniform", 0, tags=[t]).points)
                                       < -tol)) for t in tags}
            bad = [t for t, frac in inside.items() if frac < 0.5]
            if bad:
                good = [t for t in sub.boundary_tags() if t not in bad and (i.on is None or t in i.on)]
                raise ValueError(f"interface {i.name!r}: the faces {bad} of subdomain {i.subdomain!r} lie on the "
                                 f"domain's boundary (or outside it), where nothing is on their far side; give "
                                 f"Interface(on=...) the faces inside the domain" + (f", e.g. on={good}" if good else ""))
        if self.subdomains and not self.interfaces:
            raise ValueError(f"subdomains {sorted(self.subdomains)} carry their own fields, but no interface joins "
                             "them: declare self.interfaces = [elecsolver.Interface(subdomain)]")

    def subdomain_masks(self, points_si: np.ndarray) -> dict[str, np.ndarray]:
        """{subdomain: bool [N]} for SI points [N, d] (spatial columns first); a point on a subdomain's boundary
        (within 1e-9 of its size) counts as inside it, and the first subdomain that holds a point wins."""
        pts = np.asarray(points_si, dtype=np.float64)[:, : self.space_domain.dim]
        taken, out = np.zeros(pts.shape[0], dtype=bool), {}
        for name, sub in self.subdomains.items():
            inside = np.asarray(sub.contains(pts, tol=1e-9 * sub.size()), dtype=bool) & ~taken
            out[name], taken = inside, taken | inside
        out[BACKGROUND] = ~taken
        return out

    def _view(self, f, points: torch.Tensor):
        """The fields each point reads: ``f`` itself, or with subdomains the copy of the point's subdomain."""
        if not self.subdomains:
            return f
        si = torch.stack(self.context.si(points.detach()), 1).cpu().numpy()
        masks = {k: torch.as_tensor(v, device=points.device) for k, v in self.subdomain_masks(si).items()}
        return SubdomainFields(f, self.fields, self.subdomain_order, masks=masks)

    def points_per_wavelength(self) -> float | None:
        """Collocation points per wavelength of the PDE cloud, lambda / (measure / N)^(1/d) with lambda the
        shortest wavelength (m) the PDE declares (``PDE.wavelength()``, e.g. 2 pi / k of the Helmholtz equation),
        N the PDE's interior points and the measure the spatial domain's; None when the PDE declares none."""
        wavelength = getattr(self.pde, "wavelength", lambda: None)()
        if wavelength is None:
            return None
        space = self.space_domain
        n = self._count(self.pde.name, "interior", getattr(self, "interior_points", None))
        return float("inf") if n == 0 else wavelength / (space.measure() / n) ** (1.0 / space.dim)

    def _check_points_per_wavelength(self) -> None:
        """Warn (one line) when the PDE cloud has fewer than 10 points per wavelength: the residual is then not
        sampled finely enough to pin down an oscillating field."""
        ppw = self.points_per_wavelength()
        if ppw is not None and ppw < 10:
            import warnings

            n = self._count(self.pde.name, "interior", getattr(self, "interior_points", None))
            need = int(math.ceil(n * (10 / ppw) ** self.space_domain.dim))
            warnings.warn(f"{self.name}: {n} PDE collocation points give {ppw:.1f} points per wavelength "
                          f"(lambda = {self.pde.wavelength():.4g} m); use at least 10: sampling.interior >= {need}",
                          stacklevel=3)

    @property
    def time_dependent(self) -> bool:
        return isinstance(self.domain, TimeDomain)

    @property
    def space_domain(self) -> Domain:
        """The spatial domain (the domain itself for a static problem)."""
        return self.domain.domain if self.time_dependent else self.domain

    @property
    def hard_pec(self) -> bool:
        """Whether n x E = 0 on the walls is imposed through the network's head (``network.hard_pec``): needs an
        axis-aligned box (``Interval``, ``Rectangle``, ``Box``, alone or in a ``TimeDomain``) with one PEC
        condition on its whole boundary."""
        from .geometry.primitives import _AxisBox
        from .physics.conditions import PEC

        if not self.network.hard_pec:
            return False
        check(active(problem=self))  # with subdomains (elecsolver.capabilities)
        pec = [c for c in self.conditions if isinstance(c, PEC)]
        if not isinstance(self.space_domain, _AxisBox) or len(pec) != 1 or pec[0].on is not None:
            raise ConfigError("network.hard_pec needs an axis-aligned box domain with one PEC condition on its whole "
                              "boundary; set network.hard_pec=false")
        return True

    @property
    def hard_initial(self) -> bool:
        """Whether the initial values are imposed through the network's head (``network.hard_initial`` or
        ``Initial(hard=True)``): u = u0 + ((t - t0)/T) N, and no initial loss term."""
        return self.time_dependent and (self.network.hard_initial or any(
            getattr(c, "hard", False) for c in self.conditions if c.where == "initial"))

    def training_units(self, points_si: np.ndarray) -> np.ndarray:
        """SI points [N, k] (m, s, then the parameters in their units; the first k inputs) -> training units (x/L,
        t/T, a parameter / its unit's scale)."""
        pts = np.asarray(points_si, dtype=np.float64)
        return pts / self._axis_scales()[: pts.shape[1]]

    def _axis_scales(self) -> np.ndarray:
        """The SI value of one training unit along each input [d]."""
        return np.array([axis_scale(a, self.scales, self.context.parameters) for a in self.inputs])

    # sampling --------------------------------------------------------------------------------
    def _time_window(self, domain: Domain, progress: float) -> Domain:
        """The space-time domain sampled at this point of training (causal curriculum, ``sampling.time_ramp``).

        The window [t0, t0 + f (t1 - t0)] grows linearly from f = time_ramp_start to 1 over the first
        ``time_ramp`` of the steps, so early times are fitted first (the causality argument of Wang,
        Sankaran & Perdikaris, CMAME 421 (2024) 116813, applied to sampling, not to loss weights).
        """
        if not self.time_dependent:
            return domain
        s, t0, t1 = self.sampling, self.domain.t0, self.domain.t1
        frac = 1.0 if s.time_ramp <= 0 else min(1.0, s.time_ramp_start + (1 - s.time_ramp_start) * progress / s.time_ramp)
        return TimeDomain(domain, t0, t0 + frac * (t1 - t0))

    def _cloud(self, kind: str, domain: Domain, n: int, seed: int, progress: float, tags=None) -> PointCloud:
        dom = self._time_window(domain, progress)
        method = self.sampling.method
        if kind == "interior":
            c = dom.sample_interior(n, method, seed)
        elif kind == "boundary":
            c = dom.sample_boundary(n, method, seed, tags=tags)
        else:
            c = self.domain.sample_initial(n, method, seed)
        pts = self.training_units(c.points)
        if self.parameters:  # every point with a configuration of its own from the trained box
            pts = np.concatenate([pts, self.parameter_columns(pts.shape[0], seed)], axis=1)
        return PointCloud(pts, c.normals, c.weights)

    def _count(self, name: str, fallback: str, declared: int | None = None) -> int:
        if declared is not None:
            return declared
        smp = self.config["sampling"]
        return int(smp[name]) if name in smp else int(smp[fallback])

    def _count_key(self, name: str, fallback: str, declared: int | None = None) -> str | None:
        """The configuration key :meth:`_count` read (None: the count was declared in code)."""
        if declared is not None:
            return None
        return name if name in self.config["sampling"] else fallback

    def constraints(self) -> list[Constraint]:
        """Every loss term: the PDE on the domain (and on each region), each condition on its tags; terms with
        weight 0 are left out, one with no points and a positive weight is refused (a zero-weight condition's
        points may still anchor the PDE cloud, ``sampling.pde_on_boundary``).

        Raises
        ------
        ConfigError
            For a term with a positive weight and no points (names the ``sampling`` key and ``loss.<term>``).
        """
        ctx, out = self.context, []
        weights = self.config.get("loss", {})
        d = self.pde.derivatives(self.field_inputs, self.scales)

        def make(name, n, sample, residual, der: Derivatives, weight, key=None):
            weight = float(weights.get(name, weight))
            if not 0 <= weight <= MAX_LOSS_WEIGHT:
                raise ConfigError(f"loss.{name} = {weight:g} must be in [0, {MAX_LOSS_WEIGHT:g}] (0 switches the term "
                                  "off; weights of 1-1000 are usual)")
            if n > 0 and weight > 0 and key and n * len(self.inputs) * 8 > physical_memory():
                raise ConfigError(f"sampling.{key} = {n} points need {n * len(self.inputs) * 8 / 2**30:.3g} GiB for "
                                  f"their coordinates alone, more than this machine's "
                                  f"{physical_memory() / 2**30:.3g} GiB; give fewer")
            if n <= 0 and weight > 0:  # a term the user did not switch off would be silently dropped
                where = f"sampling.{key} = {n}" if key else f"{name!r} declares points={n}"
                raise ConfigError(f"{where} leaves the loss term {name!r} without points; give a positive count, "
                                  f"or switch the term off with --set loss.{name}=0")
            if n > 0 and weight > 0:
                out.append(Constraint(name, sample, residual, tuple(der.wrt), weight, tuple(der.second),
                                      der.laplacian_dict()))

        n_pde = self._count(self.pde.name, "interior", getattr(self, "interior_points", None))
        make(self.pde.name, n_pde, self._pde_sampler(n_pde), self._pde_residual, d, 1.0,
             self._count_key(self.pde.name, "interior", getattr(self, "interior_points", None)))
        for rname, region in self.regions.items():
            n, inside = self._count(rname, "interior"), region & self.space_domain

            def sample_region(seed, progress=1.0, n=n, inside=inside):
                return self._cloud("interior", inside, n, seed, progress)

            make(rname, n, sample_region, self._pde_residual, d, 1.0, self._count_key(rname, "interior"))
        hard_pec = self.hard_pec
        for c in self.conditions:
            if (c.where == "initial" and self.hard_initial) or (hard_pec and type(c).__name__ == "PEC"):
                continue
            n = self._count(c.name, c.where, c.points)

            def sample_c(seed, progress=1.0, c=c, n=n):
                return self._cloud(c.where, self.space_domain, n, seed, progress, tags=c.on)

            def res_c(f, pts, nrm, c=c):
                return c.residual(self._view(f, pts), pts, nrm, ctx)

            make(c.name, n, sample_c, res_c, c.derivatives(self.field_inputs), c.weight,
                 self._count_key(c.name, c.where, c.points))
        for i in self.interfaces:
            fallback = "interface" if "interface" in self.config["sampling"] else "boundary"
            n = self._count(i.name, fallback, i.points)
            sub, outside = self.subdomains[i.subdomain], i.outside or BACKGROUND

            def sample_i(seed, progress=1.0, n=n, sub=sub, i=i):
                return self._cloud("boundary", sub, n, seed, progress, tags=i.on)

            def res_i(f, pts, nrm, i=i, outside=outside):
                # each side's coefficients are read a hair off the interface, on its own side
                h = 1e-7 * self.space_domain.size() / self.scales.length
                shift = torch.zeros_like(pts)
                shift[:, : nrm.shape[1]] = h * nrm
                sides = [SubdomainFields(f, self.fields, self.subdomain_order, side=s) for s in (i.subdomain, outside)]
                return self.pde.interface_residual(*sides, pts - shift, pts + shift, nrm, ctx)

            make(i.name, n, sample_i, res_i, self.pde.interface_derivatives(self.field_inputs), i.weight,
                 self._count_key(i.name, fallback, i.points))
        return out

    def _pde_sampler(self, n: int):
        anchors = self.sampling.pde_on_boundary

        def sample(seed, progress=1.0):
            cloud = self._cloud("interior", self.space_domain, n, seed, progress)
            if not anchors:
                return cloud
            # as DeepXDE does, the residual is also taken at the boundary points of every condition
            extra = [self._cloud("boundary", self.space_domain, self._count(c.name, c.where, c.points), seed,
                                 progress, tags=c.on).points for c in self.conditions if c.where == "boundary"]
            if not extra and self.config["sampling"].get("boundary", 0):
                extra = [self._cloud("boundary", self.space_domain, self.sampling.boundary, seed, progress).points]
            return PointCloud(np.concatenate([cloud.points, *extra]))

        return sample

    def _pde_residual(self, f: Fields, points: torch.Tensor, normals=None) -> torch.Tensor:
        return self.pde.residual(self._view(f, points), points, self.context)

    def sample(self, name: str, seed: int = 0, progress: float = 1.0) -> PointCloud:
        """The global cloud of loss term ``name`` (training units) for a seed: a public seam for tests.

        Raises
        ------
        KeyError
            For an unknown term (the message lists them).
        """
        return self.constraint(name).sample(seed, progress)

    def constraint(self, name: str) -> Constraint:
        """The loss term ``name``.

        Raises
        ------
        KeyError
            For an unknown term (the message lists them).
        """
        for c in self.constraints():
            if c.name == name:
                return c
        raise KeyError(f"no loss term {name!r}; the terms are {[c.name for c in self.constraints()]}")

    # network ---------------------------------------------------------------------------------
    def build_network(self) -> nn.Module:
        """Body from the ``network`` block (inputs scaled to [-1, 1] over the domain's box), then the heads:
        hard zero initial fields if declared, then ``heads``."""
        from .networks import HardInitialCondition, HardInitialValue, Network, build_body

        lo, hi = self.domain.bbox()
        lo, hi = self.training_units(lo[None])[0], self.training_units(hi[None])[0]
        if self.parameters:  # each parameter's input scaled over its trained range
            lo = np.concatenate([lo, self.training_units_of_parameters(np.array([[p.lower for p in self.parameters]]))[0]])
            hi = np.concatenate([hi, self.training_units_of_parameters(np.array([[p.upper for p in self.parameters]]))[0]])
        if self.subdomains and self.input_features is not None:
            raise ConfigError(f"{self.name}: input_features do not combine with subdomains (each subdomain's copy "
                              "already carries its level set)")
        if self.subdomains:
            body = self._subdomain_body(lo, hi)
        elif self.input_features is not None:
            body = self._features_body(lo, hi)
        else:
            body = build_body(self.network, len(self.inputs), len(self.outputs), lo.tolist(), hi.tolist(),
                              self._input_spans(0))
        heads: list[nn.Module] = []
        if self.hard_initial:
            t = self.inputs.index("t")
            span = dict(t_column=t, t_start=float(lo[t]), span=float(hi[t] - lo[t]))
            values = next((c.values for c in self.conditions if c.where == "initial"), None)
            heads.append(HardInitialCondition(**span) if values is None else
                         HardInitialValue(_Values(values, self.fields, self.context, self._copies()), **span))
        if self.hard_pec:
            heads += self._pec_heads(lo, hi)
        if getattr(self.sampling, "parameters", "box") == "nodes":
            heads.insert(0, self._node_head(body, lo, hi))
            body = body[:-1]
        return Network(body, [*heads, *self.heads])

    def _node_head(self, body: nn.Sequential, lo, hi) -> nn.Module:
        """The output layer of ``sampling.parameters = "nodes"``: the body's last linear layer made a
        :class:`~elecsolver.networks.NodeInterpolation` over ``sampling.nodes`` Chebyshev-Lobatto nodes of each
        parameter's trained range (training units)."""
        from .networks import JetLinear, NodeInterpolation, chebyshev_lobatto

        if not self.parameters:
            raise ConfigError(f"{self.name}: sampling.parameters = 'nodes' needs a family (a problem with "
                              "elecsolver.Parameter inputs); use 'fixed' or 'box'")
        if self.training.optimizer != "least_squares":
            raise ConfigError(f"sampling.parameters = 'nodes' solves the output layer at each node by least squares; "
                              f"set training.optimizer = 'least_squares' (got {self.training.optimizer!r})")
        last = body[-1]
        if type(last) is not JetLinear:
            raise ConfigError("sampling.parameters = 'nodes' needs a network whose last layer is one linear layer "
                              "(network.kind = 'mlp')")
        k = len(self.inputs) - len(self.parameters)
        nodes = [chebyshev_lobatto(int(self.sampling.nodes), float(lo[k + j]), float(hi[k + j]))
                 for j in range(len(self.parameters))]
        return NodeInterpolation(nodes, list(range(k, k + len(self.parameters))), last.in_features, last.out_features)

    def _input_spans(self, extra: int) -> list[float] | None:
        """The half width each network input is scaled to: ``network.parameter_scale`` for a parameter column, 1
        for the others and for ``extra`` feature columns after the inputs; None when every one is 1."""
        s = float(self.network.parameter_scale)
        if not self.parameters or s == 1.0:
            return None
        return [s if a.kind == "parameter" else 1.0 for a in self.axes] + [1.0] * extra

    def _subdomain_body(self, lo, hi) -> nn.Sequential:
        """The body with one copy of the fields per subdomain: the level-set features, the layers of the
        ``network`` block on d + m inputs and one block of channels, then the copies side by side
        (:class:`~elecsolver.networks.SubdomainFeatures`, :class:`~elecsolver.networks.SubdomainMerge`)."""
        from .networks import SubdomainFeatures, SubdomainMerge, build_body

        levels = _LevelSets(list(self.subdomains.values()), self.scales.length, self.space_domain.dim)
        rng = np.random.default_rng(0)  # the features' range over the domain's box, for the input scaling
        box = torch.as_tensor(rng.uniform(lo, hi, (4096, len(lo))), dtype=torch.float64)
        with torch.no_grad():
            f = levels(box)
        f_lo, f_hi = f.min(0).values.tolist(), f.max(0).values.tolist()
        block = len(self.outputs) // len(self.subdomain_order)
        m = len(self.subdomains)
        body = build_body(self.network, len(self.inputs) + m, block, [*lo.tolist(), *f_lo], [*hi.tolist(), *f_hi],
                          self._input_spans(m))
        return nn.Sequential(SubdomainFeatures(levels, m), *body, SubdomainMerge(m))

    def _features_body(self, lo, hi) -> nn.Sequential:
        """The body on the inputs and ``input_features`` (:class:`~elecsolver.networks.InputFeatures`), each
        feature scaled over its range on the domain's box."""
        from .networks import InputFeatures, build_body

        rng = np.random.default_rng(0)
        box = torch.as_tensor(rng.uniform(lo, hi, (4096, len(lo))), dtype=torch.float64)
        with torch.no_grad():
            f = self.input_features(box)
        if f.ndim != 2 or f.shape[0] != box.shape[0]:
            raise ConfigError(f"{self.name}: input_features must map points [N, {len(lo)}] to [N, m], got "
                              f"{list(f.shape)}")
        f_lo, f_hi = f.min(0).values.tolist(), f.max(0).values.tolist()
        if not getattr(self.input_features, "keep_inputs", True):  # the features replace the inputs
            # each scaled to [-s, s] over its range, s from the features' ``spans`` (default 1)
            body = build_body(self.network, f.shape[1], len(self.outputs), f_lo, f_hi,
                              getattr(self.input_features, "spans", None))
            return nn.Sequential(InputFeatures(self.input_features, keep_inputs=False), *body)
        body = build_body(self.network, len(lo) + f.shape[1], len(self.outputs), [*lo.tolist(), *f_lo],
                          [*hi.tolist(), *f_hi], self._input_spans(f.shape[1]))
        return nn.Sequential(InputFeatures(self.input_features), *body)

    def _pec_heads(self, lo, hi) -> list[nn.Module]:
        """n x E = 0 on every face of a box: each tangential E component along axis a vanishes on the faces
        normal to the other axes, so it is multiplied by prod_{b != a} (x_b - lo_b)(hi_b - x_b) / h_b^2."""
        from .networks import HardDirichlet

        space = [a.name for a in self.axes if a.kind == "space"]
        heads = []
        for axis, name in zip(_AXES, self.pde.E):
            if name is None:
                continue
            cols = [k for k, a in enumerate(space) if a != axis]
            heads.append(HardDirichlet([lo[k] for k in cols], [hi[k] for k in cols], columns=cols,
                                       components=[self.outputs.index(name)]))
        return heads

    # output ----------------------------------------------------------------------------------
    def exact(self, *coords: torch.Tensor) -> dict[str, torch.Tensor]:
        """Closed-form solution (SI) at SI coordinates, if the problem has one."""
        raise NotImplementedError

    def has_exact(self) -> bool:
        return type(self).exact is not Problem.exact

    def reference(self):
        """Reference fields on the output sites and times (a FieldSet), or None.

        Default: :meth:`exact` evaluated there.
        """
        if not self.has_exact():
            return None

        pts = torch.as_tensor(self.with_configuration(self._template().points()), dtype=torch.float64)
        name = f"{type(self).__name__}.exact"
        try:
            values = self.exact(*pts.T)
        except TypeError as exc:  # most often a signature that does not match the inputs
            raise ConfigError(f"{name} is called as exact({', '.join(self.inputs)}) with the SI coordinates as torch "
                              f"tensors, and that call failed: {exc}") from None
        if not isinstance(values, Mapping):
            if len(self.fields) != 1 or not isinstance(values, (torch.Tensor, np.ndarray, int, float, complex)):
                raise ConfigError(f"{name} must return a dict {{field: tensor}} for the fields {self.fields} (a "
                                  f"tensor alone for a problem of one field), got {type(values).__name__}")
            values = {self.fields[0]: values}
        try:
            columns = self.channels(values, pts.shape[0])
        except (ValueError, RuntimeError) as exc:  # unknown names, complex for real, a shape that does not broadcast
            raise ConfigError(f"{name} returned {exc}") from None
        return self.output_fieldset(columns.numpy(), si=True)

    def _template(self, times: np.ndarray | None = None):
        """A one-field FieldSet on the output sites and ``times`` (default the problem's): its points() order."""
        from .fields import FieldSet

        times = self.times if times is None else times
        return FieldSet.from_flat(self.output, np.zeros((_count_rows(self.output, times), 1)), ["u"],
                                  {**self.units, "u": "1"}, times=times)

    def _blocks(self) -> list[tuple[str, str]]:
        """(field, copy name) per block of output channels: (u, u) or, with subdomains, (u, "u@<subdomain>")."""
        if not self.subdomains:
            return [(n, n) for n in self.fields]
        return [(n, f"{n}@{sub}") for sub in self.subdomain_order for n in self.fields]

    def _copies(self) -> list[int]:
        """The index in ``fields`` of each output channel's field."""
        return [self.fields.index(name) for name, _ in self._blocks()
                for _ in range(2 if name in self.complex_fields else 1)]

    def channels(self, values: Mapping[str, object], n: int, training_units: bool = False) -> torch.Tensor:
        """Field values {field: [n] tensor or number, SI; missing fields 0} as the network's output channels
        [n, len(outputs)], float64: a complex field's real part in ``"<name>.re"``, its imaginary part in
        ``"<name>.im"`` (divided by each field's scale when ``training_units``).  With subdomains a field's
        value fills every copy, unless a copy is given by its own name (``"u@rod"``: the value of the field of
        that side, e.g. a closed form continued across the interface).

        Raises
        ------
        ValueError
            For a name that is no field (or copy), or a complex value for a real field.
        """
        blocks = self._blocks()
        unknown = sorted(set(values) - set(self.fields) - {c for _, c in blocks})
        if unknown:
            raise ValueError(f"values for {unknown}, which are no fields of {self.fields}"
                             + (f" or their copies {[c for _, c in blocks]}" if self.subdomains else ""))
        cols = []
        for name, copy_name in blocks:
            v = torch.as_tensor(values.get(copy_name, values.get(name, 0.0)))
            v = (v.to(torch.complex128) if v.is_complex() else v.to(torch.float64)).expand(n)
            if v.is_complex() and name not in self.complex_fields:
                raise ValueError(f"field {name!r} is real, but complex values were given for it")
            scale = self.scales.of_unit(self.units[name]) if training_units else 1.0
            if name in self.complex_fields:
                v = v.to(torch.complex128)
                cols += [v.real / scale, v.imag / scale]
            else:
                cols.append(v / scale)
        return torch.stack(cols, 1)

    def output_points(self, times: np.ndarray | None = None, configuration: Mapping[str, float] | None = None
                      ) -> np.ndarray:
        """Training-unit inputs at every output (time, site), time-major, [nt * S, d]; the parameters' columns hold
        ``configuration`` ({name: SI value}, default :attr:`configuration`)."""
        return self.training_units(self.with_configuration(self._template(times).points(), configuration))

    # parameters ------------------------------------------------------------------------------
    def _check_parameters(self) -> None:
        """Validate ``parameters`` and read the configuration: each parameter's value at its ``key`` (a number), or
        the middle of its range without a key."""
        seen = set()
        self.configuration: dict[str, float] = {}
        for p in self.parameters:
            if not isinstance(p, Parameter):
                raise ValueError(f"parameters must be elecsolver.Parameter objects, got {p!r}")
            if p.name in seen:
                raise ValueError(f"parameter {p.name!r} is declared twice")
            seen.add(p.name)
            value = 0.5 * (p.lower + p.upper) if p.key is None else _lookup(self.config, p.key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{p.key} = {value!r}: the configuration of a family gives each parameter one "
                                  f"number (its trained range is {p.range_text()})")
            self.configuration[p.name] = float(value)
        fixed = getattr(self.sampling, "parameters", "box") == "fixed"
        if not (self.extrapolate or fixed):
            for p in self.parameters:
                v = self.configuration[p.name]
                if not p.contains(v):
                    raise ConfigError(f"{p.key or p.name} = {p.quantity(v)} lies outside the trained range "
                                      f"{p.range_text()}; choose a value inside it, or accept an "
                                      "extrapolation (elecsolver query --extrapolate; or train this configuration "
                                      "with --set sampling.parameters=fixed)")

    def parameter_record(self) -> dict[str, dict]:
        """The configuration for output files: {name: {"value": SI value, "unit", "key", "range": [lower, upper]}}
        (empty without parameters)."""
        return {p.name: {"value": self.configuration[p.name], "unit": p.unit, "key": p.key,
                         "range": [p.lower, p.upper]} for p in self.parameters}

    def with_configuration(self, points_si: np.ndarray, configuration: Mapping[str, float] | None = None
                           ) -> np.ndarray:
        """SI points [N, k] (space and time) with the parameters' columns appended, each holding its value in
        ``configuration`` ({name: SI value}; default :attr:`configuration`), [N, k + P]."""
        pts = np.asarray(points_si, dtype=np.float64)
        if not self.parameters:
            return pts
        conf = {**self.configuration, **(configuration or {})}
        unknown = sorted(set(configuration or {}) - {p.name for p in self.parameters})
        if unknown:
            raise ValueError(f"the configuration names {unknown}, which are no parameters of {self.name} "
                             f"({[p.name for p in self.parameters]})")
        cols = np.broadcast_to(np.array([conf[p.name] for p in self.parameters]), (pts.shape[0], len(self.parameters)))
        return np.concatenate([pts, cols], axis=1)

    def parameter_columns(self, n: int, seed: int) -> np.ndarray:
        """The parameters' columns of ``n`` collocation points in training units, [n, P]: a scrambled Sobol draw in
        the trained box (``sampling.parameters = "box"``, seeded by ``seed``; independent of the space-time draw,
        so that every point sees its own configuration), or the configuration at every point (``"fixed"``; also
        ``"nodes"``, whose solves set the columns to each node in turn, :mod:`elecsolver.training.nodes`)."""
        if not self.parameters:
            return np.zeros((n, 0))
        if getattr(self.sampling, "parameters", "box") in ("fixed", "nodes"):
            values = np.array([[self.configuration[p.name] for p in self.parameters]])
            return self.training_units_of_parameters(np.broadcast_to(values, (n, len(self.parameters))))
        from .sampling import derive_seed, unit_samples

        u = unit_samples(n, len(self.parameters), self.sampling.method, derive_seed(seed, "parameters"))
        lo = np.array([p.lower for p in self.parameters])
        hi = np.array([p.upper for p in self.parameters])
        return self.training_units_of_parameters(lo + u * (hi - lo))

    def training_units_of_parameters(self, values_si: np.ndarray) -> np.ndarray:
        """Parameter values [N, P] (SI, declaration order) -> training units."""
        k = len(self.inputs) - len(self.parameters)
        return np.asarray(values_si, dtype=np.float64) / self._axis_scales()[k:]

    def output_fieldset(self, values: np.ndarray, times: np.ndarray | None = None, si: bool = False):
        """A FieldSet on the output sites from the network's channels [nt * S, len(outputs)] (training units
        unless ``si``): complex fields joined from their ``.re``/``.im`` channels (complex128), then the
        ``derived`` fields added."""
        from .fields import FieldSet

        times = self.times if times is None else times
        vals = np.asarray(values, dtype=np.float64)
        if not si:
            vals = vals * np.array([self.scales.of_unit(self.units[self.fields[i]]) for i in self._copies()])
        shape = self.output.shape if times is None else (np.size(times), *self.output.shape)
        if vals.ndim != 2 or vals.shape[1] != len(self.outputs):
            raise ValueError(f"values must have shape [nt*S, {len(self.outputs)}] (channels {self.outputs}), got "
                             f"{list(vals.shape)}")
        def column(name, copy_name):
            if name in self.complex_fields:
                re, im = self.outputs.index(f"{copy_name}.re"), self.outputs.index(f"{copy_name}.im")
                return vals[:, re] + 1j * vals[:, im]
            return vals[:, self.outputs.index(copy_name)]

        masks = None
        if self.subdomains:  # each site reads the copy of its subdomain
            sites = self._template(times).points()
            masks = self.subdomain_masks(sites)
        fields = {}
        for name in self.fields:
            if masks is None:
                fields[name] = column(name, name).reshape(shape)
                continue
            out = column(name, f"{name}@{BACKGROUND}")
            for sub in self.subdomains:
                out = np.where(masks[sub], column(name, f"{name}@{sub}"), out)
            fields[name] = out.reshape(shape)
        units = dict(self.units)
        if self.derived:
            coords = list(self._template(times).points().T)
            flat = {k: v.reshape(-1) for k, v in fields.items()}  # the PDE's fields only
            for name, d in self.derived.items():
                fields[name] = np.asarray(d.fn(flat, *coords)).reshape(shape)
                units[name] = d.unit
        return FieldSet(self.output, fields, units, times=times, mask=self.output_mask(),
                        parameters=dict(self.configuration) if self.parameters else None)

    def output_mask(self) -> np.ndarray | None:
        """Which output sites lie in the spatial domain (bool, the sites' shape; within 1e-9 of its size), or None
        when all do: metrics leave the others out, and the files store the mask."""
        if not hasattr(self, "_mask"):
            dom = self.space_domain
            inside = dom.contains(self.output.coordinates()[:, : dom.dim], tol=1e-9 * dom.size())
            self._mask = None if inside.all() else inside.reshape(self.output.shape)
        return self._mask

    def errors(self, fields, reference, t_max: float | None = None) -> dict[str, float]:
        """The error of each field over times <= ``t_max`` (s; None: all), {field: error}: the relative L2 error
        (:func:`elecsolver.fields.relative_l2`).  The one place a problem changes how its fields are scored;
        :meth:`metrics` and :meth:`progress_metrics` both call it."""
        from .fields import relative_l2

        return relative_l2(fields, reference, t_max=t_max)

    def metrics(self, fields, reference) -> dict[str, dict[str, float]]:
        """Relative L2 error per window (``windows``: {name: t_max}) and field, {window: {field: error}}."""
        return {w: self.errors(fields, reference, t) for w, t in self.windows.items()}

    def progress_times(self) -> np.ndarray | None:
        """Output times evaluated during training (those of ``progress_window``; all by default)."""
        if self.times is None or self.progress_window is None:
            return self.times
        t_max = self.windows[self.progress_window]
        return self.times if t_max is None else self.times[self.times <= t_max * (1 + 1e-12)]

    def progress_metrics(self, fields, reference) -> dict[str, float]:
        """Flat {label: error} logged during training (the progress window, or every window)."""
        windows = {self.progress_window: self.windows[self.progress_window]} if self.progress_window else self.windows
        return {f"{w}_{k}": v for w, t in windows.items() for k, v in self.errors(fields, reference, t).items()}


class _LevelSets(nn.Module):
    """The subdomains' level sets in training units, l'(x') = l(x' L) / L, [N, d(+t)] -> [N, m]."""

    def __init__(self, domains, length: float, dim: int):
        super().__init__()
        self.domains, self.length, self.dim = list(domains), float(length), int(dim)
        for d in self.domains:
            d.level_set(torch.zeros(1, self.dim, dtype=torch.float64))  # raises for a domain without one

    def forward(self, x):
        xs = x[:, : self.dim] * self.length
        return torch.stack([d.level_set(xs) / self.length for d in self.domains], 1)


class _Values(nn.Module):
    """A user's SI function of the coordinates as a module of the training-unit inputs, [N, d] -> [N, c]
    (the real fields' values, column ``copies[j]`` in output channel j)."""

    def __init__(self, fn, names, ctx: Context, copies):
        super().__init__()
        self.fn, self.names, self.ctx, self.copies = fn, tuple(names), ctx, list(copies)

    def forward(self, x):
        from .physics.base import values_of

        return values_of(self.fn, self.names, x, self.ctx, "the initial values")[:, self.copies]


def _lookup(config: Mapping, key: str):
    """The value at dotted ``key`` of a nested configuration, or None."""
    node = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


MAX_OUTPUT_SITES_PER_AXIS = 100_000
SMOKE_STEPS, SMOKE_POINTS, SMOKE_SITES, SMOKE_WIDTH = 3, 64, 11, 64
SMOKE: dict = {}  # the marker of the derived ``smoke`` preset in ``Problem.presets`` (see :func:`smoke_changes`)
MAX_LOSS_WEIGHT = 1e10
MAX_SCALES = 1e4  # length (time) scales a domain (time window) may span along one axis
GENERIC_SECTIONS = ("training", "network", "sampling", "output", "loss")


def _check_output_counts(config: dict) -> None:
    """Refuse an integer of the ``output`` section below 1 or beyond :data:`MAX_OUTPUT_SITES_PER_AXIS` (10^5 sites
    along one axis is beyond what any viewer opens; a typo such as 1e12 would otherwise fail deep in numpy), and an
    ``output.png`` that is not true or false."""
    png = (config.get("output") or {}).get("png", True)
    if not isinstance(png, bool):
        raise ConfigError(f"output.png must be true (write the PNG snapshots) or false, got {png!r}")
    for k, v in (config.get("output") or {}).items():
        if _is_count(v) and v < 1:
            raise ConfigError(f"output.{k} = {v} must be a positive count")
        if _is_count(v) and v > MAX_OUTPUT_SITES_PER_AXIS:
            raise ConfigError(f"output.{k} = {v} is beyond {MAX_OUTPUT_SITES_PER_AXIS} sites along one axis; "
                              "give fewer")


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def smoke_changes(ci: dict) -> dict:
    """The ``smoke`` preset of a problem, as changes to its resolved ``ci`` configuration ``ci`` (a problem without
    a ``ci`` preset: its default preset's): a few steps on tiny clouds, which run every stage (the sampling of
    every loss term, the optimizer, a progress log, a loss-term balance where ``ci`` balances, the reference, the
    export) in seconds.  Its errors mean nothing; it is for trying a set-up, and it is what the test suite runs of
    each problem (tests/test_smoke.py).

    - ``training.steps``: ``ci``'s, at most :data:`SMOKE_STEPS` (3); a log every step, one checkpoint at the
      end; ``training.balance.every`` = 2 where ``ci`` balances the terms;
    - every point count of ``sampling`` (``interior``, ``boundary``, ``initial`` and the per-term keys) at most
      :data:`SMOKE_POINTS` (64);
    - every count of ``output`` at most :data:`SMOKE_SITES` (11; ``early_frames``, where there is one, the frames
      of the same early window, e.g. 7 of 11 for the point source's 25 of 41), and ``output.png`` = false;
    - ``network.width`` at most :data:`SMOKE_WIDTH` (64: a least-squares step's solve grows as the cube of it).
    """
    training, sampling, output = ci["training"], ci["sampling"], ci["output"]
    steps = min(int(training["steps"]), SMOKE_STEPS)
    sites = {k: min(v, SMOKE_SITES) for k, v in output.items() if _is_count(v)}
    if "early_frames" in output and "nt" in output:  # the same early window on the fewer frames
        nt, early = output["nt"], output["early_frames"]
        sites["early_frames"] = 1 + round((early - 1) * (sites["nt"] - 1) / max(nt - 1, 1))
    options = set(BASE_CONFIG["sampling"]) - {"interior", "boundary", "initial"}  # keys that count no points
    changes: dict = {
        "training": {"steps": steps, "log_every": 1, "checkpoint_every": steps},
        "sampling": {k: min(v, SMOKE_POINTS) for k, v in sampling.items() if k not in options and _is_count(v)},
        "output": {**sites, "png": False},
        "network": {"width": min(int(ci["network"]["width"]), SMOKE_WIDTH)}}
    if training.get("balance", {}).get("every"):
        changes["training"]["balance"] = {"every": 2}
    return changes


def _count_rows(sites, times) -> int:
    n = int(np.prod(sites.shape))
    return n * (1 if times is None else len(times))


def _merge_new(base: dict, changes: dict) -> dict:
    """Deep copy of ``base`` with ``changes`` applied; unlike :func:`merge`, new keys are allowed (a problem's
    own sections)."""
    out = copy.deepcopy(base)
    for k, v in changes.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge_new(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out
