"""What one host knows about the cells running on it: CPUs, GPUs, the PCIe tree, and overlaps.

Cells on one host register in a host-local directory (``BENCHBOX_MATRIX_DIR``, default
``$TMPDIR/benchbox-matrix-<uid>``), so each run can claim CPUs no other running cell holds
and, when it ends, say which cells ran beside it, on which CPUs and behind which PCIe
links. Cells of different matrices (or drivers) on one host see each other too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.fileio import write_atomic
from benchbox.harness import host_clock


def registry_dir() -> Path:
    env = os.environ.get("BENCHBOX_MATRIX_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"benchbox-matrix-{os.getuid()}"


def cpus_available() -> list[int]:
    """The CPUs this process may run on (its affinity mask)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def cpu_ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → '0-2,5'; [] → 'none'."""
    if not cpus:
        return "none"
    out, start, prev = [], cpus[0], cpus[0]
    for c in [*cpus[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(out)


# --- GPUs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gpu:
    """A GPU as nvidia-smi lists it."""

    index: str
    uuid: str
    bus_id: str
    name: str


def parse_gpu_query(text: str) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=index,uuid,pci.bus_id,name --format=csv,noheader``."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) == 4 and parts[0].isdigit():
            out.append(Gpu(*parts))
    return out


def list_gpus() -> list[Gpu]:
    """Every GPU nvidia-smi sees on this host (empty without nvidia-smi)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,name",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_gpu_query(r.stdout) if r.returncode == 0 else []


def gpu_processes(bus_id: str) -> int | None:
    """Compute processes on the GPU at ``bus_id`` now (None when nvidia-smi cannot tell)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return sum(1 for line in r.stdout.splitlines()
               if line.strip() and line.rsplit(",", 1)[-1].strip().lower() == bus_id.strip().lower())


def visible_gpu(gpus: list[Gpu], visible: str | None) -> Gpu | None:
    """The GPU a process sees as cuda:0 under ``CUDA_VISIBLE_DEVICES`` (index or UUID list)."""
    first = (visible.split(",")[0].strip() if visible is not None else "0")
    for g in gpus:
        if first in (g.index, g.uuid) or (first.startswith("GPU-") and g.uuid.startswith(first)):
            return g
    return None


def sysfs_bus_id(bus_id: str) -> str:
    """nvidia-smi's '00000000:1B:00.0' → sysfs's '0000:1b:00.0'."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id.lower()


def pcie_path(bus_id: str, sysfs: Path = Path("/sys/bus/pci/devices")) -> str | None:
    """The device's place in the PCIe tree: its sysfs path, e.g. /sys/devices/pci0000:00/0000:00:01.0/..."""
    try:
        return str((sysfs / sysfs_bus_id(bus_id)).resolve(strict=True))
    except OSError:
        return None


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' → [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def local_cpus(bus_id: str, sysfs: Path = Path("/sys/bus/pci/devices")) -> list[int] | None:
    """The CPUs nearest the device (its NUMA node's), from sysfs; None when sysfs does not say."""
    try:
        return parse_cpulist((sysfs / sysfs_bus_id(bus_id) / "local_cpulist").read_text()) or None
    except (OSError, ValueError):
        return None


def pcie_relation(a: str, b: str) -> str:
    """How two PCIe devices (sysfs paths) reach the CPU.

    ``shared_link``: a common bridge below the root complex (a switch or root port), so
    both transfer over one upstream link; ``same_host_bridge``: separate root ports of one
    root complex; ``separate_host_bridges``: nothing in common below the CPU.
    """
    pa = [p for p in a.split("/") if p][2:]  # drop "sys", "devices"
    pb = [p for p in b.split("/") if p][2:]
    if not pa or not pb or pa[0] != pb[0]:
        return "separate_host_bridges"
    common = 0
    for x, y in zip(pa[1:-1], pb[1:-1]):
        if x != y:
            break
        common += 1
    return "shared_link" if common else "same_host_bridge"


# --- the host registry ----------------------------------------------------------------------

def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(entry: dict[str, Any]) -> bool:
    return _proc_start(int(entry["pid"])) == entry.get("pid_start")


@dataclass
class Claim:
    """A running cell's registration on this host."""

    path: Path
    entry: dict[str, Any]
    cpus: list[int]
    cpus_available: list[int]
    running_at_start: list[dict[str, Any]] = field(default_factory=list)
    #: whether every CPU it may run on is local to its GPU (None: no GPU, or sysfs does not say)
    gpu_local: bool | None = None


class HostRegistry:
    """Running cells of this host, one JSON file each, under a lock."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or registry_dir()
        self.root.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / "lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _entries(self) -> list[tuple[Path, dict[str, Any]]]:
        out = []
        for p in sorted(self.root.glob("cell-*.json")):
            try:
                out.append((p, json.loads(p.read_text())))
            except (OSError, ValueError):
                continue  # a file being replaced, or a stray one
        return out

    def _write(self, path: Path, entry: dict[str, Any]) -> None:
        write_atomic(path, json.dumps(entry))

    def running(self) -> list[dict[str, Any]]:
        """Entries of cells still running here (their process alive, no end stamp)."""
        return [e for _, e in self._entries() if e.get("end_ns") is None and _alive(e)]

    def claim(self, cell: str, cpus: int, pin: bool, gpu: Gpu | None) -> Claim:
        """Register a starting cell; with ``pin``, take ``cpus`` CPUs no running cell holds.

        When too few are free (a scheduler that over-commits the host) the least-held CPUs
        are taken and the overlap shows in the receipt's labels.
        """
        mine = cpus_available()
        with self._locked():
            now = host_clock()
            running, keep_after = [], now
            for p, e in self._entries():
                if e.get("end_ns") is None and not _alive(e):
                    e["end_ns"], e["died"] = now, True  # its worker died: it holds nothing from now on
                    self._write(p, e)
                if e.get("end_ns") is None:
                    running.append(e)
                    keep_after = min(keep_after, e["start_ns"])
            self._collect(keep_after)
            chosen: list[int] = []
            near = set(local_cpus(gpu.bus_id) or mine) if gpu else set(mine)
            if pin:
                held: dict[int, int] = {c: 0 for c in mine}
                for e in running:
                    for c in e.get("cpus") or []:
                        if c in held:
                            held[c] += 1
                # free CPUs first, then those near the cell's GPU
                chosen = sorted(sorted(mine, key=lambda c: (held[c], c not in near, c))[:cpus])
            entry = {"cell": cell, "pid": os.getpid(), "pid_start": _proc_start(os.getpid()),
                     "host": platform.node(), "start_ns": now, "end_ns": None, "cpus": chosen,
                     "gpu_bus_id": gpu.bus_id if gpu else None,
                     "pcie_path": pcie_path(gpu.bus_id) if gpu else None}
            path = self.root / f"cell-{now}-{os.getpid()}-{cell[:12]}.json"
            self._write(path, entry)
        return Claim(path, entry, chosen, mine, running,
                     gpu_local=None if gpu is None or local_cpus(gpu.bus_id) is None
                     else set(chosen or mine) <= near)

    def release(self, claim: Claim) -> dict[str, Any]:
        """Stamp the cell's end; return the cells that ran on this host during it."""
        with self._locked():
            now = host_clock()
            claim.entry["end_ns"] = now
            self._write(claim.path, claim.entry)
            start = claim.entry["start_ns"]
            others = []
            for p, e in self._entries():
                if p == claim.path:
                    continue
                end = e.get("end_ns")
                if end is None and not _alive(e):
                    end = now  # died unseen: it may have run until now
                if e["start_ns"] < now and (end is None or end > start):
                    others.append(e)
        return {"overlapping": others}

    def _collect(self, keep_after: int) -> None:
        """Drop entries of cells that ended before every running cell began."""
        for p, e in self._entries():
            end = e.get("end_ns")
            if end is not None and end < keep_after:
                with contextlib.suppress(OSError):
                    p.unlink()


def overlap_labels(claim: Claim, overlap: dict[str, Any], gpu: Gpu | None) -> dict[str, str]:
    """Labels saying what this cell shared with the cells that ran beside it on the host."""
    others = overlap["overlapping"]
    mine = set(claim.cpus) if claim.cpus else set(claim.cpus_available)
    shared_cpu = any(mine & set(e.get("cpus") or claim.cpus_available) for e in others)
    labels = {
        "matrix_overlapping_cells": str(len(others)),
        "matrix_overlapping_cell_ids": ",".join(sorted(e["cell"][:12] for e in others)),
        "matrix_cpus_shared": "true" if shared_cpu else "false",
    }
    if gpu is None:
        labels["matrix_pcie_shared"] = "n/a"
        return labels
    own = claim.entry.get("pcie_path")
    relations = []
    for e in others:
        if not e.get("gpu_bus_id"):
            continue
        rel = pcie_relation(own, e["pcie_path"]) if own and e.get("pcie_path") else "unknown"
        if e["gpu_bus_id"] == gpu.bus_id:
            rel = "same_gpu"
        relations.append(f"{e['gpu_bus_id']}:{rel}")
    labels["matrix_pcie_relations"] = ",".join(sorted(set(relations)))
    if any(r.endswith((":shared_link", ":same_gpu")) for r in relations):
        labels["matrix_pcie_shared"] = "true"
    elif any(r.endswith(":unknown") for r in relations):
        labels["matrix_pcie_shared"] = "unknown"
    else:
        labels["matrix_pcie_shared"] = "false"
    return labels
