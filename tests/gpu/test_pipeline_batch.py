"""The stream flow on a GPU (``device_flow.py``; marked ``gpu``): the per-circuit witness layout on the witness
stream, the tail split on the device against the host path it replaces, the device-index batch addition, and
batches proven through the flow (every proof verified, the trace's lanes and copies checked).

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

import gputrace  # noqa: E402
from gputrace.prover.circuit import validate_shape  # noqa: E402
from gputrace.prover.field import R, ints_to_limbs, to_scalar  # noqa: E402
from gputrace.prover.options import OPT_NAMES, ProveOptions  # noqa: E402
from gputrace.prover.tail_split import split_tail  # noqa: E402
from gputrace.prover.witness_plan import make_plan, plan_witness  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
ONE = np.array([1, 0, 0, 0], dtype=np.uint64)


@pytest.fixture(scope="module")
def gpu():
    from gputrace.prover.backends.cuda import CudaBackend

    b = CudaBackend(1)
    yield b
    b.close()


@pytest.mark.parametrize("k,d,batch", [(3, 4, 2), (13, 6, 3)])
def test_per_circuit_witness_on_the_witness_stream(gpu, k, d, batch):
    """Circuit j's a, b, c are rows 3j..3j+3; made on the witness stream, read on the lane's after its event."""
    shape = validate_shape(k, d)
    n = 1 << (shape.constraints + k + 2 - 1).bit_length()
    plans = [make_plan(shape, SEED % 1000, c) for c in range(batch)]
    wl, lane = gpu.witness_lane(0), gpu.lanes(0)[0]
    assert wl.stream is not None and wl.stream.ptr != lane.stream.ptr
    abc, zs = gpu.device_witness(plans, n, 0, wl, per_circuit=True)
    gpu.wait_event(lane, gpu.record_event(wl))
    host = gpu.d2h(abc, lane)
    for j, plan in enumerate(plans):
        ref = plan_witness(plan, n)
        assert np.array_equal(host[3 * j:3 * j + 3], ref.abc), f"a/b/c of circuit {j} (seed {SEED})"
        assert np.array_equal(gpu.d2h(zs[j], lane), ref.z_limbs), f"z of circuit {j} (seed {SEED})"


@pytest.mark.parametrize("n,ni", [(1000, 7), (70_000, 269), (5, 5)])
def test_tail_split_on_the_device_equals_the_host(gpu, n, ni):
    rng = random.Random(SEED + n)
    vals = [rng.choice([0, 1, 1, 1, rng.randrange(1 << 60), rng.randrange(R)]) for _ in range(n)]
    z = ints_to_limbs(vals)
    lane, wl = gpu.lanes(0)[0], gpu.witness_lane(0)
    dev = gpu.h2d(z, 0, wl)  # Montgomery on the device, as device_witness leaves z
    split = gpu.split_tail(dev, ni, wl)
    gpu.wait_event(lane, gpu.record_event(wl))  # as the pipeline does: made on stream:1, read on stream:0
    ts = gpu.finish_tail(split, lane)
    mask, tail, stats = split_tail(np, z, ONE, lambda t: t, ni)
    assert np.array_equal(gpu.d2h(ts.tail, lane), tail), f"tail (seed {SEED})"
    assert np.array_equal(ts.stats, stats), f"counters {ts.stats} vs {stats} (seed {SEED})"
    assert np.array_equal(ts.ones.data.get(), np.flatnonzero(mask)), f"ones (seed {SEED})"
    assert np.array_equal(ts.ones_l.data.get(), np.flatnonzero(mask[ni:])), f"ones of L (seed {SEED})"


def test_batch_add_from_device_indices(gpu):
    rng = random.Random(SEED)
    pts = [G1Point() * to_scalar(rng.randrange(1, R)) for _ in range(300)]
    bases = gpu.load_bases("a", pts, 0)
    z = ints_to_limbs([rng.choice([0, 1, 5]) for _ in range(300)])
    lane = gpu.lanes(0)[0]
    ts = gpu.finish_tail(gpu.split_tail(gpu.h2d(z, 0, lane), 0, lane), lane)
    want = gpu.batch_add_g1(bases, np.all(z == ONE, axis=1), lane=lane)
    assert gpu.batch_add_indices(bases, ts.ones, bound=300, lane=lane) == want, f"seed {SEED}"
    from gputrace.prover.backends.base import BackendError

    with pytest.raises(BackendError, match="301 scalars for 300 bases"):
        gpu.batch_add_indices(bases, ts.ones, bound=301, lane=lane)


@pytest.mark.parametrize("flow,b_g2", [("stream", "device"), ("stream", "host"), ("stream-sync", "device"),
                                        ("batch", "device")])
def test_batches_through_the_flows_verify(tmp_path, flow, b_g2):
    from gputrace.prover.pipeline import run_prove

    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=5, depth=5, batch=3, devices=1, backend="cuda",
                                     opts=frozenset(OPT_NAMES), synthesis="device", b_g2=b_g2, device_flow=flow,
                                     seed=SEED % 1000, out_dir=tmp_path, configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * 3, f"seed {SEED % 1000}"
    assert res.config["device_flow"] == flow
    attrs = {}
    for s in sink.spans:
        attrs.setdefault(s["name"], []).append(s["attributes"])
    synth_lanes = {a["gputrace.lane"] for a in attrs["synthesis"]}  # "stream:N": N in first-seen order
    msm_lanes = {a["gputrace.lane"] for a in attrs["msm_h"]}
    assert len(synth_lanes) == len(msm_lanes) == 1
    assert (synth_lanes == msm_lanes) == (flow == "batch"), (synth_lanes, msm_lanes)  # stream: the witness stream
    results = [a for a in attrs.get("d2h", []) if a.get("what") == "results"]  # one copy back per circuit
    assert len(results) == (3 if flow == "stream" else 0)
    assert all("gputrace.gpu.start_ns" in a for a in attrs["synthesis"])
    back = [a for a in attrs.get("d2h", []) if a.get("what") == "assignment"]
    assert len(back) == (3 if (flow, b_g2) == ("stream", "host") else 0)


def test_key_upload_through_pinned_staging(gpu, monkeypatch):
    """Bases uploaded through page-locked chunks (every size, here; chunks of 4,000 bytes) give the MSM arkworks
    gives; G2 too."""
    from py_arkworks_bls12381 import G2Point

    from gputrace.prover.backends import cuda_host
    from gputrace.prover.encoding import g2_to_affine_limbs
    from gputrace.prover.field import limbs_to_scalars

    monkeypatch.setattr(cuda_host, "STAGE_MIN_BYTES", 0)
    monkeypatch.setattr(cuda_host, "STAGE_CHUNK", 4000)  # 19,200 bytes of G1 bases: 5 chunks, the last short
    rng = random.Random(SEED + 1)
    pts = [G1Point() * to_scalar(rng.randrange(1, R)) for _ in range(200)]
    limbs = ints_to_limbs([rng.randrange(R) for _ in range(200)])
    want = G1Point.multiexp_unchecked(pts, limbs_to_scalars(limbs))
    host = np.arange(3001, dtype=np.uint64)  # 24,008 bytes: 7 chunks through the two buffers
    dst = cupy.empty(host.shape, dtype=np.uint64)
    stream = cupy.cuda.Stream(non_blocking=True)
    cuda_host._upload_staged(dst, host, stream)
    assert np.array_equal(dst.get(), host)
    lane = gpu.lanes(0)[0]
    assert gpu.msm_g1(gpu.load_bases("a", pts, 0), limbs, lane=lane) == want, f"seed {SEED}"
    g2 = [G2Point() * to_scalar(rng.randrange(1, R)) for _ in range(20)]
    sc = ints_to_limbs([rng.randrange(R) for _ in range(20)])
    want2 = G2Point.multiexp_unchecked(g2, limbs_to_scalars(sc))
    assert gpu.msm_g2(gpu.load_bases_g2("b_g2", g2_to_affine_limbs(g2), 0), sc, lane=lane) == want2, f"seed {SEED}"


@pytest.mark.parametrize("opts", [("b1", "pageable", "reload", "g2end", "syncmsm", "d4"), ("reload", "b1"), ("windows",),
                                  ("g2end",), ("null",)])
def test_regression_switches_verify_on_the_gpu(tmp_path, opts):
    """The stream flow's regression switches (docs/prover.md) are real code paths: the proofs still verify with
    them on, and their phases are in the trace."""
    from gputrace.prover.pipeline import run_prove

    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=5, depth=5, batch=3, devices=1, backend="cuda", opts=frozenset(opts),
                                     synthesis="device", b_g2="device", device_flow="stream", seed=SEED % 1000,
                                     out_dir=tmp_path, configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * 3, f"seed {SEED % 1000}, {opts}"
    names = [s["name"] for s in sink.spans]
    assert ("pin" in names) == ("b1" in opts) and ("unpin" in names) == ("b1" in opts)
    reloads = [s for s in sink.spans if s["name"] == "load_bases" and s["attributes"].get("reload")]
    assert len(reloads) == (2 * 5 if "reload" in opts else 0)
