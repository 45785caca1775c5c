"""CPU NTT over Fr on numpy object arrays of Python ints (the CPU backend's ``ntt`` phase).

Radix-2 Cooley–Tukey, decimation in time, vectorised per stage across all butterflies and all
rows of a batch (shape ``(m, n)``): each stage is a handful of numpy ufunc calls on object
arrays, so the per-element work is CPython big-int arithmetic without interpreter loops
(~2x faster than a plain Python loop at 2^16). Conventions are those of ``backends/base.py``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .field import COSET_SHIFT, R, inv, root_of_unity


@lru_cache(maxsize=32)
def _bitrev(n: int) -> np.ndarray:
    k = n.bit_length() - 1
    idx = np.arange(n, dtype=np.int64)
    rev = np.zeros(n, dtype=np.int64)
    for i in range(k):
        rev |= ((idx >> i) & 1) << (k - 1 - i)
    return rev


@lru_cache(maxsize=64)
def _twiddles(n: int, inverse: bool) -> tuple[np.ndarray, ...]:
    w = root_of_unity(n)
    if inverse:
        w = inv(w)
    out = []
    m = 1
    while m < n:
        wm = pow(w, n // (2 * m), R)
        tw = [1] * m
        for j in range(1, m):
            tw[j] = tw[j - 1] * wm % R
        arr = np.empty(m, dtype=object)
        arr[:] = tw
        out.append(arr)
        m *= 2
    return tuple(out)


@lru_cache(maxsize=32)
def _coset_powers(n: int, inverse: bool) -> np.ndarray:
    g = inv(COSET_SHIFT) if inverse else COSET_SHIFT
    p = [1] * n
    for i in range(1, n):
        p[i] = p[i - 1] * g % R
    arr = np.empty(n, dtype=object)
    arr[:] = p
    return arr


def to_object(values) -> np.ndarray:
    """A 2-D object array of Python ints from a list of lists (or any 2-D sequence of ints)."""
    rows = list(values)
    out = np.empty((len(rows), len(rows[0]) if rows else 0), dtype=object)
    for i, r in enumerate(rows):
        out[i, :] = r
    return out


def ntt(x: np.ndarray, *, inverse: bool = False, coset: bool = False) -> np.ndarray:
    """NTT of each row of the object array ``x`` (shape ``(m, n)``); returns a new array.

    Forward coset: scale coefficient i by 7^i, then transform. Inverse coset: inverse transform
    (with 1/n), then scale by 7^-i.
    """
    if x.ndim != 2:
        raise ValueError(f"ntt expects a 2-D (batch, n) array, got shape {x.shape}")
    m, n = x.shape
    if n & (n - 1) or n == 0:
        raise ValueError(f"NTT length must be a power of two, got {n}")
    a = x
    if coset and not inverse:
        a = a * _coset_powers(n, False) % R
    a = a[:, _bitrev(n)]
    half = 1
    for tw in _twiddles(n, inverse):
        a = a.reshape(m, n // (2 * half), 2, half)
        u = a[:, :, 0, :]
        v = a[:, :, 1, :] * tw % R
        a = np.stack(((u + v) % R, (u - v) % R), axis=2)
        half *= 2
    a = a.reshape(m, n)
    if inverse:
        ninv = inv(n)
        a = a * (_coset_powers(n, True) * ninv % R if coset else ninv) % R
    return a


#: The CUDA NTT's pass structure (kernels/ntt.cu, ``ntt_pass``): at most this many radix-2 stages per pass
#: over global memory, and a block's tile of at most 2^CUDA_TILE_LOG elements in shared memory.
CUDA_PASS_STAGES = 8
CUDA_TILE_LOG = 10


def cuda_pass_plan(logn: int) -> list[tuple[int, int, int]]:
    """``(lo, k, logc)`` for each pass of the CUDA NTT of length 2^logn (logn >= 3).

    The pass does stages ``lo .. lo+k-1`` on tiles of ``2^logc`` columns x ``2^k`` rows (block of
    ``2^(logc+k-3)`` threads, grid of ``2^(logn-k-logc)`` tiles per vector). Stages are split as evenly
    as possible over ``ceil(logn / 8)`` passes (2^24: 8 + 8 + 8; 2^20: 7 + 7 + 6). Pure function (no CuPy):
    the backend and the tests share it. Raises ValueError for logn < 3.
    """
    if logn < 3:
        raise ValueError(f"the pass-structured NTT needs n >= 8, got 2^{logn}")
    passes = -(-logn // CUDA_PASS_STAGES)
    ks = [logn // passes + (1 if i < logn % passes else 0) for i in range(passes)]
    out, lo = [], 0
    for k in ks:
        avail = logn - k if lo == 0 else lo  # columns: groups of the first pass, else 2^lo
        out.append((lo, k, min(CUDA_TILE_LOG - k, avail)))
        lo += k
    return out
