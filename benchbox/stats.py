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


# --- two-sample comparisons ---
# Base sample ``a`` against head sample ``b``: a rank test that holds under unequal
# spreads (Brunner-Munzel), a BCa bootstrap interval for the ratio of quantiles
# q(b) / q(a), a tail test for high quantiles, and Holm's step-down correction.

#: Bootstrap resamples used by ratio_ci unless told otherwise.
RATIO_CI_RESAMPLES = 2000
#: Fewest samples per side for which ratio_ci gives an interval.
RATIO_CI_MIN_N = 5


def brunner_munzel(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Brunner-Munzel p-value for "a and b are stochastically equal".

    Valid when the two sides have different spreads. Degenerate inputs (all values
    equal) give 1.0; complete separation, where the statistic is undefined, falls
    back to the Mann-Whitney p-value.
    """
    import warnings

    from scipy.stats import brunnermunzel, mannwhitneyu

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        return 1.0
    if x.min() == x.max() == y.min() == y.max():
        return 1.0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        p = float(brunnermunzel(x, y).pvalue)
        if not np.isfinite(p):
            p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
    return p if np.isfinite(p) else 1.0


def _quantile_sorted(x: np.ndarray, q: float) -> float:
    """numpy's linear-interpolation quantile of an already sorted array."""
    h = (len(x) - 1) * q
    k = int(np.floor(h))
    f = h - k
    if f == 0.0 or k + 1 >= len(x):
        return float(x[k])
    return float(x[k] + f * (x[k + 1] - x[k]))


def _bootstrap_quantiles(x: np.ndarray, q: float, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The q-quantile of ``n_resamples`` bootstrap resamples of sorted ``x``, drawn exactly.

    The k-th smallest of n uniform draws is Beta(k, n + 1 - k); a resample's k-th order
    statistic is then x[ceil(n·U_(k)) - 1]. The next order statistic, given U_(k), is
    U_(k) + (1 - U_(k))·Beta(1, n - k). So each resampled quantile costs O(1), not O(n).
    """
    n = len(x)
    h = (n - 1) * q
    k = int(np.floor(h))  # 0-based order statistic below the quantile
    f = h - k
    u = rng.beta(k + 1, n - k, size=n_resamples)
    lo = x[np.clip(np.ceil(n * u).astype(np.int64) - 1, 0, n - 1)]
    if f == 0.0 or k + 1 >= n:
        return lo.astype(np.float64)
    u2 = u + (1.0 - u) * rng.beta(1, n - k - 1, size=n_resamples)
    hi = x[np.clip(np.ceil(n * u2).astype(np.int64) - 1, 0, n - 1)]
    return lo + f * (hi.astype(np.float64) - lo)


def _jackknife_quantiles(x: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of sorted ``x`` with each element left out in turn (vectorised)."""
    n = len(x)
    m = n - 1
    h = (m - 1) * q
    k = int(np.floor(h))
    f = h - k
    i = np.arange(n)
    j0 = k + (k >= i)
    v = x[j0].astype(np.float64)
    if f == 0.0 or k + 1 >= m:
        return v
    j1 = (k + 1) + (k + 1 >= i)
    return v + f * (x[j1] - v)


def ratio_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, q: float = 0.5,
             level: float = 0.95, *, n_resamples: int = RATIO_CI_RESAMPLES,
             seed: int = 0) -> tuple[float, float] | None:
    """BCa bootstrap interval for the ratio q-quantile(b) / q-quantile(a).

    Two independent samples are resampled separately (``n_resamples`` times, fixed
    ``seed``, so the interval is reproducible); the bias correction and acceleration
    follow scipy.stats.bootstrap(method="BCa") for multi-sample statistics, with
    the jackknife computed in closed form on the sorted samples. Returns None when a
    side has fewer than RATIO_CI_MIN_N samples or its quantile is not positive.
    """
    from scipy.special import ndtr, ndtri

    x = np.sort(np.asarray(a, dtype=np.float64))
    y = np.sort(np.asarray(b, dtype=np.float64))
    if len(x) < RATIO_CI_MIN_N or len(y) < RATIO_CI_MIN_N or not 0.0 < level < 1.0:
        return None
    qa, qb = _quantile_sorted(x, q), _quantile_sorted(y, q)
    if not qa > 0.0 or not qb >= 0.0:
        return None
    theta = qb / qa
    rng = np.random.default_rng(seed)
    ba = _bootstrap_quantiles(x, q, n_resamples, rng)
    bb = _bootstrap_quantiles(y, q, n_resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = bb / ba
    boot = boot[np.isfinite(boot)]
    if len(boot) == 0:
        return None
    if boot.min() == boot.max():
        return float(boot[0]), float(boot[0])
    alpha = (1.0 - level) / 2
    pct = (np.count_nonzero(boot < theta) + np.count_nonzero(boot <= theta)) / (2.0 * len(boot))
    if not 0.0 < pct < 1.0:
        # the observed ratio lies outside the bootstrap distribution: BCa is undefined,
        # so fall back to the percentile interval
        lo, hi = np.percentile(boot, [100 * alpha, 100 * (1 - alpha)])
        return float(lo), float(hi)
    z0 = float(ndtri(pct))
    # jackknife acceleration, one leave-one-out set per sample (as scipy does)
    num = den = 0.0
    for jack in (qb / _jackknife_quantiles(x, q), _jackknife_quantiles(y, q) / qa):
        jack = jack[np.isfinite(jack)]
        nj = len(jack)
        u = (nj - 1) * (jack.mean() - jack)
        num += float((u**3).sum()) / nj**3
        den += float((u**2).sum()) / nj**2
    acc = num / (6.0 * den**1.5) if den > 0 else 0.0
    za = float(ndtri(alpha))
    a1 = float(ndtr(z0 + (z0 + za) / (1 - acc * (z0 + za))))
    a2 = float(ndtr(z0 + (z0 - za) / (1 - acc * (z0 - za))))
    lo, hi = np.percentile(boot, [100 * a1, 100 * a2])
    return float(lo), float(hi)


def min_n_for_quantile_interval(q: float, level: float = 0.95) -> int:
    """Fewest samples for a two-sided equal-tailed order-statistic interval of the q-quantile.

    For q = 0.99 at 95% this is 368: below it even the sample maximum is not an
    upper bound at 97.5% confidence, so a p99 cannot be judged.
    """
    import math

    tail = max(q, 1.0 - q)
    return int(math.ceil(math.log((1.0 - level) / 2) / math.log(tail)))


def tail_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
              q: float = 0.99) -> tuple[float, int, int, float]:
    """Exceedance test for a tail change: Fisher's exact test on counts above the pooled q-quantile.

    Returns (two-sided p-value, exceedances in a, exceedances in b, the pooled threshold).
    Rank tests barely see a change confined to the tail; this counts it directly.
    """
    from scipy.stats import fisher_exact

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    t = float(np.quantile(np.concatenate([x, y]), q))
    ea, eb = int(np.count_nonzero(x > t)), int(np.count_nonzero(y > t))
    if ea + eb == 0:
        return 1.0, 0, 0, t
    p = float(fisher_exact([[ea, len(x) - ea], [eb, len(y) - eb]]).pvalue)
    return min(1.0, p), ea, eb, t


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given), monotone and capped at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return [float(v) for v in out]
