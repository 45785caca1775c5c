"""The pass-structured NTT (``ntt_pass``, ``fr32.cuh``) against CPU oracles. Marked ``gpu``.

* 32-bit-limb Fr arithmetic against Python integers (edge values and random);
* every implementation against the CPU NTT (``gputrace.prover.ntt.ntt``): forward, inverse, coset, inverse coset
  at 2^1..2^16, one variant each at 2^17..2^20 (``GPUTRACE_GPU_TEST_NTT_MAX``, default 20, caps the size; the
  CPU oracle takes about 12 s at 2^20), batches of several rows;
* 2^24 (``GPUTRACE_GPU_TEST_NTT_BIG=0`` skips it): the input is a geometric sequence x_i = a b^i (dense, every
  element a different field value), whose transform has a closed form, X_k = a (b^n - 1) / (b w^k - 1), so the
  CPU checks sampled outputs of all four variants exactly; plus the forward/inverse round trip and equality
  with the earlier radix-2 kernels on a random input, element for element.

Fresh random inputs every run (the seed is in every failure message).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from gputrace.prover.field import COSET_SHIFT, R, ints_to_limbs, inv, limbs_to_ints, root_of_unity  # noqa: E402
from gputrace.prover.ntt import ntt as cpu_ntt  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
NTT_MAX = int(os.environ.get("GPUTRACE_GPU_TEST_NTT_MAX", "20"))
BIG = os.environ.get("GPUTRACE_GPU_TEST_NTT_BIG", "1") != "0"
VARIANTS = [(False, False), (True, False), (False, True), (True, True)]
MONT = (1 << 256) % R


@pytest.fixture(scope="module")
def rng():
    return random.Random(SEED)


@pytest.fixture(scope="module")
def engines():
    from gputrace.prover.backends.cuda_ntt import FrNtt

    return {impl: FrNtt(0, impl=impl) for impl in ("pass", "pass_o5", "pass_e4", "pass_m64", "radix2")}


def _obj(rows):
    out = np.empty((len(rows), len(rows[0])), dtype=object)
    for i, r in enumerate(rows):
        out[i, :] = r
    return out


def _gpu(eng, rows, inverse, coset):
    a = cupy.asarray(np.stack([ints_to_limbs(r) for r in rows]))
    eng.to_mont(a, None)
    eng.transform(a, inverse=inverse, coset=coset, stream=None)
    eng.from_mont(a, None)
    return a.get()


def _check(eng, rng, logn, m, inverse, coset, what):
    n = 1 << logn
    rows = [[rng.randrange(R) for _ in range(n)] for _ in range(m)]
    got = _gpu(eng, rows, inverse, coset)
    want = cpu_ntt(_obj(rows), inverse=inverse, coset=coset)
    for i in range(m):
        g = limbs_to_ints(got[i])
        if g != list(want[i]):
            bad = next(j for j in range(n) if g[j] != want[i][j])
            raise AssertionError(f"{what}: 2^{logn} inverse={inverse} coset={coset} row {i} of {m} differs first "
                                 f"at {bad} (seed {SEED})")


def test_fr32_ops_match_python_ints(rng):
    from gputrace.prover.backends.cuda_kernels import kernel, launch, u64

    n = 4096
    edge = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, (R + 1) // 2, 1 << 64, 1 << 128, (1 << 255) % R, MONT]
    xs = edge + [rng.randrange(R) for _ in range(n - len(edge))]
    ys = list(reversed(edge)) + [rng.randrange(R) for _ in range(n - len(edge))]
    for i in range(len(edge)):  # every pair of edge values somewhere
        for j in range(len(edge)):
            xs[len(edge) + i * len(edge) + j] = edge[i]
            ys[len(edge) + i * len(edge) + j] = edge[j]
    dx = cupy.asarray(ints_to_limbs([x * MONT % R for x in xs]))
    dy = cupy.asarray(ints_to_limbs([y * MONT % R for y in ys]))
    out = cupy.full((n, 16), 0xDEADBEEF, dtype=np.uint64)  # poisoned
    launch(kernel("ntt", 0, "fr32_test_ops"), "fr32_test_ops", n, (dx, dy, out, u64(n)), None)
    got = limbs_to_ints(out.get().reshape(n * 4, 4))
    rinv = inv(MONT)
    for i, (x, y) in enumerate(zip(xs, ys)):
        raw = got[4 * i:4 * i + 4]
        assert all(g < R for g in raw), f"fr32 result not reduced at {i}: x={x} y={y} (seed {SEED})"
        want = [(x + y) % R, (x - y) % R, x * y % R, (-x) % R]
        assert [g * rinv % R for g in raw] == want, f"fr32 ops wrong at {i}: x={x} y={y} (seed {SEED})"


@pytest.mark.parametrize("logn", [lg for lg in range(1, 17) if lg <= NTT_MAX])
def test_pass_ntt_matches_cpu_small(engines, rng, logn):
    for inverse, coset in VARIANTS:
        _check(engines["pass"], rng, logn, 2, inverse, coset, "pass")


@pytest.mark.parametrize("logn", [lg for lg in range(17, 21) if lg <= NTT_MAX])
def test_pass_ntt_matches_cpu_large(engines, rng, logn):
    inverse, coset = VARIANTS[logn % 4]  # one variant per size, all four over 2^17..2^20
    _check(engines["pass"], rng, logn, 1, inverse, coset, "pass")


@pytest.mark.parametrize("impl", ["pass_o5", "pass_e4", "pass_m64"])
@pytest.mark.parametrize("logn", [3, 8, 9, 13, 17])
def test_pass_variants_match_cpu(engines, rng, impl, logn):
    for inverse, coset in VARIANTS if logn < 17 else [(False, True)]:
        _check(engines[impl], rng, logn, 1, inverse, coset, impl)


def test_batch_rows_are_independent(engines, rng):
    """A batch of 5 rows in one launch per pass equals each row transformed alone (and the CPU)."""
    logn, m = 12, 5
    n = 1 << logn
    rows = [[rng.randrange(R) for _ in range(n)] for _ in range(m)]
    rows[2] = [0] * n  # a zero row between random ones
    for inverse, coset in VARIANTS:
        got = _gpu(engines["pass"], rows, inverse, coset)
        want = cpu_ntt(_obj(rows), inverse=inverse, coset=coset)
        for i in range(m):
            assert limbs_to_ints(got[i]) == list(want[i]), f"batch row {i}, 2^{logn} {inverse=} {coset=} (seed {SEED})"
            alone = _gpu(engines["pass"], [rows[i]], inverse, coset)
            assert np.array_equal(alone[0], got[i]), f"batch row {i} differs from the row alone (seed {SEED})"


def test_unknown_impl_is_refused():
    from gputrace.prover.backends.base import BackendError
    from gputrace.prover.backends.cuda_ntt import FrNtt

    with pytest.raises(BackendError, match="unknown implementation"):
        FrNtt(0, impl="radix3")


def _from_mont(eng, dev_rows: cupy.ndarray, idx: np.ndarray) -> list[int]:
    """Values (plain ints) of ``dev_rows[0, idx]`` (Montgomery on the device)."""
    sub = cupy.ascontiguousarray(dev_rows[0, cupy.asarray(idx)])[None]
    eng.from_mont(sub, None)
    return limbs_to_ints(sub.get()[0])


def _geometric_expected(n, a, b, k, inverse, coset):
    """Closed form of the (inverse, coset) NTT of x_i = a b^i at output index k (plain ints)."""
    g = COSET_SHIFT
    w = root_of_unity(n)
    if not inverse:
        ratio = b * g % R if coset else b
        return a * (pow(ratio, n, R) - 1) * inv((ratio * pow(w, k, R) - 1) % R) % R
    val = a * (pow(b, n, R) - 1) * inv((b * pow(inv(w), k, R) - 1) % R) % R * inv(n) % R
    return val * pow(inv(g), k, R) % R if coset else val


@pytest.mark.skipif(not BIG, reason="GPUTRACE_GPU_TEST_NTT_BIG=0")
@pytest.mark.parametrize("impl", ["pass", "pass_e4"])
def test_pass_ntt_2_24(engines, rng, impl):
    logn = 24
    n = 1 << logn
    eng = engines[impl]
    a, b = rng.randrange(1, R), rng.randrange(2, R)
    idx = np.array(sorted({0, 1, 2, n // 2, n - 1} | {rng.randrange(n) for _ in range(200)}), dtype=np.int64)
    geo = eng.powers(b, n, a, None)[None]  # (1, n, 4) Montgomery: a b^i
    first = _from_mont(eng, geo, np.array([0, 1, n - 1]))
    assert first == [a, a * b % R, a * pow(b, n - 1, R) % R], f"geometric input (seed {SEED})"
    for inverse, coset in VARIANTS:
        x = geo.copy()
        eng.transform(x, inverse=inverse, coset=coset, stream=None)
        got = _from_mont(eng, x, idx)
        for k, g in zip(idx.tolist(), got):
            want = _geometric_expected(n, a, b, k, inverse, coset)
            assert g == want, f"2^24 {inverse=} {coset=}: output {k} wrong (seed {SEED})"
        del x
    # random input: round trip, and the earlier radix-2 kernels agree element for element
    host = rng.getrandbits(64)
    gen = np.random.default_rng(host)
    r = gen.integers(0, np.iinfo(np.uint64).max, size=(1, n, 4), dtype=np.uint64, endpoint=True)
    r[..., 3] &= np.uint64(0x3FFFFFFFFFFFFFFF)  # < 2^254 < r: canonical
    x = cupy.asarray(r)
    eng.to_mont(x, None)
    y = x.copy()
    eng.transform(x, inverse=False, coset=True, stream=None)
    engines["radix2"].transform(y, inverse=False, coset=True, stream=None)
    assert bool(cupy.array_equal(x, y)), f"2^24 coset NTT: {impl} and radix2 differ (seed {SEED}, input {host})"
    del y
    eng.transform(x, inverse=True, coset=True, stream=None)
    eng.from_mont(x, None)
    assert bool(cupy.array_equal(x, cupy.asarray(r))), f"2^24 coset round trip (seed {SEED}, input {host})"
