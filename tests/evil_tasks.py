"""Tasks with hostile or careless metadata, built on the sleepy diff task (no sleep by default).

``evil``: task and case names carrying terminal escape sequences; ``int_case``: a case whose
name is not a string; ``dup_cases``: two cases with one name; ``int_name``: a task name that
is not a string; ``long_name``: a case name of 5 million characters. Used as
``task="tests.evil_tasks:evil"`` and so on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbox.tasks import Case
from tests.diff_tasks import SleepTask

#: OSC 52 (write the clipboard), CSI 2J (clear the screen), a colour, C1 CSI, a bell
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b[31m\x9b1;1H\r"


@dataclass
class _Sleepless(SleepTask):
    def __post_init__(self) -> None:
        self.options = {"sleep_ms": 0, **self.options}
        super().__post_init__()


@dataclass
class EvilTask(_Sleepless):
    name = "evil" + ESCAPES

    def cases(self) -> list[Case]:
        return [Case("alpha" + ESCAPES, b'{"case": "alpha", "x": [1, 2, 3, 4]}')]


@dataclass
class IntCaseTask(_Sleepless):
    def cases(self) -> list[Case]:
        return [Case(7, b'{"case": 7, "x": [1, 2, 3, 4]}')]  # type: ignore[arg-type]


@dataclass
class DupCaseTask(_Sleepless):
    def cases(self) -> list[Case]:
        return [Case("alpha", b'{"case": "alpha", "x": [1, 2, 3, 4]}'),
                Case("alpha", b'{"case": "beta", "x": [4, 3, 2, 1]}')]


@dataclass
class IntNameTask(_Sleepless):
    name = 5  # type: ignore[assignment]


def evil(**kw: Any) -> EvilTask:
    return EvilTask(**kw)


def int_case(**kw: Any) -> IntCaseTask:
    return IntCaseTask(**kw)


def dup_cases(**kw: Any) -> DupCaseTask:
    return DupCaseTask(**kw)


def int_name(**kw: Any) -> IntNameTask:
    return IntNameTask(**kw)


@dataclass
class ManyCaseTask(_Sleepless):
    """``n`` cases (task option, default 200)."""

    def cases(self) -> list[Case]:
        n = int(self.options.get("n", 200))
        return [Case(f"c{i}", b'{"case": "c", "x": [1, 2, 3, 4]}') for i in range(n)]


def many(**kw: Any) -> ManyCaseTask:
    return ManyCaseTask(**kw)


@dataclass
class LongNameTask(_Sleepless):
    """A case name of ``length`` characters (task option, default 5,000,000: a 10 MB receipt)."""

    def cases(self) -> list[Case]:
        name = "c" * int(self.options.get("length", 5_000_000))
        return [Case(name, b'{"case": "c", "x": [1, 2, 3, 4]}')]


def long_name(**kw: Any) -> LongNameTask:
    return LongNameTask(**kw)
