"""The engine cache: the key of everything that decides an engine's bytes, and its entries
(the engine and a side file with the builder's own text, parsed again on every load)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from benchbox import fileio
from benchbox.runners import tensorrt_report as tr
from benchbox.runners.base import Phases


def engine_cache_key(*, onnx_sha256: str, flavour: str, version: str, build_options: dict[str, Any],
                     device: dict[str, Any], code_version: str) -> str:
    """sha256 of everything that decides the engine's bytes (and nothing that acts at run time)."""
    doc = {"onnx_sha256": onnx_sha256, "flavour": flavour, "version": version,
           "build_options": build_options, "device": device, "build_code_version": code_version}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    fileio.write_atomic(path, data, parents=True)


def load_entry(path: Path, enabled: bool, phases: Phases) -> tuple[bytes, dict[str, Any] | None, str | None]:
    """(engine, side facts, None) from the engine cache; (b"", None, why) when the entry is
    missing, disabled or unusable (then ``why`` says why an existing entry is rebuilt)."""
    side_path = path.with_suffix(".json")
    if not (enabled and path.is_file() and side_path.is_file()):
        return b"", None, None
    with phases("engine_cache_load"):
        engine = path.read_bytes()
        try:
            side = json.loads(side_path.read_text())
        except (OSError, ValueError):
            side = None
    if not isinstance(side, dict) or side.get("engine_sha256") != hashlib.sha256(engine).hexdigest():
        return b"", None, "the cached engine and its side file do not match"
    if not (isinstance(side.get("layer_listing", 0), str | None)
            and isinstance(side.get("build_log_lines"), list)
            and side.get("log_filter") == tr.log_filter_version()):
        return b"", None, "the side file holds no builder text this code can parse (another format)"
    return engine, side, None


def side_facts(engine: bytes, log: Any) -> dict[str, Any]:
    """What an entry keeps beside the engine: the builder's raw layer listing and log lines."""
    return {"engine_sha256": hashlib.sha256(engine).hexdigest(),
            "layer_listing": log.layer_listing, "build_log_lines": list(log.fact_lines),
            "log_filter": tr.log_filter_version(), "build_messages": log.messages[:50]}


def store_entry(path: Path, engine: bytes, side: dict[str, Any]) -> None:
    write_atomic(path, engine)
    write_atomic(path.with_suffix(".json"), json.dumps(side).encode())
