"""The recorder with CUDA activity collection, through a stand-in collector (no CUDA, no cupti-python).

The stand-in keeps CUPTI's external-correlation stack per thread (the hot path really pushes and pops) and,
for each simulated launch, writes the records CUPTI would: EXTERNAL_CORRELATION for the top of the stack,
the launching API call and the kernel."""

from __future__ import annotations

import json
import threading

import pytest

import gputrace
from gputrace.trace import hotpath, recorder
from gputrace.trace.recorder import Recorder
from gputrace.trace.sinks import MemorySink
from gputrace.trace.sinks.jsonl import JsonlFileSink


class FakeCupti:
    xkind = 7

    def __init__(self, offset_ns=5_000):
        self.offset_ns = offset_ns
        self.dropped = 3
        self.stacks: dict[int, list] = {}
        self.pending: list = []
        self.corr = 0
        self.stopped = False

    def push(self, kind, xid):
        assert kind == self.xkind
        self.stacks.setdefault(threading.get_native_id(), []).append(xid)

    def pop(self, kind):
        return self.stacks[threading.get_native_id()].pop()

    def launch(self, start, end, name="k"):
        self.corr += 1
        tid = threading.get_native_id()
        stack = self.stacks.get(tid)
        if stack:
            self.pending.append({"kind": "EXTERNAL_CORRELATION", "correlation_id": self.corr,
                                 "external_id": stack[-1], "external_kind": "CUSTOM0"})
        self.pending.append({"kind": "DRIVER", "start": start - 100, "end": start - 50, "correlation_id": self.corr,
                             "cbid": 1, "name": "cuLaunchKernel", "thread_id": tid, "process_id": 1})
        self.pending.append({"kind": "CONCURRENT_KERNEL", "start": start, "end": end, "device_id": 0,
                             "context_id": 1, "stream_id": 13, "correlation_id": self.corr, "name": name})

    def collect(self, force=False):
        out, self.pending = self.pending, []
        return out

    def stop(self):
        self.stopped = True
        return self.collect()

    def resource(self):
        return {"gputrace.cupti.version": "fake", "gputrace.cupti.clock_offset_ns": self.offset_ns,
                "gputrace.cupti.dropped": self.dropped, "gputrace.cupti.records": 0}


@pytest.fixture
def fake_run(tmp_path):
    recorder.shutdown()
    fake = FakeCupti()
    mem = MemorySink()
    path = tmp_path / "t.jsonl"
    rec = Recorder([mem, JsonlFileSink(path)], {"service.name": "t"}, run_id="r", id_seed=3, flush_interval_s=0.05)
    rec.enable_cuda_activity(fake)
    rec.start()
    yield rec, fake, mem, path
    rec.stop()
    hotpath.stop_external_ids()


def test_kernels_become_children_of_the_innermost_phase(fake_run):
    rec, fake, mem, path = fake_run
    with gputrace.phase("msm_h", device=0):
        fake.launch(1000, 2000, "bucket")
        with gputrace.phase("batch_add", device=0):
            fake.launch(3000, 3500, "add")
        fake.launch(4000, 4100, "reduce")
    fake.launch(9000, 9100, "outside")
    t = threading.Thread(target=lambda: [gputrace.phase("ntt").__enter__(), fake.launch(5000, 5100, "ntt_k")])
    t.start()
    t.join()
    summary = rec.stop()
    assert fake.stopped and not hotpath.external_ids()
    spans = {s["name"]: s for s in mem.spans}
    msm, ba = spans["msm_h"], spans["batch_add"]
    assert spans["bucket"]["parent_span_id"] == msm["span_id"] and spans["bucket"]["trace_id"] == msm["trace_id"]
    assert spans["add"]["parent_span_id"] == ba["span_id"]
    assert spans["reduce"]["parent_span_id"] == msm["span_id"]  # after the inner phase popped
    assert spans["outside"]["parent_span_id"] is None
    # a phase never closed (the thread died inside it) loses its activity's parent only at the final drain
    assert spans["ntt_k"]["parent_span_id"] is None
    assert spans["bucket"]["start_ns"] == 1000 + fake.offset_ns
    assert spans["bucket"]["attributes"]["cuda.launch.api_start_ns"] == 900 + fake.offset_ns
    assert summary.spans_dropped == 3  # the collector's drops count like the recorder's
    assert rec.activity_spans == 5
    # the file has the same spans, and its last line the collector's final resource
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    names = {s["name"] for ln in lines for rs in ln["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    assert {"bucket", "add", "reduce", "outside", "msm_h", "batch_add"} <= names
    res = {kv["key"]: kv["value"] for kv in lines[-1]["resourceSpans"][0]["resource"]["attributes"]}
    assert res["gputrace.cupti.dropped"] == {"intValue": "3"}


def test_phase_xids_push_and_pop_on_error_paths(fake_run):
    rec, fake, mem, path = fake_run
    tid = threading.get_native_id()
    with pytest.raises(ZeroDivisionError):
        with gputrace.phase("a"):
            with gputrace.phase("b"):
                assert len(fake.stacks[tid]) == 2
                1 / 0
    assert fake.stacks[tid] == []
    h = gputrace.start_phase("handle")  # start/end handles push nothing (they may end on another thread)
    assert fake.stacks[tid] == []
    h.end()


def test_unavailable_cupti_is_one_warning_and_a_resource_attribute(monkeypatch, caplog):
    recorder.shutdown()
    monkeypatch.setenv("GPUTRACE_CUDA_ACTIVITY", "1")
    import builtins

    real = builtins.__import__

    def no_cupti(name, *a, **kw):
        if name == "cupti" or name.startswith("cupti."):
            raise ImportError("no cupti here")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_cupti)
    mem = MemorySink()
    with caplog.at_level("WARNING", logger="gputrace.trace"):
        rec = gputrace.configure(sinks=[mem], collect_gpu_info=False)
    try:
        assert rec.cupti is None and "no cupti here" in rec.cuda_activity_error
        assert "no cupti here" in rec.resource["gputrace.cupti.unavailable"]
        assert any("CUDA activity not collected" in r.message for r in caplog.records)
        with gputrace.phase("x"):
            pass
    finally:
        gputrace.shutdown()
    assert [s["name"] for s in mem.spans] == ["x"]


def test_env_flag_off_values(monkeypatch):
    for v, want in (("1", True), ("yes", True), ("0", False), ("off", False), ("", False)):
        monkeypatch.setenv("GPUTRACE_CUDA_ACTIVITY", v)
        assert recorder.env_flag("GPUTRACE_CUDA_ACTIVITY") is want


def test_gc_full_collections_are_spaced_while_recording_and_restored(tmp_path):
    import gc

    recorder.shutdown()
    old = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False)
        assert gc.get_threshold() == (700, 10, 1000)
        gputrace.shutdown()
        assert gc.get_threshold() == (700, 10, 10)
        gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False)
        gc.set_threshold(500, 5, 5)  # the program's own choice wins at shutdown
        gputrace.shutdown()
        assert gc.get_threshold() == (500, 5, 5)
        gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False, gc_full_every=None)
        assert gc.get_threshold() == (500, 5, 5)
        gputrace.shutdown()
        with pytest.raises(ValueError, match="gc_full_every"):
            gputrace.configure(sinks=[MemorySink()], gc_full_every=0)
    finally:
        gputrace.shutdown()
        gc.set_threshold(*old)
