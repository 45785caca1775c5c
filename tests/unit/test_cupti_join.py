"""CUPTI activity records (plain dicts) -> child spans of the phase or NVTX range that enqueued them.

Pure: runs without CUDA or cupti-python (gputrace.trace.cupti_join / cupti_spans)."""

from __future__ import annotations

from gputrace.trace.cupti_join import ActivityJoin
from gputrace.trace.cupti_spans import demangle, short_name
from gputrace.trace.records import IdSource

OFF = 1_000_000_000_000  # CUPTI ts + OFF = epoch ns


def _join(**kw):
    j = ActivityJoin(IdSource(7), thread_name={4242: "MainThread"}.get, **kw)
    j.offset_ns = OFF
    return j


def _api(corr, start, end=None, thread=4242, name="cuLaunchKernel", kind="DRIVER"):
    return {"kind": kind, "start": start, "end": end or start + 500, "correlation_id": corr, "cbid": 1,
            "name": name, "thread_id": thread, "process_id": 1}


def _kernel(corr, start, end, stream=13, dev=0, name="_Z3addPfS_i"):
    return {"kind": "CONCURRENT_KERNEL", "start": start, "end": end, "device_id": dev, "context_id": 1,
            "stream_id": stream, "correlation_id": corr, "name": name, "grid_x": 4, "grid_y": 1, "grid_z": 1,
            "block_x": 256, "block_y": 1, "block_z": 1, "registers_per_thread": 32,
            "static_shared_memory": 0, "dynamic_shared_memory": 1024}


def _ext(corr, xid):
    return {"kind": "EXTERNAL_CORRELATION", "correlation_id": corr, "external_id": xid, "external_kind": "CUSTOM0"}


def test_kernel_is_child_of_phase_with_clock_offset_and_launch_latency():
    j = _join()
    j.register_phase(5, trace_id=0xAB, span_id=0xCD, start_ns=OFF + 900)
    assert j.add([_ext(77, 5), _api(77, 1000), _kernel(77, 3000, 7000)]) == []
    (s,) = j.take()
    assert (s["trace_id"], s["parent_span_id"]) == (0xAB, 0xCD)
    assert (s["start_ns"], s["end_ns"]) == (OFF + 3000, OFF + 7000)
    a = s["attributes"]
    assert s["name"] == "add" and a["cuda.kernel.name"] == "add(float*, float*, int)"
    assert a["gputrace.lane"] == "stream:13" and a["cuda.stream"] == 13 and a["gputrace.device"] == 0
    assert a["gputrace.kind"] == "gpu" and a["gputrace.activity"] == "kernel" and a["gputrace.source"] == "cupti"
    assert a["cuda.grid"] == [4, 1, 1] and a["cuda.block"] == [256, 1, 1]
    assert a["cuda.shared_memory.dynamic"] == 1024 and a["cuda.registers_per_thread"] == 32
    assert a["cuda.api"] == "cuLaunchKernel" and a["cuda.correlation_id"] == 77
    assert s["start_ns"] - a["cuda.launch.api_start_ns"] == 2000  # launch latency
    assert (a["gputrace.gpu.start_ns"], a["gputrace.gpu.end_ns"]) == (s["start_ns"], s["end_ns"])


def test_record_waits_for_its_phase_then_for_its_api_record_bounded():
    j = _join(max_wait=2)
    j.add([_ext(1, 9), _api(1, 10), _kernel(1, 20, 30)])
    assert j.take() == [] and j.take() == []  # phase 9 not exported yet: the kernel waits
    j.register_phase(9, 1, 2, OFF)
    (s,) = j.take()
    assert s["parent_span_id"] == 2
    j.add([_kernel(2, 40, 50)])  # no API record (yet): waits max_wait takes, then goes out without one
    assert j.take() == [] and j.take() == []
    (s,) = j.take()
    assert "cuda.api" not in s["attributes"] and s["parent_span_id"] is None
    assert s["trace_id"] >> 64 == j.ids.trace_salt  # a trace of its own


def test_final_take_resolves_everything_and_waiting_is_bounded():
    j = _join(max_waiting=3)
    j.add([_ext(i, 100 + i) for i in range(5)] + [_api(i, i) for i in range(5)]
          + [_kernel(i, 10 + i, 11 + i) for i in range(5)])
    out = j.take()  # over the bound: the two oldest go out without their (unexported) phase
    assert [s["attributes"]["cuda.correlation_id"] for s in out] == [0, 1]
    assert all(s["parent_span_id"] is None for s in out)
    assert len(j.take(final=True)) == 3 and j.waiting == []


def test_memcpy_memset_sync_attributes():
    j = _join()
    j.register_phase(1, 10, 11, OFF)
    recs = [
        _ext(5, 1), _api(5, 100, name="cudaMemcpyAsync", kind="RUNTIME"),
        {"kind": "MEMCPY", "start": 200, "end": 400, "device_id": 1, "context_id": 3, "stream_id": 7,
         "correlation_id": 5, "bytes": 4096, "copy_kind": "HTOD", "src_kind": "PAGEABLE", "dst_kind": "DEVICE"},
        _ext(6, 1), _api(6, 500, name="cuMemsetD8Async"),
        {"kind": "MEMSET", "start": 600, "end": 650, "device_id": 1, "context_id": 3, "stream_id": 7,
         "correlation_id": 6, "bytes": 64, "memory_kind": "DEVICE"},
        _ext(8, 1), _api(8, 700, end=5000, name="cuStreamSynchronize"),
        {"kind": "SYNCHRONIZATION", "start": 710, "end": 4990, "context_id": 3, "stream_id": 7,
         "correlation_id": 8, "cuda_event_id": 0xFFFFFFFF, "type": "STREAM_SYNCHRONIZE"},
    ]
    j.add(recs)
    cp, ms, sy = j.take()
    assert cp["name"] == "[CUDA memcpy HtoD]" and cp["parent_span_id"] == 11
    assert cp["attributes"]["cuda.memcpy.src_kind"] == "PAGEABLE" and cp["attributes"]["gputrace.bytes"] == 4096
    assert cp["attributes"]["gputrace.device"] == 1 and cp["attributes"]["gputrace.lane"] == "stream:7"
    assert ms["name"] == "[CUDA memset]" and ms["attributes"]["cuda.memset.kind"] == "DEVICE"
    a = sy["attributes"]
    assert sy["name"] == "[CUDA sync stream]" and a["gputrace.kind"] == "sync" and a["cuda.sync.type"] == "stream"
    assert a["gputrace.lane"] == "thread:MainThread" and a["cuda.sync.stream"] == 7 and "cuda.sync.event" not in a
    assert a["gputrace.device"] == 1  # context 3 -> device 1, learned from the device records
    assert sy["end_ns"] - sy["start_ns"] == 4280


def test_nvtx_ranges_nest_and_parent_kernels_by_the_launching_call():
    j = _join()
    M = lambda mid, ts, fl, name="", dom="": {"kind": "MARKER", "id": mid, "timestamp": ts, "flags": fl,
                                              "name": name, "domain": dom, "thread_id": 4242}
    out = j.add([M(1, 100, 2, "train_step"), M(2, 150, 2, "forward", "torch"), _api(3, 160), M(2, 400, 4),
                 M(9, 410, 2, "ntt", "gputrace"), M(9, 420, 4), M(1, 900, 4), _api(4, 950)])
    fwd, step = out
    assert (fwd["name"], step["name"]) == ("forward", "train_step")  # gputrace's own domain is skipped
    assert fwd["parent_span_id"] == step["span_id"] and fwd["trace_id"] == step["trace_id"]
    assert fwd["attributes"]["nvtx.domain"] == "torch" and fwd["attributes"]["gputrace.lane"] == "thread:MainThread"
    assert (step["start_ns"], step["end_ns"]) == (OFF + 100, OFF + 900)
    j.add([_kernel(3, 300, 350), _kernel(4, 1000, 1100)])
    k_in, k_out = j.take(final=True)
    assert k_in["parent_span_id"] == fwd["span_id"]  # launched inside "forward"
    assert k_out["parent_span_id"] is None  # launched after every range closed


def test_inner_of_phase_and_range_wins_and_root_adopts_orphans():
    j = _join()
    j.root = (1, 2, OFF)
    j.register_phase(3, 1, 30, OFF + 50)  # phase opened at 50
    M = lambda mid, ts, fl, name="": {"kind": "MARKER", "id": mid, "timestamp": ts, "flags": fl, "name": name,
                                      "domain": "", "thread_id": 4242}
    (rng,) = j.add([M(1, 100, 2, "inner"), M(1, 500, 4)])
    assert rng["parent_span_id"] == 2  # top-level range under the root
    j.add([_ext(1, 3), _api(1, 200), _kernel(1, 300, 400),  # in phase 3 and in the later-opened range
           _ext(2, 3), _api(2, 600), _kernel(2, 700, 800),  # in phase 3 only
           _api(3, 900), _kernel(3, 950, 990)])  # in neither: the root
    a, b, c = j.take()
    assert (a["parent_span_id"], b["parent_span_id"], c["parent_span_id"]) == (rng["span_id"], 30, 2)


def test_demangle_and_short_names():
    full = demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_")
    assert full.startswith("void at::native::vectorized_elementwise_kernel<4")
    assert short_name(full) == "vectorized_elementwise_kernel"
    assert demangle("msm_bucket_sum") == "msm_bucket_sum"  # extern "C" kernels (CuPy RawModule) stay
    assert demangle("_Znot a symbol") == "_Znot a symbol"


def test_phase_registry_is_bounded_without_losing_recent_phases(monkeypatch):
    from gputrace.trace import cupti_join

    monkeypatch.setattr(cupti_join, "_CAP", 8)
    j = _join()
    for x in range(1, 11):
        j.register_phase(x, 1, 100 + x, OFF)
    assert len(j.phases) <= 8 and 10 in j.phases and 1 not in j.phases
    j.add([_ext(1, 10), _api(1, 5), _kernel(1, 6, 7)])
    assert j.take()[0]["parent_span_id"] == 110


def test_start_end_range_ending_on_another_thread():
    j = _join()
    M = lambda mid, ts, fl, thread, name="": {"kind": "MARKER", "id": mid, "timestamp": ts, "flags": fl,
                                              "name": name, "domain": "", "thread_id": thread}
    assert j.add([M(5, 100, 2, 4242, "load")]) == []
    (s,) = j.add([M(5, 900, 4, 777)])
    assert s["name"] == "load" and (s["start_ns"], s["end_ns"]) == (OFF + 100, OFF + 900)
    assert s["attributes"]["gputrace.lane"] == "thread:MainThread"  # where it started
    assert j.add([M(6, 950, 4, 777)]) == []  # an end without a start is ignored
