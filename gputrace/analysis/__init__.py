"""Pure single-run analysis over a `Timeline`: phase statistics, GPU idle gaps, host waits,
pinning economics, unattributed time, critical path, and `report.analyse_timeline`, the one
composition of them that ``gputrace report`` (text and JSON) and the TUI panels share.

Comparisons of several runs (A/B statistics, designs, experiments) live in
`gputrace.analysis.ab`; synthetic-trace generators for tests live in `gputrace.testing`.

Everything here is numpy/scipy only (no Textual, no prover, no recorder) and safe to call
from a worker thread: functions read the Timeline and return new small dataclasses or
columnar numpy results whose fields are documented on the classes.
"""

from gputrace.analysis.critical_path import CriticalPath, critical_path, critical_path_summary, default_root
from gputrace.analysis.gaps import IdleGap, IdleGaps, gpu_idle_gaps
from gputrace.analysis.pinning import PinningReport, pinning_economics
from gputrace.analysis.stats import PhaseStat, phase_stats, wall_ns
from gputrace.analysis.unattributed import Unattributed, unattributed_time
from gputrace.analysis.waits import HostWaits, host_waits

__all__ = [
    "CriticalPath",
    "HostWaits",
    "IdleGap",
    "IdleGaps",
    "PhaseStat",
    "PinningReport",
    "Unattributed",
    "critical_path",
    "critical_path_summary",
    "default_root",
    "gpu_idle_gaps",
    "host_waits",
    "phase_stats",
    "pinning_economics",
    "unattributed_time",
    "wall_ns",
]
