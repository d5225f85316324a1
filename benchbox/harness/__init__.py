"""The harness: the only place that reads a clock."""

from benchbox.harness.clocks import host_clock
from benchbox.harness.loop import Harness, Measurement, PhaseTimer, StopSampling

__all__ = ["Harness", "Measurement", "PhaseTimer", "StopSampling", "host_clock"]
