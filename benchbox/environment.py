"""Environment and provenance for the receipt."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchbox import __version__
from benchbox.errors import UsageError, first_line

#: seconds a run watches the machine's CPU time before it starts (the load at start)
LOAD_WINDOW_S = 0.5
#: the environment variable that sets another window (0: read the load average only)
LOAD_WINDOW_VARIABLE = "BENCHBOX_LOAD_WINDOW_S"


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_state(cwd: Path | None = None) -> dict[str, Any]:
    """Commit and dirtiness of the working tree benchbox runs in (null outside git)."""
    cwd = cwd or Path.cwd()
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return {"commit": commit, "dirty": bool(status)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: str) -> dict[str, Any]:
    """What the run ran on: software versions, device, CPU, git state."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "benchbox": __version__,
        "git": git_state(),
        "system": system_metadata(),
        "load": load_at_start(load_window_s()),
    }
    if "torch" in sys.modules or device != "none":
        import torch

        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
        env["cuda"] = torch.version.cuda
        if device.startswith("cuda") and torch.cuda.is_available():
            idx = torch.device(device).index or 0
            props = torch.cuda.get_device_properties(idx)
            env["gpu"] = {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "memory_bytes": int(props.total_memory),
                "multiprocessors": props.multi_processor_count,
            }
            env["gpu"].update(_nvidia_smi(idx))
            env["gpu_state_before"] = gpu_state(device)
    return env


def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    vals = [int(v) for v in fields[:8]]  # guest time is counted in user already
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals) - idle, sum(vals)


def load_window_s() -> float:
    """The load-at-start window: ``$BENCHBOX_LOAD_WINDOW_S`` seconds (0 to 60), else 0.5 s.

    A shorter window reads a burst of other work as a busy machine more easily; 0 records no
    busy fraction, and the busy verdict then falls back on the load average per core."""
    text = os.environ.get(LOAD_WINDOW_VARIABLE, "").strip()
    if not text:
        return LOAD_WINDOW_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 60:
        raise UsageError(f"{LOAD_WINDOW_VARIABLE} must be seconds from 0 to 60, not {text!r}")
    return value


def load_at_start(window_s: float = LOAD_WINDOW_S) -> dict[str, Any]:
    """How busy the machine is as the run starts: the 1-minute load average per core and the
    fraction of CPU time busy over ``window_s`` (this process sleeps meanwhile)."""
    import time

    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores}
    try:
        avg = os.getloadavg()[0]
        out.update(load_avg_1min=avg, per_core=round(avg / cores, 3))
    except OSError:
        pass
    if window_s <= 0:
        return out
    a = _cpu_times()
    time.sleep(window_s)
    b = _cpu_times()
    if a and b and b[1] > a[1]:
        out["busy_fraction"] = round((b[0] - a[0]) / (b[1] - a[1]), 3)
        out["window_s"] = window_s
    return out


def _nvidia_smi(index: int) -> dict[str, Any]:
    fields = "driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,power.limit"
    try:
        r = subprocess.run(["nvidia-smi", f"--id={index}", f"--query-gpu={fields}",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    if r.returncode != 0:
        return {}
    return smi_readings(r.stdout)


def smi_readings(stdout: str) -> dict[str, str]:
    """nvidia-smi's CSV line as named readings; a field it could not read (``[N/A]``,
    ``[Not Supported]``) is left out: not read is not a value, and a diff must not compare it."""
    vals = [v.strip() for v in stdout.strip().split(",")]
    names = ["driver", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "temperature_c", "power_w",
             "power_limit_w"]
    return {k: v for k, v in zip(names, vals) if v and not v.startswith("[") and v.upper() != "N/A"}


def cpu_governors() -> dict[str, int]:
    """Count of CPUs per frequency-scaling governor (empty where sysfs has none)."""
    out: dict[str, int] = {}
    for p in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            g = p.read_text().strip()
        except OSError:
            continue
        out[g] = out.get(g, 0) + 1
    return out


def system_metadata() -> dict[str, Any]:
    """CPU frequency, governor, load and other system metadata via pyperf, when installed."""
    out: dict[str, Any] = {"cpu_governors": cpu_governors()}
    try:
        from pyperf._collect_metadata import collect_metadata
    except ImportError:
        out["note"] = ("pyperf is not installed (pip install 'benchbox-contracts[analysis]'): "
                       "CPU frequency and system metadata not recorded")
        return out
    try:
        md = collect_metadata(process=False)
    except Exception as e:  # pyperf reads many system files; any of them may fail
        out["note"] = f"pyperf could not collect metadata: {type(e).__name__}: {e}"
        return out
    out["pyperf"] = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in md.items()}
    return out


#: NVML clock-event (throttle) reason bits → names.
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


def throttle_names(mask: int) -> list[str]:
    """Decode an NVML throttle-reason bitmask (unknown bits are listed in hex)."""
    names = [n for bit, n in THROTTLE_REASONS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_REASONS)
    return names + ([hex(rest)] if rest else [])


def nvml_id(device: str) -> str | None:
    """The NVML/nvidia-smi identifier (UUID) of a torch CUDA device, robust to CUDA_VISIBLE_DEVICES."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(torch.device(device).index or 0).uuid)
    except Exception:
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _gpu_state_nvml(ident: str) -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByUUID(ident.encode())  # bytes: accepted by old and new bindings
        getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = int(getter(h))
        return {
            "source": "nvml",
            "sm_clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            "max_sm_clock_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "temperature_c": int(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            "power_w": float(pynvml.nvmlDeviceGetPowerUsage(h)) / 1000.0,
            "pstate": int(pynvml.nvmlDeviceGetPerformanceState(h)),
            "throttle_reasons_mask": mask,
            "throttle_reasons": throttle_names(mask),
        }
    finally:
        pynvml.nvmlShutdown()


def _gpu_state_smi(ident: str) -> dict[str, Any]:
    fields = ("clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "pstate",
              "clocks_throttle_reasons.active")
    r = subprocess.run(["nvidia-smi", f"--id={ident}", f"--query-gpu={','.join(fields)}",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise OSError(first_line(r.stderr) or f"exit {r.returncode}")
    vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
    out: dict[str, Any] = {"source": "nvidia-smi"}
    for key, v in zip(["sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "temperature_c",
                       "power_w", "pstate", "throttle_reasons_mask"], vals):
        out[key] = v
    try:
        mask = int(out["throttle_reasons_mask"], 16)
        out["throttle_reasons_mask"] = mask
        out["throttle_reasons"] = throttle_names(mask)
    except (KeyError, ValueError):
        pass
    return out


def gpu_state(device: str) -> dict[str, Any]:
    """GPU clocks, throttle reasons, temperature and power now: NVML, else nvidia-smi, else a note."""
    if not device.startswith("cuda"):
        return {"note": "not a CUDA device"}
    ident = nvml_id(device)
    if ident is None:
        return {"note": f"cannot identify {device} (no CUDA device visible to torch)"}
    notes = []
    try:
        return {"id": ident, **_gpu_state_nvml(ident)}
    except ImportError:
        notes.append("pynvml not installed (pip install nvidia-ml-py)")
    except Exception as e:  # NVML raises its own error types
        notes.append(f"NVML failed: {type(e).__name__}: {e}")
    try:
        return {"id": ident, **_gpu_state_smi(ident), "note": "; ".join(notes)}
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        notes.append(f"nvidia-smi failed: {type(e).__name__}: {e}")
    return {"id": ident, "note": "GPU state not recorded: " + "; ".join(notes)}
