"""The MSM engine of issue 13 (signed digits, balanced accumulation, counting sort, 32-bit-limb PTX Fq
arithmetic) against CPU oracles.

GPU tests (marked ``gpu``, skipped without CuPy/CUDA): the signed-digit kernel's digits reconstruct every
scalar; G1 MSMs of both digit kinds equal arkworks for zero scalars, r-1, repeated and identity bases, sizes
1 .. 4096 and windows 1 .. 16 (balanced and chunked accumulation, counting sort and argsort); engines agree
at 2^16; the G2 engine on the same edge cases. Fresh random inputs every run (the seed is in every failure).
The carry-chain logic of ``kernels/fq_mul32.cuh`` is also checked without a GPU:
``tests/unit/test_fq_mul32_host.py``.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars

SEED = int.from_bytes(os.urandom(4), "little")

# -- GPU ---------------------------------------------------------------------------------------------------
def _cupy():
    return pytest.importorskip("cupy")


def _points(rng, n, kind):
    from py_arkworks_bls12381 import G1Point

    g = G1Point()
    base = [g * limbs_to_scalars(ints_to_limbs([rng.randrange(1, R)]))[0] for _ in range(min(n, 16))]
    pts, acc = [], base[0]
    for i in range(n):
        acc = acc + base[i % len(base)]
        pts.append(acc)
    if kind == "repeated":  # one point many times: same-bucket doubling inside the chunk sums
        pts = [pts[i % 3] for i in range(n)]
    elif kind == "identity":
        for i in range(0, n, 3):
            pts[i] = G1Point.identity()
    return pts


def _scalars(rng, n, kind):
    if kind == "zero":
        return [0] * n
    if kind == "r-1":
        return [R - 1] * n
    if kind == "mixed":  # zeros, r-1, all-ones digits (carries through every window), small and full values
        pick = [0, 1, R - 1, R - 2, (1 << 254) - 1, (R - 1) // 2]  # (1 << 254) - 1 < R
        return [rng.choice(pick) if rng.random() < 0.5 else rng.randrange(R) for _ in range(n)]
    return [rng.randrange(R) for _ in range(n)]


@pytest.mark.gpu
@pytest.mark.parametrize("c", [1, 4, 11, 15, 16, 17, 20])
def test_signed_digits_reconstruct_scalars(c):
    cupy = _cupy()
    from gputrace.prover.backends.cuda_kernels import i32, kernel, launch, u64
    from gputrace.prover.backends.cuda_msm import signed_windows

    rng = random.Random(SEED + c)
    sc = [0, 1, R - 1, R - 2, (R - 1) // 2, (1 << 253) + 12345] + [rng.randrange(R) for _ in range(500)]
    n, nw = len(sc), signed_windows(c)
    keys = cupy.full(nw * n, 0x5A5A5A5A, dtype=np.uint32)  # poisoned
    neg = cupy.full(nw * n, 7, dtype=np.uint8)
    launch(kernel("msm", 0, "msm_digits_signed"), "msm_digits_signed", n,
           (cupy.asarray(ints_to_limbs(sc)), u64(n), i32(c), i32(nw), keys, neg), None)
    k, g = keys.get().reshape(nw, n), neg.get().reshape(nw, n)
    for i, s in enumerate(sc):
        total = 0
        for w in range(nw):
            if k[w, i] == 0xFFFFFFFF:
                assert g[w, i] == 0
                continue
            assert k[w, i] >> c == w, f"window bits of key {k[w, i]:x} (c={c}, seed {SEED})"
            d = int(k[w, i]) & ((1 << c) - 1)
            assert 0 < d and (w == nw - 1 or d <= 1 << (c - 1)), f"digit {d} out of range (c={c}, w={w})"
            assert g[w, i] in (0, 1)
            total += (-d if g[w, i] else d) << (c * w)
        assert total == s, f"scalar {i} = {s} not reconstructed at c={c} (seed {SEED})"


@pytest.mark.gpu
@pytest.mark.parametrize("signed,sort,balanced", [(True, "counting", True), (False, "argsort", True),
                                                  (True, "argsort", False), (False, "counting", False)])
@pytest.mark.parametrize("n,pkind,skind", [
    (1, "distinct", "r-1"), (2, "distinct", "zero"), (33, "repeated", "mixed"), (1000, "identity", "mixed"),
    (1000, "distinct", "r-1"), (4096, "distinct", "full"), (4096, "repeated", "full"), (4096, "identity", "zero"),
])
def test_msm_edge_cases_match_arkworks(n, pkind, skind, signed, sort, balanced):
    cupy = _cupy()
    from py_arkworks_bls12381 import G1Point

    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs

    rng = random.Random(SEED + n)
    pts, sc = _points(rng, n, pkind), _scalars(rng, n, skind)
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G1Msm(0, signed=signed, sort=sort, balanced=balanced)
    bases = eng.load_bases(g1_to_affine_limbs(pts), None)
    dsc = cupy.asarray(ints_to_limbs(sc))
    for window in (None, 1, 4, 11, 16):
        got = xyzz_to_g1(eng.msm(bases, dsc, window, None).get())
        assert got == want, (f"msm n={n} {pkind}/{skind} signed={signed} {sort} balanced={balanced} window={window}"
                             f" (seed {SEED})")


@pytest.mark.gpu
def test_msm_engines_agree_at_2_16():
    """The default engine, the engine before issue 13 and the chunked one give the same point on 2^16 inputs."""
    cupy = _cupy()
    from gputrace.prover.backends.cuda_msm import G1Msm, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs

    rng = random.Random(SEED)
    n = 1 << 16
    pts = _points(rng, 512, "distinct")
    a = G1Msm(0, balanced=True)  # signed, counting sort, load-balanced (the default engine from 2^22)
    b = G1Msm(0, signed=False, even_chunks=False, sort="argsort", balanced=False)  # the engine before issue 13
    c = G1Msm(0)  # the default engine at this size: chunked
    base = a.load_bases(g1_to_affine_limbs(pts), None)
    bases = cupy.tile(base, (n // 512, 1))
    sc = cupy.asarray(ints_to_limbs([rng.randrange(R) for _ in range(n)]))
    results = {(i, w): xyzz_to_g1(eng.msm(bases, sc, w, None).get()) for i, eng in enumerate((a, b, c))
               for w in (None, 12, 15)}
    assert len(set(map(str, results.values()))) == 1, f"engines/windows disagree (seed {SEED})"


@pytest.mark.gpu
@pytest.mark.parametrize("skind", ["r-1", "mixed"])
def test_g2_msm_signed_edge_cases(skind):
    cupy = _cupy()
    from py_arkworks_bls12381 import G2Point, Scalar

    from gputrace.prover.backends.cuda_msm import G2Msm, xyzz_to_g2
    from gputrace.prover.encoding import g2_to_affine_limbs

    rng = random.Random(SEED)
    n = 300
    base = [G2Point() * Scalar(rng.randrange(1, 1 << 60)) for _ in range(4)]
    pts, acc = [], base[0]
    for i in range(n):
        acc = acc + base[i % 4]
        pts.append(G2Point.identity() if i % 7 == 0 else pts[i - 1] if i % 5 == 0 else acc)
    sc = _scalars(rng, n, skind)
    want = G2Point.multiexp_unchecked(pts, limbs_to_scalars(ints_to_limbs(sc)))
    eng = G2Msm(0)
    bases = eng.load_bases(g2_to_affine_limbs(pts), None)
    for window in (None, 3, 8):
        got = xyzz_to_g2(eng.msm(bases, cupy.asarray(ints_to_limbs(sc)), window, None).get())
        assert got == want, f"g2 msm {skind} window={window} (seed {SEED})"
