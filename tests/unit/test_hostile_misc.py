"""Smaller hostile cases: parent cycles, what --lenient skipped, an OTLP collector that is down or a
black hole (shutdown stays within its timeout and says why spans were lost)."""

from __future__ import annotations

import socket
import time

import orjson
import pytest

from gputrace.timeline import read_trace
from gputrace.trace import configure, phase, shutdown
from gputrace.trace.sinks.otlp import OtlpSink


def _span(sid, parent, name, start, end):
    d = {"traceId": "ab" * 16, "spanId": f"{sid:016x}", "name": name, "startTimeUnixNano": str(start),
         "endTimeUnixNano": str(end)}
    if parent:
        d["parentSpanId"] = f"{parent:016x}"
    return d


def _line(spans):
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]})


def test_parent_cycles_are_broken(tmp_path):
    p = tmp_path / "cycle.jsonl"
    # 1 -> 2 -> 3 -> 1 (a cycle), 4 child of 2, and a chain of 100 ordinary levels
    spans = [_span(1, 3, "a", 10, 100), _span(2, 1, "b", 20, 90), _span(3, 2, "c", 30, 80), _span(4, 2, "d", 40, 50)]
    spans += [_span(100 + i, 100 + i - 1 if i else 0, f"l{i}", 1000 + i, 5000 - i) for i in range(100)]
    p.write_bytes(_line(spans) + b"\n")
    tl = read_trace(p)
    rows = {tl.name_of(r): r for r in range(tl.n)}
    par, depth = tl.cols["parent"], tl.cols["depth"]
    assert int(par[rows["a"]]) == -1  # the earliest start of the cycle became its root
    assert [tl.name_of(r) for r in tl.parent_chain(rows["c"])] == ["b", "a"]
    assert (int(depth[rows["a"]]), int(depth[rows["b"]]), int(depth[rows["c"]]), int(depth[rows["d"]])) == (0, 1, 2, 2)
    assert tl.path(rows["d"]) == "a/b/d"
    assert int(depth[rows["l99"]]) == 99  # long acyclic chains keep their exact depth


def test_lenient_report_says_what_it_skipped(tmp_path, capsys):
    from gputrace.commands._inputs import read_inputs

    p = tmp_path / "damaged.jsonl"
    p.write_bytes(_line([_span(1, 0, "ok", 1, 2)]) + b"\n{not json at all\n" + _line([_span(2, 0, "ok2", 3, 4)]) + b"\n")
    tl = read_inputs("report", [str(p)], True, "empty")
    assert tl is not None and tl.n == 2
    err = capsys.readouterr().err
    assert "--lenient skipped" in err and "1 line" in err


def _black_hole():
    """A port that accepts TCP connections (the kernel's backlog) but never reads or answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


@pytest.mark.slow
def test_http_exporter_close_against_a_black_hole_stays_within_its_timeout():
    hole = _black_hole()
    try:
        sink = OtlpSink("http", f"http://127.0.0.1:{hole.getsockname()[1]}/v1/traces", timeout_s=30,
                        close_timeout_s=1.0)
        sink.start({"service.name": "t"})
        sink.export([{"trace_id": 1, "span_id": i + 1, "name": "x", "start_ns": 1, "end_ns": 2} for i in range(3)])
        time.sleep(0.3)  # the worker is now blocked waiting for an answer
        t0 = time.monotonic()
        sink.close()
        took = time.monotonic() - t0
        assert took <= 1.0 + 0.5, took  # (was 2.1 s: 1.1 s past the timeout)
        s = sink.summary()
        assert s.exported == 0 and s.dropped == 3
    finally:
        hole.close()


@pytest.mark.slow
def test_collector_down_is_reported_with_the_refused_connection(monkeypatch):
    from gputrace.commands.prove import trace_delivery_warnings

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: connections are refused
    configure(otlp={"protocol": "http", "endpoint": f"http://127.0.0.1:{port}/v1/traces", "close_timeout_s": 1.5},
              collect_gpu_info=False, flush_interval_s=0.05)
    with phase("prove"):
        pass
    time.sleep(0.3)
    s = shutdown()
    (sink,) = s.sinks
    assert sink.dropped == 1 and sink.exported == 0
    assert any("refused" in e for e in sink.errors) and not any("already shutdown" in e for e in sink.errors)
    (warning,) = trace_delivery_warnings()
    assert warning.startswith("warning: otlp-http") and "1 of 1 spans not delivered" in warning and "refused" in warning
