"""kill -9 during `benchbox store add`, at random moments: is the store usable every time?

Run: python -m benchmarks.store_kill [--kills 20] [--seed 1] [--out benchmarks/results-store-kill.json]

Trials run until ``--kills`` of them killed a `store add` before it exited (a delay can
outlast the add; such a trial is recorded, and counted apart).

Receipts come from the test fixture (tests/history_fixture.py): 24 commits, 2 runners × 2 cases,
2,000 samples a run. Each trial starts `python -m benchbox store add` of all of them and
sends SIGKILL after a random delay, drawn uniformly over the time one whole `store add` takes
on this machine (measured first, three times): so kills land in the interpreter's start, the
loading, the receipt writes, the table writes and the store's creation alike. Even trials
add into a new store (a kill can land while it is being created), odd ones into a store
that already holds the first half of the receipts.

After each kill the trial records what the kill left (temporary files, hidden build
folders, whether the store exists) and then checks that the store is usable: `store add` of
the same receipts exits 0, every receipt is then stored once, the index and rows tables hold
exactly the stored receipts, every stored receipt re-hashes to its identity (Store.verify),
no temporary file or build folder is left, and `store list` exits 0. A trial that fails any
of these is counted as broken, with the reason.

The counts do not depend on the machine; where each kill lands does (it is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.store import Store
from tests.history_fixture import HistorySpec, write_history

REPO = Path(__file__).resolve().parents[1]
SPEC = HistorySpec(commits=24, samples=2000)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _add(store: Path, paths: list[Path]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchbox", "store", "add", "--store", str(store),
                             *map(str, paths)], env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _leftovers(store: Path) -> dict[str, Any]:
    tmp = [p.name for d in (store, store / "receipts") if d.is_dir() for p in d.iterdir()
           if p.name.startswith(".") and p.name.endswith(".tmp")]
    builds = [p.name for p in store.parent.iterdir() if p.name.startswith(f".{store.name}.new-")]
    stored = len(list((store / "receipts").glob("*.json"))) if store.is_dir() else 0
    return {"store_exists": (store / "store.json").exists(), "tmp_files": len(tmp),
            "build_folders": len(builds), "receipts_stored": stored}


def _usable(store: Path, paths: list[Path]) -> str | None:
    """None when the store is usable after the kill, else what is wrong."""
    p = _add(store, paths)
    _, err = p.communicate(timeout=600)
    if p.returncode != 0:
        why = err.decode(errors="replace").strip()[-300:]
        return f"store add after the kill exited {p.returncode}: {why}"
    s = Store(store)
    ids = s.identities()
    if len(ids) != len(paths):
        return f"{len(ids)} receipts stored, {len(paths)} expected"
    if set(s.index()["identity"].to_list()) != ids or set(s.rows()["identity"].to_list()) != ids:
        return "the tables do not hold exactly the stored receipts"
    s.verify()
    left = _leftovers(store)
    if left["tmp_files"] or left["build_folders"]:
        return f"leftovers after the next add: {left}"
    listed = subprocess.run([sys.executable, "-m", "benchbox", "store", "list", "--store", str(store)],
                            env=_env(), capture_output=True, text=True, timeout=600)
    if listed.returncode != 0:
        return f"store list exited {listed.returncode}"
    return None


def _duration(work: Path, paths: list[Path]) -> float:
    times = []
    for i in range(3):
        t0 = time.perf_counter()
        p = _add(work / f"timing-{i}", paths)
        p.communicate(timeout=600)
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def trial(i: int, rng: random.Random, work: Path, paths: list[Path], whole: float) -> dict[str, Any]:
    store = work / f"store-{i}"
    if i % 2:  # an existing store holding the first half
        Store(store).add(paths[: len(paths) // 2])
    delay = rng.uniform(0.0, whole)
    p = _add(store, paths)
    time.sleep(delay)
    killed = p.poll() is None
    if killed:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    out: dict[str, Any] = {"trial": i, "into": "existing store" if i % 2 else "new store",
                           "delay_s": round(delay, 3), "killed_before_exit": killed,
                           "after_kill": _leftovers(store)}
    try:
        out["broken"] = _usable(store, paths)
    except Exception as e:  # anything the checks raise is a broken store
        out["broken"] = f"{type(e).__name__}: {e}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="benchbox-store-kill-") as tmp:
        work = Path(tmp)
        paths = write_history(work / "in", SPEC)
        whole = _duration(work, paths)
        trials: list[dict[str, Any]] = []
        while sum(t["killed_before_exit"] for t in trials) < args.kills and len(trials) < 3 * args.kills:
            trials.append(trial(len(trials), rng, work, paths, whole))
    broken = [t for t in trials if t["broken"]]
    result = {
        "what": "kill -9 during `benchbox store add` at a random moment, then the store's usability",
        "command": f"python -m benchmarks.store_kill --kills {args.kills} --seed {args.seed}",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "loadavg": list(os.getloadavg())},
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "receipts": len(paths), "store_add_s": round(whole, 2),
        "trials_run": len(trials),
        "kills": sum(t["killed_before_exit"] for t in trials),
        "kills_leaving_tmp_files": sum(t["after_kill"]["tmp_files"] > 0 for t in trials),
        "kills_leaving_a_build_folder": sum(t["after_kill"]["build_folders"] > 0 for t in trials),
        "kills_before_a_new_store_existed": sum(not t["after_kill"]["store_exists"] for t in trials),
        "broken": len(broken),
        "trials": trials,
    }
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "trials"}, indent=1))
    if broken:
        sys.exit(1)


if __name__ == "__main__":
    main()
