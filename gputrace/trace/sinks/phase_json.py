"""Finished ``Phase`` objects -> OTLP JSON span text, without span dicts. Exporter thread only.

The file sink's fast path. Contract: for every phase, ``encode_phases`` yields exactly
``otlp.encode.span_json(records.to_span(p, ids, off))`` and assigns the same ids in the same order as
``to_span`` would (tests compare the bytes over many phase shapes), so a run written through this path
equals one written from span records.

Why hand-written: file writing is bounded by the exporter's per-span Python work (issue 2 asks for
0.5 M spans/s), and going through a span dict, an attribute dict and a per-attribute encoder cost ~10 µs
per span on the CI box. Here:

* a phase without keywords, stream, ``set()`` or error (most phases of a pipeline) has every byte of its
  span fixed by (thread, name, device, bytes) except the ids and the two times: that text is cached per
  shape and the span is one f-string;
* other phases mirror ``records.to_span`` attribute by attribute, but hold encoded ``KeyValue`` texts
  (cached per (key, value) for str and small int values) in the dict instead of values, so the
  attribute order, overrides (``set()`` of an existing key) and error fields come out the same;
* span ids and their hex text come from a per-batch numpy table (``_id_table``);
* siblings share the text around their span id (trace id, parent id), built once per parent and batch.
"""

from __future__ import annotations

import sys

import orjson

from gputrace.otlp.encode import attributes_json, json_string
from gputrace.otlp.ids import STATUS_ERROR
from gputrace.phases import phase_kind
from gputrace.trace.hotpath import Phase
from gputrace.trace.records import _GOLDEN, _KNOWN, _MASK64, _SPECIAL, _ids_of, _kind_cache

_MID = '","endTimeUnixNano":"'
_CACHE_MAX = 1 << 16
_SMALL = 1 << 40  # ints cached as KeyValue text: ids, devices, sizes; not timestamps (unique per span)

# (thread state, name, device, bytes) -> (head, tail, {key: KeyValue text}) of a phase without keywords:
# head runs from ',"name"' up to the start time's digits, tail from after the end time's digits.
_frags: dict = {}
_heads: dict = {}  # name -> head
_kvs: dict = {}  # (key, value) -> KeyValue text, for str and small int values


def _kv(k: str, v) -> str:
    """``{"key":k,"value":AnyValue}`` text, exactly as ``otlp.encode`` encodes the attribute."""
    t = type(v)
    if t is str or (t is int and -_SMALL < v < _SMALL):
        key = (k, v)  # (type checked first: True == 1 and 1.0 == 1 hash alike)
        b = _kvs.get(key)
        if b is None:
            # (the int text as otlp.encode.attributes_json writes it; the test suite compares them)
            b = f'{{"key":{json_string(k)},"value":{{"intValue":"{v}"}}}}' if t is int else attributes_json({k: v})
            if len(_kvs) >= _CACHE_MAX:
                _kvs.clear()
            _kvs[key] = b
        return b
    return attributes_json({k: v})


def _head(name: str) -> str:
    h = _heads.get(name)
    if h is None:
        h = f',"name":{json_string(name)},"kind":1,"startTimeUnixNano":"'  # TypeError for a non-str name
        if len(_heads) >= _CACHE_MAX:
            _heads.clear()
        _heads[name] = h
    return h


def _kind_of(name: str):
    kind = _kind_cache.get(name)
    if kind is None:
        kind = _kind_cache[name] = phase_kind(name)
    return kind


def _fragment(key) -> tuple[str, str, dict, str, str]:
    # Same keys, same order as records._template.
    st, name, device, nbytes = key
    a: dict = {}
    if device is not None:
        a["gputrace.device"] = _kv("gputrace.device", device)
    if nbytes is not None:
        a["gputrace.bytes"] = _kv("gputrace.bytes", nbytes)
    pre = ",".join(a.values())  # device, bytes: circuit/batch keywords go between these and the rest
    a["gputrace.lane"] = lane = _kv("gputrace.lane", st.lane)
    a["gputrace.kind"] = kind = _kv("gputrace.kind", _kind_of(name))
    a["thread.id"] = tid = _kv("thread.id", st.ident)
    attrs = f'","attributes":[{",".join(a.values())}]}}'
    return _store(_frags, key, (_head(name), attrs, a, pre, f"{lane},{kind},{tid}]}}"))


_kwfrags: dict = {}


_KW_PLAIN = frozenset(("circuit", "batch", "parent"))


def _kw_fragment(p, kw):
    """(head, tail, texts) of a phase with keywords and no stream; None when not cacheable.

    Keywords among ``circuit``/``batch``/``parent`` only (the usual ones; batch numbers rarely repeat),
    without ``set()`` or error: the plain shape's text with the two attributes spliced in after
    device/bytes, where ``to_span`` puts them (texts None: the caller needs no dict). Otherwise cached per
    (thread, name, device, bytes, keyword items) when every keyword value (``parent`` aside) is a str or
    an int (exact types: True == 1 and 1.0 == 1 would share a key)."""
    if kw.keys() <= _KW_PLAIN and p.extra is None and p.err is None:
        key = (p.st, p.name, p.device, p.nbytes)
        f = _frags.get(key)
        if f is None:
            f = _fragment(key)
        parts = [f[3]] if f[3] else []
        for k, v in kw.items():
            if v is not None and k != "parent":
                parts.append(_kv(_KNOWN[k], v))
        parts.append(f[4])
        return f[0], '","attributes":[' + ",".join(parts), None
    parts_key: list = [p.st, p.name, p.device, p.nbytes]
    for k, v in kw.items():
        t = type(v)
        if t is int or t is str:
            parts_key.append(k)
            parts_key.append(v)
        elif k != "parent":
            return None
    key = tuple(parts_key)
    f = _kwfrags.get(key)
    return f if f is not None else _store(_kwfrags, key, _texts_fragment(p, kw))


_cdfrags: dict = {}


def _cd_fragment(p, cd):
    """(head, tail, texts) of a phase without keywords opened with a stream but without device times: every
    attribute is fixed by (thread, name, device, bytes, stream device, lane), so the text is cached."""
    key = (p.st, p.name, p.device, p.nbytes, cd[0], cd[1])
    f = _cdfrags.get(key)
    return f if f is not None else _store(_cdfrags, key, _texts_fragment(p, None))


def _texts_fragment(p, kw) -> tuple:
    """(head, tail, texts) of a phase from its attribute texts (:func:`_attr_texts`): a cache miss of
    :func:`_kw_fragment` or :func:`_cd_fragment`."""
    a = _attr_texts(p, kw, 0)
    return _head(p.name), f'","attributes":[{",".join(a.values())}]}}', a


def _store(cache: dict, key, f):
    """Keep ``f`` under ``key`` in one of the fragment caches, emptied when it reaches 4096 entries
    (phase shapes are few; a flood of distinct keyword values must not grow it without bound). Returns f."""
    if len(cache) >= 4096:
        cache.clear()
    cache[key] = f
    return f


def _attr_texts(p, kw, off: int) -> dict:
    """{key: KeyValue text} of a phase with keywords or a stream, in ``records.to_span``'s order."""
    a: dict = {}
    device = p.device
    if device is not None:
        a["gputrace.device"] = _kv("gputrace.device", device)
    if p.nbytes is not None:
        a["gputrace.bytes"] = _kv("gputrace.bytes", p.nbytes)
    lane = kind = None
    user = None
    if kw:
        for k, v in kw.items():
            key = _KNOWN.get(k)
            if key is not None:
                if v is not None:
                    a[key] = _kv(key, v)
            elif k in _SPECIAL:
                if k == "lane":
                    lane = v
                elif k == "kind":
                    kind = v
            else:
                if user is None:
                    user = {}
                user[k] = v
    st = p.st
    cd = p.cdev
    thread_lane = False
    if cd is not None:
        if device is None and cd[0] is not None:
            a["gputrace.device"] = _kv("gputrace.device", cd[0])
        a["gputrace.lane"] = _kv("gputrace.lane", cd[1])
        if cd[2] is not None:
            a["gputrace.gpu.start_ns"] = _kv("gputrace.gpu.start_ns", cd[2] + off)
            a["gputrace.gpu.end_ns"] = _kv("gputrace.gpu.end_ns", cd[3] + off)
    elif lane is not None:
        a["gputrace.lane"] = _kv("gputrace.lane", str(lane))
    else:
        a["gputrace.lane"] = _kv("gputrace.lane", st.lane)
        thread_lane = True
    if kind is None:
        kind = _kind_of(p.name)
    a["gputrace.kind"] = _kv("gputrace.kind", kind)
    a["thread.id"] = _kv("thread.id", st.ident)
    if not thread_lane:
        a["thread.name"] = _kv("thread.name", st.name)
    if user:
        for k, v in user.items():
            a[k] = _kv(k, v)
    return a


_HEX_LUT = None


def _id_table(ids, n0: int, k: int) -> tuple[list[int], list[str]]:
    """Span ids for counter values n0+1 .. n0+k (``IdSource.next_span_id``'s bijection) and their 16-digit
    hex, computed with numpy for the whole batch: several times cheaper per span than Python int
    arithmetic and formatting on the CI box (64-bit products of Python ints allocate). Small batches, and
    batches of a process that has not imported numpy (a bare process of a ``gputrace record`` launch: its
    root span alone), take the plain Python way: importing numpy costs more than it saves there."""
    global _HEX_LUT
    if k < 64 or (k < 20_000 and "numpy" not in sys.modules):
        if k <= 0:
            return [], []
        salt = ids.span_salt
        vs = [((n * _GOLDEN) & _MASK64) ^ salt for n in range(n0 + 1, n0 + k + 1)]
        return vs, [f"{v:016x}" for v in vs]
    import numpy as np

    if _HEX_LUT is None:
        _HEX_LUT = np.array([f"{i:02x}" for i in range(256)], dtype="<U2")
    if k <= 0:
        return [], []
    ns = np.arange(n0 + 1, n0 + k + 1, dtype=np.uint64)
    v = (ns * np.uint64(_GOLDEN)) ^ np.uint64(ids.span_salt)  # uint64 arithmetic wraps mod 2**64
    hx = _HEX_LUT[v.astype(">u8").view(np.uint8)].view("<U16")  # 8 two-digit strings -> one of 16
    return v.tolist(), hx.ravel().tolist()


def _parent_parts(parent, tid: int, ids) -> tuple[str, str]:
    psid = parent.sid
    if psid is None:
        psid = _ids_of(parent, ids)[1]
    th = tid.to_bytes(16, "big").hex()  # (every trace id of a run fits: salt << 64 | root span id)
    return f'{{"traceId":"{th}","spanId":"', f'","parentSpanId":"{psid.to_bytes(8, "big").hex()}"'


def encode_phases(phases: list, ids, off: int) -> list[str]:
    """Span texts (OTLP JSON ``Span`` objects) of ``phases``, in order.

    ``ids``: the run's ``records.IdSource`` (ids are assigned here, as ``to_span`` would, when not yet
    assigned); ``off``: the epoch offset in ns. Raises TypeError for a non-str phase name.
    """
    out: list[str] = []
    app = out.append
    frags = _frags
    pparts: dict = {}  # parent Phase -> (text before the span id, text after it)
    n = n0 = ids.n
    tsid, thx = _id_table(ids, n0, len(phases))
    ntab = len(tsid)
    tsalt = ids.trace_salt
    try:
        for p in phases:
            d = p.__dict__
            if d:
                kw = d.get("kw")
            else:
                kw = None
                # The common case, handled first: a phase whose __dict__ is empty (no keywords, no
                # ids yet, no stream, set() or error: they all live there), whose parent has its
                # ids. One dict read replaces six attribute reads that fall back to the class
                # defaults (~70 ns each on the CI box).
                parent = p.up
                if parent is not None:
                    ptid = parent.tid
                    j = n - n0
                    if ptid is not None and j < ntab:
                        sid = tsid[j]
                        if sid:
                            n += 1
                            d["sid"] = sid
                            d["tid"] = ptid
                            pp = pparts.get(parent)
                            if pp is None:
                                pp = pparts[parent] = _parent_parts(parent, ptid, ids)
                            key = (p.st, p.name, p.device, p.nbytes)
                            f = frags.get(key)
                            if f is None:
                                f = _fragment(key)
                            app(f"{pp[0]}{thx[j]}{pp[1]}{f[0]}{p.t0 + off}{_MID}{p.t1 + off}{f[1]}")
                            continue
            if kw:
                parent = kw.get("parent")
                if parent is None:
                    parent = p.up
                elif not isinstance(parent, Phase):
                    parent = None
            else:
                parent = p.up
            # Ids: the same rules and order as records.to_span.
            # The counter lives in a local (n) and is synced with ids around the calls that use it.
            sid = p.sid
            if sid is None:
                if parent is None or parent.tid is not None:
                    j = n - n0
                    n += 1
                    if j < ntab:
                        sid = tsid[j]
                        sh = thx[j]
                    else:  # more ids than phases (ancestors outside the batch were numbered)
                        sid = ((n * _GOLDEN) & _MASK64) ^ ids.span_salt
                        sh = None
                    if not sid:
                        ids.n = n
                        sid = ids.next_span_id()
                        n = ids.n
                        sh = None
                    p.sid = sid
                    if parent is None:
                        p.tid = tid = (tsalt << 64) | sid
                    else:
                        p.tid = tid = parent.tid
                else:  # first child met before its parent: number up the chain
                    ids.n = n
                    tid, sid = _ids_of(p, ids)
                    n = ids.n
                    sh = None
            else:
                tid = p.tid
                sh = None
            if sh is None:
                sh = sid.to_bytes(8, "big").hex()
            if parent is None:
                pre = '{"traceId":"' + tid.to_bytes(16, "big").hex() + '","spanId":"'
                post = '"'
            else:
                pp = pparts.get(parent)
                if pp is None:
                    ids.n = n
                    pp = pparts[parent] = _parent_parts(parent, tid, ids)
                    n = ids.n
                pre, post = pp
            if not kw:
                cd = p.cdev
                if cd is None:
                    key = (p.st, p.name, p.device, p.nbytes)
                    f = frags.get(key)
                    if f is None:
                        f = _fragment(key)
                elif cd[2] is None:  # a stream phase without device times (CUDA activity on: no events)
                    f = _cd_fragment(p, cd)
                else:
                    f = None
            elif p.cdev is None:
                f = _kw_fragment(p, kw)
            else:
                f = None
            if f is not None:
                if p.extra is None and p.err is None:  # the common case
                    app(f"{pre}{sh}{post}{f[0]}{p.t0 + off}{_MID}{p.t1 + off}{f[1]}")
                    continue
                head = f[0]
                a = f[2].copy()
            else:
                head = _head(p.name)
                a = _attr_texts(p, kw, off)
            extra = p.extra
            if extra:
                for k, v in extra.items():
                    a[k] = _kv(k, v)
            status = ""
            err = p.err
            if err is not None:  # as records._set_error + otlp.encode's status encoding
                et = getattr(err, "__qualname__", None) or str(err)
                a["exception.type"] = _kv("exception.type", et)
                msg = f"{et}: {p.errmsg}" if p.errmsg else et
                st: dict = {}
                if msg:
                    st["message"] = msg
                st["code"] = STATUS_ERROR
                status = f',"status":{orjson.dumps(st).decode()}'
            attrs = f'","attributes":[{",".join(a.values())}]' if a else '"'
            app(f"{pre}{sh}{post}{head}{p.t0 + off}{_MID}{p.t1 + off}{attrs}{status}}}")
    finally:
        ids.n = n
    return out
