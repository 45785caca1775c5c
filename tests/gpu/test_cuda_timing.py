"""CUDA-event device times of phases given ``stream=`` (run on the GPU machine: ``pytest -m gpu tests/gpu``).

Prints the measured alignment figures (run with ``-s`` to see them):
* reference bracket: half the host window around a reference event (the alignment uncertainty);
* for phases that synchronise their stream before ending: how far the device interval sits inside the
  host interval (negative would mean the mapping put device time outside the host interval);
* host cost of a phase with a stream.
"""

from __future__ import annotations

import re
import statistics
import threading
import time

import pytest

cupy = pytest.importorskip("cupy")

import gputrace  # noqa: E402
from gputrace.trace import MemorySink, configure, phase, shutdown, start_phase  # noqa: E402
from gputrace.trace import cuda_timing  # noqa: E402

pytestmark = pytest.mark.gpu


def _busy(stream, n=1024):
    with stream:
        a = cupy.random.random((n, n), dtype=cupy.float32)
        for _ in range(4):
            a = a @ a
            a /= cupy.linalg.norm(a)
    return a


@pytest.fixture
def mem():
    sink = MemorySink()
    configure(sinks=[sink], collect_gpu_info=False, flush_interval_s=0.1)
    try:
        yield sink
    finally:
        shutdown()


def test_device_times_inside_host_times(mem):
    s = cupy.cuda.Stream(non_blocking=True)
    _busy(s)
    s.synchronize()
    for i in range(50):
        with phase("ntt", device=0, stream=s, circuit=i):
            _busy(s)
            s.synchronize()
    summary = shutdown()
    spans = mem.by_name("ntt")
    assert len(spans) == 50 and summary.cuda_unresolved == 0
    lead, tail, dur = [], [], []
    for sp in spans:
        a = sp["attributes"]
        g0, g1 = a["gputrace.gpu.start_ns"], a["gputrace.gpu.end_ns"]
        assert g0 <= g1
        lead.append(g0 - sp["start_ns"])  # host start -> device start
        tail.append(sp["end_ns"] - g1)  # device end -> host end
        dur.append(g1 - g0)
        assert re.fullmatch(r"stream:\d+", a["gputrace.lane"]) and a["gputrace.device"] == 0
    err = cuda_timing.last_alignment_error_ns.get(0)
    print(f"\nalignment: reference half-bracket {err} ns; host->device start lead median {statistics.median(lead)} ns "
          f"(min {min(lead)}); device end->host end tail median {statistics.median(tail)} ns (min {min(tail)}); "
          f"device duration median {statistics.median(dur) / 1e3:.1f} us")
    tol = 2 * err + 2000  # the reference's own uncertainty plus clock read granularity
    assert min(lead) >= -tol, f"device start before host start by {-min(lead)} ns"
    assert min(tail) >= -tol, f"device end after host end by {-min(tail)} ns"


def test_lanes_per_stream_and_pool_reuse(mem):
    s1 = cupy.cuda.Stream(non_blocking=True)
    s2 = cupy.cuda.Stream(non_blocking=True)
    before = len(cuda_timing._pools.get(0, []))
    for half in range(2):
        for _ in range(150):
            with phase("msm_h", device=0, stream=s1):
                _busy(s1, 256)
            with phase("msm_l", stream=s2):  # device taken from the stream
                _busy(s2, 256)
        s1.synchronize()
        s2.synchronize()
        gputrace.get_recorder().drain()  # resolves the first half: its 600 events go back to the pool
    summary = shutdown()
    assert summary.spans_recorded == 600 and summary.cuda_unresolved == 0
    lanes = {sp["name"]: sp["attributes"]["gputrace.lane"] for sp in mem.spans}
    assert lanes["msm_h"] != lanes["msm_l"]
    assert all(re.fullmatch(r"stream:\d+", v) for v in lanes.values())
    assert all(sp["attributes"]["gputrace.device"] == 0 for sp in mem.spans)
    assert all("gputrace.gpu.start_ns" in sp["attributes"] for sp in mem.spans)
    # The second half reused the first half's events: 1200 records, at most ~600 events ever created.
    assert len(cuda_timing._pools.get(0, [])) <= max(before, 600) + 20


def test_exception_in_stream_phase_keeps_device_times(mem):
    s = cupy.cuda.Stream(non_blocking=True)
    with pytest.raises(ValueError):
        with phase("msm_a", stream=s):
            _busy(s, 256)
            raise ValueError("bad scalar")
    s.synchronize()
    shutdown()
    (sp,) = mem.spans
    assert sp["status_code"] == 2 and "gputrace.gpu.end_ns" in sp["attributes"]


def test_start_end_on_another_thread(mem):
    s = cupy.cuda.Stream(non_blocking=True)
    h = start_phase("d2h", device=0, stream=s)
    _busy(s, 256)

    def finish():
        h.end()

    t = threading.Thread(target=finish)
    t.start()
    t.join()
    s.synchronize()
    shutdown()
    (sp,) = mem.spans
    a = sp["attributes"]
    assert a["gputrace.gpu.start_ns"] <= a["gputrace.gpu.end_ns"]


def test_pending_events_resolved_at_shutdown():
    sink = MemorySink()
    configure(sinks=[sink], collect_gpu_info=False, flush_interval_s=1.0)
    s = cupy.cuda.Stream(non_blocking=True)
    with phase("coset_ntt", stream=s):
        _busy(s, 2048)  # still running when the phase ends (no synchronize)
    summary = shutdown()  # the final drain waits for the events
    assert summary.cuda_unresolved == 0
    a = sink.spans[0]["attributes"]
    assert a["gputrace.gpu.end_ns"] > sink.spans[0]["end_ns"] - 1_000_000  # device work outlived the host range


def test_multi_gpu_lanes():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one GPU")
    sink = MemorySink()
    configure(sinks=[sink], collect_gpu_info=False)
    streams = []
    for d in range(2):
        with cupy.cuda.Device(d):
            streams.append(cupy.cuda.Stream(non_blocking=True))
    for d, s in enumerate(streams):
        with cupy.cuda.Device(d):
            with phase("msm_h", device=d, stream=s):
                _busy(s, 256)
            s.synchronize()
    shutdown()
    devs = sorted(sp["attributes"]["gputrace.device"] for sp in sink.spans)
    assert devs == [0, 1]
    assert all(re.fullmatch(r"stream:\d+", sp["attributes"]["gputrace.lane"]) for sp in sink.spans)


def test_host_cost_of_stream_phase(mem):
    s = cupy.cuda.Stream(non_blocking=True)
    for _ in range(200):  # warm the event pool
        with phase("ntt", device=0, stream=s):
            pass
    s.synchronize()
    gputrace.get_recorder().drain()
    costs = []
    for _ in range(7):
        n = 2000
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with phase("ntt", device=0, stream=s):
                pass
        costs.append((time.perf_counter_ns() - t0) / n)
        s.synchronize()
    med = statistics.median(costs)
    print(f"\nhost cost of a phase with a CUDA stream: median {med:.0f} ns (target <= 3000 ns)")
    assert med < 20_000  # a loose sanity bound; the target is checked by benchmarks/bench_tracer.py --cuda
