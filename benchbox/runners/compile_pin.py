"""Pinned torch.compile decisions: a benchbox-managed inductor cache per key.

The torch-compile runner keeps inductor's own caches (FX graph cache, autotune local
cache, Triton cache) in one directory per *key*, so a later run of the same model, on
the same kind of device, with the same software and compile options, loads the earlier
compile instead of autotuning again:

```
$BENCHBOX_CACHE/inductor/          (default ~/.cache/benchbox/inductor; option cache_dir)
  <key>/
    lock          held (flock) by the run that compiles under this key
    picks.json    the pinned picks and the picks of recent fresh compiles under this key
    inductor/     TORCHINDUCTOR_CACHE_DIR of pinned compiles (triton/ inside it)
```

The key is the sha256 of ``key_parts``: the model (weights and structure), input names,
shapes and dtypes, the device model, the torch/triton/python/CUDA versions and the compile
options. Two runs that use one key at once take turns through the lock; ``picks.json`` is
replaced atomically, so a reader never sees half of it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchbox.environment import cpu_model
from benchbox.fileio import NO_PARENT, folder_problem, write_atomic

#: version of the key's layout; a change makes every key new
KEY_FORMAT = 1
RECORD_FORMAT = 1
#: fresh compiles kept in picks.json per key (the pinned one is kept apart)
HISTORY = 20


def default_cache_root() -> Path:
    """``$BENCHBOX_CACHE/inductor``, else ``~/.cache/benchbox/inductor``."""
    root = os.environ.get("BENCHBOX_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "benchbox") / "inductor"


def unusable_reason(path: Path) -> str | None:
    """None when ``path`` is, or can be made, a writable directory; else why not (no side effect)."""
    why = folder_problem(path)
    return f"{path}: {why}" if why == NO_PARENT else why


def model_fingerprint(model: Any) -> dict[str, str]:
    """sha256 of the weights (names, dtypes, shapes, bytes) and of the structure.

    The structure is the module tree as printed plus the source of every module class in
    it (so an edit of a ``forward`` makes a new key); a class without source is named only.
    """
    import torch

    w = hashlib.sha256()
    tensors = [*model.named_parameters(), *model.named_buffers()]
    for name, t in sorted(tensors, key=lambda kv: kv[0]):
        t = t.detach()
        w.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        flat = t.to("cpu").contiguous().reshape(-1)
        if flat.numel():
            w.update(flat.view(torch.uint8).numpy().tobytes())
    s = hashlib.sha256(repr(model).encode())
    for cls in sorted({type(m) for m in model.modules()}, key=lambda c: f"{c.__module__}.{c.__qualname__}"):
        s.update(f"{cls.__module__}.{cls.__qualname__}".encode())
        if cls.__module__.startswith("torch."):
            continue  # torch's own modules: the torch version is part of the key
        try:
            s.update(inspect.getsource(cls).encode())
        except (OSError, TypeError):
            s.update(b"<no source>")
    return {"weights_sha256": w.hexdigest(), "structure_sha256": s.hexdigest()}


def device_identity(device: str) -> dict[str, Any]:
    """The device model a compile's decisions belong to (GPU name, else CPU model and ISA)."""
    import torch

    if device.startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(device)
        return {"type": "cuda", "name": torch.cuda.get_device_name(device), "capability": f"{major}.{minor}"}
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    # the CPU C++ GEMM templates are blocked for the thread count at compile time
    return {"type": "cpu", "model": cpu_model(), "isa": str(pick_vec_isa()) or "none",
            "threads": torch.get_num_threads()}


def software_versions(device: str) -> dict[str, Any]:
    import torch

    v: dict[str, Any] = {"torch": torch.__version__, "python": ".".join(map(str, sys.version_info[:2]))}
    if device.startswith("cuda"):
        v["cuda"] = str(torch.version.cuda)
        try:
            import triton

            v["triton"] = str(triton.__version__)
        except ImportError:
            v["triton"] = None
    return v


def key_of(parts: dict[str, Any]) -> str:
    """sha256 of the key parts' canonical JSON."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def key_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the block; waits for it.

    The operating system releases the lock when its holder dies, so a crashed run never
    leaves a stale lock behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            while True:
                try:
                    f.seek(0)
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                    break
                except OSError:
                    continue  # LK_LOCK gave up after its own retries: keep waiting
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` to a temporary file beside ``path``, then rename it over ``path``."""
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True, default=str))


class PinStore:
    """One key's directory: the inductor caches, the lock and ``picks.json``."""

    def __init__(self, root: Path, key: str, parts: dict[str, Any]) -> None:
        self.root = root
        self.key = key
        self.parts = parts
        self.dir = root / key
        self.inductor_dir = self.dir / "inductor"
        self.record_path = self.dir / "picks.json"
        self.lock_path = self.dir / "lock"
        #: why picks.json could not be read, if it could not
        self.unreadable: str | None = None

    def lock(self) -> Any:
        return key_lock(self.lock_path)

    def load(self) -> dict[str, Any]:
        """The record (an empty one when absent or unreadable; ``unreadable`` says why)."""
        empty = {"format": RECORD_FORMAT, "key": self.key, "key_parts": self.parts,
                 "generations": 0, "pinned": None, "history": []}
        try:
            doc = json.loads(self.record_path.read_text())
        except FileNotFoundError:
            return empty
        except (OSError, ValueError) as e:
            self.unreadable = f"{self.record_path}: {type(e).__name__}: {str(e)[:200]}"
            return empty
        if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT or doc.get("key") != self.key \
                or not isinstance(doc.get("history"), list) or not isinstance(doc.get("generations"), int):
            self.unreadable = f"{self.record_path}: not a picks record of format {RECORD_FORMAT} for this key"
            return empty
        return doc

    def pinned(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The pinned compile's entry, when the record has one and its caches are there."""
        pin = doc.get("pinned")
        if isinstance(pin, dict) and isinstance(pin.get("sites"), list) and self.inductor_dir.is_dir():
            return pin
        return None

    def reset_caches(self) -> None:
        """Empty the inductor caches (left over from a compile that never completed)."""
        shutil.rmtree(self.inductor_dir, ignore_errors=True)
        self.inductor_dir.mkdir(parents=True, exist_ok=True)

    def save(self, doc: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.record_path, doc)


def add_fresh(doc: dict[str, Any], compile_name: str, sites: list[dict[str, Any]],
              kernel_configs: dict[str, Any], pinned: bool,
              selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append one fresh compile's picks to the record; returns the new entry. ``selection``: how
    the compile was chosen among several fresh ones (``draws``), kept with it."""
    doc["generations"] = int(doc.get("generations", 0)) + 1
    entry = {"generation": doc["generations"], "compile": compile_name, "pinned": pinned,
             "sites": sites, "kernel_configs": kernel_configs}
    if selection:
        entry["selection"] = selection
    doc["history"] = [*doc.get("history", []), entry][-HISTORY:]
    if pinned:
        doc["pinned"] = entry
    return entry


def triton_best_configs(cache_dir: Path) -> dict[str, Any]:
    """Triton's chosen launch configuration per kernel (the ``.best_config`` files inductor
    writes under its cache directory on CUDA), without the recorded timings."""
    out: dict[str, Any] = {}
    if not cache_dir.is_dir():
        return out
    for path in sorted(cache_dir.rglob("*.best_config")):
        try:
            cfg = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(cfg, dict):
            out[str(path.relative_to(cache_dir))] = {k: v for k, v in cfg.items()
                                                     if k not in ("time_taken_ms", "triton_cache_hash")}
    return out
