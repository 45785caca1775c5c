"""GPU kernels against CPU oracles (Python ints, the CPU NTT, arkworks MSM). Marked ``gpu``.

Sizes: ``GPUTRACE_GPU_TEST_LOGN`` (comma list of log2 sizes, default ``1,5,10,11,13``) for NTTs;
``GPUTRACE_GPU_TEST_MSM`` (comma list of point counts, default ``1,7,100,1000,5000``) for MSMs.
Fresh random inputs every run (seeded from os.urandom, printed on failure).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from py_arkworks_bls12381 import G1Point  # noqa: E402

from gputrace.prover.encoding import Q, g1_to_affine_limbs  # noqa: E402
from gputrace.prover.field import R, ints_to_limbs, limbs_to_ints, limbs_to_scalars  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")


def _sizes(var: str, default: str) -> list[int]:
    return [int(x) for x in os.environ.get(var, default).split(",") if x.strip()]


NTT_LOGN = _sizes("GPUTRACE_GPU_TEST_LOGN", "1,5,10,11,13")
MSM_N = _sizes("GPUTRACE_GPU_TEST_MSM", "1,7,100,1000,5000")


@pytest.fixture(scope="module")
def rng():
    return random.Random(SEED)


def _limbs(values, width):
    buf = b"".join(v.to_bytes(8 * width, "little") for v in values)
    return np.frombuffer(buf, dtype="<u8").reshape(len(values), width).astype(np.uint64)


def _ints(arr, width):
    raw = np.ascontiguousarray(arr, dtype="<u8").tobytes()
    return [int.from_bytes(raw[i:i + 8 * width], "little") for i in range(0, len(raw), 8 * width)]


@pytest.mark.parametrize("field,mod,width", [("fr", R, 4), ("fq", Q, 6)])
def test_field_ops_match_python_ints(rng, field, mod, width):
    from gputrace.prover.backends.cuda_kernels import kernel, launch, u64

    n = 4096
    edge = [0, 1, 2, mod - 1, mod - 2, (mod - 1) // 2, 1 << 64, (1 << 192) % mod]
    xs = edge + [rng.randrange(mod) for _ in range(n - len(edge))]
    ys = list(reversed(edge)) + [rng.randrange(mod) for _ in range(n - len(edge))]
    Rm = (1 << (64 * width)) % mod
    dx = cupy.asarray(_limbs([x * Rm % mod for x in xs], width))
    dy = cupy.asarray(_limbs([y * Rm % mod for y in ys], width))
    out = cupy.full((n, 4 * width), 0xDEADBEEF, dtype=np.uint64)  # poisoned
    mod_name = "ntt" if field == "fr" else "msm"
    launch(kernel(mod_name, 0, f"{field}_test_ops"), "test_ops", n, (dx, dy, out, u64(n)), None)
    got = _ints(out.get().reshape(n * 4, width), width)
    Rinv = pow(Rm, -1, mod)
    for i, (x, y) in enumerate(zip(xs, ys)):
        want = [(x + y) % mod, (x - y) % mod, x * y % mod, (-x) % mod]
        res = [g * Rinv % mod for g in got[4 * i:4 * i + 4]]
        assert all(g < mod for g in got[4 * i:4 * i + 4]), f"{field} not reduced at {i} (seed {SEED})"
        assert res == want, f"{field} ops wrong at index {i}: x={x} y={y} (seed {SEED})"


@pytest.mark.parametrize("logn", NTT_LOGN)
@pytest.mark.parametrize("inverse,coset", [(False, False), (True, False), (False, True), (True, True)])
def test_ntt_matches_cpu(rng, logn, inverse, coset):
    from gputrace.prover.backends.cuda_ntt import FrNtt
    from gputrace.prover.ntt import ntt as cpu_ntt

    n = 1 << logn
    m = 2
    vals = [[rng.randrange(R) for _ in range(n)] for _ in range(m)]
    eng = FrNtt(0)
    a = cupy.asarray(np.stack([ints_to_limbs(v) for v in vals]))
    eng.to_mont(a, None)
    eng.transform(a, inverse=inverse, coset=coset, stream=None)
    eng.from_mont(a, None)
    got = a.get()
    obj = np.empty((m, n), dtype=object)
    for i, v in enumerate(vals):
        obj[i, :] = v
    want = cpu_ntt(obj, inverse=inverse, coset=coset)
    for i in range(m):
        assert limbs_to_ints(got[i]) == list(want[i]), f"ntt row {i} differs at 2^{logn} (seed {SEED})"


def test_ntt_roundtrip_large(rng):
    from gputrace.prover.backends.cuda_ntt import FrNtt

    logn = max(NTT_LOGN + [16])
    n = 1 << logn
    host = np.stack([ints_to_limbs([rng.randrange(R) for _ in range(n)])])
    eng = FrNtt(0)
    a = cupy.asarray(host)
    eng.to_mont(a, None)
    eng.transform(a, inverse=False, coset=True, stream=None)
    assert not np.array_equal(a.get(), host)
    eng.transform(a, inverse=True, coset=True, stream=None)
    eng.from_mont(a, None)
    assert np.array_equal(a.get(), host), f"coset NTT round trip at 2^{logn} (seed {SEED})"


def _random_points(rng, n):
    g = G1Point()
    base = [g * limbs_to_scalars(ints_to_limbs([rng.randrange(1, R)]))[0] for _ in range(min(n, 64))]
    pts = []
    acc = base[0]
    for i in range(n):  # cheap distinct points: running sums of a few random multiples
        acc = acc + base[i % len(base)]
        pts.append(acc)
    return pts


def _msm_case(rng, n, kind):
    pts = _random_points(rng, n)
    if kind == "full":
        sc = [rng.randrange(R) for _ in range(n)]
    elif kind == "sparse":  # zeros, ones, small values and repeats: skewed buckets
        sc = [rng.choice([0, 1, 1, 2, 3, R - 1, rng.randrange(1 << 20)]) for _ in range(n)]
    else:  # identity points among the bases, repeated points
        sc = [rng.randrange(R) for _ in range(n)]
        for i in range(0, n, 5):
            pts[i] = G1Point.identity()
        for i in range(1, n, 7):
            pts[i] = pts[i - 1]
    return pts, sc


@pytest.mark.parametrize("n", MSM_N)
@pytest.mark.parametrize("kind", ["full", "sparse", "special"])
def test_msm_matches_arkworks(rng, n, kind):
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1

    pts, sc = _msm_case(rng, n, kind)
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G1Msm(0)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    dsc = cupy.asarray(ints_to_limbs(sc))
    for window in (None, 4, 9, 13):
        got = xyzz_to_g1(eng.msm(bases, dsc, window, None).get())
        assert got == want, f"msm n={n} {kind} window={window} (seed {SEED})"


@pytest.mark.parametrize("kind", ["full", "sparse", "special"])
def test_msm_inline_variant_matches_arkworks(rng, kind):
    """The A/B build with Fq multiplication inlined (module msm_inline) computes the same MSMs."""
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1

    pts, sc = _msm_case(rng, 2000, kind)
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G1Msm(0, "msm_inline")
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    got = xyzz_to_g1(eng.msm(bases, cupy.asarray(ints_to_limbs(sc)), 8, None).get())
    assert got == want, f"inline msm {kind} (seed {SEED})"


def test_msm_wide_windows(rng):
    """Windows above 16 bits (keys (w << c) | digit still fit 32 bits)."""
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1

    pts, sc = _msm_case(rng, 3000, "full")
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G1Msm(0)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    for window in (17, 20):
        prof: dict = {}
        got = xyzz_to_g1(eng.msm(bases, cupy.asarray(ints_to_limbs(sc)), window, None, profile=prof).get())
        assert got == want, f"msm window {window} (seed {SEED})"
        assert prof["window"] == window and prof["accumulate"] > 0


@pytest.mark.parametrize("n", MSM_N)
def test_batch_add_matches_sum(rng, n):
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1

    pts = _random_points(rng, n)
    sel = np.array([rng.random() < 0.6 for _ in range(n)])
    want = G1Point.identity()
    for i in np.flatnonzero(sel):
        want = want + pts[i]
    eng = G1Msm(0)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    got = xyzz_to_g1(eng.sum_selected(bases, cupy.asarray(np.flatnonzero(sel).astype(np.int64)), None).get())
    assert got == want, f"batch add n={n} (seed {SEED})"


def test_kernel_report_lists_registers():
    from gputrace.prover.backends.cuda_kernels import kernel_report

    rep = kernel_report(0)
    names = {r["kernel"] for r in rep}
    assert {"ntt_block", "ntt_stage2", "sum_affine_chunks", "bucket_reduce"} <= names
    assert all(0 < r["registers"] <= 255 for r in rep)
