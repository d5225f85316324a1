"""Quantiles, distribution-free intervals, summaries of raw samples, floors and noise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
#: Confidence level of every interval in a summary.
CI_LEVEL = 0.95
#: A difference under this multiple of the harness's floor is unresolvable.
FLOOR_MULTIPLE = 3.0
#: Coefficient of variation above which a result is flagged as noisy.
NOISE_CV = 0.20
#: Fraction of Tukey outliers (beyond 1.5 IQR) above which a result is flagged as noisy.
NOISE_OUTLIER_FRACTION = 0.05
#: Relative shift between first-half and second-half medians that flags an unsettled run
#: (only when the two halves' 95% median intervals do not overlap either).
SETTLE_SHIFT = 0.05


def quantile(x: np.ndarray, q: float) -> float:
    """Sample quantile (linear interpolation, numpy's default)."""
    return float(np.quantile(x, q))


@lru_cache(maxsize=4096)
def ci_ranks(n: int, q: float, level: float = CI_LEVEL,
             alternative: str = "two-sided") -> tuple[int | None, int | None]:
    """0-based order-statistic indices bounding the q-quantile, exact binomial.

    Same rule as ``scipy.stats.quantile_test(...).confidence_interval()``: each
    side misses with probability at most (1 - level)/2 for a two-sided interval,
    1 - level for a one-sided bound ("less": an upper bound; "greater": a lower
    bound). A side that needs an order statistic beyond the sample is None.
    """
    from scipy.stats import binom

    if n < 1:
        return None, None
    tail = (1.0 - level) / 2 if alternative == "two-sided" else 1.0 - level
    bd = binom(n, q)
    lo = hi = None
    if alternative in ("two-sided", "greater"):
        i = int(bd.ppf(tail)) - 1
        lo = i if i >= 0 else None
    if alternative in ("two-sided", "less"):
        j = int(bd.isf(tail))
        hi = j if j < n else None
    return lo, hi


def quantile_ci(sorted_x: np.ndarray, q: float, level: float = CI_LEVEL) -> tuple[Any, Any] | None:
    """Exact distribution-free two-sided interval for the q-quantile of sorted samples.

    Returns (lo, hi) order-statistic values, or None when n is too small for a
    two-sided interval at this level (never a made-up bound).
    """
    lo, hi = ci_ranks(len(sorted_x), q, level)
    if lo is None or hi is None:
        return None
    return sorted_x[lo].item(), sorted_x[hi].item()


def quantile_upper_bound(sorted_x: np.ndarray, q: float, level: float = CI_LEVEL) -> Any | None:
    """Exact one-sided upper confidence bound for the q-quantile, or None when n is too small."""
    _, hi = ci_ranks(len(sorted_x), q, level, "less")
    return None if hi is None else sorted_x[hi].item()


def min_n_for_ci(q: float, level: float = CI_LEVEL, alternative: str = "two-sided") -> int:
    """Smallest n for which the exact interval (or one-sided upper bound) exists.

    p99 at 95%: 368 two-sided, 299 for a one-sided upper bound; p90: 36.
    """
    tail = (1.0 - level) / 2 if alternative == "two-sided" else 1.0 - level
    worst = max(q, 1.0 - q) if alternative == "two-sided" else q
    n = max(1, math.ceil(math.log(tail) / math.log(worst)) - 1)
    while None in _needed_sides(n, q, level, alternative):
        n += 1
    return n


def _needed_sides(n: int, q: float, level: float, alternative: str) -> tuple[int | None, ...]:
    lo, hi = ci_ranks(n, q, level, alternative)
    return {"two-sided": (lo, hi), "less": (hi,), "greater": (lo,)}[alternative]


def noise(sorted_x: np.ndarray) -> dict[str, Any]:
    """Spread and outliers: coefficient of variation, MAD, Tukey-fence outlier counts."""
    x = np.asarray(sorted_x, dtype=np.float64)
    n = len(x)
    if n < 2:
        return {"cv": None, "mad_ns": None, "outliers": None}
    mean = float(x.mean())
    med = float(np.median(x))
    q1, q3 = np.quantile(x, [0.25, 0.75])
    iqr = float(q3 - q1)
    mad = float(np.median(np.abs(x - med)))
    return {
        "cv": float(x.std(ddof=1) / mean) if mean > 0 else None,
        "mad_ns": int(round(mad)),
        "robust_cv": 1.4826 * mad / med if med > 0 else None,
        "outliers": {
            "method": "Tukey fences: beyond 1.5 IQR (and, far, 3 IQR) from the quartiles",
            "low": int(np.count_nonzero(x < q1 - 1.5 * iqr)),
            "high": int(np.count_nonzero(x > q3 + 1.5 * iqr)),
            "far_low": int(np.count_nonzero(x < q1 - 3 * iqr)),
            "far_high": int(np.count_nonzero(x > q3 + 3 * iqr)),
        },
        "thresholds": {"cv": NOISE_CV, "outlier_fraction": NOISE_OUTLIER_FRACTION},
    }


def summarize(samples: Sequence[int], level: float = CI_LEVEL) -> dict[str, Any]:
    """Summary statistics of raw nanosecond samples, with exact quantile intervals and noise.

    ``{key}_ci_ns`` is null when n is too small for a two-sided interval; the
    reason is listed in ``unresolved``. ``p99_upper_ns`` is the one-sided upper
    95% bound of p99 (from 299 samples), reported when the two-sided interval
    is not yet resolvable.
    """
    x = np.sort(np.asarray(samples, dtype=np.int64))
    n = int(len(x))
    if n == 0:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for key, q in QUANTILES.items():
        out[f"{key}_ns"] = int(round(quantile(x, q)))
    # the mean in exact integer arithmetic: a float mean of ~1e15 ns values can leave [min, max]
    total = sum(int(v) for v in x)
    out.update(mean_ns=(2 * total + n) // (2 * n), min_ns=int(x[0]), max_ns=int(x[-1]),
               std_ns=int(round(float(x.std(ddof=1)))) if n > 1 else 0)
    out["ci_level"] = level
    out["ci_method"] = "exact binomial order-statistic interval (distribution-free, equal-tailed)"
    unresolved = []
    for key, q in QUANTILES.items():
        ci = quantile_ci(x, q, level)
        out[f"{key}_ci_ns"] = [int(ci[0]), int(ci[1])] if ci is not None else None
        if ci is None:
            unresolved.append(f"{key} needs ≥ {min_n_for_ci(q, level)} samples for a two-sided "
                              f"{level:.0%} interval (have {n})")
    if out["p99_ci_ns"] is None:
        up = quantile_upper_bound(x, 0.99, level)
        out["p99_upper_ns"] = int(up) if up is not None else None
        if up is None:
            i = next(k for k, u in enumerate(unresolved) if u.startswith("p99"))
            unresolved[i] = unresolved[i].replace(
                " (have", f", and ≥ {min_n_for_ci(0.99, level, 'less')} for a one-sided upper bound (have")
    if unresolved:
        out["unresolved"] = unresolved
    out["noise"] = noise(x)
    return out


def steady_state(samples: Sequence[int], shift: float = SETTLE_SHIFT,
                 level: float = CI_LEVEL) -> dict[str, Any]:
    """First-half vs second-half medians, in sampling order: did the run settle?

    A run is flagged as unsettled when the halves' medians differ by more than
    ``shift`` (relative to the first half) and their exact median intervals do
    not overlap (a drift, not noise).
    """
    x = np.asarray(samples, dtype=np.int64)
    n = len(x)
    half = n // 2
    out: dict[str, Any] = {"method": "first-half vs second-half median", "threshold": shift}
    if half < min_n_for_ci(0.5, level):
        return {**out, "checked": False, "settled": None,
                "note": f"needs ≥ {2 * min_n_for_ci(0.5, level)} samples"}
    a, b = np.sort(x[:half]), np.sort(x[n - half:])
    ma, mb = quantile(a, 0.5), quantile(b, 0.5)
    ca, cb = quantile_ci(a, 0.5, level), quantile_ci(b, 0.5, level)
    rel = (mb - ma) / ma if ma > 0 else 0.0
    overlap = ca is None or cb is None or not (ca[1] < cb[0] or cb[1] < ca[0])
    return {**out, "checked": True, "settled": not (abs(rel) > shift and not overlap),
            "first_half_p50_ns": int(round(ma)), "second_half_p50_ns": int(round(mb)),
            "shift": float(rel), "intervals_overlap": bool(overlap)}


def floor_resolvable(delta_ns: float, floor_ns: float | None, multiple: float = FLOOR_MULTIPLE) -> bool:
    """Whether a difference is resolvable: at least ``multiple`` × the harness's floor.

    An unknown floor (None) resolves nothing.
    """
    if floor_ns is None:
        return False
    return abs(delta_ns) >= multiple * floor_ns


def floor_for(calibration: dict[str, Any] | None, clock_used: str) -> int | None:
    """The floor of a result measured with ``clock_used`` ("host" or "device"), from a receipt."""
    if not calibration:
        return None
    floors = calibration.get("floors") or {}
    v = floors.get(clock_used)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def caveats(summary: dict[str, Any], steady: dict[str, Any] | None = None,
            cv_limit: float = NOISE_CV, outlier_limit: float = NOISE_OUTLIER_FRACTION) -> list[str]:
    """Reasons to read a result with care: unresolved intervals, noise, an unsettled run."""
    out = list(summary.get("unresolved", []))
    nz = summary.get("noise") or {}
    n = summary.get("n", 0)
    if nz.get("cv") is not None and nz["cv"] > cv_limit:
        out.append(f"noise: coefficient of variation {nz['cv']:.1%} exceeds {cv_limit:.0%}")
    o = nz.get("outliers")
    if o and n and (o["low"] + o["high"]) / n > outlier_limit:
        out.append(f"noise: {o['low'] + o['high']} of {n} samples are Tukey outliers "
                   f"(over {outlier_limit:.0%})")
    if steady and steady.get("settled") is False:
        out.append(f"unsettled: second-half median {steady['shift']:+.1%} from the first half "
                   f"({steady['first_half_p50_ns']} → {steady['second_half_p50_ns']} ns); "
                   "more warm-up may be needed")
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

    Valid when the two sides have different spreads. Same statistic and t approximation
    as scipy.stats.brunnermunzel, computed from the sorted samples with searchsorted
    (no rank table), so a thousand rows of a thousand samples take a fraction of a second.
    Degenerate inputs (all values equal) give 1.0; complete separation, where the
    statistic is undefined, falls back to the Mann-Whitney p-value.
    """
    from scipy.special import stdtr

    x = np.sort(np.asarray(a, dtype=np.float64))
    y = np.sort(np.asarray(b, dtype=np.float64))
    nx, ny = len(x), len(y)
    if nx < 2 or ny < 2 or x[0] == x[-1] == y[0] == y[-1]:
        return 1.0

    def midranks(v: np.ndarray, within: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(within, v, "left")
        return lo + (np.searchsorted(within, v, "right") - lo + 1) / 2.0

    def others(v: np.ndarray, other: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(other, v, "left")
        return lo + (np.searchsorted(other, v, "right") - lo) / 2.0

    rx, ry = midranks(x, x), midranks(y, y)
    cx, cy = rx + others(x, y), ry + others(y, x)  # ranks in the combined sample
    mx, my = cx.mean(), cy.mean()
    sx = float(np.sum((cx - rx - mx + (nx + 1) / 2.0) ** 2)) / (nx - 1)
    sy = float(np.sum((cy - ry - my + (ny + 1) / 2.0) ** 2)) / (ny - 1)
    var = nx * sx + ny * sy
    if var <= 0.0:
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
        return p if np.isfinite(p) else 1.0
    w = nx * ny * (my - mx) / ((nx + ny) * np.sqrt(var))
    df = var**2 / ((nx * sx) ** 2 / (nx - 1) + (ny * sy) ** 2 / (ny - 1))
    return float(min(1.0, 2.0 * stdtr(df, -abs(w))))


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
    # Beta(1, m) is 1 - V**(1/m) for uniform V: far cheaper than a general beta draw
    u2 = u + (1.0 - u) * (1.0 - rng.random(n_resamples) ** (1.0 / (n - k - 1)))
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


# --- rounds: run-to-run variance ---
# A run may take its samples in independent rounds (``benchbox run --repeats K``). Samples of
# one round are not independent draws from "the machine": the spread between rounds is
# run-to-run variance. The interval of a ratio resamples rounds, then samples within them.

#: Bootstrap resamples of the hierarchical interval unless told otherwise.
HIER_RESAMPLES = 2000


def log_quantile_bootstrap(rounds: Sequence[np.ndarray], q: float, n_resamples: int,
                           rng: np.random.Generator) -> np.ndarray:
    """log of the q-quantile of ``n_resamples`` hierarchical bootstrap resamples.

    Each resample draws as many rounds as there are, with replacement, then within each
    drawn round as many samples as it holds, with replacement, and takes the quantile of
    the pooled draw. One round is the ordinary bootstrap (drawn exactly, in O(1) per
    resample, from the order statistics).
    """
    if len(rounds) == 1:
        x = np.sort(np.asarray(rounds[0], dtype=np.float64))
        return np.log(_bootstrap_quantiles(x, q, n_resamples, rng))
    sizes = np.array([len(r) for r in rounds])
    pooled = np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    k, top = len(rounds), int(sizes.max())
    out = np.empty(n_resamples)
    chunk = max(1, 4_000_000 // (k * top))
    for at in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - at)
        picks = rng.integers(0, k, (b, k))
        size = sizes[picks][:, :, None]
        idx = starts[picks][:, :, None] + np.floor(rng.random((b, k, top)) * size).astype(np.int64)
        vals = pooled[idx]
        if (sizes == top).all():
            out[at:at + b] = np.quantile(vals.reshape(b, -1), q, axis=1)
        else:  # a drawn round gives its own number of samples: the padding is left out
            vals[np.arange(top)[None, None, :] >= size] = np.nan
            out[at:at + b] = np.nanquantile(vals.reshape(b, -1), q, axis=1)
    return np.log(out)


def rounds_ratio(base_rounds: Sequence[np.ndarray], head_rounds: Sequence[np.ndarray], q: float,
                 level: float = CI_LEVEL, *, n_resamples: int = HIER_RESAMPLES,
                 seed: int = 0) -> tuple[float, tuple[float, float], float] | None:
    """Ratio q(head)/q(base), its hierarchical-bootstrap interval and a two-sided p-value.

    The p-value inverts the percentile interval: the smallest two-sided level at which the
    interval of the ratio excludes 1 (at least 1/(resamples + 1)). Deterministic for a
    seed. None when a side has fewer than RATIO_CI_MIN_N samples or a quantile ≤ 0.
    """
    a = [np.asarray(r, dtype=np.float64) for r in base_rounds if len(r)]
    b = [np.asarray(r, dtype=np.float64) for r in head_rounds if len(r)]
    if sum(map(len, a)) < RATIO_CI_MIN_N or sum(map(len, b)) < RATIO_CI_MIN_N:
        return None
    qa, qb = quantile(np.concatenate(a), q), quantile(np.concatenate(b), q)
    if not (qa > 0 and qb > 0):
        return None
    rng = np.random.default_rng(seed)
    la = log_quantile_bootstrap(a, q, n_resamples, rng)
    lb = log_quantile_bootstrap(b, q, n_resamples, rng)
    est = math.log(qb / qa)
    boot = est + (lb - lb.mean()) - (la - la.mean())
    alpha = (1.0 - level) / 2
    lo, hi = np.percentile(boot, [100 * alpha, 100 * (1 - alpha)])
    n = len(boot)
    tail = min(np.count_nonzero(boot <= 0.0), np.count_nonzero(boot >= 0.0))
    p = 2.0 * (tail + 1) / (n + 1)
    sd = float(boot.std())
    if tail == 0 and sd > 0:
        # every resample on one side: the count only bounds p by the resample count, which a
        # many-row Holm family would never pass; the normal tail of the bootstrap takes over
        from scipy.special import ndtr

        p = min(p, 2.0 * float(ndtr(-abs(est) / sd)))
    return qb / qa, (float(math.exp(lo)), float(math.exp(hi))), float(min(1.0, p))


def steady_state_rounds(rounds: Sequence[Sequence[int]], shift: float = SETTLE_SHIFT,
                        level: float = CI_LEVEL) -> dict[str, Any]:
    """The steady-state check within each independent round (each round has its own warm-up).

    Drift *between* rounds is run-to-run variance, which the comparison accounts for; it
    does not make a run unsettled. The first unsettled round is reported, else the first.
    """
    checks = [steady_state(r, shift, level) for r in rounds if len(r)]
    if not checks:
        return steady_state([], shift, level)
    bad = [i for i, c in enumerate(checks) if c.get("settled") is False]
    pick = checks[bad[0]] if bad else checks[0]
    return {**pick, "method": "first-half vs second-half median, within each round",
            "rounds_checked": len(checks), "rounds_unsettled": len(bad),
            "settled": (not bad) if any(c.get("checked") for c in checks) else None}
