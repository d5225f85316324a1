"""Value axes of the figures: the time unit of a set of nanosecond values, value labels, and
linear or logarithmic axes with readable ticks."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class TimeUnit:
    """A display unit for nanosecond values."""

    name: str
    scale: float

    def __call__(self, ns: float) -> float:
        return ns / self.scale


def time_unit(values_ns: Iterable[float]) -> TimeUnit:
    """µs below a millisecond, s above ten seconds, else ms."""
    vals = [v for v in values_ns if v > 0]
    top = max(vals) if vals else 1e6
    if top < 1e6:
        return TimeUnit("µs", 1e3)
    if top >= 1e10:
        return TimeUnit("s", 1e9)
    return TimeUnit("ms", 1e6)


def wide_spread(values: Iterable[float], factor: float = 8.0) -> bool:
    """True when the values span more than ``factor``× (a log axis then helps)."""
    vals = [v for v in values if v > 0]
    return bool(vals) and max(vals) / min(vals) > factor


def fmt_value(v: float) -> str:
    """A short number: 3 significant digits."""
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def set_value_axis(ax: Axes, log: bool, axis: str = "x") -> None:
    """Log or linear axis with plain tick labels; a log axis gets :func:`set_log_ticks`."""
    from matplotlib.ticker import FuncFormatter

    if log:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        set_log_ticks(ax, axis)
        return
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


#: mantissas of labelled log ticks, sparsest first: :func:`log_ticks` takes the first that gives enough
LOG_MANTISSAS = ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0),
                 (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0), (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0))


def log_ticks(lo: float, hi: float, least: int = 4) -> list[float]:
    """Labelled ticks for a log axis viewing ``lo``..``hi``: the sparsest of :data:`LOG_MANTISSAS`
    that puts at least ``least`` ticks in view with no more than 2× between either end of the view and
    its nearest tick (the densest when none does)."""

    lo, hi = sorted((lo, hi))
    if not (lo > 0 and math.isfinite(hi)):
        return []
    ticks: list[float] = []
    for subs in LOG_MANTISSAS:
        ticks = sorted({float(f"{m * 10.0 ** e:.6g}")
                        for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                        for m in subs})
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= least and ticks[0] <= 2 * lo and 2 * ticks[-1] >= hi:
            break
    return ticks


def _log_locator(least: int) -> Any:
    """A matplotlib locator that puts a log axis's labelled ticks at :func:`log_ticks` of its view
    when the figure is drawn, so later changes to the limits are followed."""
    from matplotlib.ticker import Locator

    class LogTicks(Locator):  # type: ignore[misc]
        def __call__(self) -> list[float]:
            return self.tick_values(*self.axis.get_view_interval())

        def tick_values(self, vmin: float, vmax: float) -> list[float]:
            return log_ticks(vmin, vmax, least)

    return LogTicks()


def set_log_ticks(ax: Axes, axis: str = "y", least: int = 4) -> None:
    """Label a log axis at :func:`log_ticks` of its view (as drawn), as plain numbers; unlabelled
    minor ticks at 2…9 of each decade. The one rule for every figure's log axes."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(_log_locator(least))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    target.set_minor_formatter(NullFormatter())
