"""The covariance adjustment of a cross-run comparison for the process probe.

The process probe (:func:`benchbox.harness.control.probe`) is timed at the start of each
process's run, before the task is loaded; what made the machine slower for those seconds moves
it and the process's rows alike. These fit one common slope over both sides' processes and test
the side's effect on what the probe does not explain. A covariate the change itself moves
would take part of the change's effect for the machine's, hence "before the code runs".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from benchbox.stats import CI_LEVEL, DETECT_POWER, MOST_REPLICATES, LogRatio, Replicates, _interval, _t_sum


def adjustable(kb: int, kh: int) -> bool:
    """Whether ``kb`` BASE and ``kh`` HEAD processes allow the adjusted comparison: ≥ 2 a side,
    ≥ 5 in all (a slope, a difference and a mean leave at least 2 degrees of freedom)."""
    return kb >= 2 and kh >= 2 and kb + kh >= 5


def adjusted_log_ratio(base: Replicates, head: Replicates, cov_base: Sequence[float],
                       cov_head: Sequence[float], level: float = CI_LEVEL) -> LogRatio | None:
    """The HEAD/BASE log-ratio adjusted for a covariate measured in each process.

    ``cov_*`` is the log of a fixed probe (benchbox's own code, never the code under test) timed
    at the start of each process's run, before the task was loaded: what made the machine slower
    then moves it too, and the change under test cannot. An analysis of covariance,
    y = a + d·head + b·(c − c̄), one common slope b fitted over the processes of both sides; the
    t-interval of d has n − 3 degrees of freedom, its residual spread floored by the quantiles'
    own sampling error. A probe that tracks nothing costs one degree of freedom; one that tracks
    the machine removes the machine's share of the spread between processes. None unless each
    side has ≥ 2 processes, all with a covariate, and n ≥ 5 in all.
    """
    kb, kh = base.k, head.k
    if not adjustable(kb, kh) or len(cov_base) != kb or len(cov_head) != kh:
        return None
    y = np.asarray(base.y + head.y, dtype=np.float64)
    c = np.asarray(list(cov_base) + list(cov_head), dtype=np.float64)
    if not np.all(np.isfinite(c)):
        return None
    x = np.column_stack([np.ones_like(y), np.r_[np.zeros(kb), np.ones(kh)], c - c.mean()])
    xtx = x.T @ x
    if np.linalg.cond(xtx) > 1e12:  # the covariate does not vary: nothing to adjust by
        return None
    inv = np.linalg.inv(xtx)
    beta = inv @ x.T @ y
    df = float(len(y) - 3)
    s2 = max(float(np.sum((y - x @ beta) ** 2)) / df, (base.w ** 2 + head.w ** 2) / 2)
    return _interval(float(beta[1]), math.sqrt(s2 * inv[1, 1]), df, level, ("adjusted", "adjusted"))


def adjusted_needed(fit: LogRatio, kb: int, kh: int, effect: float, alpha: float,
                    power: float = DETECT_POWER) -> int | None:
    """Processes a side with which an adjusted comparison detects ``effect`` with ``power``:
    the residual spread of ``fit`` (its se scaled back to one process), n − 3 degrees of freedom."""
    if effect <= 0 or fit.se <= 0:
        return None
    v = fit.se ** 2 / (1 / kb + 1 / kh)
    target = math.log1p(effect)
    for k in range(3, MOST_REPLICATES + 1):
        if _t_sum(2 * k - 3, alpha, power) * math.sqrt(2 * v / k) <= target:
            return k
    return None
