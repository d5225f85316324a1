"""Quantiles, distribution-free intervals, and summaries of raw samples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}


def quantile(x: np.ndarray, q: float) -> float:
    """Sample quantile (linear interpolation, numpy's default)."""
    return float(np.quantile(x, q))


def quantile_ci(sorted_x: np.ndarray, q: float, level: float = 0.95) -> tuple[int, int] | None:
    """Exact distribution-free two-sided interval for the q-quantile from order statistics.

    Returns the (lo, hi) order-statistic values, or None when n is too small for an
    interval at this level (never a made-up bound).
    """
    from scipy.stats import binom

    n = len(sorted_x)
    if n == 0:
        return None
    alpha = 1.0 - level
    # ranks are 1-based: the interval [x(l), x(u)] covers with prob F(u-1) - F(l-1)
    lo = int(binom.ppf(alpha / 2, n, q))
    hi = int(binom.ppf(1 - alpha / 2, n, q)) + 1
    while lo >= 1 and binom.cdf(hi - 1, n, q) - binom.cdf(lo - 1, n, q) < level:
        lo -= 1
    if lo < 1 or hi > n:
        return None
    return int(sorted_x[lo - 1]), int(sorted_x[hi - 1])


def min_n_for_ci(q: float, level: float = 0.95) -> int:
    """Smallest n for which quantile_ci gives a two-sided interval."""
    n = 1
    while quantile_ci(np.arange(n), q, level) is None:
        n += 1 if n < 50 else max(1, n // 50)
    while n > 1 and quantile_ci(np.arange(n - 1), q, level) is not None:
        n -= 1
    return n


def summarize(samples: Sequence[int], level: float = 0.95) -> dict[str, Any]:
    """Summary statistics of raw nanosecond samples, with exact quantile intervals."""
    x = np.sort(np.asarray(samples, dtype=np.int64))
    n = int(len(x))
    if n == 0:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for key, q in QUANTILES.items():
        out[f"{key}_ns"] = int(round(quantile(x, q)))
    out.update(mean_ns=int(round(float(x.mean()))), min_ns=int(x[0]), max_ns=int(x[-1]),
               std_ns=int(round(float(x.std(ddof=1)))) if n > 1 else 0)
    out["ci_level"] = level
    unresolved = []
    for key, q in QUANTILES.items():
        ci = quantile_ci(x, q, level)
        out[f"{key}_ci_ns"] = list(ci) if ci is not None else None
        if ci is None:
            unresolved.append(f"{key} interval needs ≥ {min_n_for_ci(q, level)} samples (have {n})")
    if unresolved:
        out["unresolved"] = unresolved
    return out
