"""The assignment's split for the tail MSMs (``tail_split``), run with numpy, against the host path it replaces
(``np.all(z == 1)``, the zeroed copy and ``msm_plan.plan_msm``): the CUDA backend runs the same code with CuPy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gputrace.prover.field import R, ints_to_limbs, popcounts
from gputrace.prover.msm_plan import plan_from_counts, plan_msm
from gputrace.prover.tail_split import (STATS, ones_indices, ones_indices_counted, plans_from_stats, popcount64,
                                        split_tail)

ONE = np.array([1, 0, 0, 0], dtype=np.uint64)


def _assignment(rng: random.Random, n: int, ones: float, zeros: float, narrow: float) -> np.ndarray:
    vals = []
    for _ in range(n):
        x = rng.random()
        if x < ones:
            vals.append(1)
        elif x < ones + zeros:
            vals.append(0)
        elif x < ones + zeros + narrow:
            vals.append(rng.randrange(2, 1 << rng.choice((8, 40, 64))))
        else:
            vals.append(rng.randrange(R))
    return ints_to_limbs(vals)


def test_popcount64_equals_numpy_bit_count():
    rng = random.Random(5)
    x = np.array([0, 1, (1 << 64) - 1, 1 << 63, 0x5555555555555555] + [rng.getrandbits(64) for _ in range(500)],
                 dtype=np.uint64)
    assert popcount64(np, x).tolist() == [bin(int(v)).count("1") for v in x]


@pytest.mark.parametrize("seed,n,ni,ones,zeros,narrow", [
    (1, 400, 5, 0.3, 0.1, 0.0),    # many ones (the bits of the circuit), few zeros
    (2, 300, 12, 0.0, 0.0, 0.2),   # no ones; narrow scalars past D4's 5 % share
    (3, 257, 2, 0.05, 0.6, 0.01),  # mostly zero: a narrower window
    (4, 64, 64, 0.5, 0.0, 0.0),    # every scalar an input: the L tail is empty
    (5, 50, 3, 1.0, 0.0, 0.0),     # every scalar 1: both tails all zero
])
def test_split_equals_the_host_path(seed, n, ni, ones, zeros, narrow):
    z = _assignment(random.Random(seed), n, ones, zeros, narrow)
    mask, tail, stats = split_tail(np, z, ONE, lambda t: t, ni)
    want_mask = np.all(z == ONE, axis=1)
    want_tail = z.copy()
    want_tail[want_mask] = 0
    assert np.array_equal(mask, want_mask) and np.array_equal(tail, want_tail) and tail.dtype == np.uint64
    assert stats.dtype == np.uint64 and stats.shape == (len(STATS),)
    assert int(stats[1]) == int(popcounts(want_tail).sum()) and int(stats[6]) == int(want_mask.sum())
    plan_l, plan_ab = plans_from_stats(stats)
    assert plan_ab == plan_msm(want_tail) and plan_l == plan_msm(want_tail[ni:])
    idx, idx_l = ones_indices(np, mask, stats, ni)
    assert idx.tolist() == np.flatnonzero(want_mask).tolist()
    assert idx_l.tolist() == np.flatnonzero(want_mask[ni:]).tolist() and idx_l.dtype == np.int64


def test_split_in_another_representation():
    """The device holds Montgomery limbs: ``one`` and ``canonical`` carry the representation. Here a stand-in
    (limbs XOR a key) shows the counters are taken on the canonical values, the mask on the held ones."""
    key = np.array([0xDEAD, 7, 0, 1 << 40], dtype=np.uint64)
    z = _assignment(random.Random(9), 200, 0.2, 0.2, 0.1)
    held = z ^ key
    zero_held = np.zeros(4, dtype=np.uint64)
    mask, tail, stats = split_tail(np, held, ONE ^ key, lambda t: np.where((t == zero_held).all(axis=1)[:, None],
                                                                          zero_held, t ^ key), 4)
    want_tail = z.copy()
    want_tail[np.all(z == ONE, axis=1)] = 0
    assert np.array_equal(mask, np.all(z == ONE, axis=1))
    assert plans_from_stats(stats) == (plan_msm(want_tail[4:]), plan_msm(want_tail))


def test_refuses_bad_shapes_and_disagreeing_counters():
    with pytest.raises(ValueError, match=r"expected \(vars, 4\)"):
        split_tail(np, np.zeros((3, 3), dtype=np.uint64), ONE, lambda t: t, 0)
    mask, _, stats = split_tail(np, ints_to_limbs([1, 1, 5]), ONE, lambda t: t, 1)
    stats = stats.copy()
    stats[6] = 5
    with pytest.raises(ValueError, match="counters say 5"):
        ones_indices(np, mask, stats, 1)


def test_plan_from_counts_is_plan_msms_rule():
    assert plan_from_counts(0, 0, 0).window == 4
    z = _assignment(random.Random(3), 1000, 0.0, 0.3, 0.1)
    nz = np.any(z != 0, axis=1)
    high = z[:, 1] | z[:, 2] | z[:, 3]
    got = plan_from_counts(int(nz.sum()), int(popcounts(z).sum()), int(((high == 0) & nz).sum()))
    assert got == plan_msm(z)


@pytest.mark.parametrize("seed,n,ni,ones", [(1, 500, 3, 0.3), (2, 64, 0, 0.0), (3, 300, 7, 1.0), (4, 1, 0, 1.0)])
def test_counted_indices_equal_nonzero(seed, n, ni, ones):
    """The sync-free indices (ranks scattered, counts from the counters) equal ``nonzero``'s."""
    z = _assignment(random.Random(seed), n, ones, 0.2, 0.1)
    mask, _, stats = split_tail(np, z, ONE, lambda t: t, ni)
    want, want_l = ones_indices(np, mask, stats, ni)
    got, got_l = ones_indices_counted(np, mask, int(stats[6]), int(stats[7]), ni)
    assert got.dtype == np.int64 and got.tolist() == want.tolist() and got_l.tolist() == want_l.tolist()
    with pytest.raises(ValueError, match="counters say"):
        ones_indices_counted(np, mask, int(stats[6]), int(stats[6]) + 1, ni)
