"""Pure analysis over a `Timeline`: phase statistics, GPU idle gaps, host waits, pinning
economics, unattributed time, critical path, and A/B comparison statistics.

Everything here is numpy/scipy only (no Textual, no prover, no recorder) and safe to call
from a worker thread: functions read the Timeline and return new small dataclasses or
columnar numpy results whose fields are documented on the classes.
"""

from gputrace.analysis.gaps import IdleGap, IdleGaps, gpu_idle_gaps
from gputrace.analysis.stats import PhaseStat, phase_stats, wall_ns

__all__ = ["IdleGap", "IdleGaps", "PhaseStat", "gpu_idle_gaps", "phase_stats", "wall_ns"]
