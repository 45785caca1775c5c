"""Host waits: explicit ``sync`` phases, and GPU phases whose host time far exceeds their
device time (the host thread sat in a synchronising call while the GPU had finished, or
had not started). Pure numpy; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gputrace.analysis._common import SYNC_KIND
from gputrace.timeline.model import Timeline

SYNC, EXCESS = 0, 1
WAIT_KIND_NAMES = {SYNC: "sync", EXCESS: "host>device"}


@dataclass
class HostWaits:
    """Host waits, columnar, sorted by start.

    * ``row``: the span's row in the Timeline; ``kind``: SYNC (0, a ``sync`` phase or a span
      of kind ``sync``) or EXCESS (1, host time beyond device time).
    * ``start``/``end``: the host interval of the span (draw it on the span's own lane).
    * ``wait_ns``: for SYNC the whole host duration; for EXCESS host minus device duration.
    * ``device``: the span's device (-1 when none); ``phase``: phase id into ``phases``.
    """

    row: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    wait_ns: np.ndarray
    device: np.ndarray
    phase: np.ndarray
    phases: list[str]

    def __len__(self) -> int:
        return int(len(self.row))

    def total_by(self) -> list[dict]:
        """Totals per (kind, phase, device): ``{"kind", "phase", "device", "count", "wait_ns"}``,
        largest ``wait_ns`` first."""
        acc: dict[tuple, list[int]] = {}
        cols = (self.kind.tolist(), self.phase.tolist(), self.device.tolist(), self.wait_ns.tolist())
        for k, p, d, w in zip(*cols, strict=True):
            a = acc.setdefault((WAIT_KIND_NAMES[k], self.phases[p], d), [0, 0])
            a[0] += 1
            a[1] += w
        out = [{"kind": k, "phase": p, "device": d, "count": c, "wait_ns": w} for (k, p, d), (c, w) in acc.items()]
        out.sort(key=lambda r: -r["wait_ns"])
        return out


def host_waits(tl: Timeline, margin_ns: int = 1_000_000, ratio: float = 0.25) -> HostWaits:
    """Find host waits.

    SYNC: every span named ``sync`` or of kind ``sync``. EXCESS: every span with device
    times whose ``host - device`` duration is at least ``margin_ns`` and at least ``ratio``
    times its device duration (so launch overhead on short kernels is not called a wait).
    Raises ValueError on a negative margin or ratio.
    """
    if margin_ns < 0 or ratio < 0:
        raise ValueError(f"host_waits: margin_ns ({margin_ns}) and ratio ({ratio}) must be >= 0")
    c = tl.cols
    sid = tl.phase_id("sync")
    is_sync = (c["kind"] == SYNC_KIND) | ((c["phase"] == sid) if sid >= 0 else False)
    host = c["end"] - c["start"]
    gd = tl.gpu_duration()
    excess = host - gd
    is_ex = (gd >= 0) & ~is_sync & (excess >= margin_ns) & (excess >= ratio * gd)
    rows = np.flatnonzero(is_sync | is_ex)
    kind = np.where(is_sync[rows], SYNC, EXCESS).astype(np.int8)
    wait = np.where(kind == SYNC, host[rows], excess[rows]).astype(np.int64)
    o = np.argsort(c["start"][rows], kind="stable")
    rows, kind, wait = rows[o], kind[o], wait[o]
    return HostWaits(
        row=rows,
        kind=kind,
        start=c["start"][rows],
        end=c["end"][rows],
        wait_ns=wait,
        device=c["device"][rows].astype(np.int64),
        phase=c["phase"][rows].astype(np.int64),
        phases=list(tl.phases),
    )
