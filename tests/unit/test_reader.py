"""read_trace: round trips, other writers' files, ordering, resources, nesting, gzip."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np

from gputrace.otlp.encode import encode_request
from gputrace.timeline import KIND_CODES, Lane, read_trace
from gputrace.testing.synthetic import SyntheticSpec, iter_synthetic, write_synthetic

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(tl) -> set[tuple]:
    out = set()
    for r in range(tl.n):
        d = tl.span(r)
        out.add((d["trace_id"], d["span_id"], d["parent_span_id"], d["name"], d["start"], d["end"], d["device"],
                 d["lane_obj"].name, d["lane_obj"].host, d["circuit"], d["batch"], d["nbytes"], d["gpu_start"], d["gpu_end"]))
    return out


def test_round_trip_every_field(tmp_path):
    spec = SyntheticSpec(hosts=2, gpus=2, streams=2, circuits=3, batches=2, seed=7)
    p = tmp_path / "run.jsonl"
    write_synthetic(p, spec, spans_per_line=37)
    want = set()
    for res, spans in iter_synthetic(SyntheticSpec(hosts=2, gpus=2, streams=2, circuits=3, batches=2, seed=7)):
        for s in spans:
            a = s["attributes"]
            want.add((s["trace_id"].hex(), s["span_id"], s["parent_span_id"] or 0, s["name"], s["start_ns"], s["end_ns"],
                      a.get("gputrace.device", -1), a["gputrace.lane"], res["host.name"], a.get("gputrace.circuit", -1),
                      a.get("gputrace.batch", -1), a.get("gputrace.bytes", -1), a.get("gputrace.gpu.start_ns", -1),
                      a.get("gputrace.gpu.end_ns", -1)))
    tl = read_trace(p)
    assert tl.n == len(want)
    assert _rows(tl) == want
    assert tl.load_report.ok and tl.load_report.spans == tl.n
    # Resource attributes survive, one per (host) resource.
    assert sorted(r["host.name"] for r in tl.resources) == ["host0", "host1"]
    assert tl.resources[0]["gputrace.gpu.1.model"] == "NVIDIA H200"


def test_rows_sorted_by_lane_then_start_and_lanes_grouped(tmp_path):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, shuffle_lines=True, spans_per_line=5)
    tl = read_trace(p)
    for k, lane in tl.iter_lanes():
        sl = tl.lane_slice(k)
        assert (np.diff(tl.start[sl]) >= 0).all()
        assert (tl.lane[sl] == k).all()
    keys = [ln.sort_key for ln in tl.lanes]
    assert keys == sorted(keys)
    assert tl.lanes[0] == Lane("host0", 1000, 0, "stream:0")


def test_out_of_order_lines_and_split_files_give_the_same_timeline(tmp_path):
    spec = dict(hosts=2, gpus=2, circuits=3, batches=3, seed=3)
    a = tmp_path / "ordered.jsonl"
    write_synthetic(a, spans_per_line=11, **spec)
    lines = a.read_bytes().splitlines(keepends=True)
    random.Random(1).shuffle(lines)
    # Split the shuffled lines over a plain file and a gzip file.
    b1, b2 = tmp_path / "part1.jsonl", tmp_path / "part2.jsonl.gz"
    b1.write_bytes(b"".join(lines[: len(lines) // 2]))
    with gzip.open(b2, "wb") as f:
        f.write(b"".join(lines[len(lines) // 2:]))
    t1, t2 = read_trace(a), read_trace([b1, b2])
    assert t2.n == t1.n
    for col in ("start", "end", "phase", "lane", "depth", "parent", "device", "kind", "gpu_start", "span_id"):
        assert np.array_equal(t1.cols[col], t2.cols[col]) or col == "phase", col
    assert [t1.phases[i] for i in t1.phase] == [t2.phases[i] for i in t2.phase]
    assert t1.lanes == t2.lanes
    assert t2.load_report.files == [str(b1), str(b2)]


def test_gzip_detected_by_magic_not_name(tmp_path):
    p = tmp_path / "trace.data"
    with gzip.open(p, "wb") as f:
        f.write(encode_request({"host.name": "h"}, [dict(trace_id=b"\x01" * 16, span_id=1, name="ntt", start_ns=5, end_ns=9)]))
    tl = read_trace(p)
    assert tl.n == 1 and tl.lanes == [Lane("h", -1, -1, "span:unknown")]


def test_nesting_depth_and_parents(tmp_path):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=1, streams=1, circuits=2, batches=1)
    tl = read_trace(p)
    ph = lambda r: tl.phases[int(tl.phase[r])]  # noqa: E731
    for r in range(tl.n):
        name = ph(r)
        if name == "prove":
            assert tl.depth[r] == 0 and tl.parent[r] == -1
        elif name in ("intt_abc", "coset_ntt", "h_eval", "intt_h"):
            assert tl.depth[r] == 2 and ph(tl.parent[r]) == "ntt"
            assert tl.path(r) == f"prove/ntt/{name}"
            p_row = tl.parent[r]
            assert tl.start[p_row] <= tl.start[r] and tl.end[r] <= tl.end[p_row]
        else:
            assert tl.depth[r] == 1 and ph(tl.parent[r]) == "prove"
    ntt = np.flatnonzero(tl.phase == tl.phase_id("ntt"))
    assert [len(tl.children(int(r))) for r in ntt] == [4, 4]


def test_kind_column_from_attribute_or_phase_vocabulary(tmp_path):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=1, circuits=1, batches=1)
    tl = read_trace(p)
    kind_of = {tl.phases[int(tl.phase[r])]: int(tl.kind[r]) for r in range(tl.n)}
    assert kind_of["sync"] == KIND_CODES["sync"]  # from gputrace.kind
    assert kind_of["msm_h"] == KIND_CODES["gpu"] and kind_of["pin"] == KIND_CODES["pin"]
    assert kind_of["synthesis"] == KIND_CODES["host"]


def test_collector_file_exporter_fixture():
    tl = read_trace(DATA / "otel_collector_fileexporter.jsonl")
    assert tl.n == 5
    by_name = {tl.name_of(r): tl.span(r) for r in range(tl.n)}
    msm = by_name["msm_h"]
    assert msm["lane_obj"] == Lane("gpu-node-1", 31337, 1, "stream:2")
    assert msm["status"] == 2 and msm["attrs"] == {"status.message": "kernel timeout"}
    assert msm["circuit"] == 3  # intValue written as a JSON number
    assert msm["gpu_end"] - msm["gpu_start"] == 79_980_000
    assert msm["trace_id"] == "5b8efff798038103d269b633813fc60c"  # upper-case hex normalised
    prove = by_name["prove"]
    assert prove["parent"] == -1 and prove["lane_obj"].name == "thread:main"  # parentSpanId "" = root
    assert tl.name_of(msm["parent"]) == "prove" and msm["depth"] == 1
    syn = by_name["synthesis"]
    assert syn["status"] == 1 and syn["lane_obj"].name == "thread:140001"  # enum names accepted
    assert syn["attrs"] == {"thread.id": 140001, "code.function": "synthesize"}
    pin = by_name["pin"]
    assert pin["lane_obj"] == Lane("gpu-node-2", 4040, -1, "thread:main") and pin["kind_name"] == "pin"
    assert pin["nbytes"] == 1 << 30 and tl.name_of(pin["parent"]) == "prove"  # parent on another host
    up = by_name["upload"]
    assert up["lane_obj"] == Lane("unknown", -1, -1, "span:sidecar")
    assert up["attrs"] == {"http.status_code": 200, "ratio": 0.25, "retried": False}
    assert len(tl.resources) == 3 and len(tl.trace_ids) == 2


def test_official_json_file_exporter_fixture():
    # Written by opentelemetry-exporter-otlp-json-file 0.66b1 (tests/data/otel_official_exporter_gen.py).
    tl = read_trace(DATA / "otel_official_exporter.jsonl")
    assert tl.n == 8
    assert {ln.host for ln in tl.lanes} == {"node-a", "node-b"}
    for host, pid in (("node-a", 4242), ("node-b", 777)):
        rows = [r for r in range(tl.n) if tl.lanes[int(tl.lane[r])].host == host]
        names = {tl.name_of(r): r for r in rows}
        assert set(names) == {"prove", "ntt", "coset_ntt", "synthesis"}
        ntt = tl.span(names["ntt"])
        assert ntt["lane_obj"] == Lane(host, pid, 0, "stream:1") and ntt["nbytes"] == 1 << 20
        assert ntt["attrs"] == {"ratio": 0.5, "ok": True, "tags": ["a", "b"], "sizes": [1, 2]}
        assert tl.path(names["coset_ntt"]) == "prove/ntt/coset_ntt"
        assert tl.span(names["synthesis"])["status"] == 2
        assert tl.span(names["synthesis"])["attrs"] == {"status.message": "boom"}
        assert tl.span(names["prove"])["lane_obj"].name == "span:official"


def test_golden_writer_file_reads_back():
    tl = read_trace(DATA / "otel_gputrace_golden.jsonl")
    assert tl.n == 3
    r = [r for r in range(tl.n) if tl.name_of(r).startswith("coset")][0]
    d = tl.span(r)
    assert d["name"] == 'coset_ntt "q" é' and d["depth"] == 2 and d["status"] == 2
    assert d["attrs"]["raw"] == b"\x00\xff" and d["attrs"]["nested"] == {"k": 1.5} and d["attrs"]["none"] is None


def test_same_span_id_in_two_traces_links_within_its_trace(tmp_path):
    t1, t2 = b"\x01" * 16, b"\x02" * 16
    spans1 = [dict(trace_id=t1, span_id=1, name="prove", start_ns=0, end_ns=100),
              dict(trace_id=t1, span_id=2, parent_span_id=1, name="ntt", start_ns=10, end_ns=20)]
    spans2 = [dict(trace_id=t2, span_id=1, name="prove", start_ns=200, end_ns=300),
              dict(trace_id=t2, span_id=2, parent_span_id=1, name="ntt", start_ns=210, end_ns=220),
              dict(trace_id=t2, span_id=3, parent_span_id=3, name="sync", start_ns=230, end_ns=240)]
    p = tmp_path / "t.jsonl"
    p.write_bytes(encode_request({}, spans2) + b"\n" + encode_request({}, spans1) + b"\n")
    tl = read_trace(p)
    for r in range(tl.n):
        d = tl.span(r)
        if d["name"] == "ntt":
            assert tl.span(d["parent"])["trace"] == d["trace"] and tl.name_of(d["parent"]) == "prove"
        if d["name"] == "sync":
            assert d["parent"] == -1 and d["depth"] == 0  # names itself as parent


def test_a_negative_device_keeps_its_own_host(tmp_path):
    # The lane key once packed device + 1 into 16 bits of one int64: a device below -1 spilled into the resource
    # bits and the span was given another resource's host (Python's negative indexing).
    from gputrace.timeline.formats.otlp_jsonl import _columns

    t = b"\x01" * 16
    lines = [encode_request({"host.name": h}, [dict(trace_id=t, span_id=i + 1, name="ntt", start_ns=i, end_ns=i + 1,
                                                    attributes={"gputrace.device": dev, "gputrace.lane": "stream:0"})])
             for i, (h, dev) in enumerate([("a", 0), ("b", -5), ("c", 3)])]
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    for dense in (_columns._DENSE_LANES, 0):  # the lookup table and the packed keys
        _columns._DENSE_LANES = dense
        try:
            for fast in (True, False):
                from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
                from gputrace.timeline.formats.otlp_jsonl._feed import load_file_into

                ld = TraceLoader(fast=fast)
                load_file_into(ld, p)
                tl = ld.timeline()
                got = sorted((tl.lanes[int(tl.lane[r])].host, tl.lanes[int(tl.lane[r])].device, int(tl.device[r]))
                             for r in range(tl.n))
                assert got == [("a", 0, 0), ("b", -5, -5), ("c", 3, 3)]
        finally:
            _columns._DENSE_LANES = 1 << 16


def test_blank_lines_and_crlf_are_ignored(tmp_path):
    line = encode_request({}, [dict(trace_id=b"\x01" * 16, span_id=1, name="x", start_ns=1, end_ns=2)])
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\n\r\n" + line + b"\r\n\n")
    assert read_trace(p).n == 1
