"""The schedule's merge: parts sampled in turn joined into one new measurement."""

from __future__ import annotations

import copy

from benchbox.harness.loop import Measurement
from benchbox.harness.schedule import merge


def _part(samples: list[int], **kw: object) -> Measurement:
    m = Measurement(samples_ns=list(samples), **kw)  # type: ignore[arg-type]
    for s in m.stages_ns:
        m.stages_ns[s] = [x // 8 for x in samples]
    return m


def test_merge_joins_parts_in_order_into_a_new_measurement_and_leaves_the_parts_alone() -> None:
    first = _part([800, 808], clock_used="device", warmup=3, clock_note="first", stop_reason="its own",
                  batch=4, host_span_ns=99, load={"overloaded": False})
    second = _part([816, 824, 832], round_sizes=[1, 2], clock_note="second", stop_reason="later")
    second.stages_ns["queue"] = [5, 6, 7]
    before = copy.deepcopy((first, second))
    m = merge([first, second])
    assert (first, second) == before
    assert m.samples_ns == [800, 808, 816, 824, 832]
    assert m.stages_ns["compute"] == [100, 101, 102, 103, 104] and m.stages_ns["queue"] == [5, 6, 7]
    assert m.round_sizes == [2, 1, 2]  # the first part is one round, the second keeps its own rounds
    assert (m.clock_used, m.warmup, m.clock_note, m.batch, m.host_span_ns, m.load) == (
        "device", 3, "first", 4, 99, {"overloaded": False})
    assert m.stop_reason == "its own"
    assert merge([first, second], stop_reason="joined").stop_reason == "joined"
    m.samples_ns.append(1)
    m.stages_ns["compute"].append(1)
    assert (first, second) == before  # nothing of the parts is shared


def test_merge_of_no_parts_is_an_empty_measurement_with_the_given_reason() -> None:
    m = merge([], stop_reason="")
    assert m == Measurement()
