"""Shared fixtures: real receipts produced by real (small) runs."""

from __future__ import annotations

import atexit
import compileall
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

# benchbox's caches (pinned torch.compile decisions, TensorRT engines) of a test session live in
# a directory of their own, never in the developer's ~/.cache or $BENCHBOX_CACHE
os.environ["BENCHBOX_CACHE"] = tempfile.mkdtemp(prefix="benchbox-test-cache-")

# one intra-op thread: on a loaded 2-core machine, OpenMP's spinning threads can slow a
# tiny model a hundredfold; results stay correct either way, tests just run steadier
os.environ.setdefault("OMP_NUM_THREADS", "1")

# a run watches the machine for 0.1 s, not 0.5 s, before it starts: some 230 runs in a session,
# 90 s saved; a test of the load reading sets its own window
os.environ.setdefault("BENCHBOX_LOAD_WINDOW_S", "0.1")

import pytest

from benchbox.run import RunConfig, run

# bytecode for the package and the test tasks, written once: with PYTHONDONTWRITEBYTECODE set in
# the environment, every `python -m benchbox` a test starts compiled benchbox from source again,
# 0.37-0.52 s of its imports against 0.19-0.22 s from bytecode (timed on the 2-core machine)
_ROOT = Path(__file__).resolve().parent.parent
compileall.compile_dir(_ROOT / "benchbox", quiet=1)
compileall.compile_dir(_ROOT / "tests", maxlevels=0, quiet=1)

atexit.register(shutil.rmtree, os.environ["BENCHBOX_CACHE"], True)


@pytest.fixture(autouse=True)
def _own_benchbox_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test compiles as if for the first time: no test reuses another's pinned compile."""
    monkeypatch.setenv("BENCHBOX_CACHE", str(tmp_path_factory.mktemp("benchbox-cache")))


@pytest.fixture(autouse=True)
def _own_signal_handlers() -> object:
    """Each test starts with the handlers the session had: the command line ignores SIGINT and
    SIGTERM once a run is interrupted (its process is exiting), and a CliRunner test that ends
    that way runs in pytest's own process, which goes on."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def make_receipt(tmp: Path, name: str = "r.json", **kw: object) -> dict:
    """Run benchbox for real (eager only by default: seconds on a CPU) and load the receipt."""
    defaults: dict = {"runners": ("torch-eager",), "samples": 40, "warmup": 2, "out": tmp / name}
    defaults.update(kw)
    outcome = run(RunConfig(**defaults))
    return json.loads(Path(outcome.path).read_text())


@pytest.fixture(scope="session")
def eager_receipt_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A receipt from a real eager run of the built-in task (all cases)."""
    tmp = tmp_path_factory.mktemp("eager")
    make_receipt(tmp)
    return tmp / "r.json"
