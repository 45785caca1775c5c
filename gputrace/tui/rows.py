"""The lane tree: which screen rows the Gantt shows, in order (host > device > lane > level).

Pure (no Textual). ``build_rows`` turns a `TimelineIndex` plus the set of collapsed
group keys into a flat list of `RowSpec`; the widget maps screen row ``y`` to
``rows[y]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputrace.textsafe import visible
from gputrace.tui.index import TimelineIndex

HOST, DEVICE, LANE, GPU = "host", "device", "lane", "gpu"


@dataclass(frozen=True)
class RowSpec:
    """One screen row.

    ``kind``: ``host``/``device`` (collapsible group headers), ``lane`` (one depth level of
    a lane's spans) or ``gpu`` (the device-time intervals of a lane's spans).
    ``key`` identifies the row across rebuilds (collapse state, keeping the cursor).
    ``level`` indexes ``LaneIndex.levels`` for ``lane`` rows (-1: all levels stacked, compact mode). ``group`` is (host, device
    label) for device headers and every row inside them.
    """

    kind: str
    label: str
    key: tuple
    lane: int = -1
    level: int = -1
    depth: int = 0
    group: tuple = ()
    collapsed: bool = False


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
        hosts.setdefault(lane.host or "?", {}).setdefault(lane.device_label, []).append(k)
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
                if compact:
                    label = f"   {visible(lane.name)}" + (f" [{lane.pid}]" if n_lanes > 1 and _pids(tl, host) > 1 else "")
                    rows.append(RowSpec(LANE, label, (LANE, k, -1, 0), lane=k, level=-1, group=(host, dev)))
                    continue
                for j, lv in enumerate(li.levels):
                    if j == 0:
                        label = f"   {visible(lane.name)}" + (f" [{lane.pid}]" if n_lanes > 1 and _pids(tl, host) > 1 else "")
                    else:
                        label = f"    └ d{lv.depth}" + (f".{lv.sublevel}" if lv.sublevel else "")
                    rows.append(
                        RowSpec(LANE, label, (LANE, k, lv.depth, lv.sublevel), lane=k, level=j,
                                depth=lv.depth, group=(host, dev))
                    )
                if show_gpu and li.gpu is not None:
                    rows.append(RowSpec(GPU, "    ⤷ device time", (GPU, k), lane=k, group=(host, dev)))
    return rows


def _pids(tl, host: str) -> int:
    return len({ln.pid for ln in tl.lanes if (ln.host or "?") == host})
