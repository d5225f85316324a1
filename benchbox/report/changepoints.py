"""Change points over a series of p50s: E-divisive means as implemented by Apache Otava.

Otava (the continuation of MongoDB's and DataStax's Hunter) splits a series where the
E-divisive statistic peaks, within sliding windows, keeps a split when a two-sided
t-test between the two sides rejects at ``max_pvalue``, then merges away splits that
fall under ``max_pvalue`` or ``min_change`` once their neighbours are known (Fleming et
al., "Hunter: Using Change Point Detection to Hunt for Performance Regressions",
ICPE 2023). Its analysis API needs only numpy and scipy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from benchbox.errors import FieldError, UsageError

#: Otava's defaults: windows of 50 points, a change kept at p < 0.001.
WINDOW = 50
MAX_PVALUE = 0.001


@dataclass(frozen=True)
class ChangePoint:
    """A change found in a series: the first point after it, and Otava's statistics."""

    index: int
    change: float
    mean_before: float
    mean_after: float
    pvalue: float


@dataclass(frozen=True)
class Detector:
    """How change points are found (recorded on the site)."""

    max_pvalue: float = MAX_PVALUE
    min_change: float = 0.05
    window: int = WINDOW

    def __post_init__(self) -> None:
        if not 0.0 < self.max_pvalue < 1.0:
            raise FieldError("max_pvalue", f"must be between 0 and 1, got {self.max_pvalue}")
        if not 0.0 <= self.min_change < 1.0:
            raise FieldError("min_change", f"must be between 0% and 100%, got {self.min_change:.4g}")
        if self.window < 6:
            raise FieldError("window", f"must be at least 6 points, got {self.window}")

    @property
    def library(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"apache-otava {version('apache-otava')}"
        except PackageNotFoundError:
            return "apache-otava"

    def describe(self) -> str:
        return (f"{self.library}: E-divisive means over each series' p50 (valid points), windows of "
                f"{self.window}, t-test p < {self.max_pvalue:g}, change ≥ {self.min_change:.0%}")

    def find(self, values: Sequence[float]) -> list[ChangePoint]:
        """Change points of ``values`` (in series order), earliest first."""
        try:
            from otava.series import AnalysisOptions, Metric, Series
        except ImportError:
            raise UsageError("apache-otava is not installed: pip install --no-deps apache-otava "
                             "(its analysis needs only numpy and scipy), or pip install "
                             "'benchbox-contracts[history]'") from None
        if len(values) < 3:
            return []
        opts = AnalysisOptions()
        opts.window_len = self.window
        opts.max_pvalue = self.max_pvalue
        opts.min_magnitude = self.min_change
        series = Series("p50", None, list(range(len(values))), {"p50": Metric()},
                        {"p50": [float(v) for v in values]}, {})
        log = logging.getLogger()
        level = log.level
        log.setLevel(max(level, logging.WARNING))  # Otava logs one INFO line per series
        try:
            found = series.analyze(opts).change_points["p50"]
        finally:
            log.setLevel(level)
        return [ChangePoint(index=int(c.index), change=float(c.forward_change_percent()) / 100.0,
                            mean_before=float(c.mean_before()), mean_after=float(c.mean_after()),
                            pvalue=float(c.pvalue())) for c in found]
