"""Fixed-base scalar multiplication of the group generators, for key generation.

Every Groth16 key element is k·G for the generator G of G1 or G2 and a known scalar k, so setup
is millions of fixed-base multiplications. ``py_arkworks_bls12381`` multiplies a point by a scalar
in ~370 µs (G1); a byte-windowed table (32 windows × 256 multiples of 256^j·G) turns each into
31 additions, ~75 µs in Python — the hot loop is hand-written for that reason. Work is split
into chunks over a process pool (arkworks' single additions do not release the GIL, so threads
would not help); results travel as 96/192-byte little-endian affine ``xy`` encodings, with the
identity as all zero bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from .field import R
from .host_msm import cpu_threads
from .processes import fork_pool, stop

_TABLES: dict[str, list] = {}
_XY = {"g1": 96, "g2": 192}
#: Below this many multiplications the pool's start-up costs more than it saves.
POOL_THRESHOLD = 3000
CHUNK = 2048


_P = TypeVar("_P", G1Point, G2Point)


def _window_table(cls: type[_P]) -> list[list[_P]]:
    """32 rows of d·256^j·G for d < 256 (the generator G of ``cls``'s group)."""
    t = []
    base = cls()
    for _ in range(32):
        row = [cls.identity()]
        acc = cls.identity()
        for _d in range(1, 256):
            acc = acc + base
            row.append(acc)
        t.append(row)
        base = acc + base
    return t


def _table(group: str) -> list:
    t = _TABLES.get(group)
    if t is None:
        t = _window_table(G1Point) if group == "g1" else _window_table(G2Point)
        _TABLES[group] = t
    return t


def mul_gen(group: str, scalars: Sequence[int]) -> bytes:
    """Concatenated xy-LE encodings of k·G for each k in ``scalars`` (this process, no pool)."""
    table = _table(group)
    zero = bytes(_XY[group])
    out = []
    t0 = table[0]
    rest = table[1:]
    for k in scalars:
        k %= R
        if k == 0:
            out.append(zero)
            continue
        b = k.to_bytes(32, "little")
        acc = t0[b[0]]
        for j, row in enumerate(rest, 1):
            d = b[j]
            if d:
                acc = acc + row[d]
        out.append(acc.to_xy_bytes_le())
    return b"".join(out)


def _job(args: tuple[str, list[int]]) -> bytes:
    return mul_gen(*args)


def mul_gen_many(jobs: Sequence[tuple[str, Sequence[int]]], workers: int | None = None) -> list[bytes]:
    """Run several ``mul_gen`` jobs (group, scalars), in parallel over processes when large.

    Returns one bytes per job, in order. The pool (``processes.fork_pool``) uses ``fork``: ``spawn``/``forkserver``
    re-import the caller's ``__main__``, which breaks scripts without a main guard; the children only run
    ``mul_gen`` (arkworks and ints), never the parent's threads or locks, and leave Ctrl-C to this process, which
    ends them when it is interrupted (or fails) instead of waiting for their queued chunks.
    """
    workers = workers or cpu_threads()
    total = sum(len(s) for _, s in jobs)
    if workers <= 1 or total < POOL_THRESHOLD:
        return [mul_gen(g, s) for g, s in jobs]
    tasks = []
    for ji, (g, s) in enumerate(jobs):
        s = list(s)
        for start in range(0, len(s), CHUNK):
            tasks.append((ji, g, s[start : start + CHUNK]))
    parts: list[list[bytes]] = [[] for _ in jobs]
    pool = fork_pool(workers)
    failed = True
    try:
        for (ji, _g, _s), res in zip(tasks, pool.map(_job, [(g, s) for _, g, s in tasks]), strict=True):
            parts[ji].append(res)
        failed = False
    finally:
        stop(pool, interrupted=failed)
    return [b"".join(p) for p in parts]


def decode_g1(buf: bytes) -> list[G1Point]:
    """xy-LE bytes (96 per point) -> G1 points (on-curve checked, subgroup trusted: our own keys)."""
    dec = G1Point.from_xy_bytes_unchecked_le
    return [dec(buf[i : i + 96]) for i in range(0, len(buf), 96)]


def decode_g2(buf: bytes) -> list[G2Point]:
    dec = G2Point.from_xy_bytes_unchecked_le
    return [dec(buf[i : i + 192]) for i in range(0, len(buf), 192)]


class PointRows(Sequence):
    """A key query kept as its xy-LE rows (``bytes`` or a ``uint8`` ``(n, 96|192)`` array), decoded into
    arkworks points on the first use that needs points (then kept). ``len`` never decodes, so a CUDA prover,
    which uploads the rows (``ProvingKey.affine_limbs``), never pays for the ~0.7 µs-per-point decode
    (70 s for the queries of a 2^24 key).

    Raises ``error`` (default ValueError) naming ``where`` when a row does not decode (a corrupt key file
    shows at first use, not at load). Thread-safe: the first use decodes once; threads that need the points
    meanwhile wait for that decode instead of decoding again (a 2^20 G2 query takes about a second under the
    GIL, and the host ``b_g2``'s part threads all read it at once, docs/prover.md "The host path at 2^20")."""

    def __init__(self, rows: Any, group: str, where: str = "points", error: type[Exception] = ValueError) -> None:
        if group not in _XY:
            raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
        self.group = group
        self.rows = rows
        nbytes = len(rows) if isinstance(rows, (bytes, bytearray)) else np.asarray(rows).nbytes
        self._n = nbytes // _XY[group]
        self._where = where
        self._error = error
        self._points: list | None = None
        self._decoding = threading.Lock()

    def points(self) -> list:
        """Every point, decoded once (by the first caller; concurrent callers wait for it)."""
        points = self._points
        if points is not None:
            return points
        with self._decoding:
            if self._points is None:
                buf = np.asarray(self.rows, dtype=np.uint8).tobytes() if not isinstance(self.rows, bytes) else self.rows
                try:
                    self._points = decode_g1(buf) if self.group == "g1" else decode_g2(buf)
                except ValueError as exc:  # arkworks' decode error (not on the curve, bad length)
                    raise self._error(f"{self._where}: corrupt point data ({exc})") from None
            return self._points

    @property
    def decoded(self) -> bool:
        return self._points is not None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # an int gives a point, a slice a list (what arkworks' multiexp takes)
        return self.points()[i]

    def __iter__(self) -> Iterator:
        return iter(self.points())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (PointRows, list, tuple)):
            return len(self) == len(other) and self.points() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PointRows({self.group}, {self._n} points{', decoded' if self.decoded else ''})"
