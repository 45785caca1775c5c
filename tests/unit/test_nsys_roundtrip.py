"""nsys report -> OTLP JSONL (gputrace.timeline.formats.otlp_jsonl.write) -> read_trace gives the same Timeline;
read_any opens every format by content."""

from __future__ import annotations

import gzip

import numpy as np
import orjson

from gputrace.timeline.load import read_any, sniff
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.timeline import read_trace
from gputrace.timeline.formats.chrome.export import write_chrome
from gputrace.timeline.formats.nsys.read import read_nsys
from test_nsys import EPOCH, PID, build_report


def _by_name(tl):
    return {tl.name_of(r): r for r in range(tl.n)}


def test_nsys_to_otlp_jsonl_reads_back_identically(tmp_path):
    tl = read_nsys(build_report(tmp_path / "prove.sqlite"))
    out = tmp_path / "prove.jsonl"
    lines = write_otlp_jsonl(tl, out, max_spans=4)
    text = out.read_bytes().splitlines()
    assert lines == len(text) >= 3  # chunked: at most 4 spans per line
    for line in text:
        req = orjson.loads(line)
        (rs,) = req["resourceSpans"]
        spans = rs["scopeSpans"][0]["spans"]
        assert len(spans) <= 4
        for s in spans:  # OTLP JSON: hex ids, string int64s
            assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16
            assert s["startTimeUnixNano"].isdigit()
    back = read_trace(out)
    assert back.n == tl.n and sorted(back.lanes, key=str) == sorted(tl.lanes, key=str)
    a, b = _by_name(tl), _by_name(back)
    assert set(a) == set(b)
    for name, r in a.items():
        q = b[name]
        assert (back.start[q], back.end[q]) == (tl.start[r], tl.end[r]), name
        assert (back.gpu_start[q], back.gpu_end[q]) == (tl.gpu_start[r], tl.gpu_end[r]), name
        assert back.lanes[back.lane[q]] == tl.lanes[tl.lane[r]], name
        assert back.kind[q] == tl.kind[r] and back.nbytes[q] == tl.nbytes[r], name
        pa, pb = int(tl.parent[r]), int(back.parent[q])
        assert (pa < 0 and pb < 0) or tl.name_of(pa) == back.name_of(pb), name
    k = b["ntt_kernel"]
    assert back.attrs[k]["cuda.kernel.name"] == "void ntt_kernel<256>(Fr*, int)"
    assert back.attrs[k]["cuda.grid"] == [1024, 1, 1]
    assert back.resources[back.resource[k]]["process.pid"] == PID
    assert int(back.start[b["prove"]]) == EPOCH + 1_000


def test_read_any_dispatches_on_content(tmp_path):
    nsys = build_report(tmp_path / "r.sqlite")
    tl = read_nsys(nsys)
    otlp = tmp_path / "t.jsonl"
    write_otlp_jsonl(tl, otlp)
    chrome = tmp_path / "c.data"  # the name says nothing; the content decides
    write_chrome(tl, chrome)
    gz = tmp_path / "c2.json.gz"
    gz.write_bytes(gzip.compress(chrome.read_bytes()))
    assert [sniff(p) for p in (nsys, otlp, chrome, gz)] == ["nsys", "otlp", "chrome", "chrome"]
    assert read_any(nsys).n == tl.n
    assert read_any(otlp).n == tl.n
    assert read_any(chrome).n == tl.n
    merged = read_any([nsys, otlp])
    assert merged.n == 2 * tl.n
    assert np.array_equal(np.sort(read_any(gz).start), np.sort(tl.start))
