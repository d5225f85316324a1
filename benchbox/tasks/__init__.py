"""Tasks: the interface, the registry of built-in tasks, loading a user's task."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchbox.errors import Setting, UsageError, did_you_mean, error_line
from benchbox.tasks.base import GENERIC_GATES, CallTrace, Case, GateResult, InputShape, Task

__all__ = ["GENERIC_GATES", "CallTrace", "Case", "GateResult", "InputShape", "SizeInfo", "Task", "TaskInfo",
           "MAX_NAME_LENGTH", "BUILTIN_TASK_NAMES", "check_task_metadata",
           "builtin_tasks", "describe_tasks", "load_task"]


#: the built-in tasks' names, known without importing them (``builtin_tasks`` imports them)
BUILTIN_TASK_NAMES = ("decision",)


def builtin_tasks() -> dict[str, Callable[..., Task]]:
    from benchbox.tasks.decision.task import DecisionTask

    return {"decision": DecisionTask}


def load_task(spec: str, **kwargs: Any) -> Task:
    """A built-in task by name, or ``package.module:factory`` for a user's task."""
    factories = builtin_tasks()
    if spec in factories:
        factory = factories[spec]
    elif ":" in spec:
        mod_name, _, attr = spec.partition(":")
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(mod_name)
        except Exception as e:  # a user's module can fail in any way
            raise _refused(spec, f"cannot import {mod_name}: {type(e).__name__}: {e}") from None
        factory = getattr(module, attr, None)
        if factory is None or not callable(factory):
            raise _refused(spec, f"{mod_name} has no callable '{attr}'")
    else:
        raise UsageError(f"unknown task '{spec}' ({did_you_mean(spec, factories)}"
                         f"built-in: {', '.join(factories)}; "
                         "or package.module:factory)")
    try:
        task = factory(**kwargs)
    except (ValueError, TypeError) as e:
        raise _refused(spec, str(e)) from None
    if not isinstance(task, Task):
        raise _refused(spec, f"the factory returned {type(task).__name__}, "
                         "not a benchbox.tasks.Task")
    return task


def _refused(spec: str, text: str) -> UsageError:
    """A task that cannot be used: the message leads with the setting that named it (``task=SPEC``)."""
    named = Setting("task", spec)
    return UsageError(f"{named}: {text}", settings=(named,))


#: The longest task, size or case name (in characters): names are table cells and receipt keys.
MAX_NAME_LENGTH = 200


def _name_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return f"must be a non-empty string, got {value!r:.60}"
    if len(value) > MAX_NAME_LENGTH:
        return f"must be at most {MAX_NAME_LENGTH} characters, got {len(value):,} ({value[:40]!r}...)"
    return None


def check_task_metadata(task: Task, cases: list[Case], spec: str) -> None:
    """A task's name and size and its case names are non-empty strings of at most
    :data:`MAX_NAME_LENGTH` characters, case names unique and requests bytes: what a receipt
    records and what ``show`` and ``diff`` read back."""
    for what, value in (("task name", task.name), ("task size", task.size)):
        if (problem := _name_problem(value)) is not None:
            raise _refused(spec, f"the {what} {problem}")
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if (problem := _name_problem(case.name)) is not None:
            raise _refused(spec, f"case {i}: the case name {problem}")
        if case.name in seen:
            raise _refused(spec, f"cases() names case {case.name!r:.60} twice (case names "
                             "identify results and references: they must be unique)")
        seen.add(case.name)
        if not isinstance(case.request, bytes):
            raise _refused(spec, f"case {case.name!r:.60}: the request must be bytes, "
                             f"got {type(case.request).__name__}")


@dataclasses.dataclass(frozen=True)
class SizeInfo:
    """One size of a task: its parameter count (from the model as built) and its shape."""

    name: str
    parameters: int
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """What ``benchbox tasks`` lists for one task."""

    name: str
    spec: str
    cases: tuple[str, ...]
    sizes: tuple[SizeInfo, ...]
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")


def describe_tasks(specs: tuple[str, ...] | list[str] | None = None) -> list[TaskInfo]:
    """Tasks (the built-in ones by default) with every size's parameter count and the cases.

    Counts come from ``Task.parameter_count``: by default from the model the task builds; the
    built-in task counts from each size's shapes, building nothing (and not importing torch).
    The task's metadata is checked as a run checks it; task code that fails or leaves by
    ``sys.exit`` or another BaseException (at import, in the factory, building a model) is one
    line, as at a run's load.
    """
    return [_contained(spec) for spec in specs or list(builtin_tasks())]


def _contained(spec: str) -> TaskInfo:
    try:
        return _describe(spec)
    except (UsageError, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - task code may leave in any way, sys.exit included
        why = (f"SystemExit: sys.exit({e.code!r}) called by task code" if isinstance(e, SystemExit)
               else error_line(e))
        raise _refused(spec, f"loading the task ended in {why}") from None


def _describe(spec: str) -> TaskInfo:
    task = load_task(spec)
    cases = task.cases()
    if not isinstance(cases, list) or not cases or not all(isinstance(c, Case) for c in cases):
        raise _refused(spec, "cases() must return a non-empty list of benchbox.tasks.Case")
    check_task_metadata(task, cases, spec)
    sizes = []
    for size in task.sizes():
        try:
            t = task if size == task.size else dataclasses.replace(task, size=size)
        except (ValueError, TypeError) as e:
            raise UsageError(f"task {spec}: size {size}: {e}") from None
        detail = getattr(t, "size_detail", lambda: "")()
        sizes.append(SizeInfo(size, int(t.parameter_count()), detail))
    return TaskInfo(task.name, spec, tuple(c.name for c in cases), tuple(sizes))
