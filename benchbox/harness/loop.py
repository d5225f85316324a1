"""The measurement loop: the harness calls every stage and stamps every boundary."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchbox.contracts import QUEUE, STAGES, Contract
from benchbox.harness.arrival import LoadBound, Pacer
from benchbox.harness.clocks import DeviceEvents, EventMarks, HostClock, HostMarks, host_clock
from benchbox.runners.base import Runner
from benchbox.tasks.base import CallTrace, Task

N_STAGES = len(STAGES)

#: Saturated sampling: a batch spans at least this much time (so a clock read's own cost is
#: negligible), the same load runs this long before the first sample (clocks and power settle),
#: and the host runs at most this many batches ahead of the device.
SATURATED_BATCH_NS = 2_000_000
SATURATED_SETTLE_S = 1.0
SATURATED_DEPTH = 4
#: calls timed together to size the batch
SATURATED_PROBE = 10


@dataclass
class Measurement:
    """Raw samples of one (runner, case): the region, and every stage."""

    samples_ns: list[int] = field(default_factory=list)
    stages_ns: dict[str, list[int]] = field(default_factory=lambda: {s: [] for s in STAGES})
    clock_used: str = "host"
    clock_note: str = ""
    warmup: int = 0
    stop_reason: str = ""
    #: saturated contracts: calls per sample, and the host time from the first to the last read
    batch: int = 1
    host_span_ns: int = 0
    #: samples per round, in order, when the samples were taken in several rounds (else empty: one)
    round_sizes: list[int] = field(default_factory=list)
    #: paced arrivals: the load the samples ran under (offered and achieved rate, overload)
    load: dict[str, Any] | None = None
    #: the process probe's timed calls (ns), timed at the process's start
    #: (:func:`benchbox.harness.control.probe`); empty where it was not timed
    probe_ns: list[int] = field(default_factory=list)

    @property
    def overloaded(self) -> bool:
        return bool(self.load and self.load.get("overloaded"))

    def rounds(self) -> list[int]:
        """Samples per round, in sampling order (one round unless the schedule said otherwise)."""
        if self.round_sizes:
            return list(self.round_sizes)
        return [len(self.samples_ns)] if self.samples_ns else []


class StopSampling(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised by a caller's stop callback to abandon sampling now, keeping ``measurement``.

    A BaseException, so that no ``except Exception`` on the way turns it into a failure.
    """

    def __init__(self, measurement: Measurement) -> None:
        super().__init__("sampling stopped")
        self.measurement = measurement


class PhaseTimer:
    """Times a runner's preparation phases with the harness's clock.

    ``trials``, when the run gives one (:class:`benchbox.harness.trials.Trials`), lets the
    runner have the harness measure its current build while it prepares.
    """

    def __init__(self, clock: HostClock = host_clock, trials: Any = None) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = {}
        self.trials = trials

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = self.clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + (self.clock() - t0) / 1e9


class Harness:
    """Runs task calls through a runner under one contract and keeps every stamp."""

    def __init__(self, contract: Contract, clock: HostClock = host_clock, bound: LoadBound | None = None
                 ) -> None:
        self.contract = contract
        self.clock = clock
        #: when an open-loop measurement is declared overloaded
        self.bound = bound or LoadBound()

    def call(self, task: Task, runner: Runner, request: bytes) -> CallTrace:
        """One untimed call (validation, warm-up of the reference): no clock is read."""
        req = task.parse(request)
        host = task.preprocess(req)
        outputs = runner.d2h(runner.compute(runner.h2d(host)))
        reduced = task.reduce(outputs, req)
        ans = task.answer(reduced, req)
        return CallTrace(outputs=outputs, reduced=reduced, answer=ans, response=task.serialize(ans))

    def settle(self, task: Task, runner: Runner, request: bytes, seconds: float,
               stop: Callable[[], bool] = lambda: False) -> int:
        """Untimed back-to-back calls for ``seconds`` (at least one), so that clocks and caches
        come up from idle before anything is timed; stops early when ``stop()`` says so.
        The clock is read between calls only, to know when the time is up. Returns the calls made."""
        end = self.clock() + int(round(seconds * 1e9))
        calls = 0
        while calls == 0 or (not stop() and self.clock() < end):
            self.call(task, runner, request)
            calls += 1
        return calls

    def _hooks(self, runner: Runner, events: DeviceEvents | None
               ) -> tuple[list[Callable[[], None] | None], list[Callable[[], None] | None]]:
        """Actions at each of the 9 boundaries: before the stamp (closing) and after (opening)."""
        pre: list[Callable[[], None] | None] = [None] * (N_STAGES + 1)
        post: list[Callable[[], None] | None] = [None] * (N_STAGES + 1)
        first, last = self.contract.first_index, self.contract.last_index + 1
        closers: list[Callable[[], None]] = []
        sync = self.contract.policy.sync_at_close
        if sync == "stream":
            closers.append(runner.synchronize)
        elif sync == "device" and runner.stream is not None:
            import torch

            closers.append(torch.cuda.synchronize)
        if events is not None:
            closers.insert(0, events.close)
            post[first] = events.open
        if closers:
            pre[last] = closers[0] if len(closers) == 1 else (lambda: [f() for f in closers] and None)
        return pre, post

    def sample(self, task: Task, runner: Runner, request: bytes, ts: list[int],
               pre: list[Callable[[], None] | None], post: list[Callable[[], None] | None]) -> bytes:
        """One timed call: stamps all 9 boundaries into ``ts``; returns the response."""
        c = self.clock
        ts[0] = c()
        if post[0]:
            post[0]()
        req = task.parse(request)
        if pre[1]:
            pre[1]()
        ts[1] = c()
        if post[1]:
            post[1]()
        host = task.preprocess(req)
        if pre[2]:
            pre[2]()
        ts[2] = c()
        if post[2]:
            post[2]()
        dev_in = runner.h2d(host)
        if pre[3]:
            pre[3]()
        ts[3] = c()
        if post[3]:
            post[3]()
        dev_out = runner.compute(dev_in)
        if pre[4]:
            pre[4]()
        ts[4] = c()
        if post[4]:
            post[4]()
        outputs = runner.d2h(dev_out)
        if pre[5]:
            pre[5]()
        ts[5] = c()
        if post[5]:
            post[5]()
        reduced = task.reduce(outputs, req)
        if pre[6]:
            pre[6]()
        ts[6] = c()
        if post[6]:
            post[6]()
        ans = task.answer(reduced, req)
        if pre[7]:
            pre[7]()
        ts[7] = c()
        if post[7]:
            post[7]()
        response = task.serialize(ans)
        if pre[8]:
            pre[8]()
        ts[8] = c()
        return response

    def sample_plain(self, fns: tuple[Callable[..., Any], ...], request: bytes, ts: list[int]) -> bytes:
        """``sample`` for a contract that acts at no boundary: the same stamps, no hook checks.

        ``fns`` are the eight stage functions, bound once per measurement.
        """
        parse, preprocess, h2d, compute, d2h, reduce, answer, serialize = fns
        c = self.clock
        ts[0] = c()
        req = parse(request)
        ts[1] = c()
        host = preprocess(req)
        ts[2] = c()
        dev_in = h2d(host)
        ts[3] = c()
        dev_out = compute(dev_in)
        ts[4] = c()
        outputs = d2h(dev_out)
        ts[5] = c()
        reduced = reduce(outputs, req)
        ts[6] = c()
        ans = answer(reduced, req)
        ts[7] = c()
        response: bytes = serialize(ans)
        ts[8] = c()
        return response

    def measure(self, task: Task, runner: Runner, request: bytes, samples: int, warmup: int,
                should_stop: Callable[[Measurement], str | None] | None = None) -> Measurement:
        """Warm up, then take samples; each sample starts from the request bytes."""
        contract = self.contract
        if contract.policy.saturated:
            return self._measure_saturated(task, runner, request, samples, warmup, should_stop)
        m = Measurement()
        events: DeviceEvents | None = None
        if contract.clock == "device":
            if runner.stream is None:
                m.clock_note = "no device stream on this runner's device: the host clock timed the region"
            else:
                events = DeviceEvents(runner.stream, contract.policy.hold_stream,
                                      subtract_floor=contract.policy.event_floor == "subtract")
                m.clock_used = "device"
        if contract.policy.state == "first_call":
            warmup = 0
        pre, post = self._hooks(runner, None)
        ts = [0] * (N_STAGES + 1)
        a, b = contract.first_index, contract.last_index + 1
        enqueue = 0
        for _ in range(warmup):
            self.sample(task, runner, request, ts, pre, post)
            enqueue = max(enqueue, ts[b] - ts[a])
        m.warmup = warmup
        if events is not None:
            events.set_hold(enqueue)
            m.clock_note = events.describe()
            pre, post = self._hooks(runner, events)
        self._sample_loop(m, task, runner, request, samples, (pre, post), events, ts, should_stop)
        return m

    def _sample_loop(self, m: Measurement, task: Task, runner: Runner, request: bytes, samples: int,
                     hooks: tuple[list[Any], list[Any]], events: DeviceEvents | None, ts: list[int],
                     should_stop: Callable[[Measurement], str | None] | None) -> None:
        """The timed calls, paced by the contract's arrival; every wait precedes a call's first stamp."""
        contract = self.contract
        pre, post = hooks
        arrival = contract.policy.arrival
        pacer = Pacer(arrival, self.clock, samples, self.bound) if arrival.paced else None
        queue = m.stages_ns.setdefault(QUEUE, []) if arrival.open_loop or contract.includes_queue else None
        in_region = contract.includes_queue
        stages = [m.stages_ns[s] for s in STAGES]
        plain = not any(pre) and not any(post)
        fns = (task.parse, task.preprocess, runner.h2d, runner.compute, runner.d2h,
               task.reduce, task.answer, task.serialize)
        a, b = contract.first_index, contract.last_index + 1
        first_end = 0
        if pacer is not None:
            pacer.start()
        for i in range(samples):
            due = pacer.before(i, ts[N_STAGES]) if pacer is not None else None
            if plain:
                self.sample_plain(fns, request, ts)
            else:
                self.sample(task, runner, request, ts, pre, post)
            q = ts[0] - due if due is not None else 0
            for k in range(N_STAGES):
                stages[k].append(ts[k + 1] - ts[k])
            if queue is not None:
                queue.append(q)
            region = events.elapsed_ns() if events is not None else ts[b] - ts[a]
            m.samples_ns.append(region + q if in_region else region)
            first_end = first_end or ts[N_STAGES]
            reason = pacer.after(i, q, ts[N_STAGES]) if pacer is not None else None
            if reason is None and should_stop is not None:
                reason = should_stop(m)
            if reason:
                m.stop_reason = reason
                break
        else:
            m.stop_reason = f"fixed sample count {samples} reached"
        if pacer is not None:
            m.load = pacer.record(m.stages_ns, len(m.samples_ns), first_end, ts[N_STAGES])
            if m.overloaded and "overloaded" not in m.stop_reason:
                m.stop_reason += f"; overloaded: {m.load['overload']}"

    def _measure_saturated(self, task: Task, runner: Runner, request: bytes, samples: int, warmup: int,
                           should_stop: Callable[[Measurement], str | None] | None) -> Measurement:
        """Per-call time at saturation: one request's region re-run back to back, in batches.

        The request is parsed, preprocessed and copied once; then ``compute`` runs back to
        back on those inputs. The clock (device events on the runner's stream, else host
        clock reads) is read between batches; the host keeps at most SATURATED_DEPTH
        batches in flight, so the device never drains while the host can keep up.
        ``warmup`` calls and at least SATURATED_SETTLE_S of the same load precede the
        first sample, and the batch is sized from the settled load's per-call time to span
        about SATURATED_BATCH_NS. Each sample is one batch's time divided by its size; the
        compute stage's entry is the host's enqueue time per call in that batch. The rest
        of the call runs once at the end, untimed. A stop (adaptive rule or SIGINT) keeps
        exactly the samples read so far; batches still in flight are drained, not kept.
        """
        m = Measurement()
        marks: EventMarks | HostMarks
        if runner.stream is not None:
            marks = EventMarks(runner.stream)
            m.clock_used = "device"
        else:
            marks = HostMarks(self.clock)
        where = ("device events on the runner's stream" if m.clock_used == "device"
                 else "host clock reads (no device stream on this runner's device)")
        req = task.parse(request)
        dev_in = runner.h2d(task.preprocess(req))
        batches = _Batches(marks, self.clock, runner.compute, dev_in)
        batches.warm_up(warmup)
        m.warmup = warmup
        settle = batches.settle()
        m.batch = batches.n
        m.clock_note = (f"saturated: one request's compute re-run back to back, {where} between "
                        f"batches of {batches.n} calls (sized to about {SATURATED_BATCH_NS / 1e6:g} ms "
                        f"from the per-call time under the settled load; at most {SATURATED_DEPTH} batches "
                        f"in flight), after {warmup} warm-up calls and {settle} batches "
                        f"({SATURATED_SETTLE_S:g} s) of the same load; sample = batch time / {batches.n}")
        batches.sample(m, samples, should_stop)
        outputs = runner.d2h(runner.compute(dev_in))  # the rest of the call, once, untimed
        task.serialize(task.answer(task.reduce(outputs, req), req))
        return m


class _Batches:
    """Saturated sampling's batches: ``n`` back-to-back computes on one input, a mark after each
    batch, at most SATURATED_DEPTH batches in flight."""

    def __init__(self, marks: EventMarks | HostMarks, clock: HostClock, compute: Callable[[Any], Any],
                 dev_in: Any) -> None:
        self.marks, self.clock, self.compute, self.dev_in = marks, clock, compute, dev_in
        self.n = 1
        #: (mark, host enqueue ns per call of the batch that ends at this mark)
        self.pending: deque[tuple[Any, int]] = deque()

    def sized(self, first: Any, last: Any, calls: int) -> int:
        """The batch size that spans about SATURATED_BATCH_NS at the per-call time between two marks."""
        per_call = max(1, self.marks.elapsed_ns(first, last) // max(1, calls))
        return max(1, min(100_000, -(-SATURATED_BATCH_NS // per_call)))

    def warm_up(self, calls: int) -> None:
        for _ in range(calls):
            self.compute(self.dev_in)

    def issue(self) -> None:
        """One batch, its host enqueue time per call, and a mark after it."""
        c, compute, dev_in, n = self.clock, self.compute, self.dev_in, self.n
        t0 = c()
        for _ in range(n):
            compute(dev_in)
        t1 = c()
        self.pending.append((self.marks.mark(), (t1 - t0) // n))

    def drain(self) -> None:
        if self.pending:
            self.marks.wait(self.pending[-1][0])

    def settle(self) -> int:
        """A probe sizes the batch; then the same load runs, untimed, SATURATED_SETTLE_S of wall
        time (whatever clock the harness was given), so clocks and power settle; the batch is
        sized again from the settled per-call time. Returns the settling batches' count."""
        marks, pending = self.marks, self.pending
        a = marks.mark()
        for _ in range(SATURATED_PROBE):
            self.compute(self.dev_in)
        b = marks.mark()
        marks.wait(b)
        self.n = self.sized(a, b, SATURATED_PROBE)
        settle_end = time.perf_counter_ns() + int(SATURATED_SETTLE_S * 1e9)
        pending.append((marks.mark(), 0))
        first_mark, settle = pending[0][0], 0
        while time.perf_counter_ns() < settle_end:
            self.issue()
            settle += 1
            while len(pending) > SATURATED_DEPTH + 1:  # at most DEPTH batches in flight
                pending.popleft()
                marks.wait(pending[0][0])
        self.drain()
        if settle:
            self.n = self.sized(first_mark, pending[-1][0], settle * self.n)
        pending.clear()
        return settle

    def sample(self, m: Measurement, samples: int,
               should_stop: Callable[[Measurement], str | None] | None) -> None:
        """``samples`` batches timed between marks into ``m`` (fewer when ``should_stop`` says)."""
        marks, pending, n = self.marks, self.pending, self.n
        start = self.clock()
        self.issue()  # one batch ahead of the first mark, so the device is busy when it is read
        pending.clear()
        pending.append((marks.mark(), 0))
        m.stop_reason = f"fixed sample count {samples} reached"
        issued = 0
        enqueue = m.stages_ns["compute"]
        try:
            while issued < samples or len(pending) > 1:
                if issued < samples and len(pending) <= SATURATED_DEPTH:
                    self.issue()
                    issued += 1
                    continue
                first, _ = pending.popleft()
                last, enq = pending[0]
                marks.wait(last)
                m.samples_ns.append(marks.elapsed_ns(first, last) // n)
                enqueue.append(enq)
                reason = should_stop(m) if should_stop is not None else None
                if reason:
                    m.stop_reason = reason
                    break
        finally:  # also on SIGINT: nothing in flight is left behind or half-counted
            self.drain()
            m.host_span_ns = self.clock() - start


#: Device event timing resolves about 0.5 µs; differences within this are not violations.
CROSS_CHECK_TOLERANCE_NS = 1_000


def clock_cross_check(m: Measurement, contract: Contract) -> dict[str, Any] | None:
    """Check each device-timed sample against the host span that must contain its device work.

    The start event is recorded after the host stamps the region's opening boundary;
    the end event is complete by the first synchronization after it: the closing
    sync when the contract declares one, else the ``d2h`` stage's own synchronization.
    So the host span from the opening stamp to that boundary can never be shorter
    than the device time; a sample where it is means the accounting is wrong.
    Also counts (for information) samples where the host time of the region's own
    stages is shorter than the device time, which is expected for asynchronous work.
    None when the samples were not device-timed.
    """
    if m.clock_used != "device" or not m.samples_ns:
        return None
    if contract.policy.saturated:
        # one host span holds all the batches: their device time cannot exceed it
        device = sum(m.samples_ns) * m.batch
        excess = device - m.host_span_ns
        return {"checked": True, "samples": len(m.samples_ns), "tolerance_ns": CROSS_CHECK_TOLERANCE_NS,
                "violations": int(excess > CROSS_CHECK_TOLERANCE_NS), "max_excess_ns": int(excess),
                "host_span": "all batches (host clock, from before the batch that leads the first "
                             "device read to the completion of the last batch in flight)"}
    a, b = contract.first_index, contract.last_index + 1
    d2h_end = STAGES.index("d2h") + 1
    out: dict[str, Any] = {"checked": False, "samples": len(m.samples_ns), "violations": 0,
                           "tolerance_ns": CROSS_CHECK_TOLERANCE_NS}
    if contract.policy.sync_at_close != "none":
        s = b
        why = f"closing synchronization ({contract.policy.sync_at_close})"
    elif b < d2h_end:
        s = d2h_end
        why = "the d2h stage's synchronization"
    else:
        out["note"] = ("no synchronization follows the closing event inside the call: "
                       "no host span bounds the device time")
        return out
    stages = [np.asarray(m.stages_ns[st], dtype=np.int64) for st in STAGES]
    dev = np.asarray(m.samples_ns, dtype=np.int64)
    span = np.sum(stages[a:s], axis=0)
    region = np.sum(stages[a:b], axis=0)
    excess = dev - span
    bad = excess > CROSS_CHECK_TOLERANCE_NS
    out.update(checked=True, host_span=f"{STAGES[a]}..{STAGES[s - 1]} (host clock, through {why})",
               violations=int(np.count_nonzero(bad)),
               max_excess_ns=int(excess.max()),
               host_region_shorter=int(np.count_nonzero(region < dev)))
    return out
