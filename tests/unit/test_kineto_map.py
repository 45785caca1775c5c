"""timeline/formats/chrome/kineto.py: Kineto's categories onto the GPU-activity conventions (docs/interop.md)."""

from __future__ import annotations

from gputrace import activity as A
from gputrace.analysis.api_calls import api_call_table, phase_mask
from gputrace.timeline.formats.chrome.read import from_chrome
from gputrace.timeline.model import KIND_CODES

BASE = 1_700_000_000_000_000_000


def _doc():
    ev = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "h2d", "pid": 1, "tid": 1, "ts": 1, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 2, "dur": 30},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 3, "dur": 5,
         "args": {"correlation": 10}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 9, "dur": 20,
         "args": {"correlation": 11}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 10,
         "dur": 15, "args": {"device": 0, "stream": 7, "correlation": 10, "bytes": 1 << 20}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 26, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 12, "bytes": 64}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "h2d", "pid": 0, "tid": 7, "ts": 10, "dur": 17,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0, "ts": 50, "dur": 5},
    ]
    return {"schemaVersion": 1, "baseTimeNanoseconds": BASE, "traceEvents": ev,
            "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}}


def _by_name(tl):
    return {tl.name_of(r): r for r in range(tl.n)}


def test_device_rows_become_activity_spans_under_their_phase():
    tl = from_chrome(_doc(), host="t")
    r = _by_name(tl)
    c = r["[CUDA memcpy HtoD]"]
    a = tl.attrs[c]
    assert a[A.ACTIVITY] == "memcpy" and a[A.MEMCPY_SRC] == "PAGEABLE" and a[A.MEMCPY_DST] == "DEVICE"
    assert a[A.API] == "cudaMemcpyAsync" and a[A.LAUNCH_API_START] == BASE + 3_000 and a[A.SOURCE] == "kineto"
    assert tl.name_of(int(tl.parent[c])) == "h2d" and tl.nbytes[c] == 1 << 20
    m = r[A.MEMSET_NAME]
    assert tl.attrs[m][A.MEMSET_KIND] == "DEVICE" and tl.attrs[m][A.ACTIVITY] == "memset"
    s = r["[CUDA sync stream]"]
    assert tl.kind[s] == KIND_CODES["sync"] and tl.attrs[s][A.SYNC_TYPE] == "stream" and tl.device[s] == 0
    assert tl.lanes[tl.lane[s]].name.startswith("thread:")


def test_api_calls_operators_and_profiler_rows_are_not_phases():
    tl = from_chrome(_doc(), host="t")
    m = phase_mask(tl)
    phases = {tl.name_of(r) for r in range(tl.n) if m[r]}
    assert phases == {"h2d"}
    r = _by_name(tl)
    assert tl.lanes[tl.lane[r["cudaMemcpyAsync"]]].name.startswith(A.API_LANE_PREFIX)
    assert [x["api"] for x in api_call_table(tl)] == ["cudaMemcpyAsync"]  # the sync is a sync span
    gpu_ann = next(i for i in range(tl.n) if tl.attrs.get(i, {}).get("chrome.cat") == "gpu_user_annotation")
    assert tl.gpu_start[gpu_ann] == -1  # no device time of its own: never counted as GPU busy


def test_resource_carries_the_rank():
    tl = from_chrome(_doc(), host="t")
    res = tl.resources[int(tl.resource[0])]
    assert res["gputrace.rank"] == 3 and res["gputrace.world_size"] == 8 and res[A.SOURCE] == "kineto"


def test_a_plain_chrome_trace_is_left_alone():
    doc = {"traceEvents": [{"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}
    tl = from_chrome(doc)
    assert tl.resources == [] and phase_mask(tl).all()


def test_a_cpu_only_profile_is_mapped_too():
    """``activities=[ProfilerActivity.CPU]``: no device or API row, yet the Trace span and operators are no phases."""
    ev = [e for e in _doc()["traceEvents"] if e["cat"] in ("Trace", "user_annotation", "cpu_op")]
    tl = from_chrome({"schemaVersion": 1, "baseTimeNanoseconds": BASE, "traceEvents": ev}, host="t")
    m = phase_mask(tl)
    assert {tl.name_of(r) for r in range(tl.n) if m[r]} == {"h2d"}
    r = _by_name(tl)
    assert tl.attrs[r["PyTorch Profiler (0)"]][A.ROLE] == "profiler" and tl.attrs[r["aten::copy_"]][A.ROLE] == "op"
