"""The MSM engine and the backend without host synchronisation (``sync_free``, the queued calls of the stream flow;
marked ``gpu``): results equal arkworks and the host-synchronising engine for skewed, zero, repeated and random
inputs, G1 and G2, every window kind; and the host really does not wait: a call queued behind a 0.5 s spin kernel
returns before the spin ends (the host-synchronising engine does not, so the check can fail). Fresh random inputs
every run (the seed is in every failure). The layouts themselves: ``tests/unit/test_msm_layout.py``."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from py_arkworks_bls12381 import G1Point, G2Point, Scalar  # noqa: E402

from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars, to_scalar  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
SPIN = r'''
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
'''


def _g1_points(rng, n):
    base = [G1Point() * to_scalar(rng.randrange(1, R)) for _ in range(min(n, 8))]
    pts, acc = [], base[0]
    for i in range(n):
        acc = acc + base[i % len(base)]
        pts.append(G1Point.identity() if i % 11 == 5 else acc)
    return pts


def _scalars(rng, n, kind):
    if kind == "same":  # every scalar equal: one bucket per window holds all n keys (the bound's worst case)
        v = rng.randrange(R)
        return [v] * n
    if kind == "zero":
        return [0] * n
    if kind == "few":  # mostly zero, a few repeated values: skewed buckets
        return [rng.choice([0, 0, 0, 2, 3, R - 1]) for _ in range(n)]
    return [rng.randrange(R) for _ in range(n)]


@pytest.mark.parametrize("signed,sort,even", [(True, "counting", True), (False, "argsort", False),
                                              (True, "argsort", True), (False, "counting", True)])
@pytest.mark.parametrize("n,kind", [(1, "full"), (33, "same"), (1000, "few"), (4096, "full"), (4096, "same"),
                                    (2000, "zero")])
def test_sync_free_msm_equals_arkworks(n, kind, signed, sort, even):
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs

    rng = random.Random(SEED + n)
    pts, sc = _g1_points(rng, n), _scalars(rng, n, kind)
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G1Msm(0, signed=signed, sort=sort, even_chunks=even, balanced=False)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    dsc = cupy.asarray(ints_to_limbs(sc))
    for window in (None, 1, 4, 11):
        got = xyzz_to_g1(eng.msm(bases, dsc, window, None, sync_free=True).get())
        assert got == want, f"n={n} {kind} signed={signed} {sort} even={even} window={window} (seed {SEED})"


@pytest.mark.parametrize("m", [0, 1, 7, 5000])
def test_sync_free_batch_add(m):
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs

    rng = random.Random(SEED + m)
    pts = _g1_points(rng, 6000)
    idx = sorted(rng.sample(range(6000), m))
    want = G1Point.identity()
    for i in idx:
        want = want + pts[i]
    eng = G1Msm(0)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    got = eng.sum_selected(bases, cupy.asarray(np.array(idx, dtype=np.int64)), None, sync_free=True)
    assert xyzz_to_g1(got.get()) == want, f"batch add of {m} (seed {SEED})"


@pytest.mark.parametrize("kind", ["full", "same"])
def test_sync_free_g2_msm(kind):
    from gputrace.prover.backends.cuda_msm import G2Msm, xyzz_to_g2
    from gputrace.prover.encoding import g2_to_affine_limbs

    rng = random.Random(SEED)
    n = 300
    pts = [G2Point() * Scalar(rng.randrange(1, 1 << 60)) for _ in range(n)]
    sc = _scalars(rng, n, kind)
    want = G2Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G2Msm(0)
    bases = eng.load_bases(g2_to_affine_limbs(pts), None)
    for window in (None, 3, 8):
        got = xyzz_to_g2(eng.msm(bases, cupy.asarray(ints_to_limbs(sc)), window, None, sync_free=True).get())
        assert got == want, f"g2 {kind} window={window} (seed {SEED})"


@pytest.mark.parametrize("sync_free", [True, False])
def test_the_host_does_not_wait(sync_free):
    """Behind a 0.5 s spin on the same stream, the sync-free MSM and batch addition return before the spin ends;
    the host-synchronising engine waits for it (the check's control)."""
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs

    rng = random.Random(SEED)
    n = 4096
    pts, sc = _g1_points(rng, n), _scalars(rng, n, "full")
    eng = G1Msm(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        bases = eng.load_bases(g1_to_affine_limbs(pts), stream)
        dsc = cupy.asarray(ints_to_limbs(sc))
        idx = cupy.arange(0, n, 3, dtype=np.int64)
        want = xyzz_to_g1(eng.msm(bases, dsc, None, stream, sync_free=sync_free).get(stream=stream))  # warm-up
        eng.sum_selected(bases, idx, stream, sync_free=sync_free)
        stream.synchronize()
        spin = cupy.RawKernel(SPIN, "spin")
        rate = cupy.cuda.Device(0).attributes["ClockRate"] * 1000  # Hz (the attribute is in kHz)
        spin((1,), (1,), (np.int64(rate // 2),), stream=stream)
        spun = cupy.cuda.Event()
        spun.record(stream)
        t0 = time.perf_counter()
        res = eng.msm(bases, dsc, None, stream, sync_free=sync_free)
        part = eng.sum_selected(bases, idx, stream, sync_free=sync_free)
        queued_s = time.perf_counter() - t0
        before_spin_end = not spun.done
        assert xyzz_to_g1(res.get(stream=stream)) == want, f"seed {SEED}"
        part.get(stream=stream)
    assert before_spin_end == sync_free, f"host waited {queued_s:.3f} s (sync_free={sync_free})"


def test_backend_queued_results_equal_the_synchronous_calls():
    from gputrace.prover.backends.cuda import CudaBackend

    rng = random.Random(SEED)
    b = CudaBackend(1)
    try:
        n = 700
        pts = _g1_points(rng, n)
        g2 = [G2Point() * Scalar(rng.randrange(1, 1 << 60)) for _ in range(n)]
        from gputrace.prover.encoding import g2_to_affine_limbs

        bases = b.load_bases("a", pts, 0)
        bases2 = b.load_bases_g2("b_g2", g2_to_affine_limbs(g2), 0)
        lane = b.lanes(0)[0]
        z = ints_to_limbs([rng.choice([0, 1, 1, rng.randrange(R)]) for _ in range(n)])
        dz = b.h2d(z, 0, lane)
        ts = b.finish_tail(b.split_tail(dz, 3, lane), lane)
        items = [b.msm_g1_queued(bases, ts.tail, lane=lane),
                 b.batch_add_queued(bases, ts.ones, bound=n, lane=lane),
                 b.msm_g2_queued(bases2, dz, lane=lane),
                 b.d2h_queued(b.rows(dz, 1, 3), lane)]
        got = b.results(b.collect(items, lane, keep=(dz, ts)))
        assert got[0] == b.msm_g1(bases, ts.tail, lane=lane), f"seed {SEED}"
        assert got[1] == b.batch_add_indices(bases, ts.ones, bound=n, lane=lane), f"seed {SEED}"
        assert got[2] == b.msm_g2(bases2, dz, lane=lane), f"seed {SEED}"
        assert np.array_equal(got[3], z[1:3]), f"seed {SEED}"
    finally:
        b.close()
