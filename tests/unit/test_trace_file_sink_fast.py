"""The file sink's direct path (phases -> JSON text) writes exactly what the span-record path writes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gputrace
from gputrace.otlp.encode import encode_request, span_json
from gputrace.trace import MemorySink, clock, configure, hotpath, phase, records, shutdown, start_phase
from gputrace.trace.sinks.jsonl import JsonlFileSink
from gputrace.trace.sinks.phase_json import encode_phases

OFF = 1_700_000_000_000_000_000


def _fake_clock():
    t = [0]

    def pc():
        t[0] += 1000
        return t[0]

    return pc


def _workload():
    """Every shape the exporter meets: plain, keywords, user attributes of every type, set() (new and
    existing keys), errors with and without a message, handles ended on other threads, parent= tokens,
    a foreign parent object, roots left open across batches, a renamed lane."""
    with phase("prove", circuit=1, batch=0) as root:
        ctx = gputrace.current_context()
        for i in range(5):
            with phase("ntt", device=i % 2, bytes=1 << 20):
                pass
        with phase("synthesis", kind="host", rows=1024, ratio=0.5, tags=["a", 2], ok=True, none=None,
                   np_i=np.int64(7), big=1 << 62, raw=b"\x00\xff", nested={"k": 1.5}, nan=float("nan")):
            pass
        with phase("msm_l", device=0, lane="gpu0-compute", circuit=None, batch=3) as p:
            p.set("gputrace.lane", "override")  # existing key: replaced in place
            p.set("points", 1 << 20)
        with phase("pin") as p:
            p.set("bytes_pinned", 4096)
        h = start_phase("h2d", device=1, bytes=4096)
        t = threading.Thread(target=h.end, name="ender")
        t.start()
        t.join()
        try:
            with phase("msm_h", device=0):
                raise RuntimeError('bad "scalar"\n')
        except RuntimeError:
            pass
        try:
            with phase("sync"):
                raise KeyError
        except KeyError:
            pass

        def worker(d):
            with phase("msm_g2", device=d, parent=ctx):
                with phase("bucket", device=d):
                    pass

        ws = [threading.Thread(target=worker, args=(d,), name=f"w{d}") for d in range(3)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        with phase("orphan", parent=object()):
            pass
        with phase("ünïcode \"q\"", device=2):
            pass
        root.set("gputrace.result", "ok")
    for i in range(20):
        with phase("prove", circuit=i % 3, batch=i) as top:
            ctx = top
            with phase("ntt", device=0):
                pass
            with phase("ntt", device=1, circuit=None, batch=True):  # spliced-in keywords, None skipped
                pass
            with phase("ntt", bytes=8, parent=ctx):  # parent= only: the plain shape's attributes
                pass
            # Repeated keyword shapes (cached text), including values that compare equal across types.
            for v in (1, True, 1.0, "1", 1, True):
                with phase("msm_l", device=0, circuit=v, batch=i % 2, points=v):
                    pass


def _collect(monkeypatch, workload=_workload):
    monkeypatch.setattr(hotpath, "_pc", _fake_clock())
    rec = configure(sinks=[MemorySink()], collect_gpu_info=False, flush_interval_s=1.0)
    rec._stop.set()  # park the exporter: this test drains by hand
    try:
        workload()
        return rec._collect()
    finally:
        shutdown()


def _reset(phases):
    for p in phases:
        for a in ("sid", "tid"):
            p.__dict__.pop(a, None)


@pytest.mark.parametrize("batch", [1, 3, 7, 10_000])
def test_direct_text_and_ids_equal_the_record_path(monkeypatch, batch):
    phases = _collect(monkeypatch)
    assert len(phases) > 40
    # Fake a resolved stream phase (device, lane, device times), as cuda_timing leaves it.
    phases[2].cdev = (1, "stream:2", 5_000, 6_000)
    phases[3].cdev = (None, "stream:1", None, None)
    # Stream phases without device times (CUDA activity on: no events), one shape twice (cached text).
    same = [p for p in phases if not p.kw and p.name == "ntt" and p.device == 0 and p.cdev is None][:3]
    assert len(same) == 3
    same[0].cdev = same[1].cdev = (0, "stream:14", None, None)
    same[2].cdev = (0, "stream:15", None, None)
    ids = records.IdSource(11)
    expected = [span_json(records.to_span(p, ids, OFF)) for p in phases]
    expected_ids = [(p.tid, p.sid) for p in phases]
    _reset(phases)
    ids = records.IdSource(11)
    got = []
    for i in range(0, len(phases), batch):  # small batches: ancestors numbered outside the batch
        got += encode_phases(phases[i:i + batch], ids, OFF)
    assert got == expected
    assert [(p.tid, p.sid) for p in phases] == expected_ids


def test_children_drained_before_their_open_root(monkeypatch):
    # A long phase whose children are exported while it is still open: ids are numbered up the
    # chain, so the batch uses more counter values than it has phases (the id table's fallback).
    def workload():
        with phase("prove"):
            for _ in range(3):
                with phase("a"):
                    with phase("b"):
                        with phase("c"):
                            pass

    phases = _collect(monkeypatch, workload)
    children, root = phases[:-1], phases[-1:]
    ids = records.IdSource(3)
    expected = [span_json(records.to_span(p, ids, OFF)) for p in children + root]
    _reset(phases)
    ids = records.IdSource(3)
    got = encode_phases(children[:4], ids, OFF) + encode_phases(children[4:], ids, OFF)
    got += encode_phases(root, ids, OFF)
    assert got == expected


class _RecordsFileSink(JsonlFileSink):
    """A subclass that overrides export(): the recorder hands it span records (the reference path)."""

    def export(self, spans):
        super().export(spans)


def _run(tmp_path, monkeypatch, name, sink_factory, with_memory):
    monkeypatch.setattr(hotpath, "_pc", _fake_clock())
    monkeypatch.setattr(clock, "EPOCH_OFFSET_NS", OFF)
    monkeypatch.setattr(threading, "get_native_id", lambda: 4242)
    path = tmp_path / name
    sinks = [sink_factory(path)] + ([MemorySink()] if with_memory else [])
    configure(sinks=sinks, service_name="fast", resource={"host.name": "h", "process.pid": 1,
                                                          "gputrace.run_id": "00000000000000aa"},
              id_seed=5, collect_gpu_info=False, flush_interval_s=1.0)
    t = threading.Thread(target=_workload, name="main-worker")
    t.start()
    t.join()
    s = shutdown()
    return path.read_bytes(), sinks, s


def test_recorder_file_bytes_equal_across_paths(tmp_path, monkeypatch):
    direct, sinks, s = _run(tmp_path, monkeypatch, "direct.jsonl", JsonlFileSink, with_memory=False)
    assert sinks[0].takes_phases and s.sinks[0].exported == s.spans_recorded > 40
    mixed, msinks, _ = _run(tmp_path, monkeypatch, "mixed.jsonl", JsonlFileSink, with_memory=True)
    reference, rsinks, _ = _run(tmp_path, monkeypatch, "records.jsonl", _RecordsFileSink, with_memory=False)
    assert not rsinks[0].takes_phases
    assert direct == mixed == reference
    # ... and equal to encode_request of the records the memory sink got.
    mem = msinks[1]
    assert direct == encode_request(mem.resource, mem.spans) + b"\n"


def test_a_bad_phase_costs_its_line_only(tmp_path):
    # A non-str name cannot be encoded: that line (chunk) is dropped and counted, the next ones are written.
    sink = JsonlFileSink(tmp_path / "bad.jsonl", max_spans_per_line=2)
    configure(sinks=[sink], collect_gpu_info=False, flush_interval_s=1.0)
    with phase("ntt"):
        pass
    with phase(12345):
        pass
    for _ in range(3):
        with phase("msm_l"):
            pass
    s = shutdown()
    (summary,) = s.sinks
    assert summary.dropped == 2 and summary.exported == 3
    assert any("TypeError" in e for e in summary.errors)
    lines = (tmp_path / "bad.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and b'"msm_l"' in lines[0] and b"12345" not in lines[0]


def test_closed_sink_counts_phases_as_dropped(tmp_path):
    sink = JsonlFileSink(tmp_path / "closed.jsonl")
    sink.close()
    sink.export_phases([object(), object()], records.IdSource(1), 0)
    assert sink.stats.dropped == 2 and "closed" in sink.stats.errors[-1]
