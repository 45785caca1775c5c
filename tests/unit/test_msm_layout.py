"""The MSM's bucket-sum layouts sized from host bounds (``msm_layout``), with numpy and integers for points: the
padded chunks equal the exact layout, and the reductions give every run's sum for random, skewed, empty and
single runs, with the level count the host derives from its bound. The same code runs on CuPy in
``backends/cuda_msm.py`` (GPU tests: ``tests/gpu/test_msm_kernels.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.prover.msm_layout import chunk_bound, chunks, reduce_levels, reduce_runs


def exact_chunks(starts, ends, S, even):
    """The host-synchronising layout (the engine before): only the true chunks."""
    cs, ce = [], []
    for s, e in zip(starts.tolist(), ends.tolist()):
        L = e - s
        k = -(-L // S)
        for j in range(k):
            if even:
                cs.append(s + j * L // k)
                ce.append(s + (j + 1) * L // k)
            else:
                cs.append(s + j * S)
                ce.append(min(s + j * S + S, e))
    return np.array(cs, dtype=np.int64), np.array(ce, dtype=np.int64)


def sum_chunks(pts, cs, ce):
    out = np.zeros((cs.shape[0],) + pts.shape[1:], dtype=pts.dtype)
    for i, (a, b) in enumerate(zip(cs.tolist(), ce.tolist())):
        out[i] = pts[a:b].sum(axis=0)
    return out


def runs_of(lengths):
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64))
    return ends - np.asarray(lengths, dtype=np.int64), ends


CASES = {
    "random": lambda rng: rng.integers(0, 90, size=300),
    "skewed": lambda rng: np.concatenate([[2000], rng.integers(0, 3, size=200), [517]]),
    "empty runs": lambda rng: np.zeros(50, dtype=np.int64),
    "one run": lambda rng: np.array([4099]),
    "no runs": lambda rng: np.zeros(0, dtype=np.int64),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("S", [1, 2, 7, 39])
@pytest.mark.parametrize("even", [True, False])
def test_padded_chunks_equal_the_exact_layout(case, S, even):
    lengths = CASES[case](np.random.default_rng(5))
    starts, ends = runs_of(lengths)
    m = int(lengths.sum())
    bound = chunk_bound(m, len(lengths), S)
    want_cs, want_ce = exact_chunks(starts, ends, S, even)
    assert bound >= want_cs.size
    cs, ce, per, cum = chunks(np, starts, ends, S, bound, even)
    assert cs.shape == (bound,) and ce.shape == (bound,)
    total = want_cs.size
    assert np.array_equal(cs[:total], want_cs) and np.array_equal(ce[:total], want_ce)
    assert np.all(cs[total:] == ce[total:])  # padding: empty chunks
    assert int(cum[-1]) == total if len(lengths) else total == 0


def test_bound_is_tight_for_one_run_and_never_below_the_truth():
    assert chunk_bound(4099, 1, 39) == -(-4099 // 39)
    assert chunk_bound(0, 10, 5) == 0 and chunk_bound(10, 0, 5) == 0
    rng = np.random.default_rng(1)
    for _ in range(200):
        lengths = rng.integers(0, 50, size=int(rng.integers(1, 30)))
        S = int(rng.integers(1, 20))
        truth = int(sum(-(-int(L) // S) for L in lengths))
        assert truth <= chunk_bound(int(lengths.sum()), len(lengths), S)


def test_levels():
    assert reduce_levels(1, 32) == 0 and reduce_levels(0, 32) == 0
    assert reduce_levels(2, 32) == 1 and reduce_levels(32, 32) == 1 and reduce_levels(33, 32) == 2
    assert reduce_levels(26887, 39) == 3


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("S", [2, 5, 39])
def test_bucket_sums_from_bounds(case, S):
    """The engine's accumulation: chunks of the sorted entries, then the partial sums reduced per run."""
    rng = np.random.default_rng(7)
    lengths = CASES[case](rng)
    starts, ends = runs_of(lengths)
    m = int(lengths.sum())
    entries = rng.integers(-(1 << 40), 1 << 40, size=(m, 2))
    cs, ce, per, cum = chunks(np, starts, ends, S, chunk_bound(m, len(lengths), S))
    part = sum_chunks(entries, cs, ce)
    max_bucket = int(lengths.max()) if len(lengths) else 0
    got = reduce_runs(np, sum_chunks, part, per, cum, S, -(-max_bucket // S))
    want = np.array([entries[s:e].sum(axis=0) for s, e in zip(starts, ends)]).reshape(-1, 2)
    assert got.shape == (len(lengths), 2)
    assert np.array_equal(got, want)


def test_a_loose_bound_only_adds_levels():
    """With the engine's bound (any bucket may hold all n scalars) the sums are the same."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 6, size=100)
    starts, ends = runs_of(lengths)
    m = int(lengths.sum())
    entries = rng.integers(0, 1000, size=(m, 1))
    cs, ce, per, cum = chunks(np, starts, ends, 2, chunk_bound(m, 100, 2))
    part = sum_chunks(entries, cs, ce)
    tight = reduce_runs(np, sum_chunks, part, per, cum, 2, 3)
    loose = reduce_runs(np, sum_chunks, part, per, cum, 2, 5000)
    assert np.array_equal(tight, loose)
    assert np.array_equal(tight[:, 0], [entries[s:e, 0].sum() for s, e in zip(starts, ends)])


def test_fixed_runs_like_the_window_sums():
    """Window sums: nw runs of G segment sums each, all sizes known on the host."""
    nw, G = 17, 512
    seg = np.arange(nw * G, dtype=np.int64).reshape(-1, 1)
    per = np.full(nw, G, dtype=np.int64)
    got = reduce_runs(np, sum_chunks, seg, per, np.cumsum(per), 32, G)
    assert np.array_equal(got[:, 0], seg.reshape(nw, G).sum(axis=1))
