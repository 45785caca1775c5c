"""Hostile OTLP input: decoding is bounded (nesting depth) with clear errors naming file and line."""

from __future__ import annotations

import pytest

from gputrace.otlp_json import encode_request
from gputrace.timeline import TraceFormatError, iter_load, read_trace
from gputrace.timeline.otlp_schema import MAX_VALUE_DEPTH


def _span(i: int, attrs=None) -> dict:
    return dict(trace_id=b"\x01" * 16, span_id=i, name="a", start_ns=1, end_ns=2, attributes=attrs or {})


def _deep_line(depth: int) -> bytes:
    """One span whose attribute value nests ``depth`` kvlists (built as text: no encoder recursion)."""
    line = encode_request({"host.name": "h"}, [_span(1, {"deep": "PLACEHOLDER"})])
    value = b'{"kvlistValue":{"values":[{"key":"k","value":' * depth + b'{"stringValue":"x"}' + b"}]}}" * depth
    out = line.replace(b'{"stringValue":"PLACEHOLDER"}', value)
    assert out != line
    return out


def _file(tmp_path, bad: bytes):
    p = tmp_path / "deep.jsonl"
    p.write_bytes(bad + b"\n" + encode_request({"host.name": "h"}, [_span(2)]) + b"\n")
    return p


def test_value_nesting_within_the_limit_is_read(tmp_path):
    tl = read_trace(_file(tmp_path, _deep_line(MAX_VALUE_DEPTH - 2)))
    assert tl.n == 2 and "deep" in tl.attrs[0] | tl.attrs.get(1, {})


def test_value_nested_past_the_limit_names_the_field(tmp_path):
    p = _file(tmp_path, _deep_line(MAX_VALUE_DEPTH + 5))
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    assert str(ei.value) == (f"{p}:1: field resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value: "
                             f"attribute value nested deeper than {MAX_VALUE_DEPTH} levels")
    tl = read_trace(p, lenient=True)
    assert tl.n == 1 and tl.load_report.spans_skipped == 1


@pytest.mark.parametrize("depth", [3000, 20000])
def test_line_nested_past_the_decoder_is_one_clear_error_not_a_recursion_error(tmp_path, depth):
    p = _file(tmp_path, _deep_line(depth))
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p)
    assert str(ei.value).startswith(f"{p}:1: JSON nested too deeply")
    tl = read_trace(p, lenient=True)
    assert tl.n == 1 and tl.load_report.lines_skipped == 1
    assert list(iter_load(p, lenient=True))[-1].timeline.n == 1
