"""Span-attribute columns (``gputrace.*`` keys) from decoded or fast-parsed attributes.

Hand-written hot path (see ``_columns``). Not thread-safe (uses the load's ``Interner``).
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from gputrace.otlp.schema import AnyValue
from gputrace.timeline.formats.otlp_jsonl._interner import Interner
from gputrace.timeline.model import KIND_CODES

# Column attributes: key -> (column, type). Types: "int" (intValue), "str" (stringValue).
COLUMN_ATTRS: dict[str, tuple[str, str]] = {
    "gputrace.device": ("device", "int"),
    "gputrace.circuit": ("circuit", "int"),
    "gputrace.batch": ("batch", "int"),
    "gputrace.bytes": ("nbytes", "int"),
    "gputrace.gpu.start_ns": ("gpu_start", "int"),
    "gputrace.gpu.end_ns": ("gpu_end", "int"),
    "gputrace.lane": ("lane", "str"),
    "gputrace.kind": ("kind", "str"),
}
COLUMN_KEYS = list(COLUMN_ATTRS)
_KEY_CODE = {k: i for i, k in enumerate(COLUMN_KEYS)}
N_COLUMN_KEYS = len(COLUMN_KEYS)
_INT_BOUNDS = {
    "device": (-(1 << 15), (1 << 15) - 1),
    "circuit": (-(1 << 31), (1 << 31) - 1),
    "batch": (-(1 << 31), (1 << 31) - 1),
    "nbytes": (-(1 << 63), (1 << 63) - 1),
    "gpu_start": (-(1 << 63), (1 << 63) - 1),
    "gpu_end": (-(1 << 63), (1 << 63) - 1),
}

_g_int = attrgetter("intValue")


class KeyCodes(dict):
    """Attribute key -> column code (``N_COLUMN_KEYS`` for non-column keys); misses fill in lazily so
    the hot ``map(__getitem__)`` stays in C. Bounded: cleared past 100k distinct keys."""

    instance: KeyCodes

    def __missing__(self, key: str) -> int:
        if len(self) > 100_000:
            self.clear()
        c = self[key] = _KEY_CODE.get(key, N_COLUMN_KEYS)
        return c


KeyCodes.instance = KeyCodes()

def set_lanes(lane_code: np.ndarray, r: np.ndarray, strs: list, it: Interner) -> None:
    for s in dict.fromkeys(strs):  # first-appearance order, independent of the hash seed
        if s not in it.lane_name_ix:
            it.lane_name_code(s)
    lane_code[r] = np.fromiter(map(it.lane_name_ix.__getitem__, strs), np.int64, len(strs))


def set_kinds(kind: np.ndarray, r: np.ndarray, strs: list) -> None:
    kc = {s: KIND_CODES.get(s, 0) for s in set(strs)}
    kind[r] = np.fromiter(map(kc.__getitem__, strs), np.int8, len(strs))


def apply_fast_attrs(fast: list, cols: dict, kind: np.ndarray, lane_code: np.ndarray, attrs: dict,
                     it: Interner) -> None:
    """Apply attributes parsed by ``_fast.parse_attributes`` (values already checked there)."""
    for fa, gidx, brows in fast:
        st = fa.indptr[gidx]
        cnt = fa.indptr[gidx + 1] - st
        tot = int(cnt.sum())
        base = np.zeros(len(cnt), dtype=np.int64)
        np.cumsum(cnt[:-1], out=base[1:])
        aidx = np.repeat(st - base, cnt) + np.arange(tot, dtype=np.int64)
        arow = np.repeat(brows, cnt)
        code = fa.code[aidx]
        present = np.bincount(code, minlength=N_COLUMN_KEYS + 1)
        if len(fa.ex_span):  # array-valued attributes lifted out of the raw arrays (_fast._lift_arrays): back in place
            sel = np.flatnonzero(code == N_COLUMN_KEYS)
            _other_attrs(fa, gidx, brows, aidx[sel], arow[sel], attrs)
            present[N_COLUMN_KEYS] = 0
        for c in np.flatnonzero(present).tolist():
            sel = np.flatnonzero(code == c)
            ai, r = aidx[sel], arow[sel]
            if c == N_COLUMN_KEYS:
                for row, k, s, ivv in zip(r.tolist(), fa.key[ai].tolist(), fa.sval[ai].tolist(), fa.ival[ai].tolist(),
                                         strict=True):
                    d = attrs.get(row)
                    if d is None:
                        d = attrs[row] = {}
                    d[k] = s if s is not None else ivv
                continue
            colname = COLUMN_ATTRS[COLUMN_KEYS[c]][0]
            if colname == "lane" or colname == "kind":
                strs = fa.sval[ai].tolist()
                if colname == "lane":
                    set_lanes(lane_code, r, strs, it)
                else:
                    set_kinds(kind, r, strs)
            else:
                cols[colname][r] = fa.ival[ai]


def _other_attrs(fa, gidx: np.ndarray, brows: np.ndarray, ai: np.ndarray, r: np.ndarray, attrs: dict) -> None:
    """The non-column attributes of a group whose spans had arrays lifted out: parsed ones (flat indices
    ``ai``, ascending, batch rows ``r``) with the lifted ones put back where they were written. A lifted
    array followed by ``m`` parsed attributes of its span (column ones included) goes before the first
    non-column attribute at or after the span's ``m``-th parsed attribute from its end."""
    if len(ai) > 1 and not (ai[1:] > ai[:-1]).all():  # (spans come in order; kept correct if not)
        o = np.argsort(ai, kind="stable")
        ai, r = ai[o], r[o]
    vals = fa.sval[ai]
    num = ~fa.is_str[ai]
    vals[num] = fa.ival[ai][num].astype(object)
    keys, rows = fa.key[ai], r
    row_of = np.full(len(fa.ok), -1, dtype=np.int64)
    row_of[gidx] = brows
    sel = np.flatnonzero(row_of[fa.ex_span] >= 0)  # lifted ones of this group's spans
    if len(sel):
        sp = fa.ex_span[sel]
        at = np.searchsorted(ai, fa.indptr[sp + 1] - fa.ex_after[sel])
        ek = np.fromiter(fa.ex_key, dtype=object, count=len(fa.ex_key))[sel]
        ev = np.fromiter(fa.ex_val, dtype=object, count=len(fa.ex_val))[sel]
        keys, vals, rows = np.insert(keys, at, ek), np.insert(vals, at, ev), np.insert(rows, at, row_of[sp])
    # Each row's attributes are consecutive: one dict(zip()) per row, not a Python step per attribute.
    if not len(rows):
        return
    cut = (np.flatnonzero(rows[1:] != rows[:-1]) + 1).tolist()
    keys_l, vals_l = keys.tolist(), vals.tolist()
    for row, a, b in zip(rows[[0] + cut].tolist(), [0] + cut, cut + [len(keys_l)], strict=True):
        d = attrs.get(row)
        if d is None:
            attrs[row] = dict(zip(keys_l[a:b], vals_l[a:b], strict=True))
        else:
            d.update(zip(keys_l[a:b], vals_l[a:b], strict=True))


def describe_value(v: AnyValue) -> str:
    for f in AnyValue.__struct_fields__:
        x = getattr(v, f)
        if x is not None:
            return f"{f} {x!r}" if not isinstance(x, (list, tuple)) else f
    return "an empty value"


def int_values(sel: np.ndarray, idx: np.ndarray, rows: np.ndarray, first: np.ndarray, colname: str,
                mark) -> np.ndarray:
    lo, hi = _INT_BOUNDS[colname]
    dt = np.int16 if colname == "device" else np.int32 if colname in ("circuit", "batch") else np.int64
    try:
        arr = np.fromiter(map(_g_int, sel), np.int64, len(sel))  # TypeError on None (not an intValue)
        if len(arr) and (arr.min() < lo or arr.max() > hi):
            raise OverflowError
        return arr.astype(dt)
    except (TypeError, OverflowError, ValueError):
        pass
    out = np.full(len(sel), -1, dtype=np.int64)
    for j, av in enumerate(sel):
        v = av.intValue
        if v is None and av.doubleValue is not None and float(av.doubleValue).is_integer():
            v = int(av.doubleValue)
        if v is None and av.stringValue is not None and av.stringValue.lstrip("-").isdigit():
            v = int(av.stringValue)
        if v is None or not lo <= v <= hi:
            p = int(idx[j])
            r = int(rows[p])
            why = f"expected intValue, got {describe_value(av)}" if v is None else f"{v} is out of range"
            mark(r, f"attributes[{p - int(first[r])}].value", f"{why} ({COLUMN_KEYS[_KEY_CODE[_col_key(colname)]]})")
        else:
            out[j] = v
    return out.astype(dt)


def _col_key(colname: str) -> str:
    for k, (c, _) in COLUMN_ATTRS.items():
        if c == colname:
            return k
    raise KeyError(colname)


