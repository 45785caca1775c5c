"""Chrome Trace Event / Perfetto JSON as a stream of byte chunks: ``chrome_chunks(tl)``.

The writer behind ``export.write_chrome`` and ``to_chrome`` (format rules in
:mod:`gputrace.timeline.formats.chrome`). Memory is bounded by one chunk of rows plus a few numpy columns
per row; the whole document is never held (the dict-per-event writer peaked at 2 GiB for 1 M spans).

Two passes: ``_layout`` places every row on a (pid, tid) track (Perfetto needs properly nested ``X``
events per thread, so partial overlaps go to ``(overlap N)`` sub-tracks) and collects the metadata
events, which therefore come first; then rows are written in chunks of ``CHUNK_ROWS`` as JSON text
built from per-phase/per-trace fragments and per-row numbers. Hand-written rather than
``orjson.dumps`` of dicts: building a dict per span was the exporter's whole cost (55-69 s for 1 M
spans); values that are not fixed-shape numbers (names, attribute dicts) still go through orjson.

GPU activity spans (``gputrace.activity`` = kernel/memcpy/memset/sync, from CUPTI or an Nsight import)
carry Kineto's categories (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_sync``) and arguments
(``device``, ``stream``, ``correlation``, ``grid``, ``block``, ``registers per thread``, ``shared
memory``, ``bytes``), the fields PyTorch profiler traces carry, so Holistic Trace Analysis finds them.
Pure functions; no threads. ``progress(done_rows, total_rows)`` is called after each chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import orjson

from gputrace.otlp.encode import CUT, MAX_WRITE_DEPTH
from gputrace.phases import phase_hex
from gputrace.timeline.model import KIND_NAMES, Timeline

__all__ = ["chrome_chunks", "GENERATOR", "KINETO_CATEGORIES", "KINETO_ARGS", "CHUNK_ROWS"]

#: ``otherData.generator`` of gputrace's own exports (the reader restores lanes and ids from them).
GENERATOR = "gputrace"
#: Rows per written chunk (bounds the writer's Python objects).
CHUNK_ROWS = 32768
#: ``gputrace.activity`` -> Kineto category.
KINETO_CATEGORIES = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "sync": "cuda_sync"}
#: Argument names added for Kineto/HTA (the reader drops them again from gputrace's own exports).
KINETO_ARGS = ("stream", "correlation", "External id", "grid", "block", "registers per thread", "shared memory")
#: The args every row may get from its columns; an attribute with one of these names is written only
#: when the row has no such column value (as ``dict.setdefault`` did).
_STANDARD = frozenset(("phase", "color", "kind", "span_id", "parent_span_id", "trace_id", "device", "circuit", "batch",
                       "bytes", "resource", "status", "name", "host.ts_us", "host.dur_us", "gpu.ts_us", "gpu.dur_us",
                       *KINETO_ARGS))
_STREAM_RE = re.compile(r"stream:(\d+)$")
#: Kind code -> category of a span that is not GPU activity (the kind name).
KIND_CAT = [KIND_NAMES.get(k, "host") for k in range(max(KIND_NAMES) + 1)]


def _jsonable(v: Any, depth: int = 0) -> Any:
    """``v`` as JSON-able values; lists and maps nested deeper than ``MAX_WRITE_DEPTH`` become ``CUT``."""
    if isinstance(v, (str, bool, int, float)) or v is None:
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (list, tuple, Mapping)) and depth >= MAX_WRITE_DEPTH:
        return CUT
    if isinstance(v, (list, tuple)):
        return [_jsonable(x, depth + 1) for x in v]
    if isinstance(v, Mapping):  # dicts and RowAttrs (shared + per-row attribute views)
        return {str(k): _jsonable(x, depth + 1) for k, x in v.items()}
    item = getattr(v, "item", None)
    return _jsonable(item(), depth) if callable(item) else str(v)


def _j(v: Any) -> str:
    return orjson.dumps(_jsonable(v), option=orjson.OPT_NON_STR_KEYS).decode()


def _us(ns: np.ndarray) -> list[str]:
    """Nanoseconds -> microseconds as JSON number text. Exact below 10^15 ns (11 days from the trace's
    start): the shortest repr of ns/1000 is then its 3-decimal value. orjson formats a chunk of floats
    3x faster than f-strings of divmod parts."""
    if not len(ns):
        return []
    return orjson.dumps((ns / 1000.0).tolist())[1:-1].decode().split(",")


def _title(kind: object) -> str:
    """'PAGEABLE' -> 'Pageable', 'DEVICE_STATIC' -> 'Device Static' (Kineto's memory-kind spelling)."""
    return str(kind or "unknown").replace("_", " ").title()


# ---- pass 1: tracks ----------------------------------------------------------------------
class _Layout:
    """Where each row is drawn: track (pid, tid), drawn interval, and the emission order."""

    def __init__(self, tl: Timeline) -> None:
        n = tl.n
        c = tl.cols
        self.pid = np.zeros(n, np.int64)
        self.tid = np.zeros(n, np.int64)
        self.s = np.zeros(n, np.int64)
        self.e = np.zeros(n, np.int64)
        self.use = np.zeros(n, bool)  # drawn at device time
        self.stream = np.full(n, -1, np.int64)  # Kineto "stream" (from a stream:N lane)
        emit: list[np.ndarray] = []
        self.meta: list[dict] = []
        self.lane_map: dict[str, dict] = {}
        procs: dict[tuple[str, int], int] = {}
        pids_per_proc: dict[tuple[str, int], set[int]] = {}
        for lane in tl.lanes:
            pids_per_proc.setdefault((lane.host, lane.device), set()).add(lane.pid)
        next_tid: dict[int, int] = {}
        for k, lane in tl.iter_lanes():
            pkey = (lane.host, lane.device)
            pid = procs.get(pkey)
            if pid is None:
                pid = procs[pkey] = len(procs) + 1
                label = f"{lane.host} {lane.device_label}"
                self.meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
                self.meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                                  "args": {"sort_index": pid}})
            base_name = lane.name if len(pids_per_proc[pkey]) == 1 else f"{lane.name} [pid {lane.pid}]"
            rows = tl.lane_rows(k)
            if lane.device >= 0:
                g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
                use = (g0 >= 0) & (g1 >= g0)
                s = np.where(use, g0, c["start"][rows])
                e = np.where(use, g1, c["end"][rows])
                m = _STREAM_RE.match(lane.name)
                if m:
                    self.stream[rows] = int(m.group(1))
            else:
                use = np.zeros(len(rows), bool)
                s, e = c["start"][rows], c["end"][rows]
            order = np.lexsort((-e, s))
            tix = self._tracks(s[order].tolist(), e[order].tolist())
            ntracks = int(tix.max()) + 1 if len(tix) else 0
            tids = []
            for t in range(ntracks):
                tid = next_tid[pid] = next_tid.get(pid, 0) + 1
                tids.append(tid)
                tname = base_name if t == 0 else f"{base_name} (overlap {t})"
                self.meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
                self.meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                                  "args": {"sort_index": tid}})
                self.lane_map[f"{pid}/{tid}"] = {"host": lane.host, "pid": lane.pid, "device": lane.device,
                                                 "name": lane.name}
            ro = rows[order]
            self.pid[ro] = pid
            self.tid[ro] = np.asarray(tids, np.int64)[tix] if len(tix) else 0
            self.s[rows], self.e[rows], self.use[rows] = s, e, use
            emit.append(ro)
        self.emit = np.concatenate(emit) if emit else np.zeros(0, np.int64)

    @staticmethod
    def _tracks(s: list[int], e: list[int]) -> np.ndarray:
        """Track index per event (events in (start, -end) order): each track keeps a stack of open
        end times; an event goes to the first track on which it nests."""
        out = np.zeros(len(s), np.int64)
        tracks: list[list[int]] = []
        for i, (si, ei) in enumerate(zip(s, e, strict=True)):
            placed = -1
            for ti, stack in enumerate(tracks):
                while stack and stack[-1] <= si:
                    stack.pop()
                if not stack or stack[-1] >= ei:
                    placed = ti
                    break
            if placed < 0:
                tracks.append([])
                placed = len(tracks) - 1
            tracks[placed].append(ei)
            if placed:
                out[i] = placed
        return out


# ---- pass 2: events ----------------------------------------------------------------------
class _Writer:
    def __init__(self, tl: Timeline, lay: _Layout) -> None:
        self.tl, self.lay = tl, lay
        self.t0 = tl.t0
        self.phase_json = [_j(p) for p in tl.phases]
        self.hex = [phase_hex(p) for p in tl.phases]
        self.trace_frag = [f',"trace_id":{_j(t)}' for t in tl.trace_ids]
        self.n_res = len(tl.resources)
        self.prefix: dict[tuple[int, int], str] = {}
        self.frag: dict[int, tuple] = {}  # id(attr dict) -> (fragment, activity, kineto fragment)

    def _prefix(self, p: int, k: int) -> str:
        key = (p, k)
        v = self.prefix.get(key)
        if v is None:
            v = self.prefix[key] = (f'"phase":{self.phase_json[p]},"color":"{self.hex[p]}",'
                                    f'"kind":"{KIND_NAMES.get(k, "host")}"')
        return v

    def _attrs(self, a: Mapping) -> tuple[str | None, str | None, str, str | None]:
        """(fragment of the extra args or None if the slow path is needed, activity, Kineto args,
        Kineto event name as JSON or None)."""
        hit = self.frag.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1], hit[2], hit[3], hit[4]
        act = a.get("gputrace.activity")
        kin = []
        kname = None
        if act == "memcpy":  # Kineto's names; tools classify copies by them ("Memcpy ...": memory)
            kname = _j(f"Memcpy {a.get('cuda.memcpy.kind', 'unknown')} ({_title(a.get('cuda.memcpy.src_kind'))} -> "
                       f"{_title(a.get('cuda.memcpy.dst_kind'))})")
        elif act == "memset":
            kname = _j(f"Memset ({_title(a.get('cuda.memset.kind'))})")
        if act in KINETO_CATEGORIES:
            corr = a.get("cuda.correlation_id")
            if isinstance(corr, int):
                kin.append(f',"correlation":{corr},"External id":{corr}')
            if isinstance(a.get("cuda.grid"), list):
                kin.append(f',"grid":{_j(a["cuda.grid"])}')
            if isinstance(a.get("cuda.block"), list):
                kin.append(f',"block":{_j(a["cuda.block"])}')
            if isinstance(a.get("cuda.registers_per_thread"), int):
                kin.append(f',"registers per thread":{a["cuda.registers_per_thread"]}')
            shm = sum(v for v in (a.get("cuda.shared_memory.static"), a.get("cuda.shared_memory.dynamic"))
                      if isinstance(v, int))
            if shm:
                kin.append(f',"shared memory":{shm}')
        frag: str | None
        if any(k in _STANDARD for k in a):
            frag = None
        else:
            body = _j(a)
            frag = "," + body[1:-1] if len(body) > 2 else ""
        out = (frag, act if act in KINETO_CATEGORIES else None, "".join(kin), kname)
        if len(self.frag) > 4096:
            self.frag.clear()
        self.frag[id(a)] = (a, *out)
        return out

    def chunk(self, rows: np.ndarray) -> bytes:
        """JSON text of the rows' ``X`` events, comma-separated. Column-wise: each optional argument
        is one list comprehension over the chunk, then one pass joins them (a loop with appends per
        row measured 2x slower)."""
        tl, lay, t0 = self.tl, self.lay, self.t0
        c = tl.cols
        n = len(rows)

        def L(k):
            return c[k][rows].tolist()

        phase, kind = L("phase"), L("kind")
        s, e, use = lay.s[rows], lay.e[rows], lay.use[rows]
        ts, dur = _us(s - t0), _us(e - s)
        pid, tid = lay.pid[rows].tolist(), lay.tid[rows].tolist()
        pk = c["phase"][rows].astype(np.int64) * 256 + (c["kind"][rows].astype(np.int64) & 255)
        pre_of = {int(k): self._prefix(int(k) >> 8, int(k) & 255) for k in np.unique(pk).tolist()}
        pre = [pre_of[k] for k in pk.tolist()]
        sidf = [f',"span_id":"{x:016x}"' if x else "" for x in L("span_id")]
        psidf = [f',"parent_span_id":"{x:016x}"' if x else "" for x in L("parent_span_id")]
        trace_frag, n_tr, n_res = self.trace_frag, len(self.trace_frag), self.n_res
        trf = [trace_frag[x] if 0 <= x < n_tr else "" for x in L("trace")]
        res = c["resource"][rows]
        res = np.where(res < n_res, res, -1).tolist()
        status = ("", ',"status":"ok"', ',"status":"error"')
        nums = [(f',"device":{d}' if d >= 0 else "") + (f',"circuit":{ci}' if ci >= 0 else "")
                + (f',"batch":{b}' if b >= 0 else "") + (f',"bytes":{nb}' if nb >= 0 else "")
                + (f',"resource":{r}' if r >= 0 else "") + (status[st] if 0 < st < 3 else "")
                for d, ci, b, nb, r, st in zip(L("device"), L("circuit"), L("batch"), L("nbytes"), res, L("status"),
                                                         strict=True)]
        # Times kept in args: host times of spans drawn at device time, device times of the others.
        extra = ["" for _ in range(n)]
        if use.any():
            ix = np.flatnonzero(use)
            r_ = rows[ix]
            a0, d0 = _us(c["start"][r_] - t0), _us(c["end"][r_] - c["start"][r_])
            for j, a, d in zip(ix.tolist(), a0, d0, strict=True):
                extra[j] = f',"host.ts_us":{a},"host.dur_us":{d}'
        g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
        gok = (~use) & (g0 >= 0) & (g1 >= g0)
        if gok.any():
            ix = np.flatnonzero(gok)
            a0, d0 = _us(g0[ix] - t0), _us(g1[ix] - g0[ix])
            for j, a, d in zip(ix.tolist(), a0, d0, strict=True):
                extra[j] = f',"gpu.ts_us":{a},"gpu.dur_us":{d}'
        phase_json = self.phase_json
        names_ = [phase_json[p] for p in phase]  # the event name as JSON
        cats = [KIND_CAT[k] if 0 <= k < len(KIND_CAT) else "host" for k in kind]
        tails = ["" for _ in range(n)]  # name override, Kineto args, attributes
        args_full: dict[int, str] = {}  # rows whose args need the slow path
        names, attrs, phases = tl.names, tl.attrs, tl.phases
        if names or attrs:
            stream = lay.stream[rows].tolist()
            for j, r in enumerate(rows.tolist()):
                nm = names.get(r) if names else None
                ra = attrs.get(r) if attrs else None
                if not nm and not ra:
                    continue
                p = phase[j]
                tail = ""
                if nm and nm != phases[p]:
                    names_[j] = _j(nm)
                    tail = f',"name":{names_[j]}'
                if ra:
                    frag, act, kin, kname = self._attrs(ra)
                    if act is not None:
                        cats[j] = KINETO_CATEGORIES[act]
                        if stream[j] >= 0:
                            tail += f',"stream":{stream[j]}'
                        tail += kin
                        if kname is not None:  # named as Kineto names it; args.name keeps ours
                            if not tail.startswith(',"name":'):
                                tail = f',"name":{names_[j]}' + tail
                            names_[j] = kname
                    if frag is None:  # an attribute named like a column arg: the column's value wins
                        d = orjson.loads("{" + pre[j] + sidf[j] + psidf[j] + trf[j] + nums[j] + extra[j] + tail + "}")
                        for key, v in ra.items():
                            d.setdefault(key, _jsonable(v))
                        args_full[j] = orjson.dumps(d).decode()
                        continue
                    tail += frag
                tails[j] = tail
        out = [f'{{"name":{nm},"cat":"{ct}","ph":"X","ts":{a},"dur":{d},"pid":{pi},"tid":{ti},'
               f'"args":{{{p}{s1}{s2}{t}{nu}{x}{tl_}}}}}'
               for nm, ct, a, d, pi, ti, p, s1, s2, t, nu, x, tl_
               in zip(names_, cats, ts, dur, pid, tid, pre, sidf, psidf, trf, nums, extra, tails, strict=True)]
        for j, args in args_full.items():
            out[j] = (f'{{"name":{names_[j]},"cat":"{cats[j]}","ph":"X","ts":{ts[j]},"dur":{dur[j]},'
                      f'"pid":{pid[j]},"tid":{tid[j]},"args":{args}}}')
        return ",".join(out).encode()


def _flows(tl: Timeline, lay: _Layout, t0: int) -> Iterator[tuple[bytes, int]]:
    """Flow event pairs parent -> child for children on another lane, in chunks.

    The start sits inside the parent's slice (at the child's host start, clamped to the slice) so
    Perfetto binds it to the parent; the finish (``bp: e``) binds to the child's enclosing slice.
    """
    c = tl.cols
    par = c["parent"]
    kids = np.nonzero(par >= 0)[0]
    if len(kids) == 0:
        return
    ps = par[kids]
    kids = kids[c["lane"][kids] != c["lane"][ps]]
    ps = par[kids]
    at = np.clip(c["start"][kids], lay.s[ps], lay.e[ps])
    for a in range(0, len(kids), CHUNK_ROWS):
        k, p = kids[a:a + CHUNK_ROWS], ps[a:a + CHUNK_ROWS]
        ats, fts = _us(at[a:a + CHUNK_ROWS] - t0), _us(lay.s[k] - t0)
        pp, pt, kp, kt = lay.pid[p].tolist(), lay.tid[p].tolist(), lay.pid[k].tolist(), lay.tid[k].tolist()
        out = [f'{{"name":"parent","cat":"gputrace.flow","ph":"s","id":{fid},"ts":{t1},"pid":{p1},"tid":{q1}}},'
               f'{{"name":"parent","cat":"gputrace.flow","ph":"f","bp":"e","id":{fid},"ts":{t2},"pid":{p2},"tid":{q2}}}'
               for fid, t1, p1, q1, t2, p2, q2
               in zip(range(a + 1, a + 1 + len(k)), ats, pp, pt, fts, kp, kt, strict=True)]
        yield ",".join(out).encode(), 2 * len(out)


def chrome_chunks(tl: Timeline, flows: bool = True, progress: Callable[[int, int], None] | None = None,
                  counts: dict | None = None) -> Iterator[bytes]:
    """The Timeline as Chrome Trace Event JSON (``{"traceEvents": [...], ...}``), in byte chunks whose
    concatenation is the document. ``counts`` (if given) receives ``events`` when done."""
    lay = _Layout(tl)
    t0 = tl.t0
    # otherData first: a streaming reader needs the lanes and the epoch before the events.
    other = {"generator": GENERATOR, "t0_epoch_ns": str(t0), "lanes": lay.lane_map,
             "resources": [_jsonable(r) for r in tl.resources]}
    yield (b'{"otherData":' + orjson.dumps(other, option=orjson.OPT_NON_STR_KEYS)
           + b',"displayTimeUnit":"ns","traceEvents":[')
    events = len(lay.meta)
    sep = b""
    if lay.meta:
        yield b",".join(orjson.dumps(m) for m in lay.meta)
        sep = b","
    w = _Writer(tl, lay)
    n = tl.n
    for a in range(0, n, CHUNK_ROWS):
        rows = lay.emit[a:a + CHUNK_ROWS]
        yield sep + w.chunk(rows)
        sep = b","
        events += len(rows)
        if progress is not None:
            progress(min(a + CHUNK_ROWS, n), n)
    if flows and n:
        for part, count in _flows(tl, lay, t0):
            yield sep + part
            sep = b","
            events += count
    yield b"]}"
    if counts is not None:
        counts["events"] = events
