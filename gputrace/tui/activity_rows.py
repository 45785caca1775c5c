"""GPU activity on the timeline: colour keys that tell pinned from pageable copies, launch-gap marks inside
phase bars. Pure (no Textual); runs on the loader worker.

Figures come from :mod:`gputrace.analysis.gpu_activity` (kernel truth); a Timeline without activity spans
gives no marks and no items.
"""

from __future__ import annotations

import numpy as np

from gputrace import activity as A
from gputrace.analysis.gpu_activity import MEMCPY, activity_index
from gputrace.timeline.model import Timeline
from gputrace.tui.keys import MARK_LAUNCH, PAGEABLE, PINNED


def row_keys(tl: Timeline) -> np.ndarray:
    """Colour key per row: the phase id, except copies whose host side is PAGEABLE (key PAGEABLE) or
    PINNED (key PINNED), so the two kinds of host memory are told apart at a glance."""
    keys = tl.cols["phase"].astype(np.int32)
    idx = activity_index(tl)
    rows = idx.rows[idx.what == MEMCPY]
    if len(rows) == 0:
        return keys
    keys = keys.copy()
    for r in rows.tolist():
        a = tl.attrs.get(r, {})
        kind = a.get(A.MEMCPY_KIND)
        host = a.get(A.MEMCPY_DST) if kind == "DtoH" else a.get(A.MEMCPY_SRC)
        if host == "PAGEABLE":
            keys[r] = PAGEABLE
        elif host == "PINNED":
            keys[r] = PINNED
    return keys


def activity_phases(tl: Timeline) -> set[int]:
    """Phase ids of the GPU activity spans (kernels, copies, memsets, syncs): the legend lists their names
    after the phases."""
    rows = activity_index(tl).rows
    return set(np.unique(tl.cols["phase"][rows]).tolist()) if len(rows) else set()


def launch_gap_marks(tl: Timeline, g, marks: list) -> None:
    """Append the holes of every non-root phase in ``g`` (`gpu_activity.LaunchGaps`) to ``marks``; the
    stalls list gets its launch-gap rows from `gputrace.analysis.stalls.launch_stalls`."""
    child = tl.cols["parent"][g.row] >= 0  # a root's holes are the GPU's idle time, drawn on the device header
    sel = np.repeat(child, np.diff(g.hole_offsets))
    rows = np.repeat(g.row, np.diff(g.hole_offsets))[sel]
    if len(rows):
        marks.append((rows, g.hole_start[sel], g.hole_end[sel], MARK_LAUNCH))
