"""Fr NTTs on one GPU: twiddle/coset tables on the device, pass-structured kernels (kernels/ntt.cu).

``FrNtt(device)`` works on CuPy arrays of shape ``(m, n, 4)`` uint64 in **Montgomery form**
(``to_mont``/``from_mont`` convert in place). Conventions are ``backends/base.py``'s: natural order in
and out, coset shift 7, inverse includes 1/n. Tables (w^j, w^-j for j < n/2; 7^i and 7^-i/n) are
built on the device by ``fr_powers`` from log2(n) host-computed powers and cached per size; the 128
powers of the 256th root (and of its inverse) come from the host once.

Implementations (``impl``; the default is ``DEFAULT_IMPL``): ``"pass"`` runs ``ntt_pass``: ceil(log2(n) / 8) passes over
global memory, 8-stage tiles in shared memory, 32-bit-limb arithmetic (``fr32.cuh``), the bit reversal
and the coset shift fused into the first pass, 1/n (or 7^-i / n) into the last, all m rows of the
batch in each launch; it needs a scratch buffer of the array's size for the first pass. ``"pass_o5"`` is
the same kernel capped at 96 registers (5 blocks per SM), ``"pass_e4"`` holds 4 elements per thread (256
threads, 2 stages per trip through shared memory, 3 blocks per SM), ``"pass_m64"`` the same passes with field.cuh's
64-bit multiplication, ``"radix2"`` the earlier kernels (in-place
bit reversal, 10 stages in shared memory, then one radix-4 launch per two stages and row); both are
kept for A/B measurement (``benchmarks/gpu_all.py``'s ntt section). n < 8 always uses ``"radix2"``.

Thread: one instance per device, used by that device's worker thread; table builds are locked.
Streams: every temporary is allocated, filled and read on the caller's stream (CuPy's memory pool is
stream-ordered); tables are built on the first caller's stream and read by later work on that stream.
Raises ``BackendError`` (from ``cuda_kernels``) on CUDA failures.
"""

from __future__ import annotations

import threading

import cupy
import numpy as np

from ..field import COSET_SHIFT, R, inv, root_of_unity
from ..ntt import cuda_pass_plan
from .base import BackendError
from .cuda_kernels import empty, i32, kernel, launch, u64

#: Montgomery radix for Fr (4 x 64-bit limbs).
MONT_R = (1 << 256) % R

BLOCK_LOG = 10  # radix2: first 10 stages of each 1024-element chunk in shared memory (32 KiB)
#: FrNtt implementations -> (pass kernel, log2 of the elements each thread holds); None: the radix-2 kernels.
IMPLS = {"pass": ("ntt_pass", 3), "pass_o5": ("ntt_pass_o5", 3), "pass_e4": ("ntt_pass_e4", 2),
         "pass_m64": ("ntt_pass_m64", 3), "radix2": None}
#: The implementation ``FrNtt(device)`` uses (the backend's).
DEFAULT_IMPL = "pass"


def mont_limbs(values: list[int]) -> np.ndarray:
    """Ints -> Montgomery-form limbs (n, 4) uint64 on the host."""
    buf = b"".join((v * MONT_R % R).to_bytes(32, "little") for v in values)
    return np.frombuffer(buf, dtype="<u8").reshape(len(values), 4).astype(np.uint64)


def _stream(stream):
    """``stream``, or CuPy's current stream for ``None``."""
    return stream if stream is not None else cupy.cuda.get_current_stream()


class FrNtt:
    """NTT engine for one device (see module docstring)."""

    def __init__(self, device: int, impl: str = DEFAULT_IMPL) -> None:
        if impl not in IMPLS:
            raise BackendError(f"cuda ntt: unknown implementation {impl!r} (one of {', '.join(IMPLS)})")
        self.device = device
        self.impl = impl
        self._tables: dict[tuple, cupy.ndarray] = {}
        self._lock = threading.Lock()
        self._k = {fn: kernel("ntt", device, fn) for fn in (
            "fr_to_mont", "fr_from_mont", "fr_powers", "fr_bitrev_inplace", "ntt_block", "ntt_stage",
            "ntt_stage2", "fr_mul_tab", "fr_scale", "fr_h_eval", "ntt_pass", "ntt_pass_o5", "ntt_pass_e4",
            "ntt_pass_m64")}

    # -- tables ---------------------------------------------------------------------------
    def powers(self, base: int, count: int, scale: int, stream) -> cupy.ndarray:
        """Device table ``scale * base^i`` for i < count (Montgomery)."""
        bits = max(1, (count - 1).bit_length())
        pow2 = [pow(base, 1 << b, R) for b in range(bits)]
        stream = _stream(stream)
        # Temporaries are allocated and copied *on the stream* that reads them: CuPy's pool hands a freed
        # block to the next allocation of its stream, and a block freed under another stream could be
        # overwritten while this (non-blocking) stream still has the kernel that reads it queued.
        with stream:
            d_pow2 = cupy.asarray(mont_limbs(pow2))
            d_scale = cupy.asarray(mont_limbs([scale % R]))
            out = empty((count, 4), np.uint64, f"ntt tables ({count} elements)", self.device)
            launch(self._k["fr_powers"], "fr_powers", count, (out, d_pow2, d_scale, u64(count)), stream)
        return out

    def _table(self, kind: str, logn: int, stream) -> cupy.ndarray:
        key = (kind, logn)
        t = self._tables.get(key)
        if t is not None:
            return t
        with self._lock:
            t = self._tables.get(key)
            if t is None:
                n = 1 << logn
                if kind == "tw":
                    t = self.powers(root_of_unity(n), max(1, n // 2), 1, stream)
                elif kind == "itw":
                    t = self.powers(inv(root_of_unity(n)), max(1, n // 2), 1, stream)
                elif kind == "coset":
                    t = self.powers(COSET_SHIFT, n, 1, stream)
                elif kind == "icoset":  # 7^-i / n: inverse coset shift with the 1/n scaling folded in
                    t = self.powers(inv(COSET_SHIFT), n, inv(n), stream)
                elif kind == "ninv":
                    with _stream(stream):
                        t = cupy.asarray(mont_limbs([inv(n)]))
                elif kind in ("small", "ismall"):  # w_256^j (w_256^-j), j < 128, for every size
                    w = root_of_unity(256)
                    w = inv(w) if kind == "ismall" else w
                    with _stream(stream):
                        t = cupy.asarray(mont_limbs([pow(w, j, R) for j in range(128)]))
                else:  # pragma: no cover - internal
                    raise KeyError(kind)
                self._tables[key] = t
        return t

    # -- conversions ----------------------------------------------------------------------
    def to_mont(self, a: cupy.ndarray, stream) -> None:
        n = a.size // 4
        launch(self._k["fr_to_mont"], "fr_to_mont", n, (a, u64(n)), stream)

    def from_mont(self, a: cupy.ndarray, stream) -> None:
        n = a.size // 4
        launch(self._k["fr_from_mont"], "fr_from_mont", n, (a, u64(n)), stream)

    # -- transforms -----------------------------------------------------------------------
    def transform(self, a: cupy.ndarray, *, inverse: bool, coset: bool, stream) -> cupy.ndarray:
        """In-place (inverse, coset) NTT of every row of ``a`` ``(m, n, 4)`` (Montgomery). Returns ``a``."""
        if a.ndim != 3 or a.shape[-1] != 4 or not a.flags.c_contiguous:
            raise BackendError(f"cuda ntt: expected a C-contiguous (m, n, 4) array, got {a.shape}")
        m, n = a.shape[0], a.shape[1]
        if n == 0 or n & (n - 1):
            raise BackendError(f"cuda ntt: length must be a power of two, got {n}")
        if m == 0:
            return a
        logn = n.bit_length() - 1
        if self.impl == "radix2" or logn < 3:
            return self._transform_radix2(a, inverse=inverse, coset=coset, stream=stream)
        return self._transform_passes(a, inverse=inverse, coset=coset, stream=stream)

    def _transform_passes(self, a: cupy.ndarray, *, inverse: bool, coset: bool, stream) -> cupy.ndarray:
        m, n = a.shape[0], a.shape[1]
        logn = n.bit_length() - 1
        impl = IMPLS[self.impl]
        assert impl is not None, "the radix-2 implementation has no pass kernel"
        fn, eb = impl
        k = self._k[fn]
        tw = self._table("itw" if inverse else "tw", logn, stream)
        small = self._table("ismall" if inverse else "small", 0, stream)
        cos = self._table("coset", logn, stream) if coset and not inverse else None
        post = self._table("icoset", logn, stream) if coset and inverse else None
        post1 = self._table("ninv", logn, stream) if inverse and not coset else None
        plan = cuda_pass_plan(logn)
        scratch = None
        if len(plan) > 1:  # the first pass gathers at bit-reversed positions: not in place
            with _stream(stream):  # stream-ordered pool block (see ``powers``)
                scratch = empty(a.shape, np.uint64, f"ntt scratch ({m} x {n} elements)", self.device)
        null = u64(0)  # a null pointer argument
        for p, (lo, kk, logc) in enumerate(plan):
            first, last = p == 0, p == len(plan) - 1
            src = a if first else scratch
            dst = a if last else scratch
            args = (src, dst, tw, small, cos if first and cos is not None else null,
                    post if last and post is not None else null, post1 if last and post1 is not None else null,
                    i32(logn), i32(lo), i32(kk), i32(logc))
            grid = (1 << (logn - kk - logc), m)
            block = (1 << (logc + kk - eb),)
            try:
                k(grid, block, args, stream=_stream(stream))
            except Exception as exc:
                raise BackendError(f"{fn} (pass {p} of 2^{logn} x {m}): kernel launch failed ({exc})") from exc
        return a

    def _transform_radix2(self, a: cupy.ndarray, *, inverse: bool, coset: bool, stream) -> cupy.ndarray:
        m, n = a.shape[0], a.shape[1]
        logn = n.bit_length() - 1
        k = self._k
        tw = self._table("itw" if inverse else "tw", logn, stream)
        cos = self._table("coset", logn, stream) if coset and not inverse else None
        post = None
        if inverse:
            post = self._table("icoset" if coset else "ninv", logn, stream)
        kb = min(BLOCK_LOG, logn)
        for r in range(m):
            row = a[r]
            if cos is not None:
                launch(k["fr_mul_tab"], "fr_mul_tab(coset)", n, (row, cos, u64(n)), stream)
            if logn:
                launch(k["fr_bitrev_inplace"], "fr_bitrev_inplace", n, (row, u64(n), i32(logn)), stream)
            if kb:
                launch(k["ntt_block"], "ntt_block", 0, (row, tw, i32(logn), i32(kb), u64(1)), stream,
                       block=1 << (kb - 1), grid=n >> kb, shared=(1 << kb) * 32)
            s = kb
            while s < logn:
                if s + 1 < logn:
                    launch(k["ntt_stage2"], "ntt_stage2", n // 4, (row, tw, i32(logn), i32(s), u64(1)), stream)
                    s += 2
                else:
                    launch(k["ntt_stage"], "ntt_stage", n // 2, (row, tw, i32(logn), i32(s), u64(1)), stream)
                    s += 1
            if post is not None:
                if coset:
                    launch(k["fr_mul_tab"], "fr_mul_tab(icoset)", n, (row, post, u64(n)), stream)
                else:
                    launch(k["fr_scale"], "fr_scale(1/n)", n, (row, post, u64(n)), stream)
        return a

    def h_eval(self, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, stream) -> cupy.ndarray:
        """a = (a*b - c) / (7^n - 1) elementwise, in place in ``a`` (all Montgomery, same shape)."""
        if not (a.shape == b.shape == c.shape):
            raise BackendError(f"cuda h_eval: shapes differ {a.shape} {b.shape} {c.shape}")
        n = a.shape[-2]
        stream = _stream(stream)
        with stream:  # zinv lives on the stream that reads it (see ``powers``)
            zinv = cupy.asarray(mont_limbs([inv((pow(COSET_SHIFT, n, R) - 1) % R)]))
            total = a.size // 4
            launch(self._k["fr_h_eval"], "fr_h_eval", total, (a, b, c, zinv, u64(total)), stream)
        return a
