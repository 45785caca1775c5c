"""Copies by memory kind, sync waits and per-kernel tables, from GPU activity spans.

* :func:`copy_table`: per (phase, device, direction, source kind, destination kind): count, bytes,
  summed copy time and bandwidth; a pageable host side is flagged where the run asked for pinning
  (a ``gputrace.config.*`` pinning switch is true in its resource).
* :func:`sync_waits`: every synchronization span: the host time blocked, the GPU work it waited for
  (device work on the waited stream, or on the whole device for event/context syncs, that was
  running during the wait), and how long the host kept waiting after that work had finished.
* :func:`kernel_table`: per (phase, kernel, device): count, total, mean and longest kernel, one row per distinct
  kernel (its template arguments count); :func:`kernel_names_table`: the same per kernel over all phases.

All figures come from activity spans (``basis`` "kernels"); a Timeline without them gives empty
results. Pure numpy plus small Python loops over groups; any thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputrace import activity as A
from gputrace.analysis._common import sum_count_max
from gputrace.analysis.gpu_activity import KERNEL, KERNELS, MEMCPY, SYNC, ActivityIndex, activity_index
from gputrace.kernel_names import distinct_display, kernel_key
from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

#: Resource attributes that mean "pinning was asked for" when true (the prover's B1 switch first).
PIN_SWITCHES = ("gputrace.config.b1", "gputrace.config.pin", "gputrace.config.pinned", "gputrace.config.pinning")
_TRUE = {True, "1", "true", "True", "on", "yes"}


def _phase_name(tl: Timeline, row: int) -> str:
    p = int(tl.cols["parent"][row])
    return tl.phases[int(tl.cols["phase"][p])] if p >= 0 else "(no phase)"


def _pin_asked(tl: Timeline, switches) -> list[bool]:
    return [any(res.get(k) in _TRUE for k in switches) for res in tl.resources]


def copy_table(tl: Timeline, idx: ActivityIndex | None = None, pin_switches=PIN_SWITCHES) -> list[dict]:
    """Copies grouped per (phase, device, kind, src_kind, dst_kind), most bytes first.

    Each entry: ``phase`` (the enqueuing phase, "(no phase)" if none), ``device``, ``kind``
    (HtoD/DtoH/...), ``src_kind``, ``dst_kind``, ``count``, ``bytes``, ``ns`` (summed copy time),
    ``gbps`` (bytes / ns, None for zero time), ``pageable`` (the host side is PAGEABLE),
    ``pin_asked`` (a pinning switch was on in the copies' run), ``flag`` (pageable where pinning was
    asked for), ``basis`` ("kernels": activity truth).
    """
    idx = idx or activity_index(tl)
    rows = idx.rows[idx.what == MEMCPY]
    s, e = idx.start[idx.what == MEMCPY], idx.end[idx.what == MEMCPY]
    asked = _pin_asked(tl, pin_switches)
    acc: dict[tuple, list] = {}
    res = tl.cols["resource"]
    for r, d, nb in zip(rows.tolist(), (e - s).tolist(), tl.cols["nbytes"][rows].tolist(), strict=True):
        a = tl.attrs.get(r, {})
        pin = bool(asked[int(res[r])]) if 0 <= int(res[r]) < len(asked) else False
        key = (_phase_name(tl, r), int(tl.cols["device"][r]), a.get(A.MEMCPY_KIND, "unknown"),
               a.get(A.MEMCPY_SRC, "UNKNOWN"), a.get(A.MEMCPY_DST, "UNKNOWN"), pin)
        v = acc.setdefault(key, [0, 0, 0])
        v[0] += 1
        v[1] += max(nb, 0)
        v[2] += d
    out = []
    for (phase, dev, kind, src, dst, pin), (n, nb, ns) in acc.items():
        pageable = (kind in ("HtoD", "HtoH") and src == "PAGEABLE") or (kind in ("DtoH", "HtoH") and dst == "PAGEABLE")
        out.append({"phase": phase, "device": dev, "kind": kind, "src_kind": src, "dst_kind": dst, "count": n,
                    "bytes": nb, "ns": ns, "gbps": (nb / ns) if ns > 0 else None, "pageable": pageable,
                    "pin_asked": pin, "flag": pageable and pin, "basis": KERNELS})
    out.sort(key=lambda r: (-r["bytes"], r["phase"], r["device"]))
    return out


def sync_waits(tl: Timeline, idx: ActivityIndex | None = None, top_kernels: int = 3) -> list[dict]:
    """Every sync span in which the host blocked (``activity.BLOCKING_SYNC_TYPES``; a poll such as
    ``cudaEventQuery`` or a ``cudaStreamWaitEvent`` is not a wait), longest wait first.

    Each entry: ``row``, ``type`` (stream/event/context/...), ``device``, ``stream`` (waited on, or
    None), ``start``, ``wait_ns`` (host time blocked), ``gpu_busy_ns`` (union of the waited-for work
    inside the wait), ``work`` (count of those kernels/copies/memsets), ``after_gpu_ns`` (time from
    the end of the last waited-for work to the end of the wait; the whole wait if nothing ran),
    ``kernels`` (top kernel names by time inside the wait), ``phase`` (enclosing phase), ``basis``,
    ``host_next_ns`` (host time from the end of the wait to the start of the next sync on the same thread lane, or
    to that lane's last span end: the host work that could run during the wait were the sync moved or dropped).
    """
    idx = idx or activity_index(tl)
    sync = np.flatnonzero(idx.what == SYNC)
    if len(sync):  # only syncs that block the host: not a poll nor a stream's wait on an event
        blocking = [(a.get(A.SYNC_TYPE, "unknown") in A.BLOCKING_SYNC_TYPES
                     and A.sync_type_of_api(a.get(A.API)) not in ("poll", "stream_wait_event"))
                    for a in (tl.attrs.get(int(idx.rows[i]), {}) for i in sync.tolist())]
        sync = sync[np.asarray(blocking, bool)]
    if len(sync) == 0:
        return []
    dw = np.flatnonzero(idx.what != SYNC)
    d_rows, d_s, d_e, d_dev, d_stream = idx.rows[dw], idx.start[dw], idx.end[dw], idx.device[dw], idx.stream[dw]
    order = np.argsort(d_s, kind="stable")
    d_rows, d_s, d_e, d_dev, d_stream = d_rows[order], d_s[order], d_e[order], d_dev[order], d_stream[order]
    pm = np.maximum.accumulate(d_e) if len(d_e) else d_e
    host_next = _host_next(tl, idx.rows[sync], idx.start[sync], idx.end[sync])
    out = []
    for k, i in enumerate(sync.tolist()):
        r = int(idx.rows[i])
        a = tl.attrs.get(r, {})
        s0, e0, dev = int(idx.start[i]), int(idx.end[i]), int(idx.device[i])
        st = a.get(A.SYNC_TYPE, "unknown")
        stream = a.get(A.SYNC_STREAM)
        lo = int(np.searchsorted(pm, s0, side="right"))
        hi = int(np.searchsorted(d_s, e0, side="left"))
        m = d_e[lo:hi] > s0
        if dev >= 0:
            m &= d_dev[lo:hi] == dev
        if st == "stream" and stream is not None:
            m &= d_stream[lo:hi] == int(stream)
        sel = np.flatnonzero(m) + lo
        cs, ce = np.maximum(d_s[sel], s0), np.minimum(d_e[sel], e0)
        busy = 0
        if len(sel):
            o = np.argsort(cs, kind="stable")
            cs, ce = cs[o], ce[o]
            run_end = np.maximum.accumulate(ce)
            starts_new = np.ones(len(cs), bool)
            starts_new[1:] = cs[1:] > run_end[:-1]
            seg_s = cs[starts_new]
            seg_e = np.maximum.reduceat(ce, np.flatnonzero(starts_new))
            busy = int((seg_e - seg_s).sum())
        last = int(d_e[sel].max()) if len(sel) else s0
        names: dict[str, int] = {}
        inside = (np.minimum(d_e[sel], e0) - np.maximum(d_s[sel], s0)).tolist()
        for rr, ns in zip(d_rows[sel].tolist(), inside, strict=True):
            if tl.attrs.get(rr, {}).get(A.ACTIVITY) == "kernel":
                n = tl.name_of(rr)
                names[n] = names.get(n, 0) + ns
        out.append({"row": r, "type": st, "device": dev, "stream": None if stream is None else int(stream),
                    "start": s0, "wait_ns": e0 - s0, "gpu_busy_ns": busy, "work": int(len(sel)),
                    "after_gpu_ns": max(e0 - max(last, s0), 0),
                    "kernels": [{"name": n, "ns": ns}
                                for n, ns in sorted(names.items(), key=lambda kv: -kv[1])[:top_kernels]],
                    "phase": _phase_name(tl, r), "basis": KERNELS, "host_next_ns": int(host_next[k])})
    out.sort(key=lambda w: -w["wait_ns"])
    return out


def _host_next(tl: Timeline, rows: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per sync (``rows``, host times ``s``/``e``): the host time from its end to the start of the next sync on
    its lane (a thread), or to the lane's last span end for the last one; 0 at least."""
    lane = tl.cols["lane"][rows].astype(np.int64)
    lane_end = np.full(len(tl.lanes), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(lane_end, tl.cols["lane"].astype(np.int64), tl.cols["end"].astype(np.int64))
    order = np.lexsort((s, lane))
    nxt = lane_end[lane[order]]
    same = lane[order][1:] == lane[order][:-1]
    nxt[:-1] = np.where(same, s[order][1:], nxt[:-1])
    out = np.empty(len(rows), np.int64)
    out[order] = np.maximum(nxt - e[order], 0)
    return out


def _full_names(tl: Timeline, rows: np.ndarray) -> list[str]:
    """Each kernel row's full name (``cuda.kernel.name``, else its span name). A ``RowAttrs``/``TemplateAttrs``
    row whose overlay does not hold the name is answered from its shared dict once per shared dict."""
    out: list[str] = []
    shared: dict[int, object] = {}
    plain: dict[int, bool] = {}
    overlaid = (RowAttrs, TemplateAttrs)
    attrs: dict[int, Any] = tl.attrs  # dicts, RowAttrs, TemplateAttrs (any Mapping)
    name_of, key = tl.name_of, A.KERNEL_NAME
    for r in rows.tolist():
        a = attrs.get(r)
        v = None
        if a is not None:
            if type(a) in overlaid:
                ks = a.keys_
                p = plain.get(id(ks))
                if p is None:
                    p = plain[id(ks)] = key not in ks
                if p:
                    sh = a.shared
                    v = shared.get(id(sh), shared)
                    if v is shared:
                        v = shared[id(sh)] = sh.get(key)
                else:
                    v = a.get(key)
            else:
                v = a.get(key)
        out.append(str(v) if v is not None else name_of(r))
    return out


def kernel_table(tl: Timeline, idx: ActivityIndex | None = None) -> list[dict]:
    """Per (phase, kernel, device), one row per distinct kernel (``kernel_names.kernel_key``: template arguments
    that differ make two rows, however the source spells them): ``count``, ``total_ns``, ``mean_ns``,
    ``max_ns``, largest total first; ``display``: a short name no other kernel of the table has
    (``kernel_names.distinct_display``: what tables show), ``kernel``: the span name (the source's short name,
    which kernels differing only in template arguments share), ``full_name`` (the demangled name of the group's
    first kernel), ``key`` (``kernel_key``)."""
    idx = idx or activity_index(tl)
    k = idx.what == KERNEL
    rows, d = idx.rows[k], (idx.end[k] - idx.start[k])
    if len(rows) == 0:
        return []
    c = tl.cols
    par = c["parent"][rows]
    pphase = np.where(par >= 0, c["phase"][np.maximum(par, 0)], -1).astype(np.int64)
    names = _full_names(tl, rows)
    key_ix: dict[str, int] = {}
    kid = np.fromiter((key_ix.setdefault(kernel_key(n), len(key_ix)) for n in names), np.int64, len(names))
    dev = c["device"][rows].astype(np.int64)
    nk = len(key_ix) + 1
    key = ((pphase + 1) * nk + kid) * 65536 + (dev + 1)
    uk, inv, tot, cnt, mx = sum_count_max(key, d)
    first = np.zeros(len(uk), np.int64)
    first[inv[::-1]] = np.arange(len(rows))[::-1]  # a kernel of each group (the first): its full name
    keys = list(key_ix)
    shown = distinct_display(keys)
    out = []
    for j, u in enumerate(uk.tolist()):
        dv = u % 65536 - 1
        pk = u // 65536
        pp, kk = pk // nk - 1, pk % nk
        full = names[int(first[j])]
        disp = shown[keys[kk]]
        span = tl.phases[int(c["phase"][rows[int(first[j])]])]
        out.append({"phase": tl.phases[pp] if pp >= 0 else "(no phase)", "kernel": span, "device": dv,
                    "full_name": full, "display": disp, "key": keys[kk],
                    "count": int(cnt[j]), "total_ns": int(tot[j]), "mean_ns": float(tot[j] / cnt[j]),
                    "max_ns": int(mx[j]), "basis": KERNELS})
    out.sort(key=lambda r: -r["total_ns"])
    return out


def kernel_names_table(table: list[dict], top: int = 1000) -> list[dict]:
    """Per distinct kernel (``key``), over every phase and device of ``table`` (``kernel_table``'s rows):
    ``kernel``, ``display``, ``full_name``, ``key``, ``count``, ``total_ns``, ``max_ns``; largest total
    first, at most ``top`` (a trace of a million distinct kernels stays a bounded document)."""
    acc: dict[str, dict] = {}
    for r in table:
        a = acc.get(r["key"])
        if a is None:
            acc[r["key"]] = {"kernel": r["kernel"], "display": r["display"], "full_name": r["full_name"],
                             "key": r["key"], "count": r["count"], "total_ns": r["total_ns"], "max_ns": r["max_ns"]}
        else:
            a["count"] += r["count"]
            a["total_ns"] += r["total_ns"]
            a["max_ns"] = max(a["max_ns"], r["max_ns"])
    out = sorted(acc.values(), key=lambda a: (-a["total_ns"], a["key"]))
    return out[:top]
