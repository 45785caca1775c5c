"""Shared tables of one load (phases, traces, resources, lanes) and their global indices.

Not thread-safe: one ``Interner`` per load, used from one thread.
"""

from __future__ import annotations

import numpy as np

from gputrace.phases import phase_kind
from gputrace.timeline.model import KIND_CODES, Lane, Timeline


class Interner:
    """Shared tables of one load: phases, traces, resources, lanes (global indices)."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.phase_ix: dict[str, int] = {}
        self.kind_by_phase = np.zeros(0, dtype=np.int8)
        self.trace_ids: list[str] = []
        self.trace_ix: dict[str, int] = {}  # raw id as written -> index
        self.resources: list[dict] = []
        self.resource_ix: dict[bytes, int] = {}
        self.res_host: list[str] = []
        self.res_pid: list[int] = []
        self.res_service: list[str] = []
        self.lanes: list[Lane] = []
        self.lane_ix: dict[Lane, int] = {}
        self.lane_name_ix: dict[str, int] = {}
        self.lane_names: list[str] = []

    def resource(self, key: bytes, attrs: dict) -> int:
        i = self.resource_ix.get(key)
        if i is None:
            i = self.resource_ix[key] = len(self.resources)
            self.resources.append(attrs)
            self.res_host.append(str(attrs.get("host.name", "") or "unknown"))
            pid = attrs.get("process.pid", -1)
            self.res_pid.append(pid if type(pid) is int else -1)
            self.res_service.append(str(attrs.get("service.name", "") or "unknown"))
        return i

    def phase_codes(self, names: list[str]) -> np.ndarray:
        new = set(names).difference(self.phase_ix)
        if new:
            for nm in sorted(new):
                self.phase_ix[nm] = len(self.phases)
                self.phases.append(nm)
            self.kind_by_phase = np.array([KIND_CODES[phase_kind(p)] for p in self.phases], dtype=np.int8)
        return np.fromiter(map(self.phase_ix.__getitem__, names), np.int32, len(names))

    def lane_name_code(self, name: str) -> int:
        c = self.lane_name_ix.get(name)
        if c is None:
            c = self.lane_name_ix[name] = len(self.lane_names)
            self.lane_names.append(name)
        return c


def sort_phases(tl: Timeline) -> Timeline:
    """Renumber ``tl``'s phase table in sorted order (in place; returns ``tl``).

    Each batch of a read adds its new names sorted, so the table of a multi-batch read followed the
    batch boundaries, which differ between whole, progressive and parallel reads; sorted once more at
    the end, every way of reading a file gives one table (and ``gputrace import`` can predict it)."""
    ph = tl.phases
    if all(ph[i] < ph[i + 1] for i in range(len(ph) - 1)):
        return tl
    order = sorted(range(len(ph)), key=ph.__getitem__)
    remap = np.empty(len(ph), dtype=np.int32)
    remap[order] = np.arange(len(ph), dtype=np.int32)
    tl.phases = [ph[i] for i in order]
    tl.cols["phase"] = remap[tl.cols["phase"]]
    return tl
