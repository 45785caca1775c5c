"""The reader's fast path (raw attributes parsed with numpy) against the general decoder: same
Timeline, same errors and reports, and a fallback for every layout the fast parser declines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline import TraceFormatError, read_trace
from gputrace.timeline.formats.otlp_jsonl._fast import parse_attributes
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.timeline.formats.otlp_jsonl._feed import load_file_into
from gputrace.testing.synthetic import write_synthetic
from tests.unit.timeline_equality import assert_same_timeline

DATA = Path(__file__).resolve().parents[1] / "data"
TID = bytes(range(1, 17))


def _load(paths, fast: bool, lenient: bool = False, batch_spans: int = 32768):
    loader = TraceLoader(lenient=lenient, batch_spans=batch_spans, fast=fast)
    for p in paths:
        load_file_into(loader, p)
    return loader.timeline(), loader


def _same(a, b) -> None:
    assert_same_timeline(a, b)
    ra, rb = a.load_report, b.load_report
    assert (ra.lines, ra.spans, ra.lines_skipped, ra.spans_skipped) == (rb.lines, rb.spans, rb.lines_skipped, rb.spans_skipped)
    assert ra.reasons == rb.reasons
    assert [str(e) for e in ra.problems] == [str(e) for e in rb.problems]


def _both(paths, lenient=False, batch_spans=32768):
    fast, fl = _load(paths, True, lenient, batch_spans)
    gen, gl = _load(paths, False, lenient, batch_spans)
    _same(fast, gen)
    assert gl.fast_lines == 0
    return fast, fl


def _span(i, attrs, parent=None, name="ntt"):
    return dict(trace_id=TID, span_id=i, parent_span_id=parent, name=name, start_ns=1_767_225_600_000_000_000 + i * 10,
                end_ns=1_767_225_600_000_000_000 + i * 10 + 5, attributes=attrs)


def _write(path, lines) -> Path:
    path.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    return path


RES = {"service.name": "prover", "host.name": "h", "process.pid": 7}


def test_synthetic_trace_is_all_fast_and_identical(tmp_path):
    p = tmp_path / "s.jsonl"
    write_synthetic(p, target_spans=6000, hosts=2, gpus=2, circuits=3, spans_per_line=97, shuffle_lines=True)
    tl, loader = _both([p], batch_spans=1000)  # many batches and groups
    assert loader.fast_lines == loader.report.lines > 0
    assert tl.n == 6000


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.jsonl")))
def test_fixture_files_identical(name):
    _both([DATA / name])
    _both([DATA / name], lenient=True)


def test_foreign_layouts_fall_back_to_the_general_decoder(tmp_path):
    # The Collector writes some integers unquoted; the golden line has doubles, arrays, bytes.
    _, loader = _both([DATA / "otel_collector_fileexporter.jsonl"])
    assert loader.fast_lines < loader.report.lines
    _, loader = _both([DATA / "otel_gputrace_golden.jsonl"])
    assert loader.fast_lines == 0


def test_every_value_kind_and_edge_integer(tmp_path):
    i64 = (1 << 63) - 1
    spans = [
        _span(1, {"gputrace.device": 0, "gputrace.lane": "stream:1", "gputrace.gpu.start_ns": i64, "gputrace.gpu.end_ns": -i64 - 1}),
        _span(2, {"gputrace.device": -32768, "gputrace.circuit": -(1 << 31), "gputrace.batch": (1 << 31) - 1,
                  "gputrace.bytes": 0, "gputrace.kind": "sync", "n": -5, "z": 0, "s": "", "u": "é \u2603 \U0001F600"}, parent=1),
        _span(3, {"thread.name": "worker-1", "x": 1234567890123456789, "longer.key.than.twenty.four.bytes": "v"}),
        _span(4, {}, name="msm_h"),
        _span(5, {"gputrace.lane": "thread:a \"quoted\" \\ name"}),  # escapes: general path
        _span(6, {"gputrace.device": 1, "ratio": 0.5, "flag": True}),  # other value types: general path
        _span(7, {"gputrace.kind": "gpu", "gputrace.lane": "stream:0"}),
    ]
    lines = [encode_request(RES, spans[:4]), encode_request(RES, spans[4:5]), encode_request(RES, spans[5:6]),
             encode_request(RES, spans[6:])]
    p = _write(tmp_path / "e.jsonl", lines)
    tl, loader = _both([p])
    assert loader.fast_lines == 2
    r = {int(tl.span_id[k]): k for k in range(tl.n)}
    assert tl.gpu_start[r[1]] == i64 and tl.gpu_end[r[1]] == -i64 - 1
    assert tl.device[r[2]] == -32768 and tl.circuit[r[2]] == -(1 << 31)
    assert tl.attrs[r[2]] == {"n": -5, "z": 0, "s": "", "u": "é \u2603 \U0001F600"}
    assert tl.lanes[tl.lane[r[3]]].name == "thread:worker-1"
    assert tl.attrs[r[3]]["x"] == 1234567890123456789


@pytest.mark.parametrize("attrs_json", [
    '[{"key":"gputrace.device","value":{"intValue":"40000"}}]',            # outside int16: error
    '[{"key":"gputrace.device","value":{"stringValue":"0"}}]',             # wrong type (digits)
    '[{"key":"gputrace.lane","value":{"intValue":"3"}}]',                  # lane as an int
    '[{"key":"gputrace.device","value":{"intValue":"1"}},{"key":"gputrace.device","value":{"intValue":"2"}}]',
    '[{"key":"a","value":{"intValue":"1"}},{"key":"a","value":{"intValue":"2"}}]',
    '[ {"key":"a","value":{"intValue":"1"}} ]',                            # whitespace
    '[{"key":"a","value":{"intValue":"007"}}]',                            # not an integer string
    '[{"key":"a","value":{"intValue":"99999999999999999999"}}]',           # beyond int64
    '[{"key":"gputrace.gpu.start_ns","value":{"intValue":"9223372036854775808"}}]',
    '[{"key":"a","value":{"intValue":"1e3"}}]',
    '[{"key":"a","value":{"intValue":"-"}}]',
    '[{"key":"a","value":{"intValue":"12a"}}]',
    '[{"key":"a","value":{"intValue":3}}]',                                # unquoted
    '[{"key":"a","value":{}}]',
    '[{"value":{"intValue":"1"},"key":"a"}]',                              # member order
    '[{"key":"a","value":{"stringValue":"x","intValue":"1"}}]',
    '[{"key":"gputrace.kind","value":{"stringValue":"weird"}}]',
    '[1,{"key":"a","value":{"intValue":"1"}}]',                           # something before the first
    '[{"key":"a","value":{"intValue":"1"}},2]',                           # ... after the last
    '[{"key":"a","value":{"intValue":"1"}},{"key":"b","value":{"intValue":"2"}}]',
    '[{"key":"a","value":{"intValue":"1"}},  {"key":"b","value":{"intValue":"2"}}]',
    '[{"key":"a","value":{"intValue":"1"}},null,{"key":"b","value":{"intValue":"2"}}]',
    '{}',
    '[]',
])
def test_hand_written_attribute_layouts(tmp_path, attrs_json):
    good = encode_request(RES, [_span(1, {"gputrace.device": 0, "gputrace.lane": "stream:0"})]).decode()
    odd = good.replace('"attributes":[{"key":"gputrace.device","value":{"intValue":"0"}},'
                       '{"key":"gputrace.lane","value":{"stringValue":"stream:0"}}]', '"attributes":' + attrs_json)
    odd = odd.replace('"spanId":"0000000000000001"', '"spanId":"0000000000000002"')
    assert odd != good
    p = _write(tmp_path / "h.jsonl", [good, odd, good.replace('"spanId":"0000000000000001"', '"spanId":"0000000000000003"')])
    for lenient in (False, True):
        try:
            _both([p], lenient=lenient)
        except TraceFormatError:  # strict: both paths must fail with the same error
            with pytest.raises(TraceFormatError) as ef:
                _load([p], True)
            with pytest.raises(TraceFormatError) as eg:
                _load([p], False)
            assert str(ef.value) == str(eg.value)


def _check_both(p):
    """Same Timeline (lenient) and same first error (strict) through both paths."""
    _both([p], lenient=True)
    try:
        _both([p])
    except TraceFormatError:
        msgs = []
        for fast in (True, False):
            with pytest.raises(TraceFormatError) as e:
                _load([p], fast)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


_RES_JSON = '"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"prover"}},' \
            '{"key":"host.name","value":{"stringValue":"h"}},{"key":"process.pid","value":{"intValue":"7"}}]}'


@pytest.mark.parametrize("resource_json", [
    _RES_JSON,
    '"resource":{"attributes":[{"key":"host.name","value":{"stringValue":"h"}},'      # other order, same attributes
    '{"key":"process.pid","value":{"intValue":"7"}},{"key":"service.name","value":{"stringValue":"prover"}}]}',
    '"resource": { "attributes" : [ ] }',                                              # whitespace, empty
    '"resource":{}',
    '"resource":null',                                                                  # invalid: error
    '"resource":{"attributes":[{"key":1}]}',                                            # invalid key
    '"resource":{"attributes":[{"key":"host.name","value":{"intValue":"x"}}]}',         # invalid value
    '"resource":{"attributes":[{"key":"a","value":{"doubleValue":0.5}},{"key":"b","value":{"bytesValue":"AAE="}},'
    '{"key":"c","value":{"arrayValue":{"values":[{"boolValue":true}]}}},{"key":"process.pid","value":{"stringValue":"7"}}]}',
    '"resource":{"attributes":[{"key":"host.name","value":{"stringValue":"h\\u00e9\\"x"}}],"droppedAttributesCount":0}',
    '"resource":[]',
])
def test_raw_resources_match_the_general_path(tmp_path, resource_json):
    good = encode_request(RES, [_span(1, {"gputrace.lane": "stream:0"})]).decode()
    assert _RES_JSON in good  # the writer's layout this test edits
    lines = [good]
    for i in range(2, 5):  # the odd resource on several lines (cache hits), between good ones
        ln = good.replace('"spanId":"0000000000000001"', f'"spanId":"000000000000000{i}"')
        lines.append(ln.replace(_RES_JSON, resource_json) if i != 3 else ln)
    lines.append(good.replace(_RES_JSON, resource_json).replace('"spanId":"0000000000000001"', '"spanId":"0000000000000009"'))
    p = _write(tmp_path / "r.jsonl", lines)
    _check_both(p)
    tl, _ = _load([p], True, lenient=True)
    assert tl.load_report.lines == 5


def test_resource_cache_eviction_and_many_resources(tmp_path, monkeypatch):
    from gputrace.timeline.formats.otlp_jsonl import _loader

    monkeypatch.setattr(_loader, "RESOURCE_CACHE_SIZE", 2)
    lines = [encode_request({**RES, "process.pid": i % 5, "host.name": f"h{i % 3}"}, [_span(i + 1, {"gputrace.device": i % 2})])
             for i in range(20)]
    p = _write(tmp_path / "m.jsonl", lines)
    tl, loader = _both([p])
    assert loader.fast_lines == 20 and len(tl.resources) == 15


@pytest.mark.parametrize("kind", ['"kind":"SPAN_KIND_SERVER"', '"kind":"1"', '"kind":2', '"kind":1.5', '"kind":null',
                                  '"kind":[1]'])
def test_span_kind_forms_match_the_general_path(tmp_path, kind):
    good = encode_request(RES, [_span(1, {"gputrace.lane": "stream:0"})]).decode()
    assert '"kind":1' in good
    odd = good.replace('"kind":1', kind, 1).replace('"spanId":"0000000000000001"', '"spanId":"0000000000000002"')
    p = _write(tmp_path / "k.jsonl", [good, odd, good.replace('"spanId":"0000000000000001"', '"spanId":"0000000000000003"')])
    _check_both(p)


def test_lines_refused_by_the_lean_decoder_stop_the_fast_path(tmp_path):
    from gputrace.timeline.formats.otlp_jsonl._loader import FAST_GIVE_UP_LINES

    good = encode_request(RES, [_span(1, {"gputrace.lane": "stream:0"})]).decode()
    lines = [good.replace('"kind":1', '"kind":"SPAN_KIND_INTERNAL"').replace('"spanId":"0000000000000001"', f'"spanId":"{i:016x}"')
             for i in range(1, FAST_GIVE_UP_LINES + 10)]
    p = _write(tmp_path / "g.jsonl", lines)
    tl, loader = _both([p])
    assert loader.fast_lines == 0 and not loader.fast and tl.n == len(lines)


def test_error_order_is_kept_across_queued_lines(tmp_path):
    s = [_span(i, {"gputrace.device": 0, "gputrace.lane": "stream:0"}) for i in range(1, 6)]
    bad_decode = encode_request(RES, s[1:2]).replace(b'{"intValue":"0"}', b'{"intValue":"zero"}')  # decoder error
    bad_column = encode_request(RES, s[2:3]).replace(b'"spanId":"0000000000000003"', b'"spanId":"xyz"')  # column error
    lines = [encode_request(RES, s[:1]), bad_column, bad_decode, b"{not json", encode_request(RES, s[3:])]
    p = _write(tmp_path / "o.jsonl", lines)
    for batch in (1, 2, 32768):
        errs = []
        for fast in (True, False):
            with pytest.raises(TraceFormatError) as e:
                _load([p], fast, batch_spans=batch)
            errs.append(str(e.value))
        assert errs[0] == errs[1]
        _both([p], lenient=True, batch_spans=batch)


def test_invalid_utf8_and_control_bytes_fall_back(tmp_path):
    good = encode_request(RES, [_span(1, {"gputrace.lane": "stream:0", "k": "abc"})])
    for bad in (b"\xff\xfe", b"\x01"):
        p = _write(tmp_path / "u.jsonl", [good, good.replace(b"abc", bad).replace(b"0000000000000001", b"0000000000000002")])
        for lenient in (False, True):
            try:
                _both([p], lenient=lenient)
            except TraceFormatError:
                msgs = []
                for fast in (True, False):
                    with pytest.raises(TraceFormatError) as e:
                        _load([p], fast)
                    msgs.append(str(e.value))
                assert msgs[0] == msgs[1]


def test_gzip_and_several_files_and_read_trace(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    write_synthetic(a, target_spans=700, seed=1, spans_per_line=50)
    write_synthetic(tmp_path / "b.jsonl", target_spans=500, seed=2, hosts=2, spans_per_line=33)
    b.write_bytes(gzip.compress((tmp_path / "b.jsonl").read_bytes()))
    _both([a, b])
    _same(read_trace([a, b], workers=1), _load([a, b], False)[0])


def test_parse_attributes_declines_exactly_the_odd_span():
    raws = [b'[{"key":"gputrace.device","value":{"intValue":"3"}}]', b'[]', b'[{"key":"a","value":{"intValue":1}}]',
            b'[{"key":"gputrace.lane","value":{"stringValue":"stream:2"}},{"key":"b","value":{"stringValue":"x"}}]']
    fa = parse_attributes(raws)
    assert fa.ok.tolist() == [True, True, False, True]
    assert fa.indptr.tolist()[:3] == [0, 1, 1]
    assert fa.ival[0] == 3 and fa.code[0] == 0
    k = fa.indptr[3]
    assert fa.sval[k] == "stream:2" and fa.code[k] == 6 and fa.key[k + 1] == "b" and fa.sval[k + 1] == "x"
    json.loads(b"[" + b",".join(raws) + b"]")  # the inputs are valid JSON


def test_iter_load_and_parallel_use_the_fast_path_with_the_same_result(tmp_path, monkeypatch):
    import functools

    from gputrace.timeline.formats.otlp_jsonl import incremental, parallel

    p = tmp_path / "s.jsonl"
    write_synthetic(p, target_spans=3000, gpus=2, circuits=2, spans_per_line=40)
    monkeypatch.setattr(incremental, "_READ", 4096)  # many slices, each flushed

    def progressive():
        last = None
        for prog in incremental.iter_load(p, interval=0.0):
            last = prog
        assert last.done
        return last

    fast = progressive()
    assert fast.loader.fast_lines == fast.report.lines
    monkeypatch.setattr(incremental, "TraceLoader", functools.partial(TraceLoader, fast=False))
    general = progressive()
    assert general.loader.fast_lines == 0
    _same(fast.timeline, general.timeline)
    # Worker processes (fast path inside) against the general path in-process, row by row
    # (trace and phase tables are numbered by batch, so compare their values).
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)
    got = read_trace(p, workers=2)
    want, _ = _load([p], False)
    for k in want.cols:
        if k not in ("trace", "phase"):
            assert np.array_equal(got.cols[k], want.cols[k]), k
    assert [got.trace_ids[t] for t in got.trace] == [want.trace_ids[t] for t in want.trace]
    assert [got.phases[t] for t in got.phase] == [want.phases[t] for t in want.phase]


def test_a_fast_parser_failure_falls_back_to_the_general_path(tmp_path, monkeypatch):
    from gputrace.timeline.formats.otlp_jsonl import _loader

    p = tmp_path / "s.jsonl"
    write_synthetic(p, target_spans=500, spans_per_line=50)
    want, _ = _load([p], False)

    def boom(raws):
        raise IndexError("simulated bug")

    monkeypatch.setattr(_loader, "parse_attributes", boom)
    got, loader = _load([p], True)
    assert loader.fast_lines == 0
    _same(got, want)


def test_nsys_import_with_array_attributes_takes_the_fast_path(tmp_path):
    """Kernels from an Nsight import carry cuda.grid/cuda.block arrays: lifted out of the raw
    attributes, so their lines stay on the fast path, with the general path's Timeline."""
    from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
    from gputrace.timeline.formats.nsys.read import read_nsys
    from tests.unit.test_nsys import build_report

    tl = read_nsys(build_report(tmp_path / "r.sqlite"))
    p = tmp_path / "n.jsonl"
    write_otlp_jsonl(tl, p)
    fast, loader = _both([p])
    assert loader.fast_lines == loader.report.lines  # every line on the fast path
    k = next(r for r, a in fast.attrs.items() if a.get("gputrace.activity") == "kernel")
    assert fast.attrs[k]["cuda.grid"] == [1024, 1, 1] and fast.attrs[k]["cuda.block"] == [256, 1, 1]


@pytest.mark.parametrize("arr", [
    {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "x"}]}},  # mixed: still an array
    {"arrayValue": {"values": [{"intValue": "1", "bogus": 1}]}},
    {"arrayValue": {"values": [{"arrayValue": {"values": [{"intValue": "1"}]}}, {"intValue": "2"}]}},  # nested
    {"kvlistValue": {"values": [{"key": "in", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}}]}},
    {"arrayValue": {"values": []}},
])
def test_array_attributes_match_the_general_path(tmp_path, arr):
    line = json.loads(encode_request({"host.name": "h"}, [_span(1, {"gputrace.device": 0, "gputrace.lane": "stream:1"})]))
    sp = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    sp["attributes"].append({"key": "cuda.grid", "value": arr})
    dup = json.loads(json.dumps(line))
    dsp = dup["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    dsp["attributes"].append({"key": "cuda.grid", "value": {"intValue": "3"}})  # a key twice: general decides
    col = json.loads(json.dumps(line))
    col["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "gputrace.batch", "value": {"arrayValue": {"values": []}}})  # a column key as an array: an error
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"\n".join(json.dumps(x, separators=(",", ":")).encode() for x in (line, dup)) + b"\n")
    _both([p])
    q = tmp_path / "c.jsonl"
    q.write_bytes(json.dumps(col, separators=(",", ":")).encode() + b"\n")
    _both([q], lenient=True)


def _fa_state(fa):
    return (fa.ok.tolist(), fa.indptr.tolist(), fa.code.tolist(), fa.ival.tolist(), fa.is_str.tolist(),
            fa.sval.tolist(), fa.key.tolist(), fa.extra)


def test_parse_attributes_gives_the_same_result_whether_arrays_are_looked_for_first_or_not():
    arr = b'{"key":"cuda.grid","value":{"arrayValue":{"values":[{"intValue":"4"},{"intValue":"1"}]}}}'
    raws = [b'[{"key":"gputrace.device","value":{"intValue":"3"}}]',
            b'[' + arr + b',{"key":"gputrace.lane","value":{"stringValue":"stream:2"}}]',
            b'[{"key":"a","value":{"intValue":1}}]',  # declined: a bare integer
            b'[{"key":"arrayValue","value":{"intValue":"5"}}]',  # the text, but no array value
            b'[' + arr + b',' + arr.replace(b"4", b"5") + b']',  # one key twice: declined
            b'[]']
    json.loads(b"[" + b",".join(raws) + b"]")
    first, later = parse_attributes(raws, arrays_likely=True), parse_attributes(raws)
    assert _fa_state(first) == _fa_state(later)
    assert later.ok.tolist() == [True, True, False, True, False, True]
    assert later.extra == {1: [("cuda.grid", [4, 1])]}
    plain = raws[:1] + raws[2:4] + raws[5:]  # no array at all: one parse either way, same result
    assert _fa_state(parse_attributes(plain, arrays_likely=True)) == _fa_state(parse_attributes(plain))


def _line_by_line(path, lenient):
    """The reference: every line of ``path`` fed with ``TraceLoader.feed``, as before blocks."""
    loader = TraceLoader(lenient=lenient)
    loader.report.files.append(str(path))
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    last = lines.pop()
    try:
        for i, ln in enumerate(lines, 1):
            loader.feed(path, i, ln, True)
        if last:
            loader.feed(path, len(lines) + 1, last, False)
        loader.resolve()
    except TraceFormatError as e:
        return None, str(e)
    return loader.timeline(), None


def _blocks(path, lenient):
    loader = TraceLoader(lenient=lenient)
    try:
        load_file_into(loader, path)
    except TraceFormatError as e:
        return None, str(e)
    return loader.timeline(), None


def _good(i, **kw):
    return encode_request(RES, [_span(i, {"gputrace.device": i % 3, "gputrace.lane": f"stream:{i % 2}"}, **kw)])


_ODD_LINES = {
    "blank": b"",
    "spaces": b"  \t ",
    "crlf": _good(900) + b"\r",
    "leading space": b"  " + _good(901),
    "two values on a line": _good(902) + b" " + _good(903),
    "not JSON": b"garbage",
    "enum kind": _good(904).replace(b'"kind":1', b'"kind":"SPAN_KIND_INTERNAL"'),
    "foreign attribute layout": _good(905).replace(b'{"key"', b'{ "key"'),
    "bad span": _good(906).replace(b'"endTimeUnixNano":"', b'"endTimeUnixNano":"x'),
}


@pytest.mark.parametrize("odd", list(_ODD_LINES))
@pytest.mark.parametrize("lenient", [False, True])
def test_blocks_of_lines_read_exactly_as_line_by_line(tmp_path, monkeypatch, odd, lenient):
    from gputrace.timeline import _lines

    lines = [_good(i) for i in range(1, 40)]
    lines[17] = _ODD_LINES[odd]
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n" + _good(40))  # the last line without a newline
    ref_tl, ref_err = _line_by_line(p, lenient)
    for chunk in (700, 4096, 1 << 22):  # several blocks per file, then one
        monkeypatch.setattr(_lines, "_CHUNK", chunk)
        monkeypatch.setattr(_lines.iter_line_blocks, "__defaults__", (chunk,))
        tl, err = _blocks(p, lenient)
        assert err == ref_err, (odd, chunk)
        if ref_tl is not None:
            _same(tl, ref_tl)


def test_iter_line_blocks_gives_every_line_once(tmp_path):
    import io

    from gputrace.timeline._lines import iter_line_blocks

    data = b"".join(b"x" * (i % 13) + b"\n" for i in range(300)) + b"tail"
    for chunk in (1, 5, 16, 64, 1 << 20):
        got = []
        for line, block, terminated in iter_line_blocks(io.BytesIO(data), chunk):
            if line is not None:
                got.append((line, terminated))
            else:
                assert block[-1:] == b"\n"
                got += [(bytes(x), True) for x in bytes(block).split(b"\n")[:-1]]
        assert got == [(x, True) for x in data.split(b"\n")[:-1]] + [(b"tail", False)], chunk


def test_newline_offsets_of_views_over_bytes_and_other_buffers():
    # feed_block finds a block's lines with bytes.find over the bytes under the view; the offsets must be
    # those of the view (not of the bytes object), and other buffers take the numpy path.
    import numpy as np

    from gputrace.timeline._lines import newline_offsets

    data = b"".join(b"y" * (i % 7) + b"\n" for i in range(200)) + b"z"
    want = lambda v: np.flatnonzero(np.frombuffer(v, np.uint8) == 10).tolist()  # noqa: E731
    views = [memoryview(data), memoryview(data)[3:], memoryview(data)[17:391], memoryview(data)[5:5],
             memoryview(data)[-1:], memoryview(bytearray(data))[9:300], memoryview(b"no newline")]
    for v in views:
        assert newline_offsets(v) == want(v)
    assert newline_offsets(memoryview(data)[3:]) != newline_offsets(memoryview(data))


def test_a_block_of_good_lines_is_decoded_in_one_call(tmp_path, monkeypatch):
    from gputrace.timeline.formats.otlp_jsonl import _loader

    calls = {"decode_lines": 0, "decode": 0}
    real = _loader.lean_decoder

    class Counting:
        def decode(self, b):
            calls["decode"] += 1
            return real.decode(b)

        def decode_lines(self, b):
            calls["decode_lines"] += 1
            return real.decode_lines(b)

    monkeypatch.setattr(_loader, "lean_decoder", Counting())
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\n".join(_good(i) for i in range(1, 60)) + b"\n")
    tl, err = _blocks(p, False)
    assert err is None and tl.n == 59
    assert calls == {"decode_lines": 1, "decode": 1}  # the first line alone, then one block
    ref, _ = _line_by_line(p, False)
    _same(tl, ref)


def test_span_ids_whose_lengths_only_add_up_are_errors():
    # The joined-hex fast path of id_column used to accept a 15- and a 17-character id side by side (together
    # 32 characters) and read them as other ids; each must be reported as the per-id path reports it.
    from gputrace.timeline.formats.otlp_jsonl._header_columns import id_column

    for allow_empty in (False, True):
        marks = []
        out = id_column(["000000000000001", "20000000000000003", "0000000000000004"], "spanId",
                        lambda i, f, m: marks.append(i), allow_empty=allow_empty)
        assert marks == [0, 1] and int(out[2]) == 4


def test_lifted_arrays_keep_their_place_among_the_attributes(tmp_path):
    """An array attribute is read back where it was written (between, before or after the others, column
    keys included), as the general path reads it: attribute key order is part of the Timeline."""
    arr = {"arrayValue": {"values": [{"intValue": "4"}, {"intValue": "1"}]}}
    layouts = [["a", "ARR", "gputrace.device", "b", "ARR2", "c"], ["ARR", "a"], ["a", "ARR"], ["ARR", "ARR2"],
               ["gputrace.lane", "ARR", "gputrace.kind"], ["x", "gputrace.batch", "ARR", "gputrace.bytes", "y", "ARR2"]]
    lines = []
    for i, layout in enumerate(layouts * 3):
        kvs = []
        for k in layout:
            if k.startswith("ARR"):
                kvs.append({"key": "cuda.grid" if k == "ARR" else "cuda.block", "value": arr})
            elif k == "gputrace.lane":
                kvs.append({"key": k, "value": {"stringValue": "stream:1"}})
            elif k == "gputrace.kind":
                kvs.append({"key": k, "value": {"stringValue": "gpu"}})
            else:
                kvs.append({"key": k, "value": {"intValue": str(i)}})
        line = json.loads(encode_request(RES, [_span(i + 1, {})]))
        line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = kvs
        lines.append(json.dumps(line, separators=(",", ":")))
    p = _write(tmp_path / "a.jsonl", lines)
    fast, loader = _both([p])
    gen, _ = _load([p], fast=False)
    assert loader.fast_lines == loader.report.lines
    assert {r: list(a) for r, a in fast.attrs.items()} == {r: list(a) for r, a in gen.attrs.items()}
    orders = {tuple(a) for a in fast.attrs.values()}
    assert ("a", "cuda.grid", "b", "cuda.block", "c") in orders and ("x", "cuda.grid", "y", "cuda.block") in orders


def test_the_phase_table_is_the_same_however_the_file_is_cut(tmp_path, monkeypatch):
    """Phases are numbered in sorted order over the whole read, so batches of any size, progressive and
    parallel reads give one table (each batch used to add its new names sorted, so the table followed
    the batch boundaries): a re-read of an imported file can be predicted exactly."""
    import gputrace.timeline.formats.otlp_jsonl.parallel as par

    names = ["zeta", "alpha", "mid", "alpha", "beta", "zeta", "omega"]
    lines = [encode_request(RES, [_span(i * 10 + j + 1, {"gputrace.lane": "thread:t"}, name=names[(i + j) % 7])
                                  for j in range(3)]) for i in range(12)]
    p = _write(tmp_path / "p.jsonl", lines)
    tables = {tuple(_load([p], fast=True, batch_spans=b)[0].phases) for b in (1, 2, 5, 7, 32768)}
    monkeypatch.setattr(par, "MIN_PARALLEL_BYTES", 0)
    tables.add(tuple(read_trace(p, workers=3).phases))
    assert tables == {("alpha", "beta", "mid", "omega", "zeta")}
    whole = read_trace(p, workers=1)
    assert [whole.phases[k] for k in whole.phase] == [whole.name_of(r) for r in range(whole.n)]
