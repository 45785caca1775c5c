"""Bad trace files: exact error texts naming file, line and field; lenient loading and its report."""

from __future__ import annotations

import gzip
import json

import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline import LoadReport, TraceFormatError, read_trace

SPANS = [dict(trace_id=b"\x01" * 16, span_id=i + 1, name="ntt", start_ns=100 + i, end_ns=200 + i,
              attributes={"gputrace.device": 0, "gputrace.lane": "stream:0"}) for i in range(5)]
LINE = encode_request({"host.name": "h"}, SPANS)
SP = "resourceSpans[0].scopeSpans[0].spans"


def _mutate(fn) -> bytes:
    obj = json.loads(LINE)
    fn(obj["resourceSpans"][0]["scopeSpans"][0]["spans"])
    return json.dumps(obj).encode()


def _write(tmp_path, data: bytes, name="run.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def _set(i, k, v):
    def f(spans):
        spans[i][k] = v
    return f


CASES = [
    ("bad int", _mutate(_set(3, "startTimeUnixNano", "abc")),
     f"{SP}[3].startTimeUnixNano: expected integer string, got 'abc'"),
    ("wrong type", _mutate(_set(1, "name", 7)), f"{SP}[1].name: expected string, got 7"),
    ("bad span id", _mutate(_set(2, "spanId", "xyz")), f"{SP}[2].spanId: expected 16 hex characters, got 'xyz'"),
    ("zero span id", _mutate(_set(2, "spanId", "0" * 16)), f"{SP}[2].spanId: an all-zero span id is invalid"),
    ("bad trace id", _mutate(_set(0, "traceId", "abc")),
     f"{SP}[0].traceId: expected 32 hex characters (not all zero), got 'abc'"),
    ("missing", _mutate(lambda s: s[4].pop("endTimeUnixNano")), f"{SP}[4].endTimeUnixNano: missing required field"),
    ("end before start", _mutate(_set(1, "endTimeUnixNano", "50")),
     f"{SP}[1].endTimeUnixNano: end 50 is before startTimeUnixNano 101"),
    ("attr type", _mutate(_set(1, "attributes", [{"key": "gputrace.device", "value": {"stringValue": "zero"}}])),
     f"{SP}[1].attributes[0].value: expected intValue, got stringValue 'zero' (gputrace.device)"),
    ("bad status", _mutate(_set(0, "status", {"code": 9})), f"{SP}[0].status.code: expected 0, 1 or 2 (or a STATUS_CODE_* name), got 9"),
    ("int64 overflow", _mutate(_set(0, "startTimeUnixNano", str(1 << 64))),
     f"{SP}[0].startTimeUnixNano: {1 << 64} is outside the int64 nanosecond range"),
]


@pytest.mark.parametrize("label,bad,field_msg", CASES, ids=[c[0] for c in CASES])
def test_corrupt_field_names_file_line_and_field(tmp_path, label, bad, field_msg):
    p = _write(tmp_path, LINE + b"\n" + bad + b"\n" + LINE + b"\n")
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    e = ei.value
    assert str(e) == f"{p}:2: field {field_msg}"
    assert (e.path, e.line) == (p, 2) and e.field == field_msg.split(":")[0]
    # Lenient: only the bad span is dropped; the line's other spans and the other lines load.
    tl = read_trace(p, lenient=True)
    rep = tl.load_report
    assert tl.n == 14 and rep.spans == 14
    assert (rep.lines, rep.lines_skipped, rep.spans_skipped) == (3, 0, 1)
    assert str(rep.problems[0]) == str(e)


@pytest.mark.parametrize(
    "data,message,reason",
    [
        (LINE + b"\n" + LINE[:60], ":2: truncated last line (the file ends inside a JSON object; is a writer still running?)", "truncated line"),
        (LINE + b"\n" + LINE[:60] + b"\n" + LINE, ":2: truncated line (the JSON object is incomplete)", "truncated line"),
        (LINE + b"\nhello world\n", ":2: not JSON (JSON is malformed: invalid character (byte 0))", "not JSON"),
        (LINE + b"\n[1, 2]\n", ":2: expected a JSON object (an OTLP ExportTraceServiceRequest), got array", "not OTLP"),
        (LINE + b'\n{"traceEvents": []}\n', ":2: not an OTLP trace request (no resourceSpans key)", "not OTLP"),
        (LINE + b'\n{"resourceSpans": {}}\n', ":2: field resourceSpans: expected array, got {}", "bad field"),
    ],
    ids=["truncated-last", "truncated-middle", "not-json", "array", "chrome-trace", "wrong-container"],
)
def test_bad_lines(tmp_path, data, message, reason):
    p = _write(tmp_path, data)
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    assert str(ei.value) == p + message
    tl = read_trace(p, lenient=True)
    rep: LoadReport = tl.load_report
    assert tl.n == 5 * (data.count(LINE) - (1 if data.endswith(LINE[:60]) else 0)) or tl.n >= 5
    assert rep.lines_skipped == 1 and rep.reasons == {reason: 1}
    assert rep.summary() == f"1 line skipped: {reason} x1 (first: {p}:2)"


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "empty file (no trace data)"),
        (b"\n  \n\n", "empty file (no trace data)"),
        (b"\x00\x01\x02\x03binary", "not a text file (binary data: NUL byte at offset 0); expected OTLP JSON Lines"),
        (gzip.compress(LINE + b"\n")[:-12], "corrupt or truncated gzip stream (Compressed file ended before the end-of-stream marker was reached)"),
    ],
    ids=["empty", "blank", "binary", "truncated-gzip"],
)
def test_bad_files(tmp_path, data, message):
    p = _write(tmp_path, data)
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    assert str(ei.value) == f"{p}: {message}" and ei.value.line is None
    tl = read_trace(p, lenient=True)
    assert tl.n == 0 and not tl.load_report.ok


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "nope.jsonl")


def test_lenient_report_counts_and_summary(tmp_path):
    bad_span = _mutate(_set(2, "spanId", "xyz"))
    p = _write(tmp_path, b"\n".join([LINE, b"garbage", bad_span, b"{oops", LINE, bad_span, LINE[:30]]))
    tl = read_trace(p, lenient=True)
    rep = tl.load_report
    assert tl.n == 5 + 4 + 5 + 4
    assert rep.lines == 7 and rep.lines_skipped == 3 and rep.spans_skipped == 2
    assert rep.reasons == {"not JSON": 2, "bad field": 2, "truncated line": 1}
    assert rep.summary() == (f"3 lines skipped, 2 spans skipped: not JSON x2 (first: {p}:2); "
                             f"bad field x2 (first: {p}:3); truncated line x1 (first: {p}:7)")
    assert rep.details(2) == [f"{p}:2: not JSON (JSON is malformed: invalid character (byte 0))",
                              f"{p}:3: field {SP}[2].spanId: expected 16 hex characters, got 'xyz'"]


def test_file_that_is_one_pretty_printed_request(tmp_path):
    p = _write(tmp_path, json.dumps(json.loads(LINE), indent=2).encode())
    assert read_trace(p).n == 5


def test_trace_text_is_never_evaluated(tmp_path):
    p = _write(tmp_path, b"__import__('os').system('touch " + str(tmp_path / "pwned").encode() + b"')\n")
    with pytest.raises(TraceFormatError, match="not JSON"):
        read_trace(p)
    assert not (tmp_path / "pwned").exists()


def test_error_pickles_and_keeps_fields():
    import pickle

    e = TraceFormatError("a.jsonl", 3, "x.y", "bad", "bad field")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.path, e2.line, e2.field, e2.message, e2.reason, str(e2)) == ("a.jsonl", 3, "x.y", "bad", "bad field", "a.jsonl:3: field x.y: bad")


def test_short_or_base64_parent_ids(tmp_path):
    import base64

    good_b64 = base64.b64encode((3).to_bytes(8, "big")).decode()
    parent = _mutate(lambda s: (s[1].__setitem__("parentSpanId", good_b64), s[2].__setitem__("parentSpanId", "")))
    tl = read_trace(_write(tmp_path, parent))
    assert tl.n == 5 and int(tl.parent_span_id[1]) == 3 and int(tl.parent_span_id[2]) == 0
    bad = _mutate(_set(1, "parentSpanId", "abc"))
    p = _write(tmp_path, bad, "bad.jsonl")
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    assert str(ei.value) == f"{p}:1: field {SP}[1].parentSpanId: expected 16 hex characters, got 'abc'"


def test_load_reports_absorb_counts_and_keep_at_most_max_problems():
    from gputrace.timeline.errors import MAX_PROBLEMS, LoadReport, TraceFormatError

    def report(name, n):
        r = LoadReport(files=[name], lines=10, spans=20)
        for i in range(n):
            r.add(TraceFormatError(name, i + 1, None, "bad", "bad line"), line_skipped=True)
        return r

    total = LoadReport()
    total.absorb(report("a", MAX_PROBLEMS - 1))
    total.absorb(report("b", 5), files=True)
    assert total.files == ["a", "b"] and total.lines == 20 and total.spans == 40
    assert total.lines_skipped == MAX_PROBLEMS + 4 and total.reasons["bad line"] == MAX_PROBLEMS + 4
    assert len(total.problems) == MAX_PROBLEMS and total.problems[-1].path == "b"
    quiet = LoadReport(files=["x"])
    quiet.absorb(report("c", 1), files=False)
    assert quiet.files == ["x"] and quiet.lines_skipped == 1
