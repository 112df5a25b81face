"""Differential operators on named field components.

:func:`evaluate` runs a network on collocation points and returns a :class:`Fields` object that
holds the values, the first input derivatives the residuals ask for and, on request, chosen second
derivatives (``second=[("x", "x"), ("x", "y")]``) and/or one summed Laplacian channel
(``laplacian={"x": 1, "y": 1, "t": -1}``), by one of two paths:

* ``method="jet"`` (default): derivatives propagated forward through jet-aware layers
  (:mod:`elecsolver.jets`); the loss then needs only a first-order backward.
* ``method="autograd"``: nested reverse mode (``torch.autograd.grad(create_graph=True)``, twice for
  second derivatives), the reference implementation and the fallback for a module without jet rules.

Tests hold the two equal to 1e-10 (float64).  Operators address components by name ("Ex", "Hz")
and inputs by name ("x", "y", "t").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from .jets import Jet, JetSpec, seed_jet

__all__ = ["Fields", "SubdomainFields", "curl", "curl_curl", "curl_te", "curl_z", "ddt", "div", "evaluate", "grad", "grad_div",
           "laplacian"]

METHODS = ("jet", "autograd")


class Fields:
    """Values, first derivatives and the declared second derivatives of named field components at N points.

    Parameters
    ----------
    jet : Jet
        channels [1 + K + P + L, N, c]: derivatives along input columns ``jet.wrt``, second
        derivatives along ``jet.pairs`` and the summed Laplacian channel (if any).
    inputs : sequence of str
        Names of the input columns, e.g. ("x", "y", "t").
    outputs : sequence of str
        Names of the c output channels, e.g. ("Ex", "Ey", "Hz"); a complex field ``u`` is the pair of
        channels ``"u.re"``, ``"u.im"``, and reading ``u`` (value or derivative) gives a complex tensor.

    Raises
    ------
    ValueError
        If the jet's component count differs from ``len(outputs)``.
    """

    def __init__(self, jet: Jet, inputs: Sequence[str], outputs: Sequence[str]):
        if jet.data.shape[-1] != len(outputs):
            raise ValueError(f"the network gives {jet.data.shape[-1]} components, the problem names {outputs}")
        self.jet, self.inputs, self.outputs = jet, tuple(inputs), tuple(outputs)

    def _component(self, name: str) -> int | tuple[int, int]:
        """The channel of a real component, or the (real, imaginary) channels of a complex one."""
        if name in self.outputs:
            return self.outputs.index(name)
        re, im = f"{name}.re", f"{name}.im"
        if re in self.outputs and im in self.outputs:
            return self.outputs.index(re), self.outputs.index(im)
        fields = tuple(dict.fromkeys(o[:-3] if o.endswith((".re", ".im")) else o for o in self.outputs))
        raise KeyError(f"no field component {name!r}; this problem has {fields}")

    @staticmethod
    def _pick(data: torch.Tensor, comp: int | tuple[int, int]) -> torch.Tensor:
        """Column ``comp`` of [N, c]; a complex tensor [N] for a (real, imaginary) pair of channels."""
        if isinstance(comp, tuple):
            return torch.complex(data[:, comp[0]], data[:, comp[1]])
        return data[:, comp]

    def _column(self, wrt: str) -> int:
        try:
            return self.inputs.index(wrt)
        except ValueError:
            raise KeyError(f"no input {wrt!r}; this problem's inputs are {self.inputs}") from None

    def __getitem__(self, name: str) -> torch.Tensor:
        """Value of component ``name``, shape [N] (complex for a complex field carried as ``name.re``/``name.im``)."""
        return self._pick(self.jet.value, self._component(name))

    def d(self, name: str, wrt: str) -> torch.Tensor:
        """d(component ``name``)/d(input ``wrt``), shape [N].

        Raises
        ------
        KeyError
            For an unknown component or input, or an input whose derivative was not requested.
        """
        col, comp = self._column(wrt), self._component(name)
        try:
            return self._pick(self.jet.derivative(col), comp)
        except KeyError:
            have = tuple(self.inputs[k] for k in self.jet.wrt)
            raise KeyError(f"d{name}/d{wrt} is read but was not declared: the derivatives carried are along "
                           f"{have}; add {wrt!r} to the derivatives the residual declares (wrt)") from None

    def d2(self, name: str, wrt_i: str, wrt_j: str) -> torch.Tensor:
        """d2(component ``name``)/d(input ``wrt_i``) d(input ``wrt_j``), shape [N] (either order).

        Raises
        ------
        KeyError
            For an unknown component or input, or a pair not declared in ``evaluate(second=...)``.
        """
        ci, cj = self._column(wrt_i), self._column(wrt_j)
        comp = self._component(name)
        try:
            return self._pick(self.jet.second_derivative(ci, cj), comp)
        except KeyError:
            have = [(self.inputs[i], self.inputs[j]) for i, j in self.jet.pairs]
            raise KeyError(f"second derivative along ({wrt_i!r}, {wrt_j!r}) is read but was not declared; carried "
                           f"pairs: {have}; add ({wrt_i!r}, {wrt_j!r}) to the second= pairs of the residual's "
                           "derivatives (Derivatives(second=...), or evaluate(second=...))") from None

    def lap(self, name: str) -> torch.Tensor:
        """The summed Laplacian channel sum_k w_k d2(name)/d x_k^2 declared in
        ``evaluate(laplacian={...})``, shape [N].

        Raises
        ------
        KeyError
            For an unknown component, or if no summed Laplacian was requested.
        """
        comp = self._component(name)
        lap = self.jet.lap
        if lap is None:
            raise KeyError("no summed Laplacian channel was requested; pass laplacian={'x': 1, 'y': 1, ...} "
                           "to evaluate")
        return self._pick(lap, comp)

    @property
    def laplacian_weights(self) -> dict[str, float] | None:
        """{input name: weight} of the summed Laplacian channel, or None."""
        w = self.jet.laplacian_weights
        return None if w is None else {self.inputs[c]: wt for c, wt in w}

    @property
    def second_pairs(self) -> tuple[tuple[str, str], ...]:
        """Input-name pairs whose second derivatives are carried."""
        return tuple((self.inputs[i], self.inputs[j]) for i, j in self.jet.pairs)

    @property
    def values(self) -> torch.Tensor:
        """All components, shape [N, c]."""
        return self.jet.value


class SubdomainFields:
    """The fields of a problem that carries one copy of its channels per subdomain (``Problem.subdomains``): a
    :class:`Fields`-like view in which component ``u`` reads the copy ``"u@<subdomain>"`` of the subdomain each
    point lies in (``masks``), or of one subdomain (``side``), as a multi-domain PINN does (one network per
    region, here one output block per region of a shared body; Jagtap & Karniadakis, *Commun. Comput. Phys.* 28
    (2020) 2002, XPINNs).  Values and derivatives are those of the chosen copy, so a field may jump, or kink,
    across an interface that no smooth network could.

    Parameters
    ----------
    fields : Fields
        The network's fields with channels ``"u@<subdomain>"`` (``".re"``/``".im"`` after it for a complex u).
    names : sequence of str
        The field components (the order of :attr:`values`).
    order : sequence of str
        Subdomain names; a point in none of ``masks`` reads the last one (the background).
    masks : dict str -> bool tensor [N], optional
        Which points lie in each subdomain (the first that holds a point wins).
    side : str, optional
        Read this subdomain's copy at every point (interface terms read both sides).
    """

    def __init__(self, fields: Fields, names: Sequence[str], order: Sequence[str], masks: dict | None = None,
                 side: str | None = None):
        if (masks is None) == (side is None):
            raise ValueError("SubdomainFields needs either masks or side")
        self.fields, self.names, self.order, self.masks, self.side = fields, tuple(names), tuple(order), masks, side

    def _read(self, method, name: str, *args):
        if self.side is not None:
            return method(f"{name}@{self.side}", *args)
        out = method(f"{name}@{self.order[-1]}", *args)
        for sub in reversed(self.order[:-1]):
            out = torch.where(self.masks[sub], method(f"{name}@{sub}", *args), out)
        return out

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._read(self.fields.__getitem__, name)

    def d(self, name: str, wrt: str) -> torch.Tensor:
        return self._read(self.fields.d, name, wrt)

    def d2(self, name: str, wrt_i: str, wrt_j: str) -> torch.Tensor:
        return self._read(self.fields.d2, name, wrt_i, wrt_j)

    def lap(self, name: str) -> torch.Tensor:
        return self._read(self.fields.lap, name)

    @property
    def values(self) -> torch.Tensor:
        """Every component, [N, len(names)] (real fields)."""
        return torch.stack([self[n] for n in self.names], 1)

    @property
    def inputs(self):
        return self.fields.inputs

    @property
    def laplacian_weights(self):
        return self.fields.laplacian_weights

    @property
    def second_pairs(self):
        return self.fields.second_pairs


def _grad_or_zeros(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """d(out.sum())/dx with create_graph=True; zeros where ``out`` does not depend on x."""
    if not out.requires_grad:
        return torch.zeros_like(x)
    g = torch.autograd.grad(out.sum(), x, create_graph=True, allow_unused=True)[0]
    return torch.zeros_like(x) if g is None else g


def _autograd_jet(model: nn.Module, points: torch.Tensor, wrt: tuple[int, ...],
                  spec: JetSpec | None = None) -> Jet:
    """The jet of ``model`` at ``points`` by nested reverse mode (reference path).

    First derivatives: one ``autograd.grad`` per component; second derivatives: one more per
    component and distinct first index i among the declared pairs and Laplacian columns, each of
    the gradient column dU_c/dx_i (Hessian row), all with create_graph=True.
    """
    x = points.detach().requires_grad_(True)
    u = model(x)
    if isinstance(u, Jet):
        raise TypeError("the autograd path needs a module that maps tensors to tensors")
    if spec is None or not spec.second_order:
        chans = [u]
        grads = [torch.autograd.grad(u[:, c].sum(), x, create_graph=True)[0] for c in range(u.shape[1])]
        for k in wrt:
            chans.append(torch.stack([g[:, k] for g in grads], dim=1))
        return Jet(torch.stack(chans, dim=0), wrt)
    ncomp = u.shape[1]
    grads = [_grad_or_zeros(u[:, c], x) for c in range(ncomp)]
    rows_needed = sorted({i for i, _ in spec.pairs} | {k for k, _ in spec.laplacian or ()})
    hess = {i: [_grad_or_zeros(grads[c][:, i], x) for c in range(ncomp)] for i in rows_needed}
    chans = [u]
    for k in spec.wrt:
        chans.append(torch.stack([g[:, k] for g in grads], dim=1))
    for i, j in spec.pairs:
        chans.append(torch.stack([h[:, j] for h in hess[i]], dim=1))
    if spec.has_lap:
        chans.append(sum(w * torch.stack([h[:, k] for h in hess[k]], dim=1) for k, w in spec.laplacian))
    return Jet.from_spec(torch.stack(chans, dim=0), spec)


def _run_on_jet(model: nn.Module, jet: Jet):
    """``model(jet)``, with a hint when a layer cannot take a jet (TypeError)."""
    try:
        return model(jet)
    except (TypeError, AttributeError) as exc:
        if "Jet" not in str(exc) and "jet" not in str(exc):
            raise
        raise TypeError(f"a layer of the model cannot take a jet ({exc}); wrap layers without a jet rule in "
                        "elecsolver.networks.FuncJet, or use method='autograd'") from exc


def evaluate(model: nn.Module, points: torch.Tensor, inputs: Sequence[str], outputs: Sequence[str],
             wrt: Sequence[str] | None = None, method: str = "jet", *,
             second: Sequence[tuple[str, str]] | None = None,
             laplacian: Mapping[str, float] | None = None) -> Fields:
    """Evaluate ``model`` and its derivatives at ``points``.

    Parameters
    ----------
    model : nn.Module
        Maps [N, d] to [N, c]; for ``method="jet"`` every layer must accept jets (second-order
        jets if ``second`` or ``laplacian`` is given).
    points : torch.Tensor
        Shape [N, d], floating, columns in the order of ``inputs`` (nondimensional).
    inputs, outputs : sequence of str
        Column and component names.
    wrt : sequence of str, optional
        Inputs to take first derivatives along; default all.  Inputs named in ``second`` or
        ``laplacian`` are added (after these, in the order of ``inputs``), since second-order
        propagation needs their first derivatives.
    method : {"jet", "autograd"}
    second : sequence of (str, str), optional
        Input pairs whose second derivatives to carry, e.g. ``[("x", "x"), ("x", "y")]``; read them
        with :meth:`Fields.d2`.  A pair and its reverse are the same derivative: give one.
    laplacian : mapping str -> float, optional
        Weights of one summed channel sum_k w_k d2/dx_k^2, e.g. ``{"x": 1, "y": 1}`` or the wave
        operator ``{"x": 1, "y": 1, "t": -1}``; read it with :meth:`Fields.lap`.  Costs one channel
        whatever the number of inputs (forward Laplacian, Li et al. 2023).

    Returns
    -------
    Fields
        With ``jet.data`` [1 + K, N, c] as before when neither ``second`` nor ``laplacian`` is given.

    Raises
    ------
    ValueError
        For an unknown method or input name, a malformed or repeated pair, or a non-finite or
        all-zero Laplacian weight.
    TypeError
        If ``method="autograd"`` and the model returns a jet.
    """
    if method not in METHODS:
        raise ValueError(f"unknown derivative method {method!r}; choose one of {METHODS}")
    inputs = tuple(inputs)
    names = inputs if wrt is None else tuple(wrt)
    unknown = [w for w in names if w not in inputs]
    if unknown:
        raise ValueError(f"cannot differentiate along {unknown}: the inputs are {inputs}")
    cols = tuple(inputs.index(w) for w in names)
    if not second and laplacian is None:
        if method == "jet":
            jet = _run_on_jet(model, seed_jet(points, cols))
            if not isinstance(jet, Jet):
                raise TypeError(f"the model returned {type(jet).__name__}, not a jet: a layer without a jet rule? "
                                "wrap it in elecsolver.networks.FuncJet, or use method='autograd'")
        else:
            jet = _autograd_jet(model, points, cols)
        return Fields(jet, inputs, outputs)

    pairs_named = []
    for pair in second or ():
        if isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"each entry of second= must be a pair of input names like ('x', 'y'), got {pair!r}")
        pairs_named.append(tuple(pair))
    if laplacian is not None and not isinstance(laplacian, Mapping):
        raise ValueError("laplacian= must map input names to weights, e.g. {'x': 1, 'y': 1}")
    lap_named = {} if laplacian is None else dict(laplacian)
    used = {n for pr in pairs_named for n in pr} | set(lap_named)
    unknown = sorted(n for n in used if n not in inputs)
    if unknown:
        raise ValueError(f"cannot take second derivatives along {unknown}: the inputs are {inputs}")
    extra = tuple(inputs.index(n) for n in inputs if n in used and inputs.index(n) not in cols)
    all_cols = cols + extra
    pairs = [(inputs.index(i), inputs.index(j)) for i, j in pairs_named]
    lap = None if laplacian is None else {inputs.index(n): w for n, w in lap_named.items()}
    spec = JetSpec(all_cols, pairs, lap)
    if method == "jet":
        jet = _run_on_jet(model, seed_jet(points, all_cols, pairs, lap))
        if not isinstance(jet, Jet) or jet.spec != spec:
            raise TypeError(f"the model dropped the second-order channels (returned {jet!r}); a layer without "
                            "second-order jet rules? wrap it in elecsolver.networks.FuncJet, or use "
                            "method='autograd' for such a module")
    else:
        jet = _autograd_jet(model, points, all_cols, spec)
    return Fields(jet, inputs, outputs)


def ddt(f: Fields, name: str, t: str = "t") -> torch.Tensor:
    """Time derivative d(name)/dt, shape [N]."""
    return f.d(name, t)


def grad(f: Fields, name: str, over: Sequence[str] = ("x", "y")) -> torch.Tensor:
    """Gradient of a scalar component over the named inputs, shape [N, len(over)]."""
    return torch.stack([f.d(name, w) for w in over], dim=1)


def div(f: Fields, names: Sequence[str], over: Sequence[str] = ("x", "y")) -> torch.Tensor:
    """Divergence sum_i d(names[i])/d(over[i]), shape [N].

    Raises
    ------
    ValueError
        If ``names`` and ``over`` differ in length.
    """
    if len(names) != len(over):
        raise ValueError(f"div needs one component per input, got {names} over {over}")
    return sum(f.d(n, w) for n, w in zip(names, over))


def curl_z(f: Fields, ex: str = "Ex", ey: str = "Ey", x: str = "x", y: str = "y") -> torch.Tensor:
    """z component of the curl of an in-plane field: d(ey)/dx - d(ex)/dy, shape [N]."""
    return f.d(ey, x) - f.d(ex, y)


def curl_te(f: Fields, hz: str = "Hz", x: str = "x", y: str = "y") -> torch.Tensor:
    """In-plane curl of H = Hz z: (dHz/dy, -dHz/dx), shape [N, 2]."""
    return torch.stack([f.d(hz, y), -f.d(hz, x)], dim=1)


def curl(f: Fields, names: str | Sequence[str], over: Sequence[str] | None = None) -> torch.Tensor:
    """Curl of named components.

    * ``names`` one name (e.g. "Hz"), ``over`` two inputs (default ("x", "y")): the in-plane curl
      of Hz z, (dHz/dy, -dHz/dx), shape [N, 2] (as :func:`curl_te`).
    * two names (e.g. ("Ex", "Ey")), ``over`` two inputs (default ("x", "y")): the z component
      d(Ey)/dx - d(Ex)/dy, shape [N] (as :func:`curl_z`).
    * three names (e.g. ("Ex", "Ey", "Ez")), ``over`` three inputs (default ("x", "y", "z")):
      (dEz/dy - dEy/dz, dEx/dz - dEz/dx, dEy/dx - dEx/dy), shape [N, 3].

    Raises
    ------
    ValueError
        For another number of names, or ``over`` of the wrong length.
    KeyError
        For an unknown component or input, or a derivative not requested.
    """
    if isinstance(names, str):
        over = ("x", "y") if over is None else tuple(over)
        if len(over) != 2:
            raise ValueError(f"the curl of one (out-of-plane) component needs two inputs, got over={over}")
        return curl_te(f, names, over[0], over[1])
    names = tuple(names)
    if len(names) == 2:
        over = ("x", "y") if over is None else tuple(over)
        if len(over) != 2:
            raise ValueError(f"the curl of two in-plane components needs two inputs, got over={over}")
        return curl_z(f, names[0], names[1], over[0], over[1])
    if len(names) == 3:
        over = ("x", "y", "z") if over is None else tuple(over)
        if len(over) != 3:
            raise ValueError(f"the curl of three components needs three inputs, got over={over}")
        (a, b, c), (x, y, z) = names, over
        return torch.stack([f.d(c, y) - f.d(b, z), f.d(a, z) - f.d(c, x), f.d(b, x) - f.d(a, y)], dim=1)
    raise ValueError(f"curl takes 1 (out-of-plane), 2 (in-plane) or 3 component names, got {names}")


def _weights(over: Sequence[str] | Mapping[str, float]) -> dict[str, float]:
    if isinstance(over, str):
        raise ValueError(f"over= must be a sequence of input names or a mapping name -> weight, got {over!r}")  # noqa: TRY004
    if isinstance(over, Mapping):
        return {k: float(v) for k, v in over.items() if float(v) != 0.0}
    return {k: 1.0 for k in over}


def _scalar_laplacian(f: Fields, name: str, over) -> torch.Tensor:
    if over is None:
        return f.lap(name)
    w = _weights(over)
    carried = f.laplacian_weights
    if carried is not None and carried == w:
        return f.lap(name)
    return sum(wk * f.d2(name, k, k) for k, wk in w.items())


def laplacian(f: Fields, names: str | Sequence[str],
              over: Sequence[str] | Mapping[str, float] | None = None) -> torch.Tensor:
    """Laplacian-type operator sum_k w_k d2/dx_k^2 of one component (shape [N]) or of each of several
    components (vector Laplacian, shape [N, len(names)]).

    Parameters
    ----------
    f : Fields
    names : str or sequence of str
        Component name(s).
    over : sequence of str or mapping str -> float, optional
        Inputs (weights 1) or {input: weight} (e.g. {"x": 1, "y": 1, "t": -1} for the wave
        operator).  None (default): the summed channel declared in ``evaluate(laplacian=...)``.
        When given, the summed channel is used if its weights are the same, otherwise the
        diagonal second derivatives declared in ``evaluate(second=...)``.

    Raises
    ------
    KeyError
        If neither a matching summed channel nor the needed diagonal pairs were requested.
    ValueError
        If ``over`` is a bare string.
    """
    if isinstance(names, str):
        return _scalar_laplacian(f, names, over)
    return torch.stack([_scalar_laplacian(f, n, over) for n in names], dim=1)


def grad_div(f: Fields, names: Sequence[str], over: Sequence[str] = ("x", "y", "z")) -> torch.Tensor:
    """grad(div A) with A = (names[0], ...) along ``over``: component i is
    sum_j d2 A_j / d x_i d x_j, shape [N, len(over)].  Needs the pairs (over[i], over[j]) in
    ``evaluate(second=...)``.

    Raises
    ------
    ValueError
        If ``names`` and ``over`` differ in length.
    KeyError
        If a needed pair was not requested.
    """
    if len(names) != len(over):
        raise ValueError(f"grad_div needs one component per input, got {names} over {over}")
    return torch.stack([sum(f.d2(a, xi, xj) for a, xj in zip(names, over)) for xi in over], dim=1)


def curl_curl(f: Fields, names: Sequence[str], over: Sequence[str] = ("x", "y", "z")) -> torch.Tensor:
    """curl(curl A) = grad(div A) - Laplacian A (Cartesian components), shape [N, len(over)]:
    component i is sum_j (d2 A_j / dx_i dx_j - d2 A_i / dx_j^2).  In 2D (two in-plane components
    over two inputs) this is the in-plane curl of curl_z.  Needs all pairs (over[i], over[j]) in
    ``evaluate(second=...)``.

    Raises
    ------
    ValueError
        If ``names`` and ``over`` differ in length.
    KeyError
        If a needed pair was not requested.
    """
    if len(names) != len(over):
        raise ValueError(f"curl_curl needs one component per input, got {names} over {over}")
    cols = []
    for a_i, xi in zip(names, over):
        cols.append(sum(f.d2(a_j, xi, xj) - f.d2(a_i, xj, xj) for a_j, xj in zip(names, over)))
    return torch.stack(cols, dim=1)
