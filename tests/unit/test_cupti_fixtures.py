"""CUPTI records captured on the H200 (tests/data/cupti, ``benchmarks/bench_cupti.py fixture`` and
``GPUTRACE_CUPTI_DUMP`` under ``gputrace record``) replayed through the conversion, without CUDA.

phases_*: a phase "work" (stream 14) that sleeps 5 ms then launches a 2 ms spin kernel, a child "h2d" copying
1 MiB from pageable then from pinned memory and a memset, a child "sync" launching a 3 ms spin kernel and
waiting on the stream. torch_*: two PyTorch training steps under NVTX ranges (examples/record_torch_step.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputrace.trace.cupti_join import ActivityJoin
from gputrace.trace.records import IdSource

DATA = Path(__file__).resolve().parents[1] / "data" / "cupti"


def _records(name):
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


@pytest.fixture(scope="module")
def replay():
    meta = json.loads((DATA / "phases_meta.json").read_text())
    phases = {s["span_id"]: s for s in meta["spans"] if s["activity"] is None}
    j = ActivityJoin(IdSource(1), thread_name={int(k): v for k, v in meta["thread_names"].items()}.get)
    j.offset_ns = meta["offset_ns"]
    for xid, sid in meta["xids"]:
        p = phases[sid]
        j.register_phase(xid, p["trace_id"], sid, p["start_ns"])
    out = j.add(_records("phases_records.jsonl")) + j.take(final=True)
    return meta, phases, out


def test_replay_gives_the_spans_the_device_run_wrote(replay):
    meta, phases, out = replay
    want = sorted((s["name"], s["parent_span_id"], s["start_ns"], s["end_ns"], s["lane"])
                  for s in meta["spans"] if s["activity"] is not None)
    got = sorted((s["name"], s["parent_span_id"], s["start_ns"], s["end_ns"], s["attributes"]["gputrace.lane"])
                 for s in out)
    assert got == want and len(got) == 6


def test_clock_mapping_puts_activity_inside_its_phase(replay):
    meta, phases, out = replay
    assert abs(meta["offset_ns"]) < 10_000_000 and meta["bracket_ns"] < 100_000  # CUPTI ~ epoch ns here
    by_id = {sid: p for sid, p in phases.items()}
    for s in out:
        p = by_id[s["parent_span_id"]]
        a = s["attributes"]
        if a["gputrace.activity"] == "sync":  # host side: inside its phase's host interval
            assert p["start_ns"] <= s["start_ns"] <= s["end_ns"] <= p["end_ns"], s["name"]
        else:  # launched inside the phase: the launching call is inside it, the work after the call
            assert p["start_ns"] <= a["cuda.launch.api_start_ns"] <= p["end_ns"], s["name"]
            assert a["cuda.launch.api_start_ns"] < s["start_ns"], s["name"]


def test_kernels_copies_memset_sync_from_the_device(replay):
    meta, phases, out = replay
    name_of = {sid: p["name"] for sid, p in phases.items()}
    kern = [s for s in out if s["attributes"]["gputrace.activity"] == "kernel"]
    assert [(name_of[k["parent_span_id"]], k["name"]) for k in kern] == [("work", "spin_ns"), ("sync", "spin_ns")]
    durs = [k["end_ns"] - k["start_ns"] for k in kern]
    assert abs(durs[0] - 2_000_000) < 20_000 and abs(durs[1] - 3_000_000) < 20_000
    copies = [s["attributes"] for s in out if s["attributes"]["gputrace.activity"] == "memcpy"]
    assert [(c["cuda.memcpy.kind"], c["cuda.memcpy.src_kind"], c["cuda.memcpy.dst_kind"], c["gputrace.bytes"])
            for c in copies] == [("HtoD", "PAGEABLE", "DEVICE", 1 << 20), ("HtoD", "PINNED", "DEVICE", 1 << 20)]
    assert all(c["cuda.api"] == "cudaMemcpyAsync" for c in copies)
    (ms,) = [s for s in out if s["attributes"]["gputrace.activity"] == "memset"]
    assert ms["attributes"]["cuda.memset.kind"] == "DEVICE" and name_of[ms["parent_span_id"]] == "h2d"
    (sy,) = [s for s in out if s["attributes"]["gputrace.activity"] == "sync"]
    a = sy["attributes"]
    assert (a["cuda.sync.type"], a["cuda.sync.stream"], a["gputrace.lane"], a["cuda.api"]) == (
        "stream", 14, "thread:MainThread", "cudaStreamSynchronize")
    assert sy["end_ns"] >= kern[1]["end_ns"] - 10_000  # the wait ends when the kernel it waited for ends


def test_torch_step_nvtx_ranges_and_kernels():
    j = ActivityJoin(IdSource(2), thread_name=lambda tid: "MainThread")
    recs = _records("torch_records.jsonl")
    out = j.add(recs) + j.take(final=True)
    ranges = [s for s in out if "nvtx.domain" in s["attributes"]]
    by_id = {s["span_id"]: s for s in ranges}
    assert sorted(s["name"] for s in ranges) == sorted(["train_step", "forward", "backward", "optimizer"] * 2)
    for s in ranges:  # gputrace's own domain (the root phase's NVTX range) is not duplicated
        parent = by_id.get(s["parent_span_id"])
        assert (parent["name"] if parent else None) == (None if s["name"] == "train_step" else "train_step")
    act = [s for s in out if "gputrace.activity" in s["attributes"]]
    assert len([s for s in act if s["attributes"]["gputrace.activity"] == "kernel"]) == 34
    under = {}
    for s in act:
        p = by_id.get(s["parent_span_id"])
        under.setdefault(p["name"] if p else None, set()).add(s["attributes"]["gputrace.activity"])
    assert "kernel" in under["forward"] and "kernel" in under["backward"] and "kernel" in under["optimizer"]
    assert "memcpy" in under["train_step"]  # x.to(dev) is inside train_step, outside forward
