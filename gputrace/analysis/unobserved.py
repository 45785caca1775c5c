"""Unobserved GPU time: the intervals in which a process paused CUDA activity collection.

``gputrace.record_control.pause()`` switches CUPTI off inside a recorded process; the trace marks each paused
interval with a ``gputrace.record.paused`` span (``gputrace.activity.PAUSED``; under the process's root, on a
lane of its own). No kernel or copy is recorded in it, so nothing is known about the process's GPUs there: it
is neither busy nor idle time. The intervals are read from the spans (the resource attribute
``gputrace.record.paused_ns`` keeps only the first 1024). A paused interval is unobserved on every device the
process recorded work on (the devices of rows of its resource, or of its (host, pid)): a device shared with a
process that kept collecting is unobserved too, since the paused process's work on it is unknown.

GPU idle gaps (:mod:`gputrace.analysis.gaps`), device busy/idle and launch gaps
(:mod:`gputrace.analysis.gpu_activity`) leave these intervals out, and the findings (``account``) never claim
the wall time in which no device was observed.

Pure numpy; any thread; cached per Timeline object (as ``activity_index``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import pair_overlaps, row_hosts, union_by_group
from gputrace.analysis.activity_index import attr_scan
from gputrace.timeline.model import Timeline

Key = tuple[int, int]  # (host index of ``_common.row_hosts``, device)


@dataclass(frozen=True)
class Unobserved:
    """Per (host index, device): the merged intervals (sorted, disjoint ``starts``/``ends`` arrays) in which
    the device was not observed. ``hosts``: host names (``_common.row_hosts`` order); ``rows``: the paused
    spans' rows."""

    hosts: list[str]
    rows: np.ndarray
    by_device: dict[Key, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_device)

    def ns_within(self, key: Key, lo: int, hi: int) -> int:
        """How much of [lo, hi) device ``key`` was unobserved."""
        iv = self.by_device.get(key)
        if iv is None or hi <= lo:
            return 0
        return int(np.maximum(np.minimum(iv[1], hi) - np.maximum(iv[0], lo), 0).sum())

    def wall(self, keys) -> list[list[int]]:
        """The wall time in which none of the devices ``keys`` was observed (the intersection of their
        intervals; empty when one of them never was), as sorted, disjoint ``[start, end]`` pairs."""
        keys = list(dict.fromkeys(keys))
        if not keys or any(k not in self.by_device for k in keys):
            return []
        cur = [(int(a), int(b)) for a, b in zip(*self.by_device[keys[0]], strict=True)]
        for k in keys[1:]:
            s, e = self.by_device[k]
            nxt = []
            for a, b in cur:
                lo, hi = np.maximum(s, a), np.minimum(e, b)
                nxt += [(int(x), int(y)) for x, y in zip(lo.tolist(), hi.tolist(), strict=True) if y > x]
            cur = nxt
        return [[a, b] for a, b in cur]

    def per_device(self) -> list[dict]:
        """``[{"host", "device", "unobserved_ns", "intervals"}]`` (JSON-able), by host then device."""
        return [{"host": self.hosts[h], "device": d, "unobserved_ns": int((e - s).sum()),
                 "intervals": [[a, b] for a, b in zip(s.tolist(), e.tolist(), strict=True)]}
                for (h, d), (s, e) in sorted(self.by_device.items())]


_CACHE: dict[int, tuple[weakref.ref, Unobserved]] = {}


def paused_rows(tl: Timeline) -> np.ndarray:
    """Rows of the ``gputrace.record.paused`` spans (bookkeeping: not phases, not host work)."""
    return attr_scan(tl).paused if tl.n else np.zeros(0, np.int64)


def unobserved(tl: Timeline) -> Unobserved:
    """The unobserved intervals of every device (see the module docstring); cached while ``tl`` lives."""
    hit = _CACHE.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    rows = paused_rows(tl)
    host, hosts = row_hosts(tl)
    out = Unobserved(hosts, rows)
    if len(rows):
        c = tl.cols
        lane_pid = np.array([ln.pid for ln in tl.lanes] or [0], np.int64)
        pid = lane_pid[c["lane"]]
        res = c["resource"]
        dev_rows = np.flatnonzero(c["device"] >= 0)
        ks, ss, es = [], [], []
        procs: dict[tuple[int, int, int], list[int]] = {}  # (host, resource, pid) -> its paused rows
        for r in rows.tolist():
            procs.setdefault((int(host[r]), int(res[r]), int(pid[r])), []).append(r)
        for (h, rs, p), prow in procs.items():
            same = (host[dev_rows] == h) & ((res[dev_rows] == rs) | (pid[dev_rows] == p))
            pr = np.asarray(prow, np.int64)
            for d in np.unique(c["device"][dev_rows[same]]).tolist():
                ks.append(np.full(len(pr), h * 65536 + int(d), np.int64))
                ss.append(c["start"][pr])
                es.append(c["end"][pr])
        if ks:
            g, s, e = union_by_group(np.concatenate(ks), np.concatenate(ss), np.concatenate(es))
            for k in np.unique(g).tolist():
                m = g == k
                out.by_device[(k // 65536, k % 65536)] = (s[m], e[m])
    for k in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        _CACHE.pop(k, None)
    _CACHE[id(tl)] = (weakref.ref(tl), out)
    return out


def observed_parts(u: Unobserved, host: np.ndarray, device: np.ndarray, s: np.ndarray,
                   e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of intervals [s, e) (each on device ``(host[i], device[i])``) outside that device's
    unobserved intervals: (index into the input, start, end), sorted by (index, start); empty parts dropped.
    Without unobserved time: every interval whole."""
    n = len(s)
    idx = np.arange(n, dtype=np.int64)
    s = np.asarray(s, np.int64)
    e = np.asarray(e, np.int64)
    if not u or n == 0:
        return idx, s, e
    big = np.iinfo(np.int64).max // 4
    keep = np.ones(n, bool)
    parts_i, parts_s, parts_e = [], [], []
    for (h, d), (cs, ce) in u.by_device.items():
        m = np.flatnonzero((host == h) & (device == d))
        if len(m) == 0:
            continue
        keep[m] = False
        comp_s = np.concatenate([[-big], ce])  # the observed time: the complement of the cuts
        comp_e = np.concatenate([cs, [big]])
        a, b = pair_overlaps(s[m], e[m], comp_s, comp_e)
        ps, pe = np.maximum(s[m[a]], comp_s[b]), np.minimum(e[m[a]], comp_e[b])
        ok = pe > ps
        parts_i.append(m[a][ok])
        parts_s.append(ps[ok])
        parts_e.append(pe[ok])
    parts_i.append(idx[keep])
    parts_s.append(s[keep])
    parts_e.append(e[keep])
    i, ps, pe = (np.concatenate(p).astype(np.int64) for p in (parts_i, parts_s, parts_e))
    o = np.lexsort((ps, i))
    return i[o], ps[o], pe[o]
