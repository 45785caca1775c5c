"""Word-at-a-time (SWAR) reads of a byte buffer with numpy: the primitives of the fast attribute parser (``_fast``).

Bytes as little-endian words (``_le``, ``_le4``; ``_words``: the 32 bytes from each of many positions, one
gather), a hash of three words (``_hash``), the value of up to eight ASCII digits per word (``_digits``), and
the UTF-8 strings at many (start, end) positions with each distinct one decoded once (``_strings``,
``_decode_list``).

Pure functions over arrays the caller owns; thread-safe. They raise nothing of their own: text that is not
valid UTF-8 comes back as None (``_decode_list``) or clears its span's flag in ``ok`` (``_strings``), bytes
that are not digits as a false flag (``_digits``). Word arithmetic wraps around on purpose (``_fast`` runs it
under ``np.errstate(over="ignore")``).
"""

from __future__ import annotations

import numpy as np


def _le(b: bytes) -> np.uint64:
    """8 (or fewer, zero-padded) bytes as the little-endian uint64 a word view reads."""
    return np.frombuffer(b.ljust(8, b"\0"), dtype="<u8")[0]


def _le4(b: bytes) -> np.uint32:
    return np.frombuffer(b, dtype="<u4")[0]


_H1, _H2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


def _hash(w0, w1, w2):
    return w0 ^ (w1 * _H1) ^ (w2 * _H2)


_ZEROS = np.uint64(0x3030303030303030)
_HI = np.uint64(0x8080808080808080)
_P46 = np.uint64(0x4646464646464646)
# _KEEP[k]: the last k bytes of a little-endian word (the ones nearest the end of the number).
_KEEP = np.array([0] + [((1 << 64) - 1) << (8 * (8 - k)) & ((1 << 64) - 1) for k in range(1, 9)], dtype=np.uint64)
# _KEEP_LOW[k]: the first k bytes of a little-endian word.
_KEEP_LOW = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_H3 = np.uint64(0x165667B19E3779F9)
_NONE = np.array(None, dtype=object)  # compares element-wise with an object array (numpy's stubs refuse a bare None)


def _words(w32: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The 32 bytes from each byte position ``idx`` as four little-endian words, shape (len, 4)."""
    return w32[idx].view("<u8").reshape(-1, 4)


def _decode_list(buf: bytes, s: np.ndarray, e: np.ndarray) -> list:
    """UTF-8 strings ``buf[s:e]`` (None where not valid UTF-8)."""
    out: list[str | None] = []
    for i, j in zip(s.tolist(), e.tolist(), strict=True):
        try:
            out.append(buf[i:j].decode())
        except UnicodeDecodeError:
            out.append(None)
    return out


def _strings(buf: bytes, w32: np.ndarray, s: np.ndarray, e: np.ndarray, span: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``buf[s:e]`` decoded, as an object array. Strings repeat (lane names, keys), so each
    distinct one is decoded once: strings up to 24 bytes are grouped by their bytes (read as
    three words; a hash only picks the candidate, equality is checked word by word). A string
    that is not valid UTF-8 declines its span (``ok``)."""
    ln = e - s
    r = _words(w32, s)
    f0 = r[:, 0] & _KEEP_LOW[np.minimum(ln, 8)]
    f1 = r[:, 1] & _KEEP_LOW[np.clip(ln - 8, 0, 8)]
    f2 = r[:, 2] & _KEEP_LOW[np.clip(ln - 16, 0, 8)]
    h = _hash(f0, f1, f2) ^ (ln.astype(np.uint64) * _H3)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    dec = _decode_list(buf, s[first], e[first])
    out = np.empty(len(s), dtype=object)
    out[:] = np.array(dec + [None], dtype=object)[:-1][inv]
    rep = first[inv]
    alone = np.flatnonzero((ln > 24) | (f0 != f0[rep]) | (f1 != f1[rep]) | (f2 != f2[rep]) | (ln != ln[rep]))
    if len(alone):
        out[alone] = np.array(_decode_list(buf, s[alone], e[alone]) + [None], dtype=object)[:-1]
    bad = np.flatnonzero(np.equal(out, _NONE))
    if len(bad):
        ok[span[bad]] = False
    return out


def _digits(w: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Value of the last ``k`` (0..8) ASCII digits of each little-endian word, and whether
    they are all digits (SWAR: eight digits per 64-bit multiply chain)."""
    keep = _KEEP[k]
    x = (w & keep) | (_ZEROS & ~keep)
    okd = (((x + _P46) | (x - _ZEROS)) & _HI) == 0
    x = x - _ZEROS
    x = ((x * np.uint64(10)) + (x >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    x = ((x * np.uint64(100)) + (x >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    x = ((x * np.uint64(10000)) + (x >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
    return x, okd
