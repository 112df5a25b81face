"""First-order jets: a value and its input derivatives, propagated forward through a network.

A jet of a field u over inputs (x_1, ..., x_d) is the stack

    data[0]     = u                    [N, c]
    data[1 + k] = du / d x_{wrt[k]}    [N, c]   for each declared input direction k

held as one tensor ``data`` of shape [1 + K, N, c].  A linear layer maps every channel with the
same weight (one batched matmul) and adds its bias to the value channel only; an elementwise
activation applies the chain rule ``d sigma(a) = sigma'(a) da``.  The loss built from jets is an
ordinary function of the parameters, so training needs only a first-order backward (see
shared/DESIGN.md, "Why jets").  This is forward-mode differentiation in its textbook form
(Griewank & Walther, *Evaluating Derivatives*, 2nd ed., 2008, ch. 3, tangent propagation).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["Jet", "seed_jet"]


class Jet:
    """Value and first input derivatives of a batch of vectors.

    Parameters
    ----------
    data : torch.Tensor
        Shape [1 + K, N, c]: channel 0 is the value, channel 1 + k the derivative along the
        k-th declared input of ``wrt``.
    wrt : tuple of int
        Input column indices the derivative channels refer to (length K).

    Raises
    ------
    ValueError
        If ``data`` is not 3-D or its channel count does not match ``wrt``.
    """

    __slots__ = ("data", "wrt")

    def __init__(self, data: torch.Tensor, wrt: tuple[int, ...]):
        if data.dim() != 3 or data.shape[0] != 1 + len(wrt):
            raise ValueError(
                f"a jet needs data of shape [1 + {len(wrt)}, N, c] for wrt={wrt}, got {tuple(data.shape)}"
            )
        self.data = data
        self.wrt = tuple(wrt)

    @property
    def value(self) -> torch.Tensor:
        """The value, shape [N, c]."""
        return self.data[0]

    def derivative(self, column: int) -> torch.Tensor:
        """d(value)/d(input ``column``), shape [N, c].

        Raises
        ------
        KeyError
            If the jet does not carry that input direction.
        """
        try:
            k = self.wrt.index(column)
        except ValueError:
            raise KeyError(f"this jet carries derivatives along inputs {self.wrt}, not {column}") from None
        return self.data[1 + k]

    def map(self, fn) -> Jet:
        """Apply a linear map ``fn`` ([..., c] -> [..., c']) to every channel."""
        return Jet(fn(self.data), self.wrt)

    def __mul__(self, other: Jet) -> Jet:
        """Product rule: (u v)' = u' v + u v' (both jets share ``wrt``)."""
        u, v = self.data, other.data
        out = torch.cat([(u[0] * v[0]).unsqueeze(0), u[1:] * v[0] + u[0] * v[1:]], dim=0)
        return Jet(out, self.wrt)

    def __repr__(self) -> str:
        return f"Jet(shape={tuple(self.data.shape)}, wrt={self.wrt})"


def seed_jet(points: torch.Tensor, wrt: Sequence[int]) -> Jet:
    """The jet of the identity map at ``points``: d x_i / d x_{wrt[k]} = delta_{i, wrt[k]}.

    Parameters
    ----------
    points : torch.Tensor
        Shape [N, d], any floating dtype.
    wrt : sequence of int
        Input columns to differentiate along, each in [0, d).

    Raises
    ------
    ValueError
        If a column is out of range or repeated.
    """
    n, d = points.shape
    wrt = tuple(int(k) for k in wrt)
    if len(set(wrt)) != len(wrt) or any(not 0 <= k < d for k in wrt):
        raise ValueError(f"wrt must list distinct input columns in [0, {d}), got {wrt}")
    eye = torch.eye(d, dtype=points.dtype, device=points.device)[list(wrt)]  # [K, d]
    tangents = eye.unsqueeze(1).expand(len(wrt), n, d)
    return Jet(torch.cat([points.unsqueeze(0), tangents], dim=0), wrt)
