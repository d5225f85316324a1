"""A pinned torch.compile as one file that travels to another machine.

PyTorch's portable compile caches (``torch.compiler.save_cache_artifacts`` /
``load_cache_artifacts``) serialize what the compiler's caches recorded in this process:
inductor's FX graph entries (the generated code, with every autotune choice baked into it),
AOTAutograd's entries and, on CUDA, Triton's tuned launch configurations (``autotune``
entries). Loaded into empty caches on another machine of the same device model and
software, a compile of the same model finds its graphs there and neither lowers nor
autotunes again (kernels are still built from the stored source: C++ on the CPU, Triton on
CUDA).

The torch-compile runner writes one file per compile (``artifact_out``), a zip archive:

```
benchbox-artifact.json      format, kind, sha256 of the payload, the pin key and its parts,
                            how the compile was chosen (selection), its autotune picks
torch-cache-artifacts.bin   the bytes save_cache_artifacts returned
```

and loads it (``artifact``) only when its key parts match this run's, except those that
say how the compile was chosen (``IGNORED_PARTS``); the artifact's identity is the sha256
of the payload.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbox.errors import UsageError
from benchbox.fileio import folder_problem, write_atomic_with

FORMAT = 1
KIND = "benchbox torch-compile artifact"
META = "benchbox-artifact.json"
PAYLOAD = "torch-cache-artifacts.bin"
#: key parts that say how a compile was chosen, not what was compiled: not compared on load
IGNORED_PARTS = ("compile.draws",)
_SHA = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Artifact:
    """A read artifact: its file, the payload's sha256, the recorded facts and the payload."""

    path: str
    sha256: str
    meta: dict[str, Any]
    payload: bytes

    @property
    def short(self) -> str:
        return self.sha256[:12]


def _refuse(path: str, why: str) -> UsageError:
    return UsageError(f"torch-compile: artifact {path}: {why}")


@contextmanager
def capture_cache_artifacts(on: bool) -> Iterator[list[Any]]:
    """With ``on``: the portable cache artifacts (``torch.compiler.save_cache_artifacts``) that the
    compiler records inside the block alone, as ``[payload or None, {cache: entries}]`` after it.

    The compiler records an entry when it writes one to its caches and when it reads one back, so
    a compile served from the caches is captured as well as a fresh one. The process's own record
    is set aside for the block and restored after.
    """
    box: list[Any] = [None, {}]
    if not on:
        yield box
        return
    import torch
    from torch.compiler._cache import CacheArtifactManager

    fresh = getattr(CacheArtifactManager, "with_fresh_cache", None)
    if fresh is None:  # an older torch: start the process's record afresh instead
        CacheArtifactManager.clear()
    with fresh() if fresh is not None else ExitStack():
        yield box
        got = torch.compiler.save_cache_artifacts()
        if got is not None:
            payload, info = got
            box[:] = [payload, {k: len(v) for k, v in info.artifacts.items()}]


def read_artifact(path: str) -> Artifact:
    """The artifact at ``path``; a one-line UsageError when it is absent, unreadable or damaged."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise _refuse(path, "no such file" if not p.exists() else "not a file")
    try:
        with zipfile.ZipFile(p) as z:
            meta = json.loads(z.read(META))
            payload = z.read(PAYLOAD)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise _refuse(path, f"not a benchbox torch-compile artifact ({type(e).__name__}: "
                            f"{' '.join(str(e).split())[:120]})") from None
    if not isinstance(meta, dict) or meta.get("kind") != KIND or meta.get("format") != FORMAT:
        raise _refuse(path, f"not a benchbox torch-compile artifact of format {FORMAT}")
    sha = hashlib.sha256(payload).hexdigest()
    if meta.get("sha256") != sha:
        raise _refuse(path, f"damaged: its payload's sha256 is {sha[:12]}, the file records "
                            f"{str(meta.get('sha256'))[:12]}")
    if not isinstance(meta.get("key_parts"), dict):
        raise _refuse(path, "records no pin key")
    return Artifact(str(p), sha, meta, payload)


def write_artifact(path: Path, payload: bytes, meta: dict[str, Any]) -> str:
    """Write the artifact file (replaced atomically); returns the payload's sha256."""
    sha = hashlib.sha256(payload).hexdigest()
    doc = {"format": FORMAT, "kind": KIND, "sha256": sha, **meta}

    def write(tmp: str) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr(META, json.dumps(doc, indent=1, sort_keys=True, default=str))
            z.writestr(PAYLOAD, payload)

    write_atomic_with(path, write, parents=True)
    return sha


def output_problem(path: str) -> str | None:
    """Why an artifact cannot be written at ``path`` (None: it can), without writing anything."""
    p = Path(path).expanduser()
    if p.is_dir():
        return "is a directory"
    return folder_problem(p.parent)


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    if isinstance(value, str) and len(value) == 64 and set(value) <= _SHA:
        return value[:12]
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


_ABSENT = object()
#: the order differences are named in: what was compiled first, then where and with what
_ORDER = ("model", "inputs", "device", "versions", "compile", "format")


def _rank(path: str) -> int:
    top = path.split(".")[0].split("[")[0]
    return _ORDER.index(top) if top in _ORDER else len(_ORDER)


def key_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The key parts that differ, ``"versions.torch "2.11.0" → "2.13.0""``, in key order."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(recorded, "", a)
    _flatten(current, "", b)
    out = []
    for k in sorted([*a, *(k for k in b if k not in a)], key=_rank):
        if any(k == p or k.startswith(p + ".") for p in IGNORED_PARTS):
            continue
        va, vb = a.get(k, _ABSENT), b.get(k, _ABSENT)
        if va != vb:
            out.append(f"{k} {_show(va)} → {_show(vb)}")
    return out


def mismatch(artifact: Artifact, parts: dict[str, Any], limit: int = 3) -> str | None:
    """One line saying how the artifact's key differs from this run's (None: it matches)."""
    diffs = key_differences(artifact.meta["key_parts"], parts)
    if not diffs:
        return None
    more = f" (and {len(diffs) - limit} more)" if len(diffs) > limit else ""
    return (f"artifact {artifact.path} (sha256 {artifact.short}) was compiled for another key: "
            + "; ".join(diffs[:limit]) + more)
