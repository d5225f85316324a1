"""The sampling schedule: how the contracts of one run take their samples of one (runner, case).

- One contract, or adaptive sampling: each contract samples in one pass, its stop rule
  seeing every sample.
- Several contracts, fixed counts: host-clock contracts that add no synchronization share
  one set of calls (every boundary of every call is stamped, so each region is read from the
  same stamps); device-clock contracts take their samples in one pass (their stream hold and
  event floor are measured once per pass); the other passes run in rounds of up to
  ROUND_SAMPLES samples in turn (the first round after the full warm-up, later ones after
  one warm-up call), so drift on the machine hits every contract alike.
- Paced arrivals (a gap, or a Poisson schedule): a contract samples in one pass, so its
  schedule runs unbroken; host-clock contracts with the same arrival still share the calls.

A stop callback may raise :class:`~benchbox.harness.loop.StopSampling` (an interrupt): the
schedule keeps every sample taken so far and reports which contracts it cut short. Any other
BaseException (a time limit, ``sys.exit`` in task code) goes on up, carrying the samples taken
before it: :func:`measured_before` gives them.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbox.contracts import QUEUE, STAGES, Contract
from benchbox.errors import error_line
from benchbox.harness.loop import Harness, Measurement, StopSampling
from benchbox.harness.sampling import SamplingPolicy

#: samples per contract per round when several contracts are sampled in one run
ROUND_SAMPLES = 100

StopRule = Callable[[Measurement], str | None]


@dataclass
class Sampled:
    """What one contract's sampling of one (runner, case) produced."""

    measurement: Measurement
    #: the sampling raised: the error's line (the samples taken before it are kept)
    error: str | None = None
    #: the traceback of that error (for the runner report)
    traceback: str | None = None
    #: a stop callback raised StopSampling: the samples so far, cut short
    interrupted: bool = False
    #: contracts whose region was read from the same calls
    shared_with: list[str] = field(default_factory=list)


def sampling_key(contract: Contract) -> tuple[Any, ...]:
    """Contracts with equal keys run identical code per sample and can share samples.

    A host-clock contract adds no action inside the call unless it synchronizes at its
    close; the harness stamps every boundary anyway, so one sample gives every such
    contract's region. Device-clock and synchronizing contracts sample on their own.
    """
    p = contract.policy
    if contract.clock == "host" and p.sync_at_close == "none":
        if p.arrival.paced:
            return ("host", p.state, p.fresh_request, p.cuda_graphs, repr(p.arrival.canonical()))
        return ("host", p.state, p.fresh_request, p.cuda_graphs)
    return ("own", contract.hash)


def one_pass(contract: Contract) -> bool:
    """Sampled in one pass, not in rounds: a device clock's calibration, or a paced schedule."""
    return contract.clock == "device" or contract.policy.arrival.paced


def derive(m: Measurement, contract: Contract, leader: Contract) -> Measurement:
    """Another host-clock contract's samples from the stamps of ``m`` (the leader's samples)."""
    if contract is leader:
        return m
    a, b = contract.first_index, contract.last_index + 1
    cols = [m.stages_ns[s] for s in ((QUEUE,) if contract.includes_queue else ()) + STAGES[a:b]]
    return Measurement(samples_ns=[int(sum(x)) for x in zip(*cols)], stages_ns=m.stages_ns,
                       clock_used="host", warmup=m.warmup, stop_reason=m.stop_reason,
                       round_sizes=list(m.round_sizes), load=m.load,
                       clock_note=f"samples shared with {leader.name}: the same calls, this contract's "
                                  f"region ({contract.first}..{contract.last}) read from their stamps")


def merge(parts: Sequence[Measurement], stop_reason: str | None = None) -> Measurement:
    """One new measurement from parts sampled in turn (the parts are left as they are).

    The samples, stages and rounds follow in order; the clock, warm-up, notes and load are the
    first part's, and so are a saturated pass's batch and host span (a device-clock contract
    samples in one pass, so only a first part carries them). ``stop_reason`` says why the
    sampling stopped (default: the first part's, a one-pass contract's own).
    """
    out = Measurement()
    for part in parts:
        if part.samples_ns:
            out.round_sizes.extend(part.rounds())
        out.samples_ns.extend(part.samples_ns)
        if not out.probe_ns:  # one process's probe, the same on every part
            out.probe_ns = list(part.probe_ns)
        for s, v in part.stages_ns.items():
            out.stages_ns.setdefault(s, []).extend(v)
    if parts:
        first = parts[0]
        out.clock_used, out.warmup, out.clock_note, out.load = (first.clock_used, first.warmup,
                                                                first.clock_note, first.load)
        out.batch, out.host_span_ns, out.stop_reason = first.batch, first.host_span_ns, first.stop_reason
    if stop_reason is not None:
        out.stop_reason = stop_reason
    return out


def sample(harnesses: Sequence[Harness], task: Any, runner: Any, request: bytes, policy: SamplingPolicy,
           stop: Callable[[StopRule | None], StopRule], probe_ns: Sequence[int] = ()) -> list[Sampled]:
    """Sample every contract of ``harnesses`` on one (runner, case); one :class:`Sampled` each.

    ``stop(inner)`` wraps a contract's own stop rule (None for fixed counts) into the
    callback the harness calls after every sample. ``probe_ns`` is the process probe, timed by
    the caller at the process's start (:func:`benchbox.harness.control.probe`), before the code
    under test first ran: every measurement with samples carries it.
    """
    out = _sample(harnesses, task, runner, request, policy, stop)
    for s in out:
        if s.measurement.samples_ns:
            s.measurement.probe_ns = list(probe_ns)
    return out


def _sample(harnesses: Sequence[Harness], task: Any, runner: Any, request: bytes, policy: SamplingPolicy,
            stop: Callable[[StopRule | None], StopRule]) -> list[Sampled]:
    if len(harnesses) == 1 or policy.adaptive:
        out: list[Sampled] = []
        seen: list[Measurement] = []
        try:
            for h in harnesses:
                seen.clear()
                watched = _watched(stop(policy.stopper()), seen)
                out.append(_one_pass(h, task, runner, request, policy, watched))
                if out[-1].interrupted:
                    break  # the other contracts get nothing more for this case
        except BaseException as e:
            if not isinstance(e, StopSampling):
                so_far = [s.measurement for s in out] + seen[:1]
                _carry(e, so_far + [Measurement() for _ in harnesses[len(so_far):]])
            raise
        return out
    return _interleaved(harnesses, task, runner, request, policy, stop(None))


#: the attribute of a BaseException that ended sampling: the measurements taken before it
_MEASURED = "benchbox_measured_before"


def measured_before(e: BaseException) -> list[Measurement]:
    """What sampling had measured, one per contract, when ``e`` (a BaseException other than
    StopSampling: a time limit, ``sys.exit``) ended it; empty when it had taken no sample."""
    measured: list[Measurement] = list(getattr(e, _MEASURED, ()))
    return measured if any(m.samples_ns for m in measured) else []


def _carry(e: BaseException, measured: list[Measurement]) -> None:
    """Attach ``measured`` to ``e``, each cut to its samples (a sample can be cut between its
    stages and its region), with a stop reason that says what ended them."""
    kept = []
    for m in map(_cut, measured):
        if m.samples_ns:
            m.stop_reason = f"sampling ended by {type(e).__name__} after {len(m.samples_ns)} sample(s)"
        kept.append(m)
    try:
        setattr(e, _MEASURED, kept)
    except (AttributeError, TypeError):
        pass  # an exception that takes no attributes: its samples are not kept


def _cut(m: Measurement) -> Measurement:
    """A copy of ``m`` with its stage lists cut to its samples (the sample in progress is dropped)."""
    n = len(m.samples_ns)
    return dataclasses.replace(m, samples_ns=list(m.samples_ns), round_sizes=list(m.round_sizes),
                               stages_ns={s: list(v[:n]) for s, v in m.stages_ns.items()})


def _watched(rule: StopRule, seen: list[Measurement]) -> StopRule:
    """``rule``, noting in ``seen[0]`` the measurement it was last shown (the harness's live one)."""
    def watch(m: Measurement) -> str | None:
        seen[:] = [m]
        return rule(m)
    return watch


def _one_pass(h: Harness, task: Any, runner: Any, request: bytes, policy: SamplingPolicy,
              should_stop: StopRule) -> Sampled:
    try:
        m = h.measure(task, runner, request, samples=policy.limit, warmup=policy.warmup,
                      should_stop=should_stop)
    except StopSampling as s:
        return Sampled(s.measurement, interrupted=True)
    except Exception as e:
        return Sampled(Measurement(), error=error_line(e), traceback=traceback.format_exc(limit=8))
    return Sampled(m)


def _interleaved(harnesses: Sequence[Harness], task: Any, runner: Any, request: bytes,
                 policy: SamplingPolicy, should_stop: StopRule) -> list[Sampled]:
    leaders: dict[tuple[Any, ...], int] = {}
    for i, h in enumerate(harnesses):
        leaders.setdefault(sampling_key(h.contract), i)
    lead_of = [leaders[sampling_key(h.contract)] for h in harnesses]
    order = list(leaders.values())
    parts: dict[int, list[Measurement]] = {i: [] for i in order}
    errors: dict[int, str] = {}
    tracebacks: dict[int, str] = {}
    rounds, left, interrupted = 0, policy.limit, False
    seen: list[Measurement] = []
    watched = _watched(should_stop, seen)
    while left > 0 and len(errors) < len(order) and not interrupted:
        k = min(ROUND_SAMPLES, left)
        for i in order:
            harness = harnesses[i]
            whole = one_pass(harness.contract)
            if i in errors or (whole and rounds > 0):
                continue
            seen.clear()
            try:
                part = harness.measure(task, runner, request, samples=policy.limit if whole else k,
                                       warmup=policy.warmup if rounds == 0 else 1, should_stop=watched)
            except StopSampling as s:
                parts[i].append(s.measurement)
                interrupted = True
                break
            except Exception as e:
                errors[i] = error_line(e)
                tracebacks[i] = traceback.format_exc(limit=8)
                continue
            except BaseException as e:  # a time limit, sys.exit: it carries what the rounds took
                if seen:
                    parts[i].append(_cut(seen[0]))
                _carry(e, [derive(merge(parts[lead_of[j]]), h.contract, harnesses[lead_of[j]].contract)
                           for j, h in enumerate(harnesses)])
                raise
            parts[i].append(part)
        rounds += 1
        left -= k
    merged = {i: merge(parts[i]) for i in order}
    out = []
    for i, h in enumerate(harnesses):
        lead = lead_of[i]
        m = derive(merged[lead], h.contract, harnesses[lead].contract)
        shared = [g.contract.name for j, g in enumerate(harnesses) if lead_of[j] == lead and j != i]
        if not interrupted and lead not in errors:
            reason = _fixed_count_reason(harnesses[lead].contract, len(m.samples_ns), rounds, shared)
            if reason is not None:
                m = dataclasses.replace(m, stop_reason=reason)
        out.append(Sampled(m, error=errors.get(lead), traceback=tracebacks.get(lead), interrupted=interrupted,
                           shared_with=shared))
    return out


def _fixed_count_reason(leader: Contract, n: int, rounds: int, shared: list[str]) -> str | None:
    """Why interleaved sampling stopped at a fixed count (None: a paced pass's own reason stands)."""
    if leader.policy.arrival.paced:
        return None  # one pass; its own stop reason (a fixed count, or an overload) stands
    if leader.clock == "device":
        return (f"fixed sample count {n} reached in one pass (a device clock's calibration — hold, floor, "
                "batch — is measured once per pass, so it is not split)")
    also = f"; the same calls also gave {', '.join(shared)}" if shared else ""
    return (f"fixed sample count {n} reached in {rounds} round(s) of ≤ {ROUND_SAMPLES}, interleaved with "
            f"the other contracts of this run{also}")
