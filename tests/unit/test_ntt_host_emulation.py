"""The CUDA NTT's pass kernels (``kernels/ntt.cu`` ``ntt_pass``/``ntt_pass_m64``, ``fr32.cuh``) run on the host.

The system C++ compiler builds ntt.cu as host code with a small CUDA shim (each block's threads are
``std::thread``s meeting at a barrier for ``__syncthreads``, shared memory a static array, the PTX carry flag
emulated by ``fr32.cuh``'s host branch); the test then drives the passes exactly as ``cuda_ntt.FrNtt`` does
(``cuda_pass_plan``, the same tables) and compares with the CPU NTT. So CI, which has no GPU, checks the
kernels' index maps, shared-memory swizzle, fused bit reversal / coset / 1/n and the 32-bit Montgomery
arithmetic; the GPU build is checked in ``tests/gpu/test_ntt_kernels.py``. Skipped only without a C++
compiler. Fresh random inputs each run (the seed is in every failure message).
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gputrace.prover.field import COSET_SHIFT, R, inv, root_of_unity
from gputrace.prover.ntt import CUDA_TILE_LOG, cuda_pass_plan, ntt, to_object

SEED = int.from_bytes(os.urandom(4), "little")
KERNELS = Path(__file__).resolve().parents[2] / "gputrace" / "prover" / "kernels"
MONT = (1 << 256) % R

_SHIM = r"""
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>
#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__
#define NTT_SHARED static
struct ulonglong2 { unsigned long long x, y; };
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ blockDim, gridDim;
struct Barrier {  // reusable barrier for one block's threads (C++17: no std::barrier)
    std::mutex mu; std::condition_variable cv; unsigned count = 0, waiting = 0, gen = 0;
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        unsigned g = gen;
        if (++waiting == count) { waiting = 0; gen++; cv.notify_all(); }
        else cv.wait(lk, [&] { return gen != g; });
    }
};
static Barrier g_bar;
inline void __syncthreads() { g_bar.wait(); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __brev(unsigned x) { unsigned r = 0; for (int i = 0; i < 32; i++) { r = (r << 1) | (x & 1); x >>= 1; } return r; }
unsigned long long sh[1];  // the radix-2 kernels' extern __shared__ (not run here)
#include "ntt.cu"

typedef void (*pass_fn)(const u64*, u64*, const u64*, const u64*, const u64*, const u64*, const u64*, int, int, int, int);

extern "C" int run_pass(int variant, const u64* src, u64* dst, const u64* tw, const u64* small, const u64* coset,
                        const u64* post, const u64* post1, int logn, int lo, int k, int logc, unsigned gx,
                        unsigned gy, unsigned block) {
    pass_fn f = variant == 0 ? ntt_pass : variant == 1 ? ntt_pass_m64 : ntt_pass_e4;
    blockDim.x = block; gridDim.x = gx; gridDim.y = gy;
    g_bar.count = block;
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            std::vector<std::thread> th;
            for (unsigned t = 0; t < block; t++)
                th.emplace_back([=] { threadIdx.x = t; blockIdx.x = x; blockIdx.y = y;
                                      f(src, dst, tw, small, coset, post, post1, logn, lo, k, logc); });
            for (auto& t : th) t.join();
        }
    return 0;
}

extern "C" void fr32_ops(const u64* x, const u64* y, u64* out, u64 n) {
    blockDim.x = 1;
    for (u64 i = 0; i < n; i++) { threadIdx.x = 0; blockIdx.x = (unsigned)i; fr32_test_ops(x, y, out, n); }
}
"""


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("ntt_emu")
    (d / "emu.cpp").write_text(_SHIM)
    lib = d / "emu.so"
    subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-w", "-pthread", f"-I{KERNELS}",
                    str(d / "emu.cpp"), "-o", str(lib)], check=True, timeout=300)
    return ctypes.CDLL(str(lib))


def _limbs(vals) -> np.ndarray:
    raw = b"".join((v * MONT % R).to_bytes(32, "little") for v in vals)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4).copy()


def _ints(a: np.ndarray) -> list[int]:
    raw = np.ascontiguousarray(a).reshape(-1, 4).tobytes()
    rinv = inv(MONT)
    return [int.from_bytes(raw[i:i + 32], "little") * rinv % R for i in range(0, len(raw), 32)]


def _ptr(a):
    return ctypes.c_void_p(0) if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _emulated_transform(lib, rows, inverse, coset, variant):
    """The passes as ``FrNtt._transform_passes`` launches them, on the host."""
    m, n = len(rows), len(rows[0])
    logn = n.bit_length() - 1
    w = root_of_unity(n)
    w = inv(w) if inverse else w
    tw = _limbs([pow(w, j, R) for j in range(n // 2)])
    w256 = root_of_unity(256)
    w256 = inv(w256) if inverse else w256
    small = _limbs([pow(w256, j, R) for j in range(128)])
    cos = _limbs([pow(COSET_SHIFT, i, R) for i in range(n)]) if coset and not inverse else None
    post = _limbs([pow(inv(COSET_SHIFT), i, R) * inv(n) % R for i in range(n)]) if coset and inverse else None
    post1 = _limbs([inv(n)]) if inverse and not coset else None
    a = _limbs([v for r in rows for v in r]).reshape(m, n, 4)
    scratch = np.zeros_like(a)
    plan = cuda_pass_plan(logn)
    for p, (lo, k, logc) in enumerate(plan):
        first, last = p == 0, p == len(plan) - 1
        lib.run_pass(variant, _ptr(a if first else scratch), _ptr(a if last else scratch), _ptr(tw), _ptr(small),
                     _ptr(cos if first else None), _ptr(post if last else None), _ptr(post1 if last else None),
                     logn, lo, k, logc, ctypes.c_uint(1 << (logn - k - logc)), ctypes.c_uint(m),
                     ctypes.c_uint(1 << (logc + k - (2 if variant == 2 else 3))))
    return [_ints(a[r]) for r in range(m)]


@pytest.mark.slow
def test_fr32_arithmetic_on_host(emu):
    rng = random.Random(SEED)
    edge = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, (R + 1) // 2, 1 << 64, (1 << 255) % R, MONT]
    pairs = [(x, y) for x in edge for y in edge] + [(rng.randrange(R), rng.randrange(R)) for _ in range(400)]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    out = np.zeros((len(pairs), 16), dtype=np.uint64)
    emu.fr32_ops(_ptr(_limbs(xs)), _ptr(_limbs(ys)), _ptr(out), ctypes.c_uint64(len(pairs)))
    got = _ints(out)
    for i, (x, y) in enumerate(pairs):
        want = [(x + y) % R, (x - y) % R, x * y % R, (-x) % R]
        assert got[4 * i:4 * i + 4] == want, f"fr32 ops wrong for x={x} y={y} (seed {SEED})"


@pytest.mark.parametrize("variant", [0, 1, 2], ids=["ntt_pass", "ntt_pass_m64", "ntt_pass_e4"])
@pytest.mark.parametrize("logn,m", [(3, 1), (4, 2), (6, 1), (8, 1), (9, 2), (11, 1), (13, 1)])
@pytest.mark.slow
def test_pass_kernels_match_cpu_ntt_on_host(emu, variant, logn, m):
    rng = random.Random(SEED + logn)
    n = 1 << logn
    rows = [[rng.randrange(R) for _ in range(n)] for _ in range(m)]
    for inverse in (False, True):
        for coset in (False, True):
            got = _emulated_transform(emu, rows, inverse, coset, variant)
            want = ntt(to_object(rows), inverse=inverse, coset=coset)
            for i in range(m):
                assert got[i] == list(want[i]), f"2^{logn} {inverse=} {coset=} row {i} (seed {SEED})"


@pytest.mark.slow
def test_three_pass_transform_on_host(emu):
    """2^17 = 6 + 6 + 5 stages: a middle pass in place in the scratch buffer."""
    rng = random.Random(SEED)
    rows = [[rng.randrange(R) for _ in range(1 << 17)]]
    got = _emulated_transform(emu, rows, False, True, 0)
    assert got[0] == list(ntt(to_object(rows), coset=True)[0]), f"2^17 coset (seed {SEED})"


@pytest.mark.parametrize("logn", range(3, 33))
def test_cuda_pass_plan_covers_every_stage(logn):
    plan = cuda_pass_plan(logn)
    assert len(plan) == -(-logn // 8)
    lo = 0
    for p, (plo, k, logc) in enumerate(plan):
        assert plo == lo and 3 <= k <= 8
        assert 0 <= logc and logc + k <= CUDA_TILE_LOG
        assert logc <= (logn - k if p == 0 else plo)  # no more columns than the pass has
        lo += k
    assert lo == logn
    assert max(k for _, k, _ in plan) - min(k for _, k, _ in plan) <= 1


def test_cuda_pass_plan_refuses_tiny():
    with pytest.raises(ValueError):
        cuda_pass_plan(2)
