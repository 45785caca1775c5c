"""Fast path of the reader: spans decoded with their ``attributes`` left as raw JSON (the lean
schema of ``gputrace.otlp.schema``), and the attribute arrays of a whole group of spans parsed at once with numpy.

Why hand-written: decoding every attribute into ``KeyValue``/``AnyValue`` Structs is half of
msgspec's time on our traces (about 5 attributes per span), and walking those Structs again to
build columns costs as much as decoding them. gputrace's own writer emits attributes in one
fixed layout::

    [{"key":"K","value":{"intValue":"123"}},{"key":"K","value":{"stringValue":"S"}}]

``parse_attributes`` checks each span's raw attribute array against exactly that layout (byte
for byte, with numpy over the concatenated arrays: quote positions, the literal text between
them, digits) and parses the accepted ones into flat arrays. A span whose attributes deviate in
any way (whitespace, escapes, other value types, unquoted integers, an out-of-range column
value, a column key given twice, invalid UTF-8, ...) is *declined*; the reader then decodes its
whole line with the general decoder (``gputrace.otlp.schema.request_decoder``), so errors, messages and
results are those of the general path. An accepted span yields exactly the values the general
path would produce for it (tests/unit/test_reader_fast.py checks the two paths give identical
Timelines).

Pure functions; thread-safe. The word-level numpy primitives they use (bytes read as words, digits,
strings decoded once each) are in ``_swar``.
"""

from __future__ import annotations

import msgspec
import numpy as np

from gputrace.otlp.decode import py_value
from gputrace.otlp.schema import key_value_decoder
from gputrace.timeline.formats.otlp_jsonl._swar import _digits, _hash, _le, _le4, _strings, _words

# Column keys, in the order of ``_columns.COLUMN_ATTRS`` (codes 0..7); 8 = any other key.
KNOWN_KEYS = (
    "gputrace.device", "gputrace.circuit", "gputrace.batch", "gputrace.bytes",
    "gputrace.gpu.start_ns", "gputrace.gpu.end_ns", "gputrace.lane", "gputrace.kind",
)
OTHER = len(KNOWN_KEYS)
_KEY_IS_STR = np.array([False] * 6 + [True, True, False])
_KEY_LO = np.array([-(1 << 15), -(1 << 31), -(1 << 31)] + [-(1 << 63)] * 6, dtype=np.int64)
_KEY_HI = np.array([(1 << 15) - 1, (1 << 31) - 1, (1 << 31) - 1] + [(1 << 63) - 1] * 6, dtype=np.int64)


# A known key is identified by the 24 bytes from its first character: the key itself and the
# literal '","value":{"' that must follow it (all known keys are 12 bytes or longer).
_KNOWN_WIN = np.array([[_le((k.encode() + b'","value":{"')[8 * j:8 * j + 8]) for j in range(3)] for k in KNOWN_KEYS],
                      dtype=np.uint64)
_KNOWN_LEN = np.array([len(k) for k in KNOWN_KEYS], dtype=np.int64)
_KNOWN_W0, _KNOWN_W1, _KNOWN_W2 = (np.ascontiguousarray(_KNOWN_WIN[:, j]) for j in range(3))

with np.errstate(over="ignore"):
    _KNOWN_HASH = _hash(_KNOWN_WIN[:, 0], _KNOWN_WIN[:, 1], _KNOWN_WIN[:, 2])
_HASH_ORDER = np.argsort(_KNOWN_HASH)
_HASH_SORTED = _KNOWN_HASH[_HASH_ORDER]

_L_KEY = _le(b'{"key":"')
# '","value":{"stringValue":"' (26 bytes) and '","value":{"intValue":"' (23 bytes) as words.
_L_VALUE = _le(b'","value')
_L_STR1, _L_STR2, _L_STR3 = _le(b'":{"stri'), _le(b'ngValue"'), _le(b':"')
_L_INT1, _L_INT2 = _le(b'":{"intV'), _le(b'alue":"')
_M16, _M56 = np.uint64(0xFFFF), np.uint64((1 << 56) - 1)
_L_NEXT = _le4(b'"}},')
_L_LAST = _le4(b'"}}]')
_I64_MAX = np.uint64((1 << 63) - 1)
_PAD = b"\0" * 32


class FastAttrs:
    """Parsed attributes of a group of spans (``parse_attributes``'s result).

    ``ok[i]``: span i was accepted. For accepted spans, attributes are flat arrays in span
    order: ``indptr`` (per span, CSR offsets into the flat arrays; declined spans have none),
    ``code`` (0..7 column key, 8 other), ``ival`` (int value, where ``is_str`` is false), and
    ``sval`` (decoded string for string values, else None) and ``key`` (decoded key for other
    keys, else None) as object arrays. Array-valued attributes (``_lift_arrays``), which are not in the
    flat arrays, are in ``ex_span`` (their span), ``ex_key``, ``ex_val`` and ``ex_after`` (how many of the
    span's parsed attributes follow each in the text, so that the reader puts it back in its place: a
    span's attributes keep their written order), in span order; ``extra`` gives them as span ->
    ``[(key, value)]``.
    """

    __slots__ = ("ok", "indptr", "code", "ival", "is_str", "sval", "key", "ex_span", "ex_key", "ex_val", "ex_after")

    def __init__(self, ok, indptr, code, ival, is_str, sval, key) -> None:
        self.ok, self.indptr, self.code, self.ival = ok, indptr, code, ival
        self.is_str, self.sval, self.key = is_str, sval, key
        self.ex_span = np.empty(0, np.int64)
        self.ex_key: list[str] = []
        self.ex_val: list = []
        self.ex_after = np.empty(0, np.int64)

    @property
    def extra(self) -> dict[int, list]:
        out: dict[int, list] = {}
        for i, k, v in zip(self.ex_span.tolist(), self.ex_key, self.ex_val, strict=True):
            out.setdefault(i, []).append((k, v))
        return out


_ARRAY = b'"arrayValue"'
_KNOWN_SET = frozenset(KNOWN_KEYS)
_ELEMENT = b'{"key":"'  # starts every KeyValue; never inside a string (quotes there are escaped)
_KVLIST = b'"kvlistValue"'


def _lift_arrays(raws: list) -> tuple[list[int], list[str], list, list[int]]:
    """Take array-valued attributes (Nsight kernels' ``cuda.grid``/``cuda.block``) out of the raw
    attribute arrays that have them, so the rest still fits the fixed layout; returns them flat, in span
    order: (span, key, value, how many attributes follow it). ``raws`` is modified in place.

    Cut by text (``_lift_one``), on each span's *tail*: its text from the byte before its first array
    element to its end. The cut never looks before that byte, so equal tails are cut alike, and a tail
    is cut once (an Nsight kernel's tail, geometry to launching API, repeats for every launch; only
    the per-launch values before it differ)."""
    spans: list[int] = []
    keys: list[str] = []
    vals: list = []
    after: list[int] = []
    elements: dict[bytes, tuple[str, list] | None] = {}  # element text -> (key, value); None: decline
    tails: dict[bytes, tuple | None] = {}  # tail -> (cut tail, keys, values, after); None: decline
    for i, raw in enumerate(raws):
        b = bytes(raw)
        first = b.find(_ARRAY)
        if first < 0:
            continue
        start = b.rfind(b'{"key":"', 0, first)
        if start < 1:
            continue  # no element start before it: declined (the general decoder reads the span)
        tail = b[start - 1:]
        if tail in tails:
            hit = tails[tail]
        else:
            cut = _lift_one(tail, elements)
            hit = None if cut is None else (cut[0], [k for k, _ in cut[1]], [v for _, v in cut[1]], list(cut[2]))
            if len(tails) < 4096:
                tails[tail] = hit
        if hit is None:
            continue
        raws[i] = b[:start - 1] + hit[0]
        spans.extend([i] * len(hit[1]))
        keys.extend(hit[1])
        vals.extend([v[:] for v in hit[2]])  # lists of their own, as the general path gives each span
        after.extend(hit[3])
    return spans, keys, vals, after


def _lift_one(b: bytes, cache: dict) -> tuple[bytes, list, tuple] | None:
    """Cut every array element out of ``b`` (last first): an element runs from the ``{"key":"`` before
    ``"arrayValue"`` (a quote inside a string is escaped, so this text is structural) to the next
    ``]}}}``, with the comma before it (or, first in the array, after it); the cut text must decode as
    one ``KeyValue`` with an array value. Returns (``b`` without them, ``[(key, value)]`` in order, how
    many elements of the cut ``b`` follow each of them) or None to decline the span. A kvlist in ``b``
    is declined (its nested elements would be miscounted); another wrong cut (arrays of arrays) leaves
    text the fixed layout refuses or fails to decode, so the span is read by the general decoder, never
    mis-read.
    Also declined: an array under a column key, a key twice (a repeat among the span's other
    attributes is checked after parsing). Each distinct element text is decoded once (``cache``)."""
    if _KVLIST in b:
        return None
    lifted: list[tuple[str, list]] = []
    after: list[int] = []
    pos = b.rfind(_ARRAY)
    while pos >= 0:
        start = b.rfind(b'{"key":"', 0, pos)
        end = b.find(b"]}}}", pos)
        if start < 0 or end < 0:
            return None
        end += 4
        eb = b[start:end]
        if eb in cache:
            hit = cache[eb]
        else:
            try:
                kv = key_value_decoder.decode(eb)
                lift = kv.value.arrayValue is not None and kv.key not in _KNOWN_SET
                hit = (kv.key, py_value(kv.value)) if lift else None
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
                hit = None
            if len(cache) < 4096:
                cache[eb] = hit
        if hit is None:
            return None
        lifted.append(hit)
        after.append(b.count(_ELEMENT, end))  # later arrays are already cut: these are parsed ones
        if b[start - 1:start] == b",":
            b = b[:start - 1] + b[end:]
        elif b[end:end + 1] == b",":
            b = b[:start] + b[end + 1:]
        else:
            b = b[:start] + b[end:]
        pos = b.rfind(_ARRAY, 0, start)
    if not lifted or len(lifted) != len({k for k, _ in lifted}):
        return None
    lifted.reverse()
    after.reverse()
    return b, lifted, tuple(after)


def _drop_repeated_keys(fa: FastAttrs, spans: list[int], keys: list[str]) -> None:
    """Decline spans whose lifted array key also appears among their parsed attributes (one vectorised
    comparison per distinct lifted key; a repeat is rare)."""
    for key in set(keys):
        hits = np.flatnonzero(np.equal(fa.key, np.array(key, dtype=object)))
        if not len(hits):
            continue
        parsed = set((np.searchsorted(fa.indptr, hits, side="right") - 1).tolist())
        for i in {s for s, k in zip(spans, keys, strict=True) if k == key} & parsed:
            fa.ok[i] = False


def parse_attributes(raws: list, arrays_likely: bool = False) -> FastAttrs:
    """Check and parse the raw ``attributes`` JSON arrays of a group of spans (see module doc).

    An array value never fits the layout, so only a declined span can hold one: by default the
    group is parsed first and arrays are looked for (and the group parsed again with them lifted
    out) only in declined spans; looking in every span first cost ~10 % of a read of our own
    traces. ``arrays_likely`` (the previous group had arrays: Nsight kernels) looks first, as
    parsing twice would cost more. Both give the same result."""
    raws = list(raws)
    if arrays_likely and any(_ARRAY in r for r in map(bytes, raws)):
        lifted = _lift_arrays(raws)
    else:
        with np.errstate(over="ignore"):
            fa = _parse(raws)
        declined = np.flatnonzero(~fa.ok).tolist()
        if not declined or not any(_ARRAY in bytes(raws[i]) for i in declined):
            return fa
        lifted = _lift_arrays(raws)
        if not lifted[0]:
            return fa
    with np.errstate(over="ignore"):
        fa = _parse(raws)
    spans, keys, vals, after = lifted
    if not spans:
        return fa
    _drop_repeated_keys(fa, spans, keys)
    span = np.array(spans, dtype=np.int64)
    keep = np.flatnonzero(fa.ok[span])
    fa.ex_span, fa.ex_after = span[keep], np.array(after, dtype=np.int64)[keep]
    if len(keep) == len(spans):
        fa.ex_key, fa.ex_val = keys, vals
    else:
        kl = keep.tolist()
        fa.ex_key, fa.ex_val = [keys[j] for j in kl], [vals[j] for j in kl]
    return fa


def _parse(raws: list) -> FastAttrs:
    n = len(raws)
    lens = np.fromiter(map(len, raws), np.int64, n)
    off = np.zeros(n, np.int64)
    np.cumsum(lens[:-1], out=off[1:])
    end = off + lens
    raws = list(raws)
    raws.append(_PAD)
    buf = b"".join(raws)
    total = len(buf) - len(_PAD)
    a = np.frombuffer(buf, np.uint8)
    body = a[:total]
    # Unaligned views: w4[i] / w32[i] are the 4 / 32 bytes from byte i (one gather reads a record).
    w4 = np.ndarray((len(buf) - 3,), dtype="<u4", buffer=buf, strides=(1,))
    w32 = np.ndarray((len(buf) - 31,), dtype="V32", buffer=buf, strides=(1,))
    ok = (lens >= 2) & (a[off] == 91) & (a[np.maximum(end - 1, 0)] == 93)  # [ ... ]
    if buf.find(b"\\", 0, total) >= 0 or body.min() < 32:  # escapes, control characters
        bad_bytes = np.flatnonzero((body == 92) | (body < 32))
        ok[np.searchsorted(end, bad_bytes, side="right")] = False
    q = np.flatnonzero(body == 34)
    if len(q) % 10 == 0:
        # Usual case (every span in the layout): ten quotes per attribute, in order.
        Q = q.reshape(-1, 10)
        span = np.searchsorted(end, Q[:, 0], side="right")
        nat = np.bincount(span, minlength=n)
        res = _check(buf, a, w4, w32, Q, span, nat, ok & ((nat > 0) | (lens == 2)), off, end)
        if res.ok.all():
            return res
    # Some span is not in the layout: count each span's quotes so that the others still line up.
    qc = np.searchsorted(q, end) - np.searchsorted(q, off)
    ok &= (qc % 10 == 0) & ((qc > 0) | (lens == 2))
    nat = np.where(ok, qc // 10, 0)
    Q = q[np.repeat(ok, qc)].reshape(-1, 10)
    return _check(buf, a, w4, w32, Q, np.repeat(np.arange(n), nat), nat, ok, off, end)


def _check(buf, a, w4, w32, Q, span, nat, ok, off, end) -> FastAttrs:
    """Check attributes ``Q`` (ten quote positions each; ``span``: their span, ``nat``: count per
    span) against the layout and parse them; ``ok`` (modified) says which spans are kept."""
    n = len(ok)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(nat, out=indptr[1:])
    m = len(Q)
    if m == 0:
        return FastAttrs(ok, indptr, np.zeros(0, np.int8), np.zeros(0, np.int64), np.zeros(0, bool),
                         np.zeros(0, object), np.zeros(0, object))
    q0, q3, q9 = Q[:, 0], Q[:, 3], Q[:, 9]
    # Layout {"key":"K","value":{"T":"V"}}. The literal text around K pins the positions of the
    # quotes in it (Q holds every quote, in order), so only K's and V's closing quotes are read.
    r = _words(w32, q0 - 1)  # '{"key":"' and the first 24 bytes of K
    good = r[:, 0] == _L_KEY
    k0, k1, k2 = r[:, 1], r[:, 2], r[:, 3]
    t = _words(w32, q3)
    base = t[:, 0] == _L_VALUE
    is_str = base & (t[:, 1] == _L_STR1) & (t[:, 2] == _L_STR2) & ((t[:, 3] & _M16) == _L_STR3)
    is_int = base & (t[:, 1] == _L_INT1) & ((t[:, 2] & _M56) == _L_INT2)
    good &= is_str | is_int
    # '[{' before a span's first attribute, '}},{' between two, '}}]' after the last.
    first = np.zeros(m, bool)
    has = nat > 0
    first[indptr[:-1][has]] = True
    last = np.zeros(m, bool)
    last[indptr[1:][has] - 1] = True
    c4 = w4[q9]
    good &= np.where(first, q0 - 2 == off[span], True)
    good &= np.where(last, (c4 == _L_LAST) & (q9 + 4 == end[span]), c4 == _L_NEXT)
    good[1:] &= first[1:] | (q0[1:] - q9[:-1] == 5)  # '}},{' between two: 5 bytes from quote to quote
    # Keys.
    ks, ke = q0 + 7, q3
    kl = ke - ks
    h = _hash(k0, k1, k2)
    cand = _HASH_ORDER[np.minimum(np.searchsorted(_HASH_SORTED, h), len(_HASH_SORTED) - 1)]
    hit = (k0 == _KNOWN_W0[cand]) & (k1 == _KNOWN_W1[cand]) & (k2 == _KNOWN_W2[cand]) & (kl == _KNOWN_LEN[cand])
    code = np.where(hit, cand, OTHER).astype(np.int8)
    good &= (code == OTHER) | (is_str == _KEY_IS_STR[code])  # column key, wrong value type: general path
    # Integers: -?(0|[1-9][0-9]{0,18}) inside int64 and the column's range.
    vs, ve = q3 + np.where(is_str, 26, 23), q9
    ival = np.zeros(m, np.int64)
    ii = np.flatnonzero(is_int & good)
    if len(ii):
        e = ve[ii]
        neg = a[vs[ii]] == 45
        ds = vs[ii] + neg
        nd = e - ds
        dw = _words(w32, e - 32)  # the 32 bytes before the closing quote; digits end the last word
        uval, okd = _digits(dw[:, 3], np.minimum(nd, 8).clip(0))  # last 8 digits
        for k, col in ((8, 2), (16, 1)):  # the 8 before them, then the first 3 (where there are any)
            more = np.flatnonzero(nd > k)
            if len(more):
                v, okm = _digits(dw[more, col], np.minimum(nd[more] - k, 8))
                uval[more] += v * np.uint64(10 ** k)
                okd[more] &= okm
        okd &= (nd >= 1) & (nd <= 19) & ((nd == 1) | (a[ds] != 48))
        okd &= uval <= _I64_MAX + neg.astype(np.uint64)
        val = np.where(neg, (np.uint64(0) - uval).view(np.int64), uval.view(np.int64))
        c = code[ii]
        okd &= (val >= _KEY_LO[c]) & (val <= _KEY_HI[c])
        ival[ii] = val
        good[ii[~okd]] = False
    # A column key twice in one span: the general path decides which wins.
    kc = code < OTHER
    if kc.any():
        sk = span[kc] * OTHER + code[kc]
        dup = np.bincount(sk, minlength=n * OTHER) > 1
        if dup.any():
            good[np.flatnonzero(kc)[dup[sk]]] = False
    ok[span[~good]] = False
    # Strings (lane, kind, other values) and other keys, decoded for accepted spans only.
    keep = ok[span]
    sval = np.full(m, None, dtype=object)
    key = np.full(m, None, dtype=object)
    si = np.flatnonzero(is_str & keep)
    if len(si):
        sval[si] = _strings(buf, w32, vs[si], ve[si], span[si], ok)
    oi = np.flatnonzero((code == OTHER) & keep)
    if len(oi):
        key[oi] = _strings(buf, w32, ks[oi], ke[oi], span[oi], ok)
    return FastAttrs(ok, indptr, code, ival, is_str, sval, key)
