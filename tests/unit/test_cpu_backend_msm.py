"""CPU backend ``msm_g1`` cut into parts on its ``HostMsm`` pool equals one arkworks multiexp (plain and D4)."""

from __future__ import annotations

import os
import random
import threading

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point

from gputrace.prover import host_msm
from gputrace.prover.msm_plan import MsmPlan
from gputrace.prover.backends.cpu import CpuBackend
from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars, to_scalar
from gputrace.prover.msm_plan import plan_msm

MIN_PART = 8


@pytest.fixture
def parts(monkeypatch):
    """Small parts, and a record of every part call: (point count, bit lengths of its scalars, thread name)."""
    monkeypatch.setattr(host_msm, "MIN_PART", MIN_PART)
    calls, lock, real = [], threading.Lock(), host_msm._part

    def spy(point_type, bases, scalars, lo, hi):
        bits = [int.from_bytes(s.to_le_bytes(), "little").bit_length() for s in scalars[lo:hi]]
        with lock:
            calls.append((hi - lo, bits, threading.current_thread().name))
        return real(point_type, bases, scalars, lo, hi)

    monkeypatch.setattr(host_msm, "_part", spy)
    return calls


def _bases(n, seed=3):
    rng = random.Random(seed)
    return [G1Point() * to_scalar(rng.randrange(1, R)) for _ in range(n)]


def _one_multiexp(pts, scalars):
    return G1Point.multiexp_unchecked(pts[:len(scalars)], limbs_to_scalars(ints_to_limbs(scalars)))


def test_plain_msm_in_parts_equals_one_multiexp(parts):
    rng = random.Random(5)
    pts = _bases(70)
    scalars = [rng.randrange(R) for _ in range(61)]
    scalars[3], scalars[60] = 0, R - 1
    be = CpuBackend(1, msm_threads=4)
    try:
        bases = be.load_bases("h", pts, 0)
        assert be.msm_g1(bases, ints_to_limbs(scalars)) == _one_multiexp(pts, scalars)
        assert sorted(c[0] for c in parts) == [15, 15, 15, 16]  # 61 points cut into 4 contiguous parts
        assert all(name.startswith("cpu-msm-part") for _, _, name in parts)
        parts.clear()
        dev = be.h2d(ints_to_limbs(scalars[:20]), 0)  # a device array: 20 points -> 2 parts
        assert be.msm_g1(bases, dev) == _one_multiexp(pts, scalars[:20])
        assert sorted(c[0] for c in parts) == [10, 10]
    finally:
        be.close()


@pytest.mark.parametrize("planner", ["plan_msm", "narrow_bits=65", "narrow_bits=0"])
def test_d4_msm_in_parts_keeps_zero_narrow_wide_classes(parts, planner):
    rng = random.Random(9)
    kinds = ["zero"] * 12 + ["one"] * 6 + ["narrow"] * 34 + ["wide"] * 40
    rng.shuffle(kinds)
    draw = {"zero": lambda: 0, "one": lambda: 1, "narrow": lambda: rng.randrange(2, 1 << 64),
            "wide": lambda: rng.randrange(1 << 64, R)}
    scalars = [draw[k]() for k in kinds]
    pts = _bases(len(scalars) + 3)
    limbs = ints_to_limbs(scalars)
    plan = plan_msm(limbs) if planner == "plan_msm" else MsmPlan(window=8, narrow_bits=int(planner.split("=")[1]))
    be = CpuBackend(1, msm_threads=3)
    try:
        got = be.msm_g1(be.load_bases("a", pts, 0), limbs, plan=plan)
    finally:
        be.close()
    assert got == _one_multiexp(pts, scalars)
    nb = plan.narrow_bits
    widths = [bits for _, bits, _ in parts]
    if nb == 0:  # no narrow class: one multiexp of every scalar, zeros included, in 3 parts
        assert len(widths) == 3 and sum(map(len, widths)) == len(scalars)
        return
    assert nb == 65
    assert all(b > 0 for w in widths for b in w)  # zeros dropped
    narrow = [w for w in widths if all(b < nb for b in w)]
    wide = [w for w in widths if all(b >= nb for b in w)]
    assert len(narrow) + len(wide) == len(widths)  # no part mixes the classes
    assert sum(map(len, narrow)) == 40 and sum(map(len, wide)) == 40
    assert len(narrow) == 3 and len(wide) == 3  # 40 points with 3 threads: 3 parts each


def test_lanes_share_one_pool(parts):
    """Two lanes in msm_g1 at once: right answers, and all parts on the backend's one pool of msm_threads threads."""
    rng = random.Random(11)
    pts = _bases(64)
    be = CpuBackend(2, msm_threads=2)
    cases = [[rng.randrange(R) for _ in range(64)] for _ in range(4)]
    want = [_one_multiexp(pts, s) for s in cases]
    got: dict[int, object] = {}

    def lane(d):
        bases = be.load_bases("l", pts, d)
        for i in range(d, len(cases), 2):
            got[i] = be.msm_g1(bases, ints_to_limbs(cases[i]), plan=plan_msm(ints_to_limbs(cases[i])))

    try:
        threads = [threading.Thread(target=lane, args=(d,)) for d in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        be.close()
    assert [got[i] for i in range(len(cases))] == want
    assert len({name for _, _, name in parts}) <= 2 and len(parts) == 2 * len(cases)


def test_close_is_idempotent_and_backend_stays_usable(parts):
    pts = _bases(20)
    scalars = list(range(3, 23))
    be = CpuBackend(1, msm_threads=2)
    be.close()  # before any pool exists
    bases = be.load_bases("b_g1", pts, 0)
    assert be.msm_g1(bases, ints_to_limbs(scalars)) == _one_multiexp(pts, scalars)
    be.close()
    be.close()
    assert be.msm_g1(bases, ints_to_limbs(scalars)) == _one_multiexp(pts, scalars)  # a new pool
    be.close()
    assert be.msm_g1(bases, np.zeros((0, 4), dtype=np.uint64)) == G1Point.identity()


def test_default_threads_one_per_usable_cpu():
    expect = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert CpuBackend(1).msm_threads == expect
    with pytest.raises(ValueError, match="msm_threads"):
        CpuBackend(1, msm_threads=0)
