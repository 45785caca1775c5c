"""The lane tree: which screen rows the Gantt shows, in order (host > process > device > lane > level),
and which span a screen row shows at a time. The process level is there on a host with lanes of several
processes (a ``record`` of a launch, a torchrun job): one header per process, ``rank N · pid P · command``,
ordered by rank then pid; a host of one process, and lanes of no process (pid -1, a profiler's GPU stream),
go straight to their devices.

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
from gputrace.analysis.collectives import rank_of
from gputrace.analysis.lanes import device_name
from gputrace.textsafe import visible
from gputrace.timeline.model import Timeline
from gputrace.tui.index import IntervalIndex, TimelineIndex

HOST, PROCESS, DEVICE, LANE, GPU = "host", "process", "device", "lane", "gpu"
#: The lane of the intervals CUDA activity collection was paused (``record_control.pause``), and its label:
#: no GPU activity was recorded there, so the device rows show neither work nor idle gaps in them.
PAUSED_LANE = f"thread:{PAUSED}"
PAUSED_LABEL = "CUDA collection paused (not recorded)"



@dataclass(frozen=True)
class RowSpec:
    """One screen row.

    ``kind``: ``host``/``process``/``device`` (collapsible group headers), ``lane`` (one depth level of
    a lane's spans) or ``gpu`` (the device-time intervals of a lane's spans).
    ``key`` identifies the row across rebuilds (collapse state, keeping the cursor).
    ``level`` indexes ``LaneIndex.levels`` for ``lane`` rows (-1: all levels stacked, compact mode).
    ``group`` is (host, device label) for device headers and every row inside them (the key of the
    device's idle gaps). ``proc``: the pid of the process header the row is under, -1 for none.
    """

    kind: str
    label: str
    key: tuple
    lane: int = -1
    level: int = -1
    depth: int = 0
    group: tuple = ()
    collapsed: bool = False
    #: A lane's first row: its name as shown, which the painter fits to the name column
    #: (``layout.fit_lane_label``); ``label`` holds it whole. (Its process is the header above it.)
    name: str = ""
    proc: int = -1
    #: A process header's label parts, most telling first (``rank 1``, ``pid 681``, the command), which the
    #: painter fits to the name column (``layout.fit_parts``); ``label`` holds them joined.
    parts: tuple[str, ...] = ()


def device_key(host: str, dev: str, proc: int = -1) -> tuple:
    """The key of a device group (``GPU 0`` or ``CPU``) of ``host``, under process ``proc`` (-1: none)."""
    return (DEVICE, host, dev) if proc < 0 else (DEVICE, host, dev, proc)


@dataclass(frozen=True)
class ProcessName:
    """What names a process in its header: its rank (None: none recorded), pid and command."""

    pid: int
    rank: int | None = None
    command: str = ""

    @property
    def parts(self) -> tuple[str, ...]:
        """``rank N`` (where known), ``pid P``, the command (where known): most telling first."""
        return (((f"rank {self.rank}",) if self.rank is not None else ()) + (f"pid {self.pid}",)
                + ((self.command,) if self.command else ()))


def process_names(tl: Timeline) -> dict[tuple[str, int], ProcessName]:
    """Each process's name by (host, pid), from the first of its resources that gives each field: the rank
    (``analysis.collectives.rank_of``), the command (``service.name``, made visible). One pass."""
    out: dict[tuple[str, int], ProcessName] = {}
    for res in tl.resources:
        pid = res.get("process.pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        key = (str(res.get("host.name") or "?"), pid)
        old = out.get(key, ProcessName(pid))
        rank = old.rank if old.rank is not None else rank_of(res)
        command = old.command or visible(res.get("service.name") or "")
        out[key] = ProcessName(pid, rank, command)
    return out


def build_rows(index: TimelineIndex, collapsed: frozenset | set = frozenset(), show_gpu: bool = True,
               compact: bool = False) -> list[RowSpec]:
    """Flatten the lane tree. Lanes with nothing to draw (filtered out) are skipped,
    and so are groups left empty. ``compact``: one row per lane (``level=-1``: every depth
    stacked, the deepest span on top) and no device-time rows."""
    tl = index.timeline
    rows: list[RowSpec] = []
    # Lanes are already sorted host > GPUs (by index) > CPU > streams before threads; a host of several
    # processes gets a process level (pid -1: lanes of no process, before the processes).
    hosts: dict[str, dict[int, dict[str, list[int]]]] = {}
    several = _several_processes(tl)
    named = process_names(tl) if several else {}
    for k, lane in enumerate(tl.lanes):
        li = index.lanes[k] if k < len(index.lanes) else None
        if li is None or not li.levels:
            continue
        host = lane.host or "?"
        proc = lane.pid if lane.pid >= 0 and host in several else -1
        hosts.setdefault(host, {}).setdefault(proc, {}).setdefault(device_name(lane.device), []).append(k)
    for host, procs in hosts.items():
        hkey = (HOST, host)
        hc = hkey in collapsed
        rows.append(RowSpec(HOST, f"{'▶' if hc else '▼'} {visible(host)}", hkey, collapsed=hc, group=(host,)))
        if hc:
            continue
        names = {pid: named.get((host, pid), ProcessName(pid)) for pid in procs}
        for pid in [n.pid for n in sorted(names.values(), key=_order)]:
            pad = ""
            if pid >= 0:
                pkey = (PROCESS, host, pid)
                pc = pkey in collapsed
                parts = names[pid].parts
                rows.append(RowSpec(PROCESS, f" {'▶' if pc else '▼'} {' · '.join(parts)}", pkey,
                                    collapsed=pc, group=(host,), proc=pid, parts=parts))
                if pc:
                    continue
                pad = " "
            rows.extend(_device_rows(index, host, pid, procs[pid], collapsed, show_gpu, compact, pad))
    return rows


def _device_rows(index: TimelineIndex, host: str, proc: int, devices: dict[str, list[int]],
                 collapsed: frozenset | set, show_gpu: bool, compact: bool, pad: str) -> list[RowSpec]:
    """The rows of ``devices`` (device label -> lanes) of ``host``, under process ``proc`` (-1: none), the
    device headers indented by ``pad`` (lanes are not: under a device header either way, they keep the
    name column's width)."""
    tl = index.timeline
    rows: list[RowSpec] = []
    for dev, lanes in devices.items():
        dkey = device_key(host, dev, proc)
        dc = dkey in collapsed
        rows.append(RowSpec(DEVICE, f"{pad} {'▶' if dc else '▼'} {dev}", dkey, collapsed=dc, group=(host, dev),
                            proc=proc))
        if dc:
            continue
        for k in lanes:
            lane = tl.lanes[k]
            li = index.lanes[k]
            shown = PAUSED_LABEL if lane.name == PAUSED_LANE else visible(lane.name)
            name = f"   {shown}"
            if compact:
                rows.append(RowSpec(LANE, name, (LANE, k, -1, 0), lane=k, level=-1, group=(host, dev),
                                    name=shown, proc=proc))
                continue
            for j, lv in enumerate(li.levels):
                first = j == 0
                if first:
                    label = name
                else:
                    label = f"    └ d{lv.depth}" + (f".{lv.sublevel}" if lv.sublevel else "")
                rows.append(
                    RowSpec(LANE, label, (LANE, k, lv.depth, lv.sublevel), lane=k, level=j,
                            depth=lv.depth, group=(host, dev), name=shown if first else "", proc=proc)
                )
            if show_gpu and li.gpu is not None:
                rows.append(RowSpec(GPU, "    ⤷ device time", (GPU, k), lane=k, group=(host, dev),
                                    proc=proc))
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
    """The keys of the host, process and device groups that hold ``lane`` (unfolding them shows the lane)."""
    ln = tl.lanes[lane]
    host = ln.host or "?"
    proc = ln.pid if ln.pid >= 0 and host in _several_processes(tl) else -1
    keys = {(HOST, host), device_key(host, device_name(ln.device), proc)}
    return keys | ({(PROCESS, host, proc)} if proc >= 0 else set())


def _order(name: ProcessName) -> tuple:
    """Process groups in order: lanes of no process (pid -1) first, then by rank, then by pid."""
    return (name.pid >= 0, name.rank is None, name.rank or 0, name.pid)


def _several_processes(tl: Timeline) -> set[str]:
    """The hosts with lanes of more than one process (pid -1, a lane of no process such as a GPU stream's,
    not counted): those get a process level."""
    pids: dict[str, set[int]] = {}
    for ln in tl.lanes:
        if ln.pid >= 0:
            pids.setdefault(ln.host or "?", set()).add(ln.pid)
    return {h for h, p in pids.items() if len(p) > 1}
