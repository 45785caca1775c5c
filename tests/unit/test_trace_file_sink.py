"""The JSONL file sink while a run goes on: lines appear within a second; errors are clear."""

from __future__ import annotations

import json
import time

import pytest

from gputrace.trace import configure, phase, shutdown
from gputrace.trace.sinks.jsonl import JsonlFileSink


def test_file_can_be_followed_while_running(tmp_path):
    path = tmp_path / "live.jsonl"
    configure(trace_file=path, collect_gpu_info=False)  # default flush interval (0.5 s)
    try:
        with phase("prove", circuit=1):
            pass
        deadline = time.monotonic() + 1.5
        lines = []
        while time.monotonic() < deadline and not lines:
            time.sleep(0.05)
            lines = path.read_bytes().splitlines()
        assert lines, "nothing flushed within 1.5 s"
        span = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        assert span["name"] == "prove"
        with phase("assemble"):
            pass
    finally:
        s = shutdown()
    names = [sp["name"] for ln in path.read_bytes().splitlines()
             for sp in json.loads(ln)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert names == ["prove", "assemble"] and s.spans_recorded == 2


def test_long_batches_are_split_into_lines(tmp_path):
    sink = JsonlFileSink(tmp_path / "split.jsonl", max_spans_per_line=100)
    configure(sinks=[sink], collect_gpu_info=False, flush_interval_s=1.0)
    for _ in range(250):
        with phase("ntt"):
            pass
    shutdown()
    lines = (tmp_path / "split.jsonl").read_bytes().splitlines()
    counts = [len(json.loads(ln)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for ln in lines]
    assert sum(counts) == 250 and max(counts) <= 100


def test_unwritable_trace_file_is_a_clear_error(tmp_path):
    with pytest.raises(OSError) as e:
        configure(trace_file=tmp_path / "missing-dir" / "run.jsonl", collect_gpu_info=False)
    assert "missing-dir" in str(e.value)


@pytest.mark.parametrize("kw, match", [
    ({"buffer_size": 0}, "buffer_size"),
    ({"flush_interval_s": 0}, "flush_interval_s"),
    ({"otlp": "carrier-pigeon"}, "otlp"),
    ({"config": ["pin"]}, "config"),
    ({"sinks": [object()]}, "sinks"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        configure(collect_gpu_info=False, **kw)
    shutdown()
