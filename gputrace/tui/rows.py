"""The lane tree: which screen rows the Gantt shows, in order (host > device > lane > level), and
which span a screen row shows at a time.

Pure (no Textual). ``build_rows`` turns a `TimelineIndex` plus the set of collapsed
group keys into a flat list of `RowSpec`; the widget maps screen row ``y`` to
``rows[y]``. `index_of`, `hit` and `level_of` answer the widget's hit tests (click,
Enter, ``[`` ``]``, measuring) and its "show this span" (a search match, a stall).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gputrace.activity import PAUSED
from gputrace.analysis.lanes import device_name
from gputrace.textsafe import visible
from gputrace.timeline.model import Timeline
from gputrace.tui.index import IntervalIndex, TimelineIndex

HOST, DEVICE, LANE, GPU = "host", "device", "lane", "gpu"
#: The lane of the intervals CUDA activity collection was paused (``record_control.pause``), and its label:
#: no GPU activity was recorded there, so the device rows show neither work nor idle gaps in them.
PAUSED_LANE = f"thread:{PAUSED}"
PAUSED_LABEL = "CUDA collection paused (not recorded)"



@dataclass(frozen=True)
class RowSpec:
    """One screen row.

    ``kind``: ``host``/``device`` (collapsible group headers), ``lane`` (one depth level of
    a lane's spans) or ``gpu`` (the device-time intervals of a lane's spans).
    ``key`` identifies the row across rebuilds (collapse state, keeping the cursor).
    ``level`` indexes ``LaneIndex.levels`` for ``lane`` rows (-1: all levels stacked, compact mode).
    ``group`` is (host, device label) for device headers and every row inside them.
    """

    kind: str
    label: str
    key: tuple
    lane: int = -1
    level: int = -1
    depth: int = 0
    group: tuple = ()
    collapsed: bool = False
    #: A lane's first row: its name as shown and what follows it (`` [pid]``), from which the painter fits the
    #: label to the name column (``layout.fit_lane_label``); ``label`` holds them whole.
    name: str = ""
    tag: str = ""


def build_rows(index: TimelineIndex, collapsed: frozenset | set = frozenset(), show_gpu: bool = True,
               compact: bool = False) -> list[RowSpec]:
    """Flatten the lane tree. Lanes with nothing to draw (filtered out) are skipped,
    and so are groups left empty. ``compact``: one row per lane (``level=-1``: every depth
    stacked, the deepest span on top) and no device-time rows."""
    tl = index.timeline
    rows: list[RowSpec] = []
    # Lanes are already sorted host > GPUs (by index) > CPU > streams before threads.
    hosts: dict[str, dict[str, list[int]]] = {}
    for k, lane in enumerate(tl.lanes):
        li = index.lanes[k] if k < len(index.lanes) else None
        if li is None or not li.levels:
            continue
        hosts.setdefault(lane.host or "?", {}).setdefault(device_name(lane.device), []).append(k)
    for host, devices in hosts.items():
        hkey = (HOST, host)
        hc = hkey in collapsed
        n_lanes = sum(len(v) for v in devices.values())
        rows.append(RowSpec(HOST, f"{'▶' if hc else '▼'} {visible(host)}", hkey, collapsed=hc, group=(host,)))
        if hc:
            continue
        for dev, lanes in devices.items():
            dkey = (DEVICE, host, dev)
            dc = dkey in collapsed
            rows.append(
                RowSpec(DEVICE, f" {'▶' if dc else '▼'} {dev}", dkey, collapsed=dc, group=(host, dev))
            )
            if dc:
                continue
            for k in lanes:
                lane = tl.lanes[k]
                li = index.lanes[k]
                shown = PAUSED_LABEL if lane.name == PAUSED_LANE else visible(lane.name)
                tag = f" [{lane.pid}]" if lane.pid >= 0 and n_lanes > 1 and _pids(tl, host) > 1 else ""
                name = f"   {shown}{tag}"
                if compact:
                    label = name
                    rows.append(RowSpec(LANE, label, (LANE, k, -1, 0), lane=k, level=-1, group=(host, dev),
                                        name=shown, tag=tag))
                    continue
                for j, lv in enumerate(li.levels):
                    first = j == 0
                    if first:
                        label = name
                    else:
                        label = f"    └ d{lv.depth}" + (f".{lv.sublevel}" if lv.sublevel else "")
                    rows.append(
                        RowSpec(LANE, label, (LANE, k, lv.depth, lv.sublevel), lane=k, level=j,
                                depth=lv.depth, group=(host, dev), name=shown if first else "",
                                tag=tag if first else "")
                    )
                if show_gpu and li.gpu is not None:
                    rows.append(RowSpec(GPU, "    ⤷ device time", (GPU, k), lane=k, group=(host, dev)))
    return rows


def index_of(index: TimelineIndex, spec: RowSpec, gaps: Mapping[tuple, IntervalIndex]) -> IntervalIndex | None:
    """The intervals screen row ``spec`` draws (a compact row: its first level), or None for a header
    without idle gaps. ``gaps``: idle-gap intervals per device group."""
    if spec.kind == LANE:
        return index.lanes[spec.lane].levels[max(spec.level, 0)].index
    if spec.kind == GPU:
        return index.lanes[spec.lane].gpu
    if spec.kind == DEVICE:
        return gaps.get(spec.group)
    return None


def hit(index: TimelineIndex, spec: RowSpec, gaps: Mapping[tuple, IntervalIndex], t: float, tol: float) -> int:
    """Timeline row of the span drawn at time ``t`` (relative ns) on ``spec`` (the deepest one in a compact
    row), else the nearest within ``tol`` ns, else -1 (also for an idle gap: it is not a span)."""
    if spec.kind == LANE and spec.level < 0:
        for lv in reversed(index.lanes[spec.lane].levels):
            i = lv.index.at(t)
            if i >= 0:
                return int(lv.index.row[i])
    ii = index_of(index, spec, gaps)
    if ii is None:
        return -1
    i = ii.nearest(t, tol)
    return int(ii.row[i]) if i >= 0 and ii.row[i] >= 0 else -1


def level_of(index: TimelineIndex, row: int) -> tuple[int, int] | None:
    """``(lane, level)``: where Timeline ``row`` is drawn (its level in ``index.lanes[lane].levels``), or
    None when ``index`` does not show it (filtered out)."""
    if row < 0:
        return None
    tl = index.timeline
    lane = int(tl.lane[row])
    rel = int(tl.start[row]) - index.origin
    for j, lv in enumerate(index.lanes[lane].levels):
        ii = lv.index
        i = int(np.searchsorted(ii.start, rel, side="left"))
        while i < len(ii) and ii.start[i] == rel:
            if ii.row[i] == row:
                return lane, j
            i += 1
    return None


def groups_of(tl: Timeline, lane: int) -> set[tuple]:
    """The keys of the host and device groups that hold ``lane`` (unfolding them shows the lane)."""
    ln = tl.lanes[lane]
    return {(HOST, ln.host or "?"), (DEVICE, ln.host or "?", device_name(ln.device))}


def _pids(tl: Timeline, host: str) -> int:
    """Processes with lanes on ``host`` (pid -1, a lane of no process such as a GPU stream's, not counted)."""
    return len({ln.pid for ln in tl.lanes if (ln.host or "?") == host and ln.pid >= 0})
