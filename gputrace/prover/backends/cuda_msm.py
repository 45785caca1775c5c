"""G1 and G2 MSMs and batch addition on one GPU (kernels/msm.cu), driven with CuPy.

``G1Msm(device)`` (``G2Msm(device)``: the same engine over Fq2 for ``b_g2``, affine ``(n, 2, 2, 6)`` limbs,
48-word XYZZ results, ``xyzz_to_g2``):
* ``load_bases(limbs)``: affine ``(n, 2, 6)`` canonical limbs (``encoding.g1_to_affine_limbs``) -> device
  ``(n, 12)`` Montgomery.
* ``msm(bases, scalars, window, stream)``: Pippenger with ``window``-bit signed digits (``signed=False``:
  unsigned; no window: ``engine_window``). Keys ``(window << c) | |digit|`` are grouped by bucket (a counting
  sort, or CuPy's argsort); from 2^22 scalars every accumulation thread sums the same number of sorted entries
  across bucket boundaries (``balanced``; a negative digit adds the negated base) and the pieces of buckets
  that cross threads are summed per bucket; below, each bucket's run is cut into equal chunks of at most ``S``
  entries (``chunk_size``); partial sums are reduced again until each bucket is one point, so no thread's
  work grows with a skewed bucket. Buckets are combined per window (``sum j*B_j``) in segments of
  ``bucket_span`` buckets, segments and windows summed the same way, then a one-thread Horner.
* ``sum_selected(bases, idx, stream)``: batch addition (sum of the points at ``idx``) with the same
  chunked reduction.
Both return the XYZZ result as a device ``uint64[24]`` (Montgomery; ``xyzz_to_g1`` makes a ``G1Point`` of the
host copy). ``sync_free=True``: every chunk count is an upper bound known on the host (``msm_layout``: padded
chunk layouts, a fixed number of reduction levels), so nothing is read back and the host never waits inside the
call (below ``BALANCED_FROM`` scalars; the balanced accumulation still reads its piece count back);
``sync_free=False`` is the engine before (sizes read back, one host synchronisation per reduction level).

Thread: one instance per device, used from that device's worker thread. Raises ``BackendError``.
"""

from __future__ import annotations

import math
from itertools import pairwise

import cupy
import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from .. import msm_layout
from ..encoding import Q
from ..field import R
from ..msm_plan import default_window
from .base import BackendError
from .cuda_kernels import check, empty, i32, kernel, launch, u64

FQ_R_INV = pow(1 << 384, -1, Q)
def bucket_span(c: int, nw: int) -> int:
    """Buckets per bucket-reduction thread: a power of two <= 64 leaving >= 2^15 threads where possible."""
    m = max(1, min(64, (nw << c) >> 15))
    return 1 << (m.bit_length() - 1)


# default_window(n): window bits for an MSM of ``n`` scalars without a D4 plan: log2(n) - 5, in [4, 15].
# Measured on the H200 (benchmarks/RESULTS.md, 2026-11-29): at 2^24, c=15 took 290 ms against 352 ms for c=16
# and 346 ms for c=14; at 2^20, c=15 36.6 ms against 39.9 ms for c=16. Defined in msm_plan (D4 uses it too).


def chunk_size(entries: int, buckets: int | None = None) -> int:
    """Entries per chunk: enough chunks (about 2^20) to fill the GPU, at least 32 per thread.

    With ``buckets`` (the buckets the digits can reach), the size is fitted to the mean bucket: a bucket of
    m entries is cut into ceil(m / S) equal chunks (``G1Msm._chunks``), so S is set 20 % above an even share
    of the mean bucket, so that the usual spread of bucket sizes (about sqrt(m)) does not add a nearly empty
    chunk to half of the buckets (the c = 16 case of the H200 window sweep: 350 ms against 289 at c = 15).
    """
    target = int(max(32, min(512, entries >> 20)))
    if not buckets:
        return target
    mean = entries / buckets
    k = max(1, round(mean / target))
    return int(max(8, math.ceil(1.2 * mean / k)))


#: MSM size from which the default engine accumulates load-balanced (``G1Msm(balanced=None)``).
BALANCED_FROM = 1 << 22


def engine_window(n: int, signed: bool) -> int:
    """The window of an MSM of ``n`` scalars when the caller gives none (no D4 plan).

    Unsigned digits: ``default_window`` (log2 n - 5 in [4, 15]). Signed digits halve the buckets, so large MSMs
    take wider windows: from 2^23 on, log2 n - 7 capped at 17 (H200 sweep, RESULTS.md "G1 MSM at 2^24": at 2^24
    c = 17 143.7 ms, 16 145.8, 15 147.9, 18 155.8; at 2^20 c = 15 stayed best, 17.2 ms against 18.2 for 16).
    """
    c = default_window(n)
    if signed and n >= 1 << 23:
        c = min(17, max(c, round(math.log2(n)) - 7))
    return c


def signed_windows(c: int) -> int:
    """Windows of ``c``-bit signed digits for scalars < r: ceil(255 / c), plus one when the top window's digit
    (its bits plus the carry from below) could reach 2^c (then it would not fit the window's buckets)."""
    nw = (255 + c - 1) // c
    if ((R - 1) >> (c * (nw - 1))) + 1 >= (1 << c):
        nw += 1
    return nw


def _ints(limbs: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(limbs, dtype="<u8").tobytes(), "little")


def xyzz_to_g1(p: np.ndarray) -> G1Point:
    """Host XYZZ (24 uint64, Montgomery) -> ``G1Point`` (affine, one inversion each for ZZ and ZZZ)."""
    X, Y, ZZ, ZZZ = (_ints(p[6 * i: 6 * i + 6]) * FQ_R_INV % Q for i in range(4))
    if ZZ == 0:
        return G1Point.identity()
    x = X * pow(ZZ, -1, Q) % Q
    y = Y * pow(ZZZ, -1, Q) % Q
    return G1Point.from_xy_bytes_unchecked_le(x.to_bytes(48, "little") + y.to_bytes(48, "little"))


def _fq2_inv(a0: int, a1: int) -> tuple[int, int]:
    d = pow((a0 * a0 + a1 * a1) % Q, -1, Q)
    return a0 * d % Q, (Q - a1) * d % Q


def _fq2_mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q


def xyzz_to_g2(p: np.ndarray) -> G2Point:
    """Host G2 XYZZ (48 uint64: X, Y, ZZ, ZZZ, each Fq2 c0 then c1, Montgomery) -> ``G2Point``."""
    X, Y, ZZ, ZZZ = ((_ints(p[12 * i: 12 * i + 6]) * FQ_R_INV % Q, _ints(p[12 * i + 6: 12 * i + 12]) * FQ_R_INV % Q)
                     for i in range(4))
    if ZZ == (0, 0):
        return G2Point.identity()
    x = _fq2_mul(X, _fq2_inv(*ZZ))
    y = _fq2_mul(Y, _fq2_inv(*ZZZ))
    return G2Point.from_xy_bytes_unchecked_le(b"".join(v.to_bytes(48, "little") for v in (*x, *y)))


class G1Msm:
    """MSM engine for one device (see module docstring)."""

    #: kernel-name prefix, u64 words per affine base and per XYZZ point
    PREFIX, AFFINE, XW = "", 12, 24

    def __init__(self, device: int, module: str = "msm", *, signed: bool = True, even_chunks: bool = True,
                 sort: str = "counting", balanced: bool | None = None) -> None:
        """``signed``: signed digits (half the buckets per window); ``even_chunks``: equal chunks per bucket
        and ``chunk_size`` fitted to the mean bucket. Both off = the engine before issue 13's MSM work (A/B).
        ``sort``: "counting" (bucket counts by atomics, a scan, a scatter; 13.9 ms at 2^24, c = 15) or
        "argsort" (CuPy radix argsort of the keys, then a gather and searchsorted for the offsets; 16.5 ms).
        ``balanced``: every accumulation thread takes the same number of sorted entries across bucket boundaries
        (``sum_affine_balanced``), instead of whole chunks of one bucket; None (default): from ``BALANCED_FROM``
        scalars up (H200: 2^24 128.4 ms against 139.5 chunked; 2^20 17.9 against 17.0)."""
        if sort not in ("argsort", "counting"):
            raise BackendError(f"cuda msm: sort must be 'argsort' or 'counting', got {sort!r}")
        self.device = device
        self.signed = signed
        self.even_chunks = even_chunks
        self.sort = sort
        self.balanced = balanced
        self._k = {fn: kernel(module, device, fn) for fn in ("fq_to_mont", "msm_digits", "msm_digits_signed",
                                                             "msm_bucket_count", "msm_bucket_scatter")}
        for fn in ("sum_affine_chunks", "sum_affine_balanced", "sum_xyzz_chunks", "bucket_reduce", "msm_horner"):
            self._k[fn] = kernel(module, device, self.PREFIX + fn)
        self._none = cupy.zeros(1, dtype=np.int64)
        cupy.cuda.get_current_stream().synchronize()  # ready before any other stream reads it

    def load_bases(self, limbs: np.ndarray, stream, upload=None) -> cupy.ndarray:
        """Device Montgomery bases from canonical affine limbs, queued on ``stream``. ``upload(dst, arr, stream)``
        copies the host array in (default: CuPy's ``set``)."""
        arr = np.ascontiguousarray(limbs, dtype=np.uint64).reshape(-1, self.AFFINE)
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        nfq = len(arr) * self.AFFINE // 6  # Fq elements
        with stream:
            d = empty(arr.shape, np.uint64, f"bases ({len(arr)} points)", self.device)
            if upload is None:
                check("cudaMemcpyAsync(bases H2D)", d.set, arr, stream=stream)
            elif arr.size:
                upload(d, arr, stream)
            launch(self._k["fq_to_mont"], "fq_to_mont", nfq, (d, u64(nfq)), stream)
        return d

    # -- chunked reductions ---------------------------------------------------------------------
    def _chunks(self, starts: cupy.ndarray, ends: cupy.ndarray, S: int):
        """Cut runs [starts, ends) into ceil(len / S) chunks, equal (lengths differ by at most one) or, without
        ``even_chunks``, S-long but the last: (chunk starts, chunk ends, chunks per run, cumsum, owner run)."""
        length = ends - starts
        per = (length + (S - 1)) // S
        cum = cupy.cumsum(per)
        total = int(cum[-1]) if cum.size else 0
        t = cupy.arange(total, dtype=np.int64)
        owner = cupy.searchsorted(cum, t, side="right")
        j = t - (cum[owner] - per[owner])
        if self.even_chunks:
            L, k = length[owner], per[owner]
            cs = starts[owner] + j * L // k
            ce = starts[owner] + (j + 1) * L // k
        else:
            cs = starts[owner] + j * S
            ce = cupy.minimum(cs + S, ends[owner])
        return cs, ce, per, cum, owner

    def _reduce_runs(self, pts: cupy.ndarray, per: cupy.ndarray, cum: cupy.ndarray, S: int, stream) -> cupy.ndarray:
        """Run r owns pts[cum[r]-per[r] : cum[r]] (XYZZ); returns (nruns, 24) run sums (inf for empty)."""
        k = self._k["sum_xyzz_chunks"]
        while True:
            nruns = per.size
            if nruns == 0:
                return cupy.zeros((0, self.XW), dtype=np.uint64)
            if int(per.max()) <= 1:
                out = cupy.zeros((nruns, self.XW), dtype=np.uint64)  # zero = infinity
                owners = cupy.flatnonzero(per)
                out[owners] = pts[: owners.size]
                return out
            cs, ce, per, cum, _ = self._chunks(cum - per, cum, S)
            nxt = empty((cs.size, self.XW), np.uint64, "msm partial sums", self.device)
            launch(k, "sum_xyzz_chunks", cs.size, (pts, cs, ce, self._none, i32(0), nxt, u64(cs.size)), stream)
            pts = nxt

    def _sum_gathered(self, bases, perm, nbases: int, starts, ends, S: int, stream, neg=None) -> cupy.ndarray:
        """Per run [starts, ends) of ``perm``: sum of (-1 if neg[perm[k]] else 1) * bases[perm[k] % nbases]
        (``neg``: uint8 per key, or None); (nruns, 24)."""
        cs, ce, per, cum, _ = self._chunks(starts, ends, S)
        part = empty((max(cs.size, 1), self.XW), np.uint64, "msm bucket partial sums", self.device)
        launch(self._k["sum_affine_chunks"], "sum_affine_chunks", cs.size,
               (bases, perm, u64(nbases), cs, ce, self._none, i32(0), part, u64(cs.size),
                neg if neg is not None else self._none, i32(neg is not None)), stream)
        return self._reduce_runs(part, per, cum, S, stream)

    def _xyzz_sums(self, stream):
        """``msm_layout``'s ``sum_chunks`` for XYZZ points: one ``sum_xyzz_chunks`` launch on ``stream``."""
        k = self._k["sum_xyzz_chunks"]

        def run(pts, cs, ce):
            nxt = empty((max(cs.size, 1), self.XW), np.uint64, "msm partial sums", self.device)
            launch(k, "sum_xyzz_chunks", cs.size, (pts, cs, ce, self._none, i32(0), nxt, u64(cs.size)), stream)
            return nxt[: cs.size]
        return run

    def _sum_gathered_free(self, bases, perm, nbases: int, starts, ends, S: int, stream, neg, entries: int,
                           max_run: int) -> cupy.ndarray:
        """``_sum_gathered`` without reading anything back: ``entries`` bounds the runs' total length and
        ``max_run`` the longest run (host values); (nruns, XW)."""
        bound = msm_layout.chunk_bound(entries, starts.size, S)
        cs, ce, per, cum = msm_layout.chunks(cupy, starts, ends, S, bound, self.even_chunks)
        part = empty((max(bound, 1), self.XW), np.uint64, "msm bucket partial sums", self.device)
        launch(self._k["sum_affine_chunks"], "sum_affine_chunks", bound,
               (bases, perm, u64(nbases), cs, ce, self._none, i32(0), part, u64(bound),
                neg if neg is not None else self._none, i32(neg is not None)), stream)
        return msm_layout.reduce_runs(cupy, self._xyzz_sums(stream), part[:bound], per, cum, S,
                                      -(-max_run // S))

    def _sum_balanced(self, bases, perm, nbases: int, off, stream, neg=None) -> cupy.ndarray:
        """Bucket sums (nb, XW) of the sorted entries (bucket b owns perm[off[b]:off[b+1]]), S entries per
        thread across bucket boundaries; the pieces of buckets that cross threads are summed per bucket."""
        nb = off.size - 1
        m = int(off[-1])
        buckets = cupy.zeros((nb, self.XW), dtype=np.uint64)  # zero = infinity (empty buckets)
        if m == 0:
            return buckets
        S = chunk_size(m)
        T = (m + S - 1) // S
        pieces = empty((2 * T, self.XW), np.uint64, "msm bucket pieces", self.device)
        piece_b = empty((2 * T,), np.int64, "msm piece buckets", self.device)
        launch(self._k["sum_affine_balanced"], "sum_affine_balanced", T,
               (bases, perm, u64(nbases), off, u64(nb), u64(m), u64(S), neg if neg is not None else self._none,
                i32(neg is not None), buckets, pieces, piece_b), stream)
        used = cupy.flatnonzero(piece_b >= 0)
        if used.size:
            pb = piece_b[used]
            first = cupy.flatnonzero(cupy.concatenate((cupy.ones(1, dtype=bool), pb[1:] != pb[:-1])))
            per = cupy.diff(cupy.concatenate((first, cupy.full(1, used.size, dtype=first.dtype)))).astype(np.int64)
            sums = self._reduce_runs(pieces[used], per, cupy.cumsum(per), 32, stream)
            buckets[pb[first]] = sums
        return buckets

    # -- public ---------------------------------------------------------------------------------
    def msm(self, bases: cupy.ndarray, scalars: cupy.ndarray, window: int | None, stream,
            profile: dict | None = None, sync_free: bool = False) -> cupy.ndarray:
        """Device XYZZ (24,) of sum scalars[i] * bases[i]; ``scalars`` (n, 4) canonical uint64 on device.
        ``sync_free``: no host synchronisation inside (module docstring).

        ``profile``: if a dict, filled with device milliseconds per step (CUDA events; synchronises).
        """
        n = scalars.shape[0]
        if n > bases.shape[0]:
            raise BackendError(f"cuda msm: {n} scalars for {bases.shape[0]} bases")
        if n == 0:
            return cupy.zeros(self.XW, dtype=np.uint64)
        c = int(window) if window else engine_window(n, self.signed)
        if not 1 <= c <= 20:
            raise BackendError(f"cuda msm: window must be in 1..20 bits, got {c}")
        nw = signed_windows(c) if self.signed else (255 + c - 1) // c
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        marks: list = []

        def mark(name: str) -> None:
            if profile is not None:
                ev = cupy.cuda.Event()
                ev.record(stream)
                marks.append((name, ev))

        with stream:
            mark("start")
            keys = empty((nw * n,), np.uint32, f"msm keys ({nw} windows x {n})", self.device)
            neg = None
            if self.signed:
                neg = empty((nw * n,), np.uint8, f"msm digit signs ({nw} windows x {n})", self.device)
                launch(self._k["msm_digits_signed"], "msm_digits_signed", n,
                       (scalars, u64(n), i32(c), i32(nw), keys, neg), stream)
            else:
                launch(self._k["msm_digits"], "msm_digits", n, (scalars, u64(n), i32(c), i32(nw), keys), stream)
            mark("digits")
            nb = nw << c
            if self.sort == "counting":
                m = nw * n
                counts = cupy.zeros(nb, dtype=np.uint32)
                launch(self._k["msm_bucket_count"], "msm_bucket_count", m, (keys, u64(m), counts), stream)
                off = cupy.zeros(nb + 1, dtype=np.int64)
                cupy.cumsum(counts, dtype=np.int64, out=off[1:])
                del counts
                mark("sort")
                cursor = off[:-1].copy()
                perm = empty((m,), np.int64, f"msm bucket order ({m} keys)", self.device)
                launch(self._k["msm_bucket_scatter"], "msm_bucket_scatter", m, (keys, u64(m), cursor, perm), stream)
                del keys, cursor
            else:
                perm = check("cupy.argsort(msm keys)", cupy.argsort, keys)
                mark("sort")
                skeys = keys[perm]
                off = cupy.searchsorted(skeys, cupy.arange(nb + 1, dtype=np.uint32))
                del keys, skeys
            mark("bucket_offsets")
            if self.balanced if self.balanced is not None else n >= BALANCED_FROM:
                buckets = self._sum_balanced(bases, perm, n, off, stream, neg)
            else:
                if self.even_chunks:
                    S = chunk_size(nw * n, nw << (c - 1) if self.signed else nw << c)
                else:
                    S = chunk_size(nw * n)
                if sync_free:  # a bucket holds at most one key per scalar (one window each)
                    buckets = self._sum_gathered_free(bases, perm, n, off[:-1], off[1:], S, stream, neg, nw * n, n)
                else:
                    buckets = self._sum_gathered(bases, perm, n, off[:-1], off[1:], S, stream, neg)
            del perm, neg
            mark("accumulate")
            G = (1 << c) // bucket_span(c, nw)
            seg = empty((nw * G, self.XW), np.uint64, "msm window segments", self.device)
            launch(self._k["bucket_reduce"], "bucket_reduce", nw * G, (buckets, i32(c), i32(nw), i32(G), seg), stream)
            mark("bucket_reduce")
            per = cupy.full(nw, G, dtype=np.int64)
            if sync_free:
                win = msm_layout.reduce_runs(cupy, self._xyzz_sums(stream), seg, per, cupy.cumsum(per), 32, G)
            else:
                win = self._reduce_runs(seg, per, cupy.cumsum(per), 32, stream)
            mark("window_sums")
            out = cupy.empty(self.XW, dtype=np.uint64)
            launch(self._k["msm_horner"], "msm_horner", 1, (win, i32(c), i32(nw), out), stream)
            mark("horner")
        if profile is not None:
            marks[-1][1].synchronize()
            for (_, e0), (name, e1) in pairwise(marks):
                profile[name] = cupy.cuda.get_elapsed_time(e0, e1)
            profile["window"] = c
            profile["windows"] = nw
        return out

    def sum_selected(self, bases: cupy.ndarray, idx: cupy.ndarray, stream, sync_free: bool = False) -> cupy.ndarray:
        """Device XYZZ (24,) of the sum of bases[idx] (idx int64 on device; its length is known on the host, so
        with ``sync_free`` every size is exact and nothing is read back)."""
        m = idx.size
        if m == 0:
            return cupy.zeros(self.XW, dtype=np.uint64)
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        with stream:
            S = int(max(8, min(512, m >> 14)))
            starts = cupy.zeros(1, dtype=np.int64)
            ends = cupy.full(1, m, dtype=np.int64)
            if sync_free:
                res = self._sum_gathered_free(bases, idx, bases.shape[0], starts, ends, S, stream, None, m, m)
            else:
                res = self._sum_gathered(bases, idx, bases.shape[0], starts, ends, S, stream)
        return res[0]


class G2Msm(G1Msm):
    """The MSM engine over G2 (kernels ``g2_*``): bases ``(n, 2, 2, 6)`` affine limbs, results 48 words."""

    PREFIX, AFFINE, XW = "g2_", 24, 48
