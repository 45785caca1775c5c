"""The GPU-activity analysis on CUPTI records captured on the H200 (tests/data/cupti/phases_*, see
tests/unit/test_cupti_fixtures.py): a phase "work" on stream 14 sleeps 5 ms on the host, then launches a 2 ms
spin kernel; its child "h2d" copies 1 MiB from pageable and from pinned memory and sets memory; its child
"sync" launches a 3 ms spin kernel and waits on the stream. Replayed through the collector's conversion and
the OTLP reader, so this is what `report` and the TUI compute for that device run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputrace.analysis.gpu_activity import device_busy, launch_gaps
from gputrace.analysis.gpu_transfers import copy_table, kernel_table, sync_waits
from gputrace.otlp.encode import encode_request
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.trace.cupti_join import ActivityJoin
from gputrace.trace.records import IdSource

DATA = Path(__file__).resolve().parents[1] / "data" / "cupti"
MS = 1_000_000


@pytest.fixture(scope="module")
def tl():
    meta = json.loads((DATA / "phases_meta.json").read_text())
    phases = [s for s in meta["spans"] if s["activity"] is None]
    j = ActivityJoin(IdSource(1), thread_name={int(k): v for k, v in meta["thread_names"].items()}.get)
    j.offset_ns = meta["offset_ns"]
    by_id = {p["span_id"]: p for p in phases}
    for xid, sid in meta["xids"]:
        j.register_phase(xid, by_id[sid]["trace_id"], sid, by_id[sid]["start_ns"])
    recs = [json.loads(line) for line in (DATA / "phases_records.jsonl").read_text().splitlines()]
    act = j.add(recs) + j.take(final=True)
    spans = [{"trace_id": p["trace_id"], "span_id": p["span_id"], "parent_span_id": p["parent_span_id"], "name": p["name"],
              "start_ns": p["start_ns"], "end_ns": p["end_ns"],
              "attributes": {"gputrace.lane": p["lane"], **({"gputrace.device": 0} if p["lane"].startswith("stream:") else {})}}
             for p in phases]
    loader = TraceLoader()
    loader.feed("<h200>", 1, encode_request({"service.name": "fixture", "host.name": "h200", "process.pid": 1,
                                              "gputrace.config.b1": True}, spans + act))
    return loader.timeline()


def _gap(tl, name):
    g = launch_gaps(tl)
    return next(g.entry(i) for i in range(len(g)) if tl.phases[int(g.phase[i])] == name)


def test_kernel_busy_is_the_kernels_not_the_bracket(tl):
    (d,) = device_busy(tl)
    assert d.basis == "kernels" and (d.kernels, d.copies, d.memsets) == (2, 2, 1)
    assert d.kernel_ns == pytest.approx(5 * MS, rel=0.01)  # the 2 ms and 3 ms spins
    work = _gap(tl, "work")
    assert work["kernel_ns"] == pytest.approx(5 * MS, rel=0.01) and work["bracket_ns"] > 17 * MS
    kernels = {(k["phase"], k["kernel"]): k["total_ns"] for k in kernel_table(tl)}
    assert kernels[("work", "spin_ns")] == pytest.approx(2 * MS, rel=0.01)
    assert kernels[("sync", "spin_ns")] == pytest.approx(3 * MS, rel=0.01)


def test_the_host_delay_is_a_launch_gap_in_no_child_span(tl):
    work = _gap(tl, "work")
    # The 5 ms host sleep before the first launch is device-idle time inside "work", spent in no child span.
    assert work["gap_ns"] >= 5 * MS and work["unattributed_ns"] >= 5 * MS
    assert work["gap_ns"] + work["busy_ns"] <= work["window_ns"]
    # "sync" waits behind the work already queued on stream 14: almost no device idle inside it.
    sync = _gap(tl, "sync")
    assert sync["kernel_ns"] == pytest.approx(3 * MS, rel=0.01) and sync["gap_ns"] < 0.1 * MS


def test_pageable_and_pinned_copies_are_told_apart(tl):
    rows = {c["src_kind"]: c for c in copy_table(tl)}
    assert set(rows) == {"PAGEABLE", "PINNED"}
    assert rows["PAGEABLE"]["flag"] and not rows["PINNED"]["flag"]
    assert rows["PAGEABLE"]["bytes"] == rows["PINNED"]["bytes"] == 1 << 20


def test_the_stream_sync_waited_for_the_spin_kernel(tl):
    (w,) = sync_waits(tl)
    assert w["type"] == "stream" and w["stream"] == 14 and w["phase"] == "sync"
    assert w["kernels"][0]["name"] == "spin_ns" and w["kernels"][0]["ns"] >= 3 * MS * 0.99
    assert w["after_gpu_ns"] < 0.1 * MS  # the host woke up right after the stream drained
