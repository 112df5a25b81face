"""Error metrics between two :class:`~elecsolver.fields.FieldSet` objects on the same sites and times."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .fieldset import FieldSet, check_matching

__all__ = ["relative_l2"]


def _common_mask(pred: FieldSet, ref: FieldSet) -> np.ndarray | None:
    if pred.mask is not None and ref.mask is not None and not np.array_equal(pred.mask, ref.mask):
        raise ValueError("pred and ref have different masks; give them the same mask or leave one None")
    return pred.mask if pred.mask is not None else ref.mask


def relative_l2(pred: FieldSet, ref: FieldSet, names: Sequence[str] | None = None,
                t_max: float | None = None) -> dict[str, float]:
    """Relative L2 error ``||pred - ref||_2 / ||ref||_2`` per field.

    The norms run over every (time, site) entry with time ``<= t_max`` and (when a mask is given)
    mask True; complex fields use the modulus ``|.|``.  Values are computed in float64/complex128.

    Parameters
    ----------
    pred, ref : FieldSet
        Prediction and reference, with the same sites and times.  Their masks must be equal, or
        one of them None (then the other one is used).
    names : sequence of str, optional
        Fields to compare (default: all of ``pred``'s); each must be in both.
    t_max : float, optional
        Only times ``<= t_max`` (s); None: all times.  Only for time series.

    Returns
    -------
    dict of str to float
        ``{name: error}`` (dimensionless); ``0.0`` where both are zero, ``inf`` where ``ref`` is
        zero and ``pred`` is not, NaN if a value is NaN.

    Raises
    ------
    ValueError
        For different sites, times or masks, a name missing from either, or a ``t_max`` that is
        given for static fields or keeps no time.
    """
    if not isinstance(pred, FieldSet):
        raise ValueError(f"pred must be a FieldSet, got {type(pred).__name__}")
    names = list(pred.names if names is None else names)
    check_matching(pred, ref, "ref", names=names)
    mask = _common_mask(pred, ref)
    pred, ref = pred.window(t_max), ref.window(t_max)
    out = {}
    for name in names:
        p, r = pred.fields[name], ref.fields[name]
        if mask is not None:
            p, r = (p[mask] if pred.static else p[:, mask]), (r[mask] if ref.static else r[:, mask])
        dtype = np.result_type(p, r, np.float64)
        r = r.astype(dtype).ravel()
        num = float(np.linalg.norm(p.astype(dtype).ravel() - r))
        den = float(np.linalg.norm(r))
        out[name] = num / den if den > 0 else (0.0 if num == 0 else (num if np.isnan(num) else float("inf")))
    return out
