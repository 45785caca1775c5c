"""GPU activity on the timeline: colour keys that tell pinned from pageable copies, launch-gap marks inside
phase bars, and launch-gap lines for the stalls panel. Pure (no Textual); runs on the loader worker.

Figures come from :mod:`gputrace.analysis.gpu_activity` (kernel truth); a Timeline without activity spans
gives no marks and no items.
"""

from __future__ import annotations

import numpy as np

from gputrace import activity as A
from gputrace.analysis.gpu_activity import MEMCPY, activity_index, launch_gaps
from gputrace.timeline.model import Timeline
from gputrace.tui.layout import format_duration
from gputrace.tui.render import PAGEABLE, PINNED

MARK_LAUNCH = 2  # overlay mark kind: a launch gap (the GPU idle inside a phase that enqueued work)


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


def launch_gap_overlays(tl: Timeline, max_items: int, items: list, marks: list, item_cls) -> None:
    """Append launch-gap marks (holes of every non-root phase that enqueued device work) to ``marks`` and
    the ``max_items`` largest gaps to ``items`` as ``item_cls("launch", ...)`` stall items."""
    g = launch_gaps(tl)
    if len(g) == 0:
        return
    c = tl.cols
    child = c["parent"][g.row] >= 0  # a root's holes are the GPU's idle time, drawn on the device header
    counts = np.diff(g.hole_offsets)
    sel = np.repeat(child, counts)
    rows = np.repeat(g.row, counts)[sel]
    if len(rows):
        marks.append((rows, g.hole_start[sel], g.hole_end[sel], MARK_LAUNCH))
    gap = g.gap_ns
    order = np.argsort(-gap, kind="stable")
    order = order[child[order] & (gap[order] > 0)][:max_items]
    for i in order.tolist():
        e = g.entry(i)
        host = e["host_activity"]
        if e["unattributed_ns"] is None:
            who = ""
        elif host:
            who = "; host: " + ", ".join(f"{a['phase']} {format_duration(a['ns'], 2)}" for a in host[:2]) + (
                f", no span {format_duration(e['unattributed_ns'], 2)}" if e["unattributed_ns"] else "")
        else:
            who = f"; host in no child span {format_duration(e['unattributed_ns'], 2)}"
        text = (f"{e['phase']} GPU {e['device']}: launch gaps {format_duration(e['gap_ns'], 3)} "
                f"(GPU busy {format_duration(e['busy_ns'], 3)} of {format_duration(e['bracket_ns'], 3)} "
                f"{e['bracket']} bracket, {e['kernels']} kernels){who}")
        items.append(item_cls("launch", text, int(g.window_start[i]), int(g.window_end[i]), int(g.row[i]),
                              int(g.device[i]), int(gap[i])))
