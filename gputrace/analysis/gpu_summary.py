"""All GPU-activity figures of one Timeline as plain JSON-able data (for ``report``, ``--json`` and the TUI).

Composes :mod:`gputrace.analysis.gpu_activity` and :mod:`gputrace.analysis.gpu_transfers`; every
table says its ``basis`` ("kernels": activity spans; "brackets": CUDA-event brackets only). Pure;
any thread.
"""

from __future__ import annotations

from gputrace.analysis.gpu_activity import LaunchGaps, activity_index, bracket_only_phases, device_busy, launch_gaps
from gputrace.analysis.gpu_transfers import (
    PIN_SWITCHES,
    copy_table,
    kernel_names_table,
    kernel_table,
    sync_waits,
)
from gputrace.timeline.model import Timeline


def gpu_summary(tl: Timeline, top: int = 10, pin_switches=PIN_SWITCHES, launch: LaunchGaps | None = None) -> dict:
    """``{"activity_spans", "devices", "launch_gaps", "bracket_only", "copies", "sync_waits", "kernels",
    "kernel_names", "left_out"}`` (``kernel_names``: per distinct kernel over all phases, ``kernel_names_table``,
    at most 1000); lists are cut to ``top`` rows except ``devices``, ``copies`` (small by construction) and
    ``kernel_names``, and ``left_out`` says how many rows each cut list lost (``{"kernels": 12, ...}``). ``launch``: the
    Timeline's `launch_gaps` when the caller already has them."""
    idx = activity_index(tl)
    gaps = launch if launch is not None else launch_gaps(tl, idx)
    full = {"launch_gaps": gaps.by_phase(), "bracket_only": bracket_only_phases(tl, gaps),
            "sync_waits": sync_waits(tl, idx), "kernels": kernel_table(tl, idx)}
    return {
        "activity_spans": len(idx),
        "devices": [d.to_dict() for d in device_busy(tl, idx)],
        "launch_gaps": full["launch_gaps"][:top],
        "bracket_only": full["bracket_only"][:top],
        "copies": copy_table(tl, idx, pin_switches),
        "sync_waits": full["sync_waits"][:top],
        "kernels": full["kernels"][:top],
        "kernel_names": kernel_names_table(full["kernels"]),
        "left_out": {k: len(v) - top for k, v in full.items() if len(v) > top},
    }
