"""The CUDA backend against the CPU backend, and a whole GPU proof that verifies. Marked ``gpu``.

Size: ``GPUTRACE_GPU_TEST_LOGN`` (largest entry, capped at 13) for the backend comparisons.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

import gputrace  # noqa: E402
from gputrace.prover.backends.base import BackendError  # noqa: E402
from gputrace.prover.msm_plan import MsmPlan  # noqa: E402
from gputrace.prover.backends.cpu import CpuBackend  # noqa: E402
from gputrace.prover.field import R, ints_to_limbs  # noqa: E402
from gputrace.prover.options import OPT_NAMES, ProveOptions  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
LOGN = min(13, max(int(x) for x in os.environ.get("GPUTRACE_GPU_TEST_LOGN", "1,5,10,11,13").split(",")))


@pytest.fixture(scope="module")
def gpu():
    from gputrace.prover.backends.cuda import CudaBackend

    b = CudaBackend(1)
    yield b
    b.close()
    b.close()  # safe twice


@pytest.fixture(scope="module")
def rng():
    return random.Random(SEED)


def _rand(rng, shape):
    m, n = shape
    return np.stack([ints_to_limbs([rng.randrange(R) for _ in range(n)]) for _ in range(m)])


@pytest.mark.parametrize("pinned", [False, True])
def test_ntt_and_h_eval_identical_to_cpu(gpu, rng, pinned):
    cpu = CpuBackend(1)
    n = 1 << LOGN
    host = _rand(rng, (3, n))
    outs = []
    for be in (cpu, gpu):
        lane = be.lanes(0)[0]
        p = be.pin(host) if pinned else None
        try:
            dev = be.h2d(p if p is not None else host, 0, lane)
            dev = be.ntt(dev, inverse=True, coset=False, lane=lane)
            dev = be.ntt(dev, inverse=False, coset=True, lane=lane)
            h = be.h_eval(be.rows(dev, 0, 1), be.rows(dev, 1, 2), be.rows(dev, 2, 3), lane=lane)
            h = be.ntt(h, inverse=True, coset=True, lane=lane)
            outs.append(be.d2h(h, lane))
        finally:
            if p is not None:
                be.unpin(p)
    assert outs[1].shape == (1, n, 4)
    assert np.array_equal(outs[0], outs[1]), f"GPU H differs from CPU at 2^{LOGN} (seed {SEED})"


def _busy(stream, ms: float = 50.0) -> None:
    """Queue roughly ``ms`` of float32 matrix products on ``stream`` (keeps it busy; nothing waits)."""
    with stream:
        x = cupy.random.random((4096, 4096), dtype=cupy.float32)
        for _ in range(max(1, int(ms / 3))):
            x = x @ x
            x /= 4096.0


def test_fresh_tables_behind_queued_work(rng):
    """Regression: a 2^18 GPU proof once failed to verify because NTT tables were built from temporaries
    allocated on the legacy default stream; with the backend's non-blocking stream still busy, CuPy's pool
    handed those blocks to the next allocation, which overwrote them before the queued kernel read them.
    Here the stream is kept busy while a fresh backend builds every table, pinned input (async copy)."""
    from gputrace.prover.backends.cuda import CudaBackend

    cpu = CpuBackend(1)
    n = 1 << 14
    host = _rand(rng, (3, n))
    lane = cpu.lanes(0)[0]
    dev = cpu.h2d(host, 0, lane)
    dev = cpu.ntt(cpu.ntt(dev, inverse=True, coset=False), inverse=False, coset=True)
    h = cpu.h_eval(cpu.rows(dev, 0, 1), cpu.rows(dev, 1, 2), cpu.rows(dev, 2, 3))
    want = cpu.d2h(cpu.ntt(h, inverse=True, coset=True))
    for _ in range(3):
        be = CudaBackend(1)
        try:
            lane = be.lanes(0)[0]
            _busy(lane.stream)
            p = be.pin(host)
            try:
                dev = be.h2d(p, 0, lane)
                dev = be.ntt(dev, inverse=True, coset=False, lane=lane)
                _busy(lane.stream, 10)
                dev = be.ntt(dev, inverse=False, coset=True, lane=lane)
                h = be.h_eval(be.rows(dev, 0, 1), be.rows(dev, 1, 2), be.rows(dev, 2, 3), lane=lane)
                h = be.ntt(h, inverse=True, coset=True, lane=lane)
                got = be.d2h(h, lane)
            finally:
                be.unpin(p)
        finally:
            be.close()
        assert np.array_equal(got, want), f"H built behind queued work differs from the CPU's (seed {SEED})"


def test_msm_and_batch_add_identical_to_cpu(gpu, rng):
    from py_arkworks_bls12381 import G1Point

    from gputrace.prover.field import limbs_to_scalars

    cpu = CpuBackend(1)
    n = 3000
    g = G1Point()
    pts = [g * s for s in limbs_to_scalars(ints_to_limbs([rng.randrange(1, R) for _ in range(50)]))]
    pts = [pts[i % 50] + pts[(7 * i) % 50] for i in range(n)]
    sc = ints_to_limbs([rng.choice([0, 1, 5, rng.randrange(R), rng.randrange(R)]) for _ in range(n)])
    sel = np.all(sc == np.array([1, 0, 0, 0], dtype=np.uint64), axis=1)
    cb, gb = cpu.load_bases("a", pts, 0), gpu.load_bases("a", pts, 0)
    for plan in (None, MsmPlan(window=6, narrow_bits=65), MsmPlan(window=12, narrow_bits=0)):
        assert gpu.msm_g1(gb, sc, plan=plan) == cpu.msm_g1(cb, sc, plan=plan), f"plan {plan} (seed {SEED})"
    assert gpu.batch_add_g1(gb, sel) == cpu.batch_add_g1(cb, sel)
    # scalars already on the device (Montgomery inside the backend), and fewer scalars than bases
    dev = gpu.h2d(sc[None, :2000], 0)
    assert gpu.msm_g1(gb, _row(gpu, dev)) == cpu.msm_g1(cb, sc[:2000])


def _row(be, dev):
    from gputrace.prover.backends.base import DeviceArray

    row = be.rows(dev, 0, 1)
    return DeviceArray(row.data[0], row.device, row.shape[1:])


def test_errors_name_the_call(gpu):
    with pytest.raises(BackendError, match="h2d"):
        gpu.h2d(np.zeros((4, 3), dtype=np.uint64), 0)
    with pytest.raises(BackendError, match="out of range"):
        gpu.lanes(5)
    free, _ = cupy.cuda.runtime.memGetInfo()
    from gputrace.prover.backends.cuda_kernels import empty

    with pytest.raises(BackendError, match=r"needed \d+ bytes"):
        empty((free // 8 + (1 << 34),), np.uint64, "huge test buffer", 0)


@pytest.mark.parametrize("logn", [18])
def test_gpu_proof_verifies_at_2_18(tmp_path, logn):
    """A 2^18-constraint proof (the size that exposed the stream race); key generation takes a minute."""
    from gputrace.prover.pipeline import run_prove

    if os.environ.get("GPUTRACE_GPU_TEST_BIG", "1") == "0":
        pytest.skip("GPUTRACE_GPU_TEST_BIG=0")
    keys = os.environ.get("GPUTRACE_GPU_TEST_KEYS") or str(tmp_path / "keys")
    res = run_prove(ProveOptions(constraints=1 << logn, batch=1, devices=1, backend="cuda",
                                 opts=frozenset(OPT_NAMES), out_dir=tmp_path, key_dir=keys, configure_tracer=False))
    assert res.verified == [True]


def test_gpu_proof_verifies_and_is_device_timed(tmp_path):
    from gputrace.prover.pipeline import run_prove

    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=1, depth=3, batch=2, devices=1, backend="cuda",
                                     opts=frozenset(OPT_NAMES), synthesis="host", b_g2="host",  # the host paths
                                     out_dir=tmp_path, configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.backend == "cuda"
    assert res.verified == [True, True]
    spans = sink.spans
    names = {s["name"] for s in spans}
    assert {"pin", "h2d", "intt_abc", "coset_ntt", "h_eval", "intt_h", "msm_h", "batch_add", "msm_l",
            "msm_a", "msm_b_g1", "d2h", "sync", "unpin"} <= names
    for s in spans:
        a = s["attributes"]
        if s["name"] in ("intt_abc", "coset_ntt", "h_eval", "intt_h", "msm_h", "msm_a"):
            assert a["gputrace.device"] == 0
            assert a["gputrace.lane"].startswith("stream:")
            assert "gputrace.gpu.start_ns" in a, s["name"]
            assert a["gputrace.gpu.start_ns"] <= a["gputrace.gpu.end_ns"]


def test_circuits_split_across_gpus_verify_with_device_times(tmp_path):
    """Every visible GPU (at least two) proves its own circuit; each GPU's phases carry its device and times."""
    from gputrace.prover.pipeline import run_prove

    ndev = cupy.cuda.runtime.getDeviceCount()
    if ndev < 2:
        pytest.skip(f"needs two GPUs, {ndev} visible")
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=1, depth=3, batch=1, devices=ndev, backend="cuda",
                                     opts=frozenset(OPT_NAMES), out_dir=tmp_path, configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * ndev
    timed = {}
    for s in sink.spans:
        a = s["attributes"]
        if s["name"] in ("h2d", "intt_abc", "msm_h", "msm_a") and "gputrace.gpu.start_ns" in a:
            timed.setdefault(a["gputrace.device"], set()).add(s["name"])
    assert set(timed) == set(range(ndev)), timed
    assert all(names >= {"intt_abc", "msm_h", "msm_a"} for names in timed.values()), timed
