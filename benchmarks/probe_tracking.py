"""Does the process probe track the rows, and does the code under test move it?

For each pair of joined receipts ``<prefix>base.json`` / ``<prefix>head.json`` in a folder (the
CI recipe's, or ``benchmarks.ci_false_alarms --keep``'s), per row: the correlation of the row's
log p50 with the process probe's log within each side, the sd of log p50 between processes
(pooled within sides) before and after one common slope on the probe, and the probe's ratio
head/base with Welch's p on its logs. A probe that tracks the machine correlates with the rows
and shrinks their spread; a probe the code under test moves differs between the sides.

    python -m benchmarks.probe_tracking FOLDER [--verdicts diff-acc.json diff.json] [--out results.json]

``--verdicts``: diff JSON files (``benchbox diff --format json``) to look for beside each pair,
the first found giving the row's verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
from scipy import stats

from benchbox.receipts import load_receipt
from benchbox.receipts.replication import process_samples


def _side(path: Path) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(runner, case) → (log p50 per process, log probe per process) of one joined receipt."""
    r = load_receipt(path)
    out = {}
    for row in r.results:
        if row.process_probe_ns is None or not row.samples_ns:
            continue
        p50 = [float(np.median(s)) for s in process_samples(r, row)]
        if len(p50) == len(row.process_probe_ns):
            out[(row.runner, row.case)] = (np.log(p50), np.log(np.asarray(row.process_probe_ns, float)))
    return out


def _pooled_sd(groups: list[np.ndarray]) -> float:
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    df = sum(len(g) - 1 for g in groups)
    return math.sqrt(ss / df) if df > 0 else float("nan")


def row_figures(base: tuple[np.ndarray, np.ndarray], head: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """The figures of one row: tracking, spread before/after the common slope, probe ratio."""
    (yb, cb), (yh, ch) = base, head
    yc = [yb - yb.mean(), yh - yh.mean()]
    cc = [cb - cb.mean(), ch - ch.mean()]
    sxx = sum(float((c ** 2).sum()) for c in cc)
    slope = sum(float((c * y).sum()) for c, y in zip(cc, yc)) / sxx if sxx > 0 else 0.0
    resid = [y - slope * c for y, c in zip(yc, cc)]
    df = len(yb) + len(yh) - 3
    adj = math.sqrt(sum(float((e ** 2).sum()) for e in resid) / df) if df > 0 else float("nan")

    def corr(y: np.ndarray, c: np.ndarray) -> float:
        return float(np.corrcoef(y, c)[0, 1]) if len(y) > 2 and y.std() > 0 and c.std() > 0 else float("nan")

    welch = stats.ttest_ind(ch, cb, equal_var=False).pvalue if len(cb) > 1 and len(ch) > 1 else float("nan")
    return {"k_base": len(yb), "k_head": len(yh), "corr_base": corr(yb, cb), "corr_head": corr(yh, ch),
            "slope": slope, "sd_raw": _pooled_sd([yb, yh]), "sd_adjusted": adj,
            "probe_sd": _pooled_sd([cb, ch]), "probe_ratio": math.exp(ch.mean() - cb.mean()),
            "probe_welch_p": float(welch), "row_ratio": math.exp(yh.mean() - yb.mean())}


#: a joined receipt of one side: ``<prefix>base<suffix>.json`` (``base.json``, ``base-recheck.json``,
#: ``rest-0-base.json``, ``rest+slow-0-recheck-base.json``), never one process's (``base-1.json``)
PAIR = re.compile(r"^(?P<prefix>.*)base(?P<suffix>-recheck)?\.json$")


def _verdicts(where: Path, names: list[str], suffix: str) -> dict[str, str]:
    """The verdicts of the first diff file found of ``names`` (``diff.json`` → ``diff<suffix>.json``)."""
    for name in names:
        path = where / (name[: -len(".json")] + suffix + ".json")
        if path.exists():
            rows = json.loads(path.read_text())["rows"]
            return {f"{r['runner']}/{r['case']}": r["verdict"] for r in rows}
    return {}


def folder_figures(folder: Path, verdict_files: list[str] | None = None) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for b in sorted(folder.rglob("*.json")):
        m = PAIR.match(b.name)
        h = b.with_name(f"{m['prefix']}head{m['suffix'] or ''}.json") if m else None
        if h is None or not h.exists():
            continue
        sb, sh = _side(b), _side(h)
        # verdicts only where a folder holds one recipe's pairs (bench.sh's diff.json, diff-recheck.json)
        verdicts = _verdicts(b.parent, verdict_files or [], m["suffix"] or "") if not m["prefix"] else {}
        for key in sorted(set(sb) & set(sh)):
            row = "/".join(key)
            out.append({"pair": str(b.relative_to(folder)), "row": row, **row_figures(sb[key], sh[key]),
                        **({"verdict": verdicts[row]} if row in verdicts else {})})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--verdicts", nargs="*", default=[])
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    rows = folder_figures(a.folder, a.verdicts)
    for r in rows:
        print(f"{r['pair']:42} {r['row']:22} row ×{r['row_ratio']:.2f} probe ×{r['probe_ratio']:.3f} "
              f"(p {r['probe_welch_p']:.3f}) corr {r['corr_base']:.2f}/{r['corr_head']:.2f} "
              f"sd {r['sd_raw']:.3f} -> {r['sd_adjusted']:.3f} probe sd {r['probe_sd']:.3f} "
              f"{r.get('verdict', '')}")
    if rows:
        med = {k: float(np.nanmedian([float(r[k]) for r in rows]))  # type: ignore[arg-type]
               for k in ("corr_base", "corr_head", "sd_raw", "sd_adjusted", "probe_ratio")}
        print("median " + " ".join(f"{k} {v:.3f}" for k, v in med.items()))
    if a.out:
        a.out.write_text(json.dumps({"folder": str(a.folder), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
