"""Pausing and resuming CUDA activity collection (``gputrace.trace.record_control``, ``CuptiCollector.pause``)
without CUDA: a stand-in ``cupti`` module logs every flush, disable and enable call."""

from __future__ import annotations

import enum
import threading
from types import SimpleNamespace as NS

import pytest

import gputrace
from gputrace.trace import cupti_collect, hotpath, record_control, recorder
from gputrace.trace.cupti_collect import CuptiCollector
from gputrace.trace.sinks import MemorySink


class AK(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    DRIVER = 5
    RUNTIME = 6
    CONCURRENT_KERNEL = 10
    MARKER = 12
    EXTERNAL_CORRELATION = 31
    SYNCHRONIZATION = 38


class Cbid(enum.IntEnum):
    INVALID = 0
    cudaLaunchKernel = 1
    cudaGetDevice = 2


class LoggingCupti:
    """The parts of ``cupti.cupti`` the collector calls; ``calls`` logs (name, argument) in order."""

    ActivityKind = AK
    ActivityMemcpyKind = enum.IntEnum("MK", {"UNKNOWN": 0, "HTOD": 1})
    ActivityMemoryKind = enum.IntEnum("MemK", {"UNKNOWN": 0, "PAGEABLE": 1})
    ActivitySynchronizationType = enum.IntEnum("ST", {"UNKNOWN": 0})
    ExternalCorrelationKind = enum.IntEnum("EK", {"INVALID": 0, "CUSTOM0": 5})
    ActivityThreadIdType = NS(SYSTEM=1)
    CallbackDomain = NS(RUNTIME_API=1, DRIVER_API=2)
    RuntimeApiTraceCbid = Cbid

    def __init__(self, collector=None):
        self.calls: list[tuple[str, object]] = []
        self.enabled: set[int] = set()
        self.collector = collector
        self.refuse: set[str] = set()
        self.t = 0

    def _log(self, name, arg=None):
        self.calls.append((name, arg))
        if name in self.refuse:
            raise RuntimeError(f"{name} refused")

    def set_thread_id_type(self, t):
        pass

    def activity_register_callbacks(self, req, done):
        self._log("register")

    def activity_enable(self, k):
        self._log("enable", int(k))
        self.enabled.add(int(k))

    def activity_disable(self, k):
        self._log("disable", int(k))
        self.enabled.discard(int(k))

    def activity_enable_runtime_api(self, cbid, on):
        self.calls.append(("api", (cbid, on)))

    def activity_flush_all(self, force):
        self._log("flush", force)
        if self.collector is not None and self.enabled:  # a buffer CUPTI held: handed over on this thread
            self.collector._completed([NS(kind=12, id=1, timestamp=5, flags_=2, name="step", domain=None,
                                          object_id=NS(pt=NS(thread_id=1)))])

    def activity_push_external_correlation_id(self, kind, xid):
        pass

    def activity_pop_external_correlation_id(self, kind):
        return 0

    def get_timestamp(self):
        self.t += 1000
        return self.t


def _started(markers=False):
    """A collector started against the stand-in (what ``start`` does after importing cupti)."""
    c = CuptiCollector(markers=markers)
    cupti = c._cupti = LoggingCupti(c)
    c.load_names(cupti)
    kinds = [AK.CONCURRENT_KERNEL, AK.MEMCPY, AK.MEMSET, AK.SYNCHRONIZATION, AK.EXTERNAL_CORRELATION, AK.RUNTIME,
             AK.DRIVER] + ([AK.MARKER] if markers else [])
    for k in kinds:
        cupti.activity_enable(k)
        c._kinds.append(k)
    c._restrict_api(cupti)
    c.measure_offset()
    cupti.calls.clear()
    return c, cupti, {int(k) for k in kinds}


def test_pause_flushes_then_disables_every_kind_and_resume_enables_them_again():
    c, cupti, kinds = _started(markers=True)
    assert c.pause() is True and c.is_paused
    names = [n for n, _ in cupti.calls]
    assert names[0] == "flush" and cupti.calls[0][1] == 1  # a forced flush, before any disable
    assert {a for n, a in cupti.calls if n == "disable"} == kinds and names.count("disable") == len(kinds)
    assert cupti.enabled == set()
    assert [r["kind"] for r in c.collect()] == ["MARKER"]  # what CUPTI held at the pause is kept
    cupti.calls.clear()
    assert c.resume() is True and not c.is_paused
    assert {a for n, a in cupti.calls if n == "enable"} == kinds and cupti.enabled == kinds
    assert "register" not in [n for n, _ in cupti.calls]  # nothing registered again
    # The per-call API restriction is set again with the API kinds (launches kept, cudaGetDevice off).
    assert ("api", (1, 1)) in cupti.calls and ("api", (2, 0)) in cupti.calls
    assert [n for n, _ in cupti.calls].index("api") > max(i for i, (n, _) in enumerate(cupti.calls) if n == "enable")


def test_pause_and_resume_are_idempotent_and_intervals_recorded(monkeypatch):
    c, cupti, _ = _started()
    t = iter(range(1000, 100_000, 1000))
    monkeypatch.setattr(cupti_collect.clock, "now_ns", lambda: next(t))
    assert c.resume() is True and cupti.calls == []  # not paused: nothing to do
    assert c.pause() is True
    n = len(cupti.calls)
    assert c.pause() is True and len(cupti.calls) == n  # already paused: no CUPTI call
    assert c.resume() is True
    n = len(cupti.calls)
    assert c.resume() is True and len(cupti.calls) == n
    assert c.paused == [(1000, 2000, threading.current_thread().name)] and c.paused_count == 1
    res = c.resource()
    assert res["gputrace.record.paused_ns"] == [1000, 2000] and res["gputrace.record.paused_total_ns"] == 1000
    assert c.take_paused() == c.paused and c.take_paused() == []


def test_no_pause_no_resource_attributes():
    c, _, _ = _started()
    assert not any(k.startswith("gputrace.record.") for k in c.resource())


def test_stop_ends_a_pause_and_a_stopped_collector_cannot_pause():
    c, cupti, _ = _started()
    c.pause()
    c.stop()
    assert c.paused_count == 1 and not c.is_paused and len(c.take_paused()) == 1
    assert c.pause() is False and c.resume() is False
    assert CuptiCollector().pause() is False  # never started


def test_refused_calls_never_raise_and_are_recorded():
    c, cupti, kinds = _started()
    cupti.refuse = {"flush", "disable"}
    assert c.pause() is True  # counted as paused: resume enables every kind again
    cupti.refuse = {"enable"}
    assert c.resume() is True
    assert c.toggle_errors[0].startswith("pause: flush: RuntimeError")
    assert any(e.startswith("pause: disable") for e in c.toggle_errors)
    assert any(e.startswith("resume: enable") for e in c.toggle_errors)
    assert c.toggle_errors[0] in c.errors
    assert c.resource()["gputrace.record.pause_errors"] == c.toggle_errors


def test_concurrent_pause_resume_from_many_threads_stays_consistent():
    c, cupti, kinds = _started()

    def flip(i):
        for _ in range(50):
            (c.pause if i % 2 else c.resume)()

    threads = [threading.Thread(target=flip, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    c.resume()
    assert cupti.enabled == kinds and not c.is_paused
    assert all(a <= b for a, b, _ in c.paused)


# -- the public module ----------------------------------------------------------------------------------
def test_no_op_outside_record():
    recorder.shutdown()
    assert record_control.pause() is False and record_control.resume() is False
    assert record_control.is_collecting() is False and record_control.is_paused() is False
    assert record_control.paused_intervals() == []
    assert gputrace.record_control is record_control


def test_no_op_with_a_recorder_without_cuda_activity():
    recorder.shutdown()
    gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False, cuda_activity=False)
    try:
        assert record_control.pause() is False and record_control.is_collecting() is False
    finally:
        gputrace.shutdown()


@pytest.fixture
def fake_cupti_run(monkeypatch):
    """configure(cuda_activity=True) with CuptiCollector.start playing against the stand-in module."""
    recorder.shutdown()
    state = {}

    def start(self):
        cupti = self._cupti = LoggingCupti(self)
        self.load_names(cupti)
        for k in (AK.CONCURRENT_KERNEL, AK.RUNTIME, AK.MARKER):
            cupti.activity_enable(k)
            self._kinds.append(k)
        self.xkind = 5
        self.push = cupti.activity_push_external_correlation_id
        self.pop = cupti.activity_pop_external_correlation_id
        self.measure_offset()
        state["cupti"] = cupti

    monkeypatch.setattr(CuptiCollector, "start", start)
    mem = MemorySink()
    rec = gputrace.configure(sinks=[mem], collect_gpu_info=False, cuda_activity=True, flush_interval_s=1.0)
    yield rec, mem, state["cupti"]
    gputrace.shutdown()
    hotpath.stop_external_ids()


def test_record_control_pauses_the_active_collector_and_the_trace_says_when(fake_cupti_run):
    rec, mem, cupti = fake_cupti_run
    assert record_control.is_collecting() is True
    with gputrace.phase("before"):
        pass
    assert record_control.pause() is True and record_control.is_paused() and not record_control.is_collecting()
    with gputrace.phase("while_paused"):  # phases keep being recorded
        pass
    assert record_control.pause(drain=True) is True  # (already paused; drains on this thread)
    assert "before" in [s["name"] for s in mem.spans]
    assert record_control.pause() is True
    assert record_control.resume() is True and record_control.is_collecting()
    (iv,) = record_control.paused_intervals()
    gputrace.shutdown()
    names = [s["name"] for s in mem.spans]
    assert {"before", "while_paused"} <= set(names)
    (paused,) = mem.by_name(recorder.PAUSED_SPAN)
    assert (paused["start_ns"], paused["end_ns"]) == iv
    assert paused["attributes"]["gputrace.record.paused"] is True
    assert paused["attributes"]["gputrace.lane"] == "thread:gputrace.record.paused"
    assert rec.resource["gputrace.record.paused_ns"] == list(iv)
    assert rec.resource["gputrace.record.paused_count"] == 1
    assert record_control.pause() is False  # recorder gone: no-op again


def test_a_pause_in_force_at_shutdown_is_closed_and_written(fake_cupti_run):
    rec, mem, cupti = fake_cupti_run
    record_control.pause()
    gputrace.shutdown()
    (paused,) = mem.by_name(recorder.PAUSED_SPAN)
    assert paused["end_ns"] >= paused["start_ns"]
    assert rec.resource["gputrace.record.paused_count"] == 1
