"""Quantiles, distribution-free intervals, summaries of raw samples, floors and noise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
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


def _log_gamma(x: np.ndarray) -> np.ndarray:
    """log Γ(x) for x ≥ 1: the standard library's below 50, Stirling's series above (four terms;
    the next is under 1e-18 there), within a few ulp of math.lgamma."""
    out = np.empty(len(x))
    small = x < 50
    out[small] = [math.lgamma(v) for v in x[small]]
    y = x[~small]
    r = 1.0 / y
    r2 = r * r
    out[~small] = ((y - 0.5) * np.log(y) - y + 0.5 * math.log(2 * math.pi)
                   + r * (1 / 12 - r2 * (1 / 360 - r2 * (1 / 1260 - r2 / 1680))))
    return out


def _binomial_pmf(n: int, q: float) -> tuple[int, np.ndarray]:
    """(a, P(X = k) for k = a..b), X ~ Binomial(n, q), over the window [a, b] of 15 standard
    deviations and 40 more either side of the mean (clipped to 0..n): the mass outside it is
    below 1e-40, and the work grows with the square root of n, not with n."""
    mean, sd = n * q, math.sqrt(n * q * (1.0 - q))
    a, b = max(0, int(mean - 15 * sd) - 40), min(n, int(mean + 15 * sd) + 40)
    k = np.arange(a, b + 1, dtype=np.float64)
    log_choose = math.lgamma(n + 1) - _log_gamma(k + 1) - _log_gamma(n - k + 1)
    pmf = np.exp(log_choose + k * math.log(q) + (n - k) * math.log1p(-q))
    return a, pmf / pmf.sum()  # takes out the rounding the large log-gammas share (same for every k)


@lru_cache(maxsize=4096)
def ci_ranks(n: int, q: float, level: float = CI_LEVEL,
             alternative: str = "two-sided") -> tuple[int | None, int | None]:
    """0-based order-statistic indices bounding the q-quantile, exact binomial.

    Same rule as ``scipy.stats.quantile_test(...).confidence_interval()``: each side misses with
    probability at most (1 - level)/2 for a two-sided interval, 1 - level for a one-sided bound
    ("less": an upper bound; "greater": a lower bound); a side that needs an order statistic
    beyond the sample is None. The tails are summed here, not by scipy.stats (its import takes
    1.2-1.5 s): their CDF is within 1e-9 of scipy's up to n = 1e8, tested against its ranks."""
    if n < 1:
        return None, None
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be strictly between 0 and 1, got {q!r}")
    tail = (1.0 - level) / 2 if alternative == "two-sided" else 1.0 - level
    a, pmf = _binomial_pmf(n, q)
    lo = hi = None
    if alternative in ("two-sided", "greater"):
        # the binomial's tail quantile: the first k with P(X <= k) >= tail; the bound is one below
        i = a + int(np.searchsorted(np.cumsum(pmf), tail, side="left")) - 1
        lo = i if i >= 0 else None
    if alternative in ("two-sided", "less"):
        # the first k with P(X > k) <= tail (the upper tail summed from its small end)
        above = np.append(np.cumsum(pmf[::-1])[::-1][1:], 0.0)
        j = a + int(np.flatnonzero(above <= tail)[0])
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


#: The flags a row's caveats raise → the start of the reason that records each in the receipt.
FLAG_REASONS = {"noisy": "noise:", "unsettled": "unsettled:"}


def unsettled_text(shift: float, first_p50_ns: Any, second_p50_ns: Any) -> str:
    """Why a run is unsettled: its halves' medians (the reason, after ``unsettled:``)."""
    return (f"second-half median {shift:+.1%} from the first half ({first_p50_ns} → {second_p50_ns} ns); "
            "more warm-up may be needed")


def flagged_caveats(summary: dict[str, Any], steady: dict[str, Any] | None = None,
                    cv_limit: float = NOISE_CV, outlier_limit: float = NOISE_OUTLIER_FRACTION
                    ) -> tuple[list[str], tuple[str, ...]]:
    """Reasons to read a result with care (unresolved intervals, noise, an unsettled run) and
    the flags they raise: ``noisy`` and/or ``unsettled``, in the order of :data:`FLAG_REASONS`."""
    out = list(summary.get("unresolved", []))
    raised = set()
    nz = summary.get("noise") or {}
    n = summary.get("n", 0)
    noise = FLAG_REASONS["noisy"]
    if nz.get("cv") is not None and nz["cv"] > cv_limit:
        out.append(f"{noise} coefficient of variation {nz['cv']:.1%} exceeds {cv_limit:.0%}")
        raised.add("noisy")
    o = nz.get("outliers")
    if o and n and (o["low"] + o["high"]) / n > outlier_limit:
        out.append(f"{noise} {o['low'] + o['high']} of {n} samples are Tukey outliers "
                   f"(over {outlier_limit:.0%})")
        raised.add("noisy")
    if steady and steady.get("settled") is False:
        why = unsettled_text(steady["shift"], steady["first_half_p50_ns"], steady["second_half_p50_ns"])
        out.append(f"{FLAG_REASONS['unsettled']} {why}")
        raised.add("unsettled")
    return out, tuple(f for f in FLAG_REASONS if f in raised)


def caveats(summary: dict[str, Any], steady: dict[str, Any] | None = None,
            cv_limit: float = NOISE_CV, outlier_limit: float = NOISE_OUTLIER_FRACTION) -> list[str]:
    """Reasons to read a result with care: unresolved intervals, noise, an unsettled run."""
    return flagged_caveats(summary, steady, cv_limit, outlier_limit)[0]


# --- comparisons: Holm's step-down correction over a family of tests ---

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


# --- replications: the process is the unit ---
# Samples of one process are not independent draws from "the code's speed": what a process
# decides once (memory layout, hash seed, thread placement, compile draws) moves all of them.
# A comparison across runs therefore rests on one number per process and side — the log of the
# process's quantile — and on the spread of those numbers: Welch's t on the replications'
# log-quantiles, its Satterthwaite degrees of freedom, and a floor for the spread from the
# quantile's own sampling error. benchmarks/diff_calibration.py measures its coverage, false
# alarm rate and power for 1–8 processes a side at run-to-run drift of 0–20%.

#: Fewest samples per process for a quantile's verdict (fewer: the metric is advisory).
MIN_PER_REPLICATE = {0.5: 30, 0.99: 200}
#: Power at which the smallest detectable change is stated.
DETECT_POWER = 0.8
#: Most replications a side that :func:`replications_needed` looks for.
MOST_REPLICATES = 200


def log_quantile_se(sorted_x: np.ndarray, q: float, level: float = CI_LEVEL) -> float | None:
    """Standard error of log(q-quantile) from one replication's sorted samples: the exact
    order-statistic interval's half-width in log over z (ranks from the normal approximation,
    clipped to the sample, where the exact interval needs more samples). None without two
    positive samples."""
    x = np.asarray(sorted_x, dtype=np.float64)
    n = len(x)
    if n < 2 or not x[0] > 0:
        return None
    z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2)
    lo, hi = ci_ranks(n, q, level)
    if lo is None or hi is None:
        centre, spread = n * q, z * math.sqrt(n * q * (1.0 - q))
        lo, hi = max(0, math.floor(centre - spread) - 1), min(n - 1, math.ceil(centre + spread))
    return float(math.log(x[hi] / x[lo])) / (2.0 * z)


@dataclass(frozen=True)
class Replicates:
    """One side of a comparison: the log q-quantile of each process, and ``w``, the mean of
    their own sampling errors (a floor for the spread between them)."""

    y: tuple[float, ...]
    w: float

    @property
    def k(self) -> int:
        return len(self.y)

    @property
    def mean(self) -> float:
        return float(np.mean(self.y))

    @property
    def s2(self) -> float | None:
        """The variance between processes (None with one process)."""
        return float(np.var(self.y, ddof=1)) if self.k >= 2 else None

    @property
    def variance(self) -> float | None:
        """max(s², w²): the spread between processes, never below their own sampling error."""
        s2 = self.s2
        return None if s2 is None else max(s2, self.w ** 2)


def replicates(groups: Sequence[np.ndarray], q: float, level: float = CI_LEVEL) -> Replicates | None:
    """The :class:`Replicates` of ``groups`` (one array of samples per process); None when a
    quantile is not positive."""
    ys, ws = [], []
    for g in groups:
        x = np.sort(np.asarray(g, dtype=np.float64))
        v = quantile(x, q) if len(x) else 0.0
        if not v > 0:
            return None
        ys.append(math.log(v))
        ws.append(log_quantile_se(x, q, level) or 0.0)
    return Replicates(tuple(ys), float(np.mean(ws))) if ys else None


@dataclass(frozen=True)
class LogRatio:
    """d = mean log-quantile of HEAD − of BASE, its standard error, degrees of freedom (inf
    where every variance was given rather than estimated), two-sided p-value and interval."""

    d: float
    se: float
    df: float
    p: float
    ci: tuple[float, float]  # of the ratio exp(d)
    #: how each side's variance was had: "measured" (k ≥ 2), "prior" (given), "pooled" (the other
    #: side's), "assumed" (the largest measured spread), or "paired"
    sources: tuple[str, str]

    @property
    def ratio(self) -> float:
        return math.exp(self.d)

    def detectable(self, alpha: float, power: float = DETECT_POWER) -> float:
        """The smallest relative change this comparison detects with ``power`` at ``alpha``."""
        return math.exp(_t_sum(self.df, alpha, power) * self.se) - 1.0


def _t_sum(df: float, alpha: float, power: float) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, 1.0 - alpha / 2) + stdtrit(df, power))


def _variances(base: Replicates, head: Replicates, prior_sd: float | None,
               fallback_sd: float | None) -> list[tuple[float, int, float, str]] | None:
    """Per side: (variance, replications, degrees of freedom of the variance, source). A side of
    one process takes ``prior_sd``, else the other side's measured spread, else ``fallback_sd``."""
    sides: list[tuple[float, int, float, str] | None] = []
    for r in (base, head):
        v = r.variance
        if v is not None:
            sides.append((v, r.k, float(r.k - 1), "measured"))
        elif prior_sd is not None:
            sides.append((max(prior_sd ** 2, r.w ** 2), r.k, math.inf, "prior"))
        else:
            sides.append(None)
    for i in (0, 1):  # one process on this side: the other side's spread stands for both
        other, r = sides[1 - i], (base, head)[i]
        if sides[i] is None and other is not None and other[3] == "measured":
            sides[i] = (max(other[0], r.w ** 2), r.k, other[2], "pooled")
        elif sides[i] is None and fallback_sd is not None:
            sides[i] = (max(fallback_sd ** 2, r.w ** 2), r.k, math.inf, "assumed")
    if sides[0] is None or sides[1] is None:
        return None
    return [sides[0], sides[1]]


def _welch_df(sides: list[tuple[float, int, float, str]]) -> float:
    """Satterthwaite's degrees of freedom; a pooled side's variance is the other's estimate."""
    if any(src == "pooled" for *_, src in sides):
        return next(dof for *_, dof, src in sides if src == "measured")
    terms = [(v / k, dof) for v, k, dof, _ in sides]
    den = sum(term ** 2 / dof for term, dof in terms if math.isfinite(dof))
    return sum(term for term, _ in terms) ** 2 / den if den > 0 else math.inf


def _interval(d: float, se: float, df: float, level: float,
              sources: tuple[str, str]) -> LogRatio:
    from scipy.special import stdtr, stdtrit

    if se <= 0:
        return LogRatio(d, 0.0, df, 1.0 if d == 0 else 0.0, (math.exp(d), math.exp(d)), sources)
    crit = float(stdtrit(df, 1.0 - (1.0 - level) / 2))
    p = float(min(1.0, 2.0 * stdtr(df, -abs(d) / se)))
    return LogRatio(d, se, df, p, (math.exp(d - crit * se), math.exp(d + crit * se)), sources)


def log_ratio(base: Replicates, head: Replicates, level: float = CI_LEVEL, prior_sd: float | None = None,
              fallback_sd: float | None = None) -> LogRatio | None:
    """Welch's t on the replications' log-quantiles, with Satterthwaite's degrees of freedom.

    A side of one process has no spread of its own: it takes ``prior_sd`` (a run-to-run spread
    measured elsewhere, e.g. the row's history), else the other side's measured spread (equal
    spreads assumed; that side's degrees of freedom), else ``fallback_sd`` (the largest spread
    measured between processes of such a contract); with none of them, None: run-to-run
    variance is unknown and nothing can be judged.
    """
    sides = _variances(base, head, prior_sd, fallback_sd)
    if sides is None:
        return None
    se = math.sqrt(sum(v / k for v, k, _, _ in sides))
    return _interval(head.mean - base.mean, se, _welch_df(sides), level, (sides[0][3], sides[1][3]))


def paired_log_ratio(base: Replicates, head: Replicates, level: float = CI_LEVEL) -> LogRatio | None:
    """Two rows measured in the same processes (runners of one run): the t-interval of the
    per-process differences of log-quantiles, so what moved a whole process cancels. None
    unless both sides hold the same k ≥ 2 processes."""
    if base.k != head.k or base.k < 2:
        return None
    diffs = np.asarray(head.y) - np.asarray(base.y)
    v = max(float(np.var(diffs, ddof=1)), base.w ** 2 + head.w ** 2)
    return _interval(float(diffs.mean()), math.sqrt(v / base.k), float(base.k - 1), level,
                     ("paired", "paired"))


def replications_needed(base: Replicates, head: Replicates, effect: float, alpha: float,
                        prior_sd: float | None = None, fallback_sd: float | None = None,
                        power: float = DETECT_POWER) -> int | None:
    """The fewest processes a side (the same on both) with which a change of ``effect``
    (relative, e.g. 0.05) would be detected with ``power``, at the spreads measured here;
    None when no spread is known or more than :data:`MOST_REPLICATES` would be needed."""
    sides = _variances(base, head, prior_sd, fallback_sd)
    if sides is None or effect <= 0:
        return None
    from scipy.special import stdtrit

    vb, vh = sides[0][0], sides[1][0]
    k = np.arange(2, MOST_REPLICATES + 1, dtype=float)
    se2 = (vb + vh) / k
    den = ((vb / k) ** 2 + (vh / k) ** 2) / (k - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, se2 ** 2 / np.where(den > 0, den, 1.0), np.inf)
    # every candidate count at once (one scipy call, not two per count): the same t quantiles
    crit = stdtrit(df, 1.0 - alpha / 2) + stdtrit(df, power)
    enough = np.flatnonzero(crit * np.sqrt(se2) <= math.log1p(effect))
    return int(k[enough[0]]) if enough.size else None

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
