"""CUDA activity from CUPTI under gputrace phases (GPU machine: ``pytest -m gpu tests/gpu/test_cupti.py -s``).

Truth comes from the work itself: a kernel that spins on the GPU's global timer for a set time, launched
after a host sleep of a set time, and a stream synchronisation that waits for such a kernel.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
pytest.importorskip("cupti")

from gputrace.testing.gpu_kernels import SPIN_NS  # noqa: E402
from gputrace.trace import MemorySink, configure, phase, shutdown  # noqa: E402

pytestmark = pytest.mark.gpu

_SPIN = SPIN_NS


@pytest.fixture(scope="module")
def spin():
    k = cupy.RawKernel(_SPIN, "spin_ns")
    k((1,), (1,), (np.uint64(1000),))  # compile + load outside the measured phases
    cupy.cuda.Device().synchronize()
    return k


@pytest.fixture
def run():
    mem = MemorySink()
    rec = configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.1, cuda_activity=True)
    assert rec.cupti is not None, rec.cuda_activity_error
    # CUPTI sets a context up for tracing at its first API calls (measured ~8 ms): keep that out of the phases.
    k = cupy.RawKernel(_SPIN, "spin_ns")
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        k((1,), (1,), (np.uint64(1000),))
    s.synchronize()
    cupy.empty(16, dtype=np.uint8).set(np.zeros(16, dtype=np.uint8), stream=s)
    s.synchronize()
    rec.drain()
    mem.clear()
    yield mem
    shutdown()


def _children(spans, parent, activity):
    return [s for s in spans if s["parent_span_id"] == parent["span_id"]
            and s["attributes"].get("gputrace.activity") == activity]


def test_kernel_busy_and_launch_gap_after_a_host_delay(spin, run):
    delay_s, kern_ns = 0.020, 10_000_000
    s = cupy.cuda.Stream(non_blocking=True)
    # A stream's first phase and first launch under CUPTI cost 6-8 ms of one-off host time (measured on the
    # H200: CUPTI's per-stream set-up and the stream-id lookup for the lane), not part of this truth.
    with phase("warm", device=0, stream=s):
        with s:
            spin((1,), (1,), (np.uint64(1000),))
        s.synchronize()
    with phase("work", device=0, stream=s):
        time.sleep(delay_s)
        with s:
            spin((1,), (1,), (np.uint64(kern_ns),))
        s.synchronize()
    shutdown()
    spans = run.spans
    (work,) = [x for x in spans if x["name"] == "work"]
    (k,) = _children(spans, work, "kernel")
    busy = k["end_ns"] - k["start_ns"]
    gap = (work["end_ns"] - work["start_ns"]) - busy  # bracket minus kernel-busy
    launch_gap = k["start_ns"] - work["start_ns"]
    print(f"\nkernel busy {busy / 1e6:.3f} ms (truth {kern_ns / 1e6}), phase gap {gap / 1e6:.3f} ms, "
          f"start gap {launch_gap / 1e6:.3f} ms (truth {delay_s * 1e3}), launch latency "
          f"{(k['start_ns'] - k['attributes']['cuda.launch.api_start_ns']) / 1e3:.1f} us")
    assert abs(busy - kern_ns) <= 0.10 * kern_ns
    assert abs(launch_gap - delay_s * 1e9) <= 0.10 * delay_s * 1e9
    assert abs(gap - delay_s * 1e9) <= 0.10 * delay_s * 1e9
    a = k["attributes"]
    assert k["name"] == "spin_ns" and a["cuda.grid"] == [1, 1, 1] and a["gputrace.source"] == "cupti"
    assert a["gputrace.lane"] == work["attributes"]["gputrace.lane"]  # the phase's stream lane is its kernels'
    assert work["start_ns"] <= a["cuda.launch.api_start_ns"] <= k["start_ns"] <= k["end_ns"] <= work["end_ns"]


def test_pageable_and_pinned_copies_are_told_apart(run):
    n = 8 << 20
    host = np.ones(n, dtype=np.uint8)
    pinned = cupy.cuda.alloc_pinned_memory(n)
    pinned_arr = np.frombuffer(pinned, dtype=np.uint8, count=n)
    pinned_arr[:] = 1
    dev = cupy.empty(n, dtype=np.uint8)
    s = cupy.cuda.Stream(non_blocking=True)
    with phase("h2d_pageable", device=0):
        dev.set(host, stream=s)
        s.synchronize()
    with phase("h2d_pinned", device=0):
        dev.set(pinned_arr, stream=s)
        s.synchronize()
    shutdown()
    spans = run.spans
    kinds = {}
    for name in ("h2d_pageable", "h2d_pinned"):
        (p,) = [x for x in spans if x["name"] == name]
        copies = _children(spans, p, "memcpy")
        assert copies, name
        kinds[name] = {(c["attributes"]["cuda.memcpy.kind"], c["attributes"]["cuda.memcpy.src_kind"]) for c in copies}
        assert sum(c["attributes"]["gputrace.bytes"] for c in copies) == n
    print(f"\ncopy kinds {kinds}")
    assert kinds["h2d_pageable"] == {("HtoD", "PAGEABLE")}
    assert kinds["h2d_pinned"] == {("HtoD", "PINNED")}


def test_stream_sync_of_known_length(spin, run):
    kern_ns = 15_000_000
    s = cupy.cuda.Stream(non_blocking=True)
    with phase("sync", device=0):
        with s:
            spin((1,), (1,), (np.uint64(kern_ns),))
        t0 = time.perf_counter_ns()
        s.synchronize()
        host_wait = time.perf_counter_ns() - t0
    shutdown()
    spans = run.spans
    (p,) = [x for x in spans if x["name"] == "sync"]
    (w,) = _children(spans, p, "sync")
    dur = w["end_ns"] - w["start_ns"]
    a = w["attributes"]
    print(f"\nsync {dur / 1e6:.3f} ms (host wait {host_wait / 1e6:.3f} ms, kernel {kern_ns / 1e6} ms)")
    assert w["name"] == "[CUDA sync stream]" and a["cuda.sync.type"] == "stream" and a["gputrace.kind"] == "sync"
    (k,) = _children(spans, p, "kernel")
    assert a["gputrace.lane"] == "thread:MainThread" and a["cuda.sync.stream"] == k["attributes"]["cuda.stream"]
    assert abs(dur - host_wait) <= 0.10 * host_wait
    assert dur <= kern_ns * 1.1
