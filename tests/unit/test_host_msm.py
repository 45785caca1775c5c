"""``HostMsm``: a G1/G2 MSM cut into parts on a thread pool equals one arkworks multiexp."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gputrace.prover import host_msm
from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars
from gputrace.prover.host_msm import HostMsm


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(host_msm, "MIN_PART", 8)


def _case(point_type, n, seed=7):
    rng = random.Random(seed)
    bases = [point_type() * Scalar(rng.randrange(1, R)) for _ in range(n + 5)]
    scalars = [rng.randrange(R) for _ in range(n)]
    for i, v in ((3, 0), (5, R - 1)):
        if i < n:
            scalars[i] = v
    return bases, ints_to_limbs(scalars)


@pytest.mark.parametrize("point_type", [G1Point, G2Point])
@pytest.mark.parametrize("n,threads", [(61, 4), (64, 8), (9, 3), (1, 4)])
def test_split_equals_one_multiexp(small_parts, point_type, n, threads):
    bases, limbs = _case(point_type, n)
    want = point_type.multiexp_unchecked(bases[:n], limbs_to_scalars(limbs))
    m = HostMsm(threads)
    try:
        assert m.parts_for(n) == max(1, min(threads, n // 8))
        assert m.multiexp(point_type, bases, limbs) == want
    finally:
        m.close()


def test_parts_run_on_pool_threads_concurrently(small_parts, monkeypatch):
    """Every part of one MSM is its own call, on the pool's threads, and they overlap."""
    calls, inside, peak, lock = [], [0], [0], threading.Lock()
    real = host_msm._part
    gate = threading.Barrier(4, timeout=10)

    def spy(point_type, bases, scalars, lo, hi):
        with lock:
            calls.append((lo, hi, threading.current_thread().name))
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        gate.wait()  # all four parts must be running at once to pass
        try:
            return real(point_type, bases, scalars, lo, hi)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(host_msm, "_part", spy)
    bases, limbs = _case(G1Point, 64)
    m = HostMsm(4, thread_name_prefix="test-part")
    try:
        got = m.multiexp(G1Point, bases, limbs)
    finally:
        m.close()
    assert got == G1Point.multiexp_unchecked(bases[:64], limbs_to_scalars(limbs))
    assert sorted((lo, hi) for lo, hi, _ in calls) == [(0, 16), (16, 32), (32, 48), (48, 64)]
    assert all(name.startswith("test-part") for _, _, name in calls)
    assert peak[0] == 4


def test_empty_and_too_many_scalars():
    m = HostMsm(2)
    try:
        assert m.multiexp(G2Point, [G2Point()], np.zeros((0, 4), dtype=np.uint64)) == G2Point.identity()
        with pytest.raises(ValueError, match="3 scalars for 2 bases"):
            m.multiexp(G1Point, [G1Point(), G1Point()], ints_to_limbs([1, 2, 3]))
    finally:
        m.close()
    with pytest.raises(ValueError, match="threads"):
        HostMsm(0)


def test_scalars_are_made_once_on_the_calling_thread(small_parts, monkeypatch):
    """Turning limbs into Scalars holds the GIL: it happens once, on the caller's thread, not in each part."""
    real = host_msm.limbs_to_scalars
    where = []

    def spy(limbs):
        where.append((len(limbs), threading.current_thread().name))
        return real(limbs)

    monkeypatch.setattr(host_msm, "limbs_to_scalars", spy)
    bases, limbs = _case(G1Point, 64)
    m = HostMsm(4)
    try:
        got = m.multiexp(G1Point, bases, limbs)
    finally:
        m.close()
    assert got == G1Point.multiexp_unchecked(bases[:64], real(limbs))
    assert where == [(64, threading.current_thread().name)]


def test_closed_pool_refuses_every_msm(small_parts):
    """After close() a small MSM (one part, no pool) is refused as a split one would be: one contract."""
    bases, limbs = _case(G1Point, 64)
    m = HostMsm(4)
    m.close()
    m.close()  # idempotent
    for n in (1, 64):
        with pytest.raises(RuntimeError, match="after close"):
            m.multiexp(G1Point, bases, limbs[:n])



class _CountingBases(Sequence):
    """A key query as the pipeline may hand it (e.g. a lazily decoded ``PointRows``): records every read."""

    def __init__(self, points):
        self.points, self.reads = points, []

    def __len__(self):
        return len(self.points)

    def __getitem__(self, i):
        self.reads.append((i, threading.current_thread().name))
        return self.points[i]


def test_bases_are_read_once_on_the_calling_thread(small_parts):
    """The parts slice one list read on the caller's thread: a lazy query read by every part thread was decoded
    by each of them (k parts, k decodes of the whole query: docs/prover.md "The host path at 2^20")."""
    bases, limbs = _case(G2Point, 64)
    counted = _CountingBases(bases)
    m = HostMsm(4, thread_name_prefix="test-part")
    try:
        assert m.parts_for(64) == 4
        got = m.multiexp(G2Point, counted, limbs)
    finally:
        m.close()
    assert got == G2Point.multiexp_unchecked(bases[:64], limbs_to_scalars(limbs))
    assert counted.reads == [(slice(None, 64), threading.current_thread().name)]
