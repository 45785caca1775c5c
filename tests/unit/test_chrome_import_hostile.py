"""Hostile Chrome traces (issue 26): the reader raises ChromeFormatError (file, event, field) and nothing else, and
``import chrome`` writes only files the strict OTLP reader reads back, or refuses with a reason and leaves no
file: timestamps past the int64 nanosecond range, an ``E`` before its ``B``, ``args`` with
``"gputrace.device": "zero"``, and a seeded fuzz over malformed shapes (non-object events and args, missing or
non-numeric times, unhashable or huge pids, nested garbage, hostile ``otherData``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gputrace.timeline.formats.chrome.read import ChromeFormatError, read_chrome
from gputrace.timeline.formats.chrome.stream import GENERATOR
from gputrace.timeline.formats.otlp_jsonl.read import read_otlp
from gputrace.timeline.load import convert

ROOT = Path(__file__).resolve().parents[2]
BASE = [{"ph": "X", "name": "a", "ts": 1.0, "dur": 5.0, "pid": 1, "tid": 1},
        {"ph": "B", "name": "b", "ts": 2, "pid": 1, "tid": 2}, {"ph": "E", "ts": 4, "pid": 1, "tid": 2},
        {"ph": "X", "name": "k", "ts": 3, "dur": 1, "pid": 0, "tid": 7, "cat": "kernel",
         "args": {"device": 0, "stream": 7, "correlation": 5}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]
ODD = [None, True, False, -1, 0, 2**63, -2**63 - 1, 2**64, 1e300, -1e300, "x", "", [], {}, [1, 2], {"a": {"b": 1}},
       1.5, -0.0, "\x00", "a" * 500, 9.3e15, 2**62]
KEYS = ["ph", "name", "ts", "dur", "pid", "tid", "args", "cat", "id"]
ARG_KEYS = ["device", "stream", "correlation", "External id", "gputrace.device", "gputrace.lane", "gputrace.kind",
            "gputrace.batch", "gputrace.bytes", "gputrace.gpu.start_ns", "host.ts_us", "gpu.dur_us"]


def _mutate(rng: random.Random):
    ev = json.loads(json.dumps(BASE))
    if rng.random() < 0.08:
        return rng.choice([[1, 2], "str", 5, None, [None], [[]], {"traceEvents": 5}, {"traceEvents": [1]},
                           {"traceEvents": [{"ph": "X"}]}, {"otherData": 5, "traceEvents": []}])
    for _ in range(rng.randint(1, 4)):
        e = rng.choice(ev)
        if not isinstance(e, dict):
            continue
        r = rng.random()
        if r < 0.4:
            e[rng.choice(KEYS)] = rng.choice(ODD)
        elif r < 0.7:
            if not isinstance(e.get("args"), dict):
                e["args"] = {}
            e["args"][rng.choice(ARG_KEYS)] = rng.choice(ODD)
        elif r < 0.8:
            e.pop(rng.choice(KEYS), None)
        elif r < 0.9:
            ev.append(rng.choice(ODD))
        else:
            ev.append({"ph": rng.choice(["B", "E", "X", "i", "M", "C"]), "ts": rng.choice([*ODD, 1, 2, 3]), "pid": 1,
                       "tid": rng.choice([1, 2, "t"])})
    if rng.random() < 0.25:
        ours = rng.random() < 0.5
        other = {"generator": GENERATOR if ours else "x", "t0_epoch_ns": rng.choice(ODD),
                 "lanes": rng.choice([*ODD, {"1/1": rng.choice(ODD)}]), "resources": rng.choice(ODD)}
        return {"traceEvents": ev, "otherData": other}
    return {"traceEvents": ev} if rng.random() < 0.7 else ev


def _import(src: Path, out: Path) -> str | None:
    """None when the import wrote ``out`` (then it must read strictly), else the refusal's message."""
    try:
        convert(src, "chrome", out)
    except ValueError as exc:
        assert not out.exists(), f"{src}: refused ({exc}) but left {out}"
        return str(exc)
    read_otlp([out])  # the strict reader reads what import wrote
    return None


def test_fuzzed_shapes_read_or_refuse_cleanly(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    written = refused = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow warning is a failure too (values cast to -2**63)
        for seed in range(250):
            src = tmp_path / f"in{seed}.json"
            src.write_text(json.dumps(_mutate(random.Random(seed))))
            try:
                read_chrome(src)
            except ChromeFormatError as exc:
                assert str(src) in str(exc)
            why = _import(src, tmp_path / f"out{seed}.jsonl")
            written += why is None
            refused += why is not None
    assert written > 50 and refused > 50  # both sides exercised


@pytest.mark.parametrize("doc, reason", [
    ([{"ph": "X", "name": "a", "ts": 9.3e15, "dur": 1, "pid": 1, "tid": 1}], r"field 'ts' = 9300000000000000\.0 us"),
    ([{"ph": "X", "name": "a", "ts": 1, "dur": 1e300, "pid": 1, "tid": 1}], r"field 'dur'"),
    ([{"ph": "B", "name": "b", "ts": 5, "pid": 1, "tid": 1}, {"ph": "E", "ts": 2, "pid": 1, "tid": 1}],
     r"traceEvents\[1\] \('E' None\): ends at 2000 ns, before its 'B' 'b' began at 5000 ns"),
    ([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": {"gputrace.device": "zero"}}],
     r"span 'a' \(row 0\): attribute gputrace.device = 'zero' is not an integer"),
    ([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": [1], "tid": 1}], r"field 'pid' must be a string or"),
    ([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": "x"}], r"field 'args' must be an object"),
    ([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": {"n": 2**64}}],
     r"attribute 'n' = 18446744073709551616 holds an integer beyond 64 bits"),
    ([{"ph": "i", "name": "a", "ts": 1, "pid": 1, "tid": 1}], r"no spans to import"),
])
def test_import_chrome_refuses_with_a_reason(tmp_path, doc, reason):
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": doc}))
    out = tmp_path / "out.jsonl"
    r = subprocess.run([sys.executable, "-m", "gputrace", "import", "chrome", str(src), "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert __import__("re").search(reason, r.stderr), r.stderr
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["otlp", "chrome", "jaeger"])
def test_args_nested_300_deep_import_and_export(tmp_path, fmt):
    """``args`` 300 maps (or lists) deep (issue 34: a traceback in every writer, orjson's depth limit 255): each
    writer keeps the first MAX_WRITE_DEPTH levels and writes the rest as the CUT text; what it writes reads back.
    (``read_chrome`` and ``import chrome`` read it whole: the reader's depth limit is its decoder's.)"""
    from gputrace.otlp.encode import CUT, MAX_WRITE_DEPTH
    from gputrace.timeline.load import read_any, write_as

    deep: object = {"leaf": 1}
    for _ in range(300):
        deep = {"a": deep}
    deep_list: object = [1]
    for _ in range(300):
        deep_list = [deep_list]
    src = tmp_path / "deep.json"
    src.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "op", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "args": {"m": deep, "l": deep_list}},
        {"ph": "X", "name": "child", "ts": 2, "dur": 3, "pid": 1, "tid": 1, "args": {"k": 1}}]}))
    out = tmp_path / f"deep.{fmt}"
    write_as(read_chrome(src), out, fmt)
    if fmt == "jaeger":  # written only (no Jaeger reader): valid JSON with the cut text
        assert CUT in out.read_text() and json.loads(out.read_text())
        return
    back = read_any([out])
    assert back.n == 2
    if fmt == "otlp":
        row = [r for r in range(back.n) if back.name_of(r) == "op"][0]
        v = back.attrs[row]["m"]
        for _ in range(MAX_WRITE_DEPTH - 1):
            v = v["a"]
        assert v == {"a": CUT}


@pytest.mark.parametrize("stream", [2**64 - 1, 2**63, -(2**63) - 1, 2**70])
def test_a_kineto_stream_beyond_64_bits(tmp_path, stream):
    """A kernel whose ``args.stream`` is beyond 64 bits (issue 34: an OverflowError traceback from ``report``): one
    error naming the event and the field where the decoder gives an int; where it gives a float (beyond
    uint64) the stream is a lane name, and the analyses count it as an unknown stream."""
    from gputrace.analysis.report import analyse_timeline

    ev = [{"ph": "X", "cat": "kernel", "name": "void gemm<1>(float*)", "pid": 0, "tid": 7, "ts": 10.0, "dur": 3.0,
           "args": {"device": 0, "stream": stream, "correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "void gemm<2>(float*)", "pid": 0, "tid": 7, "ts": 20.0, "dur": 3.0,
           "args": {"device": 0, "stream": 7, "correlation": 2}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 30.0, "args": {}}]
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    try:
        tl = read_chrome(p)
    except ChromeFormatError as e:
        assert "traceEvents[0]" in str(e) and "args.stream" in str(e) and str(stream) in str(e)
        return
    doc = analyse_timeline(tl).to_dict()
    assert doc["gpu_activity"]["devices"][0]["kernels"] == 2


def test_an_otlp_kernel_stream_beyond_64_bits_is_an_unknown_stream():
    from gputrace.activity import ACTIVITY, STREAM
    from gputrace.analysis.activity_index import attr_scan
    from gputrace.testing.synth import make_timeline

    tl = make_timeline([{"name": "k", "start": 0, "end": 5, "device": 0, "kind": "gpu",
                         "attrs": {ACTIVITY: "kernel", STREAM: 2**70}},
                        {"name": "k", "start": 6, "end": 9, "device": 0, "kind": "gpu",
                         "attrs": {ACTIVITY: "kernel", STREAM: 3}}])
    assert sorted(attr_scan(tl).act_stream.tolist()) == [-1, 3]
