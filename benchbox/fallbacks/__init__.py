"""What a runner chose, independent of what it measured (torch-free).

Runner reports list ``fallbacks``: graph breaks, recompiles, ATen fallbacks, CUDA-graph
skips, autotune picks, TensorRT plugin layers, ... Some fields are declarations (which
kernel was picked, which operator falls back) and some are measurements (the autotuner's
timing of each candidate). Two compiles of identical code measure differently every time,
so comparisons must look only at the declarations:

- ``identity(entry)``: a fallback entry's identity without its measured values;
- ``decisions(entries)``: a fallback list's identities, counted by how many each entry stands for;
- ``compare_picks(a, b)``: two compiles' autotune picks, call site by call site, with the
  device-time difference the changed picks make by the autotuner's own timings;
- ``probable_causes(base, head)``: compact lines naming what changed between two fallback
  lists ("bmm → triton_mm at 3 sites", "new graph break: ...");
- ``draw_causes(base, head)``: how each side's compiled kernels were chosen, from the runner
  reports' ``compile`` facts ("compiled artifact 1a2b… → 3c4d…", "both sides the fastest of 3
  fresh compiles (draws spread ×1.210 base, ×1.050 head)").

Each takes the records of :mod:`benchbox.fallbacks.records` (``FallbackEntry``, ``CompileChoice``),
as the receipts decode them, or the dicts a runner builds (decoded here). Used by the diff engine,
which never imports torch, and by the torch-compile runner.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchbox.fallbacks.records import CompileChoice, DrawSelection, FallbackEntry, entries

#: fields that hold measurements or bookkeeping, never a decision
MEASURED_KEYS = frozenset({"chosen_ms", "chosen_ms_range", "ms", "alternatives", "n_choices", "phase",
                           "source", "detail", "chosen_key", "timings"})
_MEASURED_SUFFIXES = ("_ms", "_ns", "_us", "_s", "_range")
#: the per-process counter inductor appends to kernel names (triton_mm_3, cpp_CppMicroGemmFP32Vec_0)
_COUNTER = re.compile(r"_\d+$")
_LINE_NUMBER = re.compile(r":\d+")
_MAX_REASON = 90


def kernel_label(name: str) -> str:
    """A kernel's name without inductor's per-process counter, description kept.

    ``"triton_mm_3 (BLOCK_M=64, BLOCK_N=32)"`` → ``"triton_mm (BLOCK_M=64, BLOCK_N=32)"``,
    ``"cpp_CppMicroGemmFP32Vec_0"`` → ``"cpp_CppMicroGemmFP32Vec"``, ``"bmm"`` → ``"bmm"``.
    """
    head, sep, desc = str(name).partition(" (")
    return _COUNTER.sub("", head.strip()) + (f" ({desc}" if sep else "")


def kernel_family(name: str) -> str:
    """The kernel's family: its label without the configuration (``triton_mm``, ``bmm``)."""
    return kernel_label(name).partition(" (")[0]


def _config(label: str) -> dict[str, str]:
    desc = label.partition(" (")[2].removesuffix(")")
    out = {}
    for part in desc.split(", "):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _where(locations: Any) -> list[str]:
    """Graph-break locations without line numbers or directories (they move with unrelated edits)."""
    out = set()
    for loc in locations or []:
        text = _LINE_NUMBER.sub("", str(loc))
        out.add(re.sub(r"(?:[^\s'\"]*[/\\])+([^/\\\s'\"]+)", r"\1", text))
    return sorted(out)


def identity(entry: FallbackEntry | Mapping[str, Any]) -> str:
    """A fallback entry's identity: what was chosen or declared, never what was measured.

    Kernel timings, alternatives, the phase that observed it, free text and sources are
    left out; kernel names lose inductor's per-process counter; graph-break locations lose
    directories and line numbers. Equal identities mean the same decision.
    """
    kept: dict[str, Any] = {}
    for k, v in (entry.to_json() if isinstance(entry, FallbackEntry) else entry).items():
        if k in MEASURED_KEYS or k.endswith(_MEASURED_SUFFIXES):
            continue
        if k == "chosen":
            v = kernel_label(str(v))
        elif k == "where":
            v = _where(v)
        kept[k] = v
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)


def decisions(items: Iterable[FallbackEntry | Mapping[str, Any]]) -> Counter[str]:
    """What a fallback list decided, as identities (without ``count``) each counted as often as
    its entries stand for: one entry for 146 call sites decides what 146 entries of one site do,
    so receipts that group repeated picks and receipts that list each site compare equal."""
    out: Counter[str] = Counter()
    for e in entries(items):
        out[identity({k: v for k, v in e.to_json().items() if k != "count"})] += _times(e)
    return out


# -- call-site comparison of two compiles' picks ----------------------------------------

def _site_group(site: FallbackEntry) -> tuple[str, str]:
    return str(site.op), json.dumps(site.input_shapes, separators=(",", ":"))


def _timing_of(site: FallbackEntry, label: str) -> float | None:
    """The autotuner's timing of the choice ``label`` in the session that tuned ``site``."""
    if kernel_label(str(site.chosen) if site.given("chosen") else "") == label:
        return None if site.chosen_ms is None else float(site.chosen_ms)
    for alt in site.alternatives or ():
        if kernel_label(str(alt.kernel) if alt.given("kernel") else "") == label and alt.ms is not None:
            return float(alt.ms)
    return None


def _shapes_text(shapes: Any) -> str:
    try:
        return ", ".join("×".join(str(d) for d in s) for s in shapes)
    except TypeError:
        return str(shapes)


@dataclass(frozen=True)
class PickChange:
    """Call sites of one operator whose pick moved from one kernel to another."""

    op: str
    before: str
    after: str
    sites: int
    input_shapes: tuple[str, ...]
    #: (after − before) summed over these sites, by each compile's own autotune timings, in ms;
    #: None where a compile has no timing for the other compile's pick
    delta_ms_by_first: float | None
    delta_ms_by_second: float | None

    def line(self) -> str:
        return change_line(self.op, self.before, self.after, self.sites)


@dataclass(frozen=True)
class PickComparison:
    """Two compiles' autotune picks compared call site by call site."""

    sites: int
    changed_sites: int
    unmatched_sites: int
    changes: tuple[PickChange, ...]
    #: the tuned operators' total time under the first compile's picks, by its own timings (ms)
    tuned_ms_first: float
    #: estimated change in device time per call from the changed picks (ms; mean of both
    #: compiles' estimates, else the one available); None when neither has the timings
    delta_ms: float | None
    #: ratio second/first of the autotuner's timing of the same pick at unchanged sites
    timing_ratio_unchanged: dict[str, float] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return self.changed_sites == 0 and self.unmatched_sites == 0

    def lines(self, limit: int = 6) -> list[str]:
        out = [c.line() for c in self.changes]
        if self.unmatched_sites:
            out.append(f"{self.unmatched_sites} call site(s) tuned in only one compile")
        return _bounded(out, limit)

    def to_dict(self, limit: int = 6) -> dict[str, Any]:
        return {
            "sites": self.sites, "changed_sites": self.changed_sites,
            "unmatched_sites": self.unmatched_sites, "same": self.same,
            "changes": [{"op": c.op, "before": c.before, "after": c.after, "sites": c.sites,
                         "input_shapes": list(c.input_shapes),
                         "delta_ms_by_first": c.delta_ms_by_first,
                         "delta_ms_by_second": c.delta_ms_by_second} for c in self.changes],
            "lines": self.lines(limit),
            "tuned_ms_first": self.tuned_ms_first,
            "estimated_delta_ms": self.delta_ms,
            "estimated_delta_pct": (100.0 * self.delta_ms / self.tuned_ms_first
                                    if self.delta_ms is not None and self.tuned_ms_first > 0 else None),
            "timing_ratio_unchanged": dict(self.timing_ratio_unchanged),
            "estimate_source": "the autotuner's own compile-time benchmark of each candidate kernel "
                               "(in isolation, on generated inputs); an estimate, not a measurement "
                               "under the contract"}


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def compare_picks(first: Iterable[FallbackEntry | Mapping[str, Any]],
                  second: Iterable[FallbackEntry | Mapping[str, Any]]) -> PickComparison:
    """Compare two compiles' per-call-site picks (as the torch-compile runner records them).

    Sites are matched by operator and input shapes, in compile order within each group;
    a site present in one compile only is counted as unmatched. For each changed site
    the device-time difference is (time of the second's pick − time of the first's pick),
    estimated once with each compile's own autotune timings.
    """
    groups: dict[tuple[str, str], tuple[list[FallbackEntry], list[FallbackEntry]]] = {}
    firsts = entries(first)
    for which, sites in ((0, firsts), (1, entries(second))):
        for s in sites:
            groups.setdefault(_site_group(s), ([], []))[which].append(s)
    changed: dict[tuple[str, str, str], list[tuple[str, float | None, float | None]]] = {}
    ratios: list[float] = []
    n_sites = n_changed = unmatched = 0
    for (op, _shapes), (a_sites, b_sites) in groups.items():
        unmatched += abs(len(a_sites) - len(b_sites))
        for a, b in zip(a_sites, b_sites):
            n_sites += 1
            la, lb = kernel_label(str(a.chosen)), kernel_label(str(b.chosen))
            if la == lb:
                ta, tb = a.chosen_ms, b.chosen_ms
                if ta is not None and tb is not None and ta > 0:
                    ratios.append(float(tb) / float(ta))
                continue
            n_changed += 1
            d1 = _diff(_timing_of(a, lb), _timing_of(a, la))
            d2 = _diff(_timing_of(b, lb), _timing_of(b, la))
            changed.setdefault((op, la, lb), []).append((_shapes_text(a.input_shapes), d1, d2))
    changes = tuple(sorted(
        (PickChange(op, la, lb, len(v), tuple(sorted({s for s, _, _ in v})),
                    _sum_or_none([d for _, d, _ in v]), _sum_or_none([d for _, _, d in v]))
         for (op, la, lb), v in changed.items()),
        key=lambda c: (-c.sites, c.op, c.before, c.after)))
    d_first = _sum_or_none([c.delta_ms_by_first for c in changes])
    d_second = _sum_or_none([c.delta_ms_by_second for c in changes])
    known = [d for d in (d_first, d_second) if d is not None]
    tuned = float(sum(float(s.chosen_ms) for s in firsts if s.chosen_ms is not None))
    ratios.sort()
    noise = ({"n": len(ratios), "min": ratios[0], "median": ratios[len(ratios) // 2], "max": ratios[-1]}
             if ratios else {})
    return PickComparison(sites=n_sites, changed_sites=n_changed, unmatched_sites=unmatched,
                          changes=changes, tuned_ms_first=tuned,
                          delta_ms=(sum(known) / len(known)) if known else (0.0 if not changes else None),
                          timing_ratio_unchanged=noise)


def _diff(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def compare_kernel_configs(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Triton's per-kernel launch configurations (``.best_config``) of two compiles.

    Keys are the kernels' cache paths (derived from their source), so the same kernel has
    the same key in both; values are the chosen configurations without their timings.
    """
    common = sorted(set(first) & set(second))
    differ = [k for k in common if _canon(first[k]) != _canon(second[k])]
    return {"kernels": len(common), "changed": len(differ), "changed_kernels": differ[:10],
            "only_in_one": len(set(first) ^ set(second))}


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


# -- probable causes between two fallback lists --------------------------------------------

def change_line(op: str, before: str, after: str, sites: int) -> str:
    """``"bmm → triton_mm at 3 sites"``; the same family with another configuration names the keys."""
    fa, fb = kernel_family(before), kernel_family(after)
    where = f"at {sites} site{'' if sites == 1 else 's'}"
    if fa == fb:
        ca, cb = _config(before), _config(after)
        moved = [f"{k}={ca.get(k, '?')}→{cb.get(k, '?')}" for k in sorted(set(ca) | set(cb))
                 if ca.get(k) != cb.get(k)]
        what = ", ".join(moved[:3]) + (", …" if len(moved) > 3 else "") if moved else "another configuration"
        return f"{op}: {fa} {what} {where}"
    return f"{fa} → {fb} {where}" if fa == op else f"{op}: {fa} → {fb} {where}"


def _bounded(lines: list[str], limit: int) -> list[str]:
    if limit < 1 or len(lines) <= limit:
        return lines
    return lines[:limit - 1] + [f"and {len(lines) - limit + 1} more"]


def _short(text: Any) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= _MAX_REASON else t[:_MAX_REASON - 1] + "…"


def _op_name(op: Any) -> str:
    return str(op).removesuffix(".default")


def _autotune_lines(base: list[FallbackEntry], head: list[FallbackEntry]) -> list[tuple[int, str]]:
    def sites(picks: list[FallbackEntry]) -> dict[tuple[str, str], Counter[str]]:
        out: dict[tuple[str, str], Counter[str]] = {}
        for e in picks:
            out.setdefault(_site_group(e), Counter())[kernel_label(str(e.chosen))] += e.count or 1
        return out

    b, h = sites(base), sites(head)
    moved: Counter[tuple[str, str, str]] = Counter()
    appeared: Counter[str] = Counter()
    vanished: Counter[str] = Counter()
    for group in list(b) + [g for g in h if g not in b]:
        cb, ch = b.get(group, Counter()), h.get(group, Counter())
        gone = sorted((cb - ch).elements())
        new = sorted((ch - cb).elements())
        for before, after in zip(gone, new):
            moved[(group[0], before, after)] += 1
        vanished[group[0]] += max(len(gone) - len(new), 0)
        appeared[group[0]] += max(len(new) - len(gone), 0)
    out = [(n, change_line(op, before, after, n)) for (op, before, after), n in moved.items()]
    out += [(n, f"new autotuned {op} at {n} site{'' if n == 1 else 's'}") for op, n in appeared.items() if n]
    out += [(n, f"autotuned {op} gone at {n} site{'' if n == 1 else 's'}") for op, n in vanished.items() if n]
    return sorted(out, key=lambda x: (-x[0], x[1]))


def _times(entry: FallbackEntry) -> int:
    """How many an entry stands for: its count (a null one: none), else one."""
    return entry.count or 0 if entry.given("count") else 1


def _counted(picked: list[FallbackEntry], label: Any, by_count: bool) -> Counter[str]:
    c: Counter[str] = Counter()
    for e in picked:
        c[label(e)] += _times(e) if by_count else 1
    return c


def _delta_lines(kind_word: str, base: Counter[str], head: Counter[str]) -> list[str]:
    out = []
    for name in list(head) + [n for n in base if n not in head]:
        nb, nh = base.get(name, 0), head.get(name, 0)
        if nb == nh:
            continue
        if not nb:
            out.append(f"new {kind_word}: {name}")
        elif not nh:
            out.append(f"{kind_word} gone: {name}")
        else:
            out.append(f"{kind_word} {name}: {nb} → {nh}")
    return out


_KIND_WORDS = {"graph_break": "graph break", "recompile": "recompile",
               "cudagraph_skip": "CUDA-graph skip", "aten_fallback": "ATen fallback",
               "plugin_layer": "plugin layer", "parser_error": "parser error"}
_ORDER = ("graph_break", "aten_fallback", "recompile", "cudagraph_skip")


def _label(entry: FallbackEntry) -> str:
    if entry.layer_type:  # TensorRT layers, grouped by type and precision
        level = entry.level if entry.given("level") else "?"
        return _short(f"{entry.layer_type} {entry.precision} ({level})")
    if entry.op:
        return _short(_op_name(entry.op))
    for text in (entry.name, entry.reason, entry.node_name):
        if text:
            return _short(text)
    return _short(identity(entry))


def _reason(entry: FallbackEntry) -> str:
    return _short(entry.reason)


def _aten_name(entry: FallbackEntry) -> str:
    return _op_name(entry.op) + (" (forced)" if entry.forced else "")


def _aten_lines(b: list[FallbackEntry], h: list[FallbackEntry]) -> list[str]:
    """ATen fallbacks present in the generated code on one side only, and those called a different
    number of times."""
    present_b, present_h = [e for e in b if e.present], [e for e in h if e.present]
    lines = _delta_lines("ATen fallback", _counted(present_b, _aten_name, False),
                         _counted(present_h, _aten_name, False))
    calls_b = {_aten_name(e): e.calls or 0 for e in present_b}
    for e in present_h:
        n = _aten_name(e)
        if n in calls_b and calls_b[n] != (e.calls or 0):
            lines.append(f"ATen fallback {n}: {calls_b[n]} → {e.calls or 0} calls")
    return lines


def probable_causes(base: Iterable[FallbackEntry | Mapping[str, Any]],
                    head: Iterable[FallbackEntry | Mapping[str, Any]], limit: int = 6) -> list[str]:
    """Compact lines naming what the compiler decided differently in ``head`` than in ``base``.

    Autotune picks per operator and call-site count first (most sites first), then graph
    breaks, ATen fallbacks, recompiles, CUDA-graph skips and any other kind; at most
    ``limit`` lines, the last saying "and N more" when some were left out. Measured values
    never produce a line: two fallback lists with the same identities give none.
    """
    base_entries, head_entries = entries(base), entries(head)

    def of(picked: tuple[FallbackEntry, ...], kind: str) -> list[FallbackEntry]:
        return [e for e in picked if e.kind == kind]

    lines = [text for _, text in _autotune_lines(of(base_entries, "autotune_choice"),
                                                 of(head_entries, "autotune_choice"))]
    for kind in _ORDER:
        b, h = of(base_entries, kind), of(head_entries, kind)
        if kind == "aten_fallback":
            lines += _aten_lines(b, h)
        else:
            lines += _delta_lines(_KIND_WORDS[kind], _counted(b, _reason, kind == "graph_break"),
                                  _counted(h, _reason, kind == "graph_break"))
    known = {"autotune_choice", *_ORDER}
    other_kinds = sorted({str(e.kind) for e in (*base_entries, *head_entries) if e.kind not in known})
    for kind in other_kinds:
        word = _KIND_WORDS.get(kind, kind.replace("_", " "))
        lines += _delta_lines(word, _counted(of(base_entries, kind), _label, True),
                              _counted(of(head_entries, kind), _label, True))
    return _bounded(lines, limit)


# -- how each side's compiled kernels were chosen (draws, artifacts) ---------------------------

def _compiled_identity(facts: CompileChoice | None) -> str | None:
    """What names the compiled kernels a row ran, when anything does: the artifact's sha256 (loaded
    or saved), else the pinned compile (key, directory, generation); None for a compile of its own."""
    if facts is None:
        return None
    if facts.artifact is not None and facts.artifact.sha256 is not None:
        return f"artifact {facts.artifact.sha256}"
    pin = facts.pin
    if pin is not None and pin.enabled and pin.status in ("fresh", "reused"):
        return f"pin {pin.key} {pin.dir} {pin.picks_generation}"
    return None


def _fresh_pin(facts: CompileChoice | None) -> bool:
    return facts is not None and facts.pin is not None and facts.pin.status == "fresh"


def _selection(facts: CompileChoice | None) -> DrawSelection | None:
    sel = facts.selection if facts is not None else None
    return sel if sel is not None and sel.draws is not None and sel.draws > 1 else None


def _spread_text(sel: DrawSelection) -> str:
    return f"×{sel.spread:.3f}" if sel.spread is not None else "×?"


def draw_causes(base: CompileChoice | Mapping[str, Any] | None,
                head: CompileChoice | Mapping[str, Any] | None) -> list[str]:
    """Lines on how each side's compiled kernels were chosen, from the two rows' ``compile`` facts
    (the torch-compile runner report's): which artifact, and whether each is the fastest of N fresh
    compiles (``draws``). None when both ran the same artifact or the same pinned compile (then the
    rows compare as any two runs of the same kernels), or when neither side says anything of it."""
    cb, ch = CompileChoice.read(base), CompileChoice.read(head)
    ib, ih = _compiled_identity(cb), _compiled_identity(ch)
    # one pinned compile on both sides, unless each side pinned its own (two stores, one path)
    if ib is not None and ib == ih and not (ib.startswith("pin ") and _fresh_pin(cb) and _fresh_pin(ch)):
        return []
    out = []
    ab = ib[len("artifact "):] if ib and ib.startswith("artifact ") else None
    ah = ih[len("artifact "):] if ih and ih.startswith("artifact ") else None
    if ab and ah:
        out.append(f"compiled artifact {ab[:12]} → {ah[:12]}")
    elif ab or ah:
        out.append(f"compiled artifact {(ab or ah or '')[:12]} on the {'base' if ab else 'head'} side only")
    sb, sh = _selection(cb), _selection(ch)
    if sb is not None and sh is not None:
        n = sb.draws if sb.draws == sh.draws else f"{sb.draws} | {sh.draws}"
        out.append(f"both sides the fastest of {n} fresh compiles "
                   f"(draws spread {_spread_text(sb)} base, {_spread_text(sh)} head)")
    else:  # one side at most
        out += [f"only the {side} side is the fastest of {one.draws} fresh compiles "
                f"(draws spread {_spread_text(one)})" for side, one in (("base", sb), ("head", sh))
                if one is not None]
    return out
