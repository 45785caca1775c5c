"""Hostile OTLP input: decoding is bounded (nesting depth) with clear errors naming file and line."""

from __future__ import annotations

import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline import TraceFormatError, iter_load, read_trace
from gputrace.otlp.decode import MAX_VALUE_DEPTH


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


def test_deep_line_is_a_clear_error_when_a_library_raised_the_recursion_limit(tmp_path):
    """py_ecc (imported by this suite) sets the recursion limit to 100,000: msgspec's guard then no
    longer protects the C stack before Python 3.12. Run in a child so a regression fails, not crashes."""
    import subprocess
    import sys

    p = _file(tmp_path, _deep_line(20000))
    code = (
        "import sys; sys.setrecursionlimit(100000)\n"
        "from gputrace.timeline import TraceFormatError, iter_load, read_trace\n"
        f"p = {str(p)!r}\n"
        "try:\n    read_trace(p)\nexcept TraceFormatError as e:\n    print('ERR', e)\n"
        "print('LENIENT', read_trace(p, lenient=True).n, list(iter_load(p, lenient=True))[-1].timeline.n)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"ERR {p}:1: JSON nested too deeply" in out.stdout
    assert "LENIENT 1 1" in out.stdout


def test_too_deep_ignores_brackets_inside_strings():
    import sys

    from gputrace.json_depth import too_deep

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100000)
    try:
        assert not too_deep(b'{"a":"' + b"[" * 5000 + b'"}', limit=10)
        assert not too_deep(b'{"a":"\\"' + b"[" * 5000 + b'"}', limit=10)
        assert too_deep(b"[" * 20 + b"]" * 20, limit=10) is (sys.version_info < (3, 12))
    finally:
        sys.setrecursionlimit(old)
