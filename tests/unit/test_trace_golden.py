"""Golden file for the recorder's OTLP JSON Lines output (ids, clock and thread id injected).

Regenerate after an intended format change with ``GPUTRACE_UPDATE_GOLDEN=1 pytest tests/unit/test_trace_golden.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import gputrace
from gputrace.trace import clock, configure, hotpath, phase, shutdown, start_phase

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "trace_writer.jsonl"


def _fake_clock():
    t = [0]

    def pc():
        t[0] += 1000
        return t[0]

    return pc


def _workload():
    with phase("prove", circuit=1, batch=0) as root:
        with phase("synthesis", kind="host", rows=1024, ratio=0.5, tags=["a", "b"], ok=True):
            pass
        h = start_phase("h2d", device=0, bytes=4096)
        with phase("ntt", device=0, lane="gpu0-compute"):
            with phase("intt_abc", device=0):
                pass
        h.end()
        try:
            with phase("msm_h", device=0, bytes=1 << 40):
                raise RuntimeError('bad "scalar"\n')
        except RuntimeError:
            pass
        root.set("gputrace.result", "ok")

    @phase("assemble")
    def assemble():
        return 1

    assemble()


def _record(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(hotpath, "_pc", _fake_clock())
    monkeypatch.setattr(clock, "EPOCH_OFFSET_NS", 1_700_000_000_000_000_000)
    monkeypatch.setattr(threading, "get_native_id", lambda: 4242)
    out = tmp_path / "golden.jsonl"
    configure(
        trace_file=out, service_name="golden", config={"pin_memory": False, "msm_window": 13},
        resource={"host.name": "golden-host", "process.pid": 1, "gputrace.run_id": "00000000000000aa",
                  "gputrace.version": "0.0.0-golden"},
        id_seed=2024, collect_gpu_info=False, flush_interval_s=1.0,
    )
    t = threading.Thread(target=_workload, name="golden-worker")
    t.start()
    t.join()
    shutdown()
    return out


def test_jsonl_writer_matches_golden(tmp_path, monkeypatch):
    out = _record(tmp_path, monkeypatch)
    data = out.read_bytes()
    if os.environ.get("GPUTRACE_UPDATE_GOLDEN"):
        GOLDEN.write_bytes(data)
    assert data == GOLDEN.read_bytes()


def test_golden_is_valid_otlp_json_lines():
    lines = GOLDEN.read_bytes().splitlines()
    assert lines
    spans = []
    for ln in lines:
        req = json.loads(ln)
        (rs,) = req["resourceSpans"]
        (ss,) = rs["scopeSpans"]
        assert ss["scope"]["name"] == "gputrace"
        spans.extend(ss["spans"])
    assert {s["name"] for s in spans} == {"prove", "synthesis", "h2d", "ntt", "intt_abc", "msm_h", "assemble"}
    for s in spans:
        assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16 and s["kind"] == 1
        assert isinstance(s["startTimeUnixNano"], str) and int(s["startTimeUnixNano"]) < int(s["endTimeUnixNano"])
        for a in s.get("attributes", []):
            if "intValue" in a["value"]:
                assert isinstance(a["value"]["intValue"], str)
    msm = next(s for s in spans if s["name"] == "msm_h")
    assert msm["status"]["code"] == 2


def test_golden_reads_into_timeline():
    tl = gputrace.read_trace([str(GOLDEN)])
    assert len(tl) == 7
