"""Jets: a value and its input derivatives (first and, on request, chosen second), propagated forward.

A first-order jet of a field u over inputs (x_1, ..., x_d) is the stack

    data[0]     = u                    [N, c]
    data[1 + k] = du / d x_{wrt[k]}    [N, c]   for each declared input direction k

held as one tensor ``data`` of shape [1 + K, N, c].  A second-order jet appends, in the same
tensor ``channels`` of shape [1 + K + P + L, N, c],

    channels[1 + K + p]  = d2u / d x_i d x_j           for each declared pair p = (i, j)
    channels[1 + K + P]  = sum_k w_k d2u / d x_k^2     (L = 1: a summed Laplacian channel, optional)

so that a PDE carries exactly the second derivatives it declares: the diagonal pairs of a
Laplacian, the mixed pairs of grad-div or curl-curl, or one collapsed channel for a weighted
Laplacian (weights may be negative, e.g. the wave operator sum_k d2/dx_k^2 - d2/dt^2).
``data`` is always the first-order part [1 + K, N, c] (a view), so code written for first-order
jets keeps working; a first-order jet carries no extra state and costs exactly what it did.

Layers map every channel together: a linear layer is one batched matmul over all channels with the
bias on the value channel only; an elementwise function s applies the chain rule to second order
(Faa di Bruno),

    d s(a)/dx_i          = s'(a) a_i
    d2 s(a)/dx_i dx_j    = s'(a) a_ij + s''(a) a_i a_j
    L[s(a)]              = s'(a) L[a] + s''(a) sum_k w_k a_k^2,

and a product of jets the Leibniz rule (uv)_ij = u_ij v + u_i v_j + u_j v_i + u v_ij.  The loss
built from jets is an ordinary function of the parameters, so training needs only a first-order
backward (shared/DESIGN.md, "Why jets").

References: forward (tangent) and Taylor-mode propagation, Griewank & Walther, *Evaluating
Derivatives*, 2nd ed., SIAM 2008, ch. 3 and ch. 13; the summed Laplacian channel is the forward
Laplacian of Li et al., "Forward Laplacian: a new computational framework for neural
network-based variational Monte Carlo", 2023 (arXiv:2307.08214; Nat. Mach. Intell. 2024), and the
collapsed Taylor mode of Dangel, Siebert, Zeinhofer & Walther, "Collapsing Taylor mode automatic
differentiation", NeurIPS 2025 (arXiv:2505.13644), where the second-order coefficients of all
directions are summed (here with weights) before they are propagated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

__all__ = ["Jet", "JetSpec", "seed_jet"]


class JetSpec:
    """Which derivatives a jet carries (immutable, shared by all jets of one evaluation).

    Parameters
    ----------
    wrt : sequence of int
        Input columns of the first-derivative channels (length K), distinct.
    pairs : sequence of (int, int), optional
        Input column pairs (i, j) of the second-derivative channels (length P); both columns must
        be in ``wrt``; (i, j) and (j, i) denote the same derivative and may not both appear.
    laplacian : mapping int -> float, optional
        Weights w_k of the summed channel sum_k w_k d2u/dx_k^2 over input columns in ``wrt``;
        None (default) for no such channel.  Weights must be finite; zero weights are dropped.

    Raises
    ------
    ValueError
        If a column repeats, a pair or Laplacian column is not in ``wrt``, a pair repeats, or a
        weight is not finite.
    """

    __slots__ = ("_cache", "_ii", "_jj", "_lk", "_wvec", "has_lap", "k", "laplacian", "p", "pairs", "wrt")

    def __init__(self, wrt: Sequence[int], pairs: Sequence[tuple[int, int]] = (),
                 laplacian: Mapping[int, float] | None = None):
        wrt = tuple(int(k) for k in wrt)
        if len(set(wrt)) != len(wrt):
            raise ValueError(f"wrt must list distinct input columns, got {wrt}")
        norm_pairs = []
        seen = set()
        for pair in pairs:
            if len(pair) != 2:
                raise ValueError(f"a second-derivative pair needs two input columns, got {pair!r}")
            i, j = int(pair[0]), int(pair[1])
            if i not in wrt or j not in wrt:
                raise ValueError(f"second-derivative pair {(i, j)} needs both columns among wrt={wrt}; "
                                 "add them to wrt")
            key = (min(i, j), max(i, j))
            if key in seen:
                raise ValueError(f"second-derivative pair {(i, j)} is declared twice; declare it once")
            seen.add(key)
            norm_pairs.append((i, j))
        lap: tuple[tuple[int, float], ...] | None = None
        if laplacian is not None:
            items = []
            for col, w in dict(laplacian).items():
                col, w = int(col), float(w)
                if col not in wrt:
                    raise ValueError(f"Laplacian column {col} is not among wrt={wrt}; add it to wrt")
                if not math.isfinite(w):
                    raise ValueError(f"Laplacian weight of column {col} must be finite, got {w}")
                if w != 0.0:
                    items.append((col, w))
            if not items:
                raise ValueError("a summed Laplacian channel needs at least one nonzero weight")
            lap = tuple(items)
        self.wrt, self.pairs, self.laplacian = wrt, tuple(norm_pairs), lap
        self.k, self.p, self.has_lap = len(wrt), len(norm_pairs), lap is not None
        self._ii = [wrt.index(i) for i, _ in norm_pairs]
        self._jj = [wrt.index(j) for _, j in norm_pairs]
        self._lk = [wrt.index(col) for col, _ in lap or ()]   # channels of the Laplacian columns
        self._wvec = [w for _, w in lap or ()]
        self._cache: dict = {}

    @property
    def second_order(self) -> bool:
        """True if the jet carries any second-derivative channel."""
        return self.p > 0 or self.has_lap

    @property
    def n_channels(self) -> int:
        """1 + K + P + L."""
        return 1 + self.k + self.p + int(self.has_lap)

    def key(self) -> tuple:
        """Hashable description, equal for specs that describe the same channels."""
        return (self.wrt, self.pairs, self.laplacian)

    def __eq__(self, other) -> bool:
        return isinstance(other, JetSpec) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def pair_index(self, i: int, j: int) -> int | None:
        """Position p of the pair (i, j) or (j, i) among ``pairs``; None if not carried."""
        for p, (a, b) in enumerate(self.pairs):
            if (a, b) == (i, j) or (a, b) == (j, i):
                return p
        return None

    def _pair_index(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Channel indices (within the first-derivative stack) of the pairs' i and j, cached per device."""
        t = self._cache.get(device)
        if t is None:
            t = self._cache[device] = (torch.tensor(self._ii, dtype=torch.long, device=device),
                                       torch.tensor(self._jj, dtype=torch.long, device=device))
        return t

    def second_order_products(self, u1: torch.Tensor, v1: torch.Tensor | None = None) -> torch.Tensor:
        """The bilinear second-order terms of two first-derivative stacks.

        For a pair p = (i, j): u_i v_j (+ u_j v_i if ``v1`` is given, else u_i u_j); for the
        Laplacian channel: sum_k w_k u_k v_k (times 2 if ``v1`` is given, else sum_k w_k u_k^2).

        Parameters
        ----------
        u1, v1 : torch.Tensor
            Shape [K, N, c] (v1 may broadcast in c).

        Returns
        -------
        torch.Tensor
            Shape [P + L, N, c'].
        """
        parts = []
        if self.p:
            ii, jj = self._pair_index(u1.device)
            if v1 is None:
                parts.append(u1.index_select(0, ii) * u1.index_select(0, jj))
            else:
                parts.append(u1.index_select(0, ii) * v1.index_select(0, jj)
                             + u1.index_select(0, jj) * v1.index_select(0, ii))
        if self.has_lap:
            # an unrolled weighted sum over the (few) Laplacian directions: elementwise work that a
            # compiler fuses with its neighbours (a tensordot would be a separate tiny matmul)
            acc = None
            for kk, wk in zip(self._lk, self._wvec):
                b = v1[kk] if v1 is not None else u1[kk]
                term = u1[kk] * b
                term = term if wk == 1.0 else wk * term
                acc = term if acc is None else acc + term
            parts.append((acc if v1 is None else 2.0 * acc).unsqueeze(0))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)

    def __repr__(self) -> str:
        return f"JetSpec(wrt={self.wrt}, pairs={self.pairs}, laplacian={self.laplacian})"


class Jet:
    """Value, first input derivatives and (optionally) chosen second derivatives of a batch of vectors.

    Parameters
    ----------
    data : torch.Tensor
        Shape [1 + K + P + L, N, c], floating: channel 0 the value, channel 1 + k the derivative
        along input column ``wrt[k]``, then the P second derivatives of ``pairs`` and, if
        ``laplacian`` is given, the summed Laplacian channel.  With no ``pairs`` and no
        ``laplacian`` (a first-order jet) this is [1 + K, N, c] as before.
    wrt : tuple of int
        Input column indices the first-derivative channels refer to (length K).
    pairs : sequence of (int, int), optional
        Input column pairs of the second-derivative channels, see :class:`JetSpec`.
    laplacian : mapping int -> float, optional
        Weights of the summed Laplacian channel, see :class:`JetSpec`.

    Attributes
    ----------
    channels : torch.Tensor
        All channels, [1 + K + P + L, N, c].
    data : torch.Tensor
        Value and first derivatives, [1 + K, N, c] (a view of ``channels``).
    spec : JetSpec

    Raises
    ------
    ValueError
        If ``data`` is not 3-D, its channel count does not match the declared derivatives, or the
        declaration is invalid (see :class:`JetSpec`).
    """

    __slots__ = ("channels", "spec")

    def __init__(self, data: torch.Tensor, wrt: tuple[int, ...], pairs: Sequence[tuple[int, int]] = (),
                 laplacian: Mapping[int, float] | None = None):
        spec = JetSpec(wrt, pairs, laplacian)
        if data.dim() != 3 or data.shape[0] != spec.n_channels:
            if spec.second_order:
                shape = f"[1 + {spec.k} + {spec.p} + {int(spec.has_lap)}, N, c]"
            else:
                shape = f"[1 + {spec.k}, N, c]"
            raise ValueError(f"a jet needs data of shape {shape} for wrt={spec.wrt}, pairs={spec.pairs}, "
                             f"laplacian={spec.laplacian}, got {tuple(data.shape)}")
        self.channels = data
        self.spec = spec

    @classmethod
    def from_spec(cls, channels: torch.Tensor, spec: JetSpec) -> Jet:
        """A jet with the same declared derivatives as ``spec`` (no validation: for layers).

        Parameters
        ----------
        channels : torch.Tensor
            Shape [spec.n_channels, N, c].
        spec : JetSpec
        """
        jet = object.__new__(cls)
        jet.channels = channels
        jet.spec = spec
        return jet

    def like(self, channels: torch.Tensor) -> Jet:
        """A jet carrying the same derivatives as ``self`` with new ``channels`` [1+K+P+L, N, c']."""
        return Jet.from_spec(channels, self.spec)

    # ---- structure ------------------------------------------------------------------------
    @property
    def wrt(self) -> tuple[int, ...]:
        """Input columns of the first-derivative channels."""
        return self.spec.wrt

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Input column pairs of the second-derivative channels (empty for a first-order jet)."""
        return self.spec.pairs

    @property
    def laplacian_weights(self) -> tuple[tuple[int, float], ...] | None:
        """((column, weight), ...) of the summed Laplacian channel, or None."""
        return self.spec.laplacian

    @property
    def second_order(self) -> bool:
        """True if the jet carries second-derivative channels."""
        return self.spec.second_order

    # ---- views ----------------------------------------------------------------------------
    @property
    def data(self) -> torch.Tensor:
        """Value and first derivatives, shape [1 + K, N, c]."""
        if not self.spec.second_order:
            return self.channels
        return self.channels[: 1 + self.spec.k]

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        if self.spec.second_order or value.dim() != 3 or value.shape[0] != 1 + self.spec.k:
            raise ValueError(f"only a first-order jet's data [1 + {self.spec.k}, N, c] can be replaced; "
                             "build a new Jet (or use Jet.like) instead")
        self.channels = value

    @property
    def value(self) -> torch.Tensor:
        """The value, shape [N, c]."""
        return self.channels[0]

    @property
    def first(self) -> torch.Tensor:
        """First derivatives, shape [K, N, c]."""
        return self.channels[1 : 1 + self.spec.k]

    @property
    def second(self) -> torch.Tensor:
        """Second derivatives of the declared pairs, shape [P, N, c] (P may be 0)."""
        k = self.spec.k
        return self.channels[1 + k : 1 + k + self.spec.p]

    @property
    def lap(self) -> torch.Tensor | None:
        """The summed Laplacian channel sum_k w_k d2u/dx_k^2, shape [N, c]; None if not carried."""
        return self.channels[-1] if self.spec.has_lap else None

    def derivative(self, column: int) -> torch.Tensor:
        """d(value)/d(input ``column``), shape [N, c].

        Raises
        ------
        KeyError
            If the jet does not carry that input direction.
        """
        try:
            k = self.spec.wrt.index(column)
        except ValueError:
            raise KeyError(f"this jet carries derivatives along inputs {self.wrt}, not {column}") from None
        return self.channels[1 + k]

    def second_derivative(self, i: int, j: int) -> torch.Tensor:
        """d2(value)/d(input i) d(input j), shape [N, c].

        Raises
        ------
        KeyError
            If the jet does not carry that pair (in either order).
        """
        p = self.spec.pair_index(int(i), int(j))
        if p is None:
            raise KeyError(f"this jet carries second derivatives along the pairs {self.pairs}, not {(i, j)}; "
                           "declare the pair when the jet is seeded (and check every layer has second-order "
                           "jet rules)")
        return self.channels[1 + self.spec.k + p]

    # ---- jet arithmetic ---------------------------------------------------------------------
    def map(self, fn) -> Jet:
        """Apply a linear map ``fn`` ([..., c] -> [..., c']) to every channel."""
        return self.like(fn(self.channels))

    def elementwise(self, s0: torch.Tensor, s1: torch.Tensor, s2: torch.Tensor | None = None) -> Jet:
        """The jet of s(u) for an elementwise function s, given s, s', s'' at the value.

        Parameters
        ----------
        s0, s1 : torch.Tensor
            s(u0) and s'(u0), shape [N, c] (u0 = ``self.value``).
        s2 : torch.Tensor, optional
            s''(u0) [N, c]; needed only for a second-order jet.

        Raises
        ------
        ValueError
            If the jet is second order and ``s2`` is missing.
        """
        ch = self.channels
        spec = self.spec
        if not spec.second_order:
            rest = torch.split(ch, [1, ch.shape[0] - 1], dim=0)[1]  # split: see below
            return self.like(torch.cat([s0.unsqueeze(0), s1.unsqueeze(0) * rest], dim=0))
        if s2 is None:
            raise ValueError("this elementwise function has no second derivative; it cannot act on a "
                             "second-order jet (give s'' or use method='autograd')")
        k = spec.k
        # split (not slicing): its backward concatenates instead of zero-filling full-size gradients
        _, first, rest = torch.split(ch, [1, k, ch.shape[0] - 1 - k], dim=0)
        tail = s1 * rest + s2 * spec.second_order_products(first)
        return self.like(torch.cat([s0.unsqueeze(0), s1 * first, tail], dim=0))

    def _check_same(self, other: Jet) -> None:
        if self.spec is not other.spec and self.spec != other.spec:
            raise ValueError(f"cannot combine jets that carry different derivatives: {self.spec} and {other.spec}")

    def __add__(self, other: Jet) -> Jet:
        """Sum of two jets carrying the same derivatives (channels add; c may broadcast)."""
        if not isinstance(other, Jet):
            return NotImplemented
        self._check_same(other)
        return self.like(self.channels + other.channels)

    def __sub__(self, other: Jet) -> Jet:
        """Difference of two jets carrying the same derivatives."""
        if not isinstance(other, Jet):
            return NotImplemented
        self._check_same(other)
        return self.like(self.channels - other.channels)

    def __neg__(self) -> Jet:
        return self.like(-self.channels)

    def __mul__(self, other: Jet) -> Jet:
        """Product rule (both jets carry the same derivatives; c may broadcast):
        (u v)' = u' v + u v', and to second order (u v)_ij = u_ij v + u_i v_j + u_j v_i + u v_ij,
        L[u v] = L[u] v + u L[v] + 2 sum_k w_k u_k v_k.

        Raises
        ------
        ValueError
            If the two jets carry different derivatives.
        """
        if not isinstance(other, Jet):
            return NotImplemented
        self._check_same(other)
        u, v = self.channels, other.channels
        if not self.spec.second_order:
            u0, u1 = torch.split(u, [1, u.shape[0] - 1], dim=0)  # split: a cheaper backward than indexing
            v0, v1 = torch.split(v, [1, v.shape[0] - 1], dim=0)
            return self.like(torch.cat([u0 * v0, u1 * v0 + u0 * v1], dim=0))
        k = self.spec.k
        parts = [1, k, u.shape[0] - 1 - k]
        u0, u1, u2 = torch.split(u, parts, dim=0)
        v0, v1, v2 = torch.split(v, parts, dim=0)
        cross = self.spec.second_order_products(u1, v1)
        out = torch.cat([u0 * v0, u1 * v0 + u0 * v1, u2 * v0 + u0 * v2 + cross], dim=0)
        return self.like(out)

    def __repr__(self) -> str:
        extra = ""
        if self.spec.second_order:
            extra = f", pairs={self.pairs}, laplacian={self.laplacian_weights}"
        return f"Jet(shape={tuple(self.channels.shape)}, wrt={self.wrt}{extra})"


def seed_jet(points: torch.Tensor, wrt: Sequence[int], pairs: Sequence[tuple[int, int]] = (),
             laplacian: Mapping[int, float] | None = None) -> Jet:
    """The jet of the identity map at ``points``: d x_i / d x_{wrt[k]} = delta_{i, wrt[k]}, and all
    second derivatives zero.

    Parameters
    ----------
    points : torch.Tensor
        Shape [N, d], any floating dtype.
    wrt : sequence of int
        Input columns to differentiate along, each in [0, d).
    pairs : sequence of (int, int), optional
        Input column pairs whose second derivatives to carry (both columns in ``wrt``).
    laplacian : mapping int -> float, optional
        Weights w_k of a summed channel sum_k w_k d2/dx_k^2 (columns in ``wrt``).

    Returns
    -------
    Jet
        channels [1 + K + P + L, N, d]; a first-order jet [1 + K, N, d] when neither ``pairs``
        nor ``laplacian`` is given.

    Raises
    ------
    ValueError
        If a column is out of range or repeated, or the second-order declaration is invalid.
    """
    n, d = points.shape
    wrt = tuple(int(k) for k in wrt)
    if len(set(wrt)) != len(wrt) or any(not 0 <= k < d for k in wrt):
        raise ValueError(f"wrt must list distinct input columns in [0, {d}), got {wrt}")
    eye = torch.eye(d, dtype=points.dtype, device=points.device)
    eye = torch.stack([eye[k] for k in wrt]) if wrt else eye[:0]  # [K, d] (no index tensor from the host)
    tangents = eye.unsqueeze(1).expand(len(wrt), n, d)
    if not pairs and laplacian is None:
        return Jet(torch.cat([points.unsqueeze(0), tangents], dim=0), wrt)
    spec = JetSpec(wrt, pairs, laplacian)
    zeros = points.new_zeros(spec.p + int(spec.has_lap), n, d)
    return Jet.from_spec(torch.cat([points.unsqueeze(0), tangents, zeros], dim=0), spec)
