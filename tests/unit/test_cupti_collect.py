"""CuptiCollector's CUPTI-thread side without CUDA: record objects -> plain dicts, the bound on held records
(drops counted), clock-offset bookkeeping, and a dump file. A stand-in module plays ``cupti``."""

from __future__ import annotations

import enum
import json
from types import SimpleNamespace as NS

import pytest

from gputrace.trace.cupti_collect import CuptiCollector


class AK(enum.IntEnum):
    CONCURRENT_KERNEL = 10
    MEMCPY = 1
    RUNTIME = 5
    DRIVER = 6
    EXTERNAL_CORRELATION = 31
    MARKER = 12
    OVERHEAD = 25


class FakeCupti:
    ActivityKind = AK
    ActivityMemcpyKind = enum.IntEnum("MK", {"UNKNOWN": 0, "HTOD": 1, "DTOH": 2})
    ActivityMemoryKind = enum.IntEnum("MemK", {"UNKNOWN": 0, "PAGEABLE": 1, "DEVICE": 3})
    ActivitySynchronizationType = enum.IntEnum("ST", {"UNKNOWN": 0, "STREAM_SYNCHRONIZE": 2})
    ExternalCorrelationKind = enum.IntEnum("EK", {"INVALID": 0, "CUSTOM0": 5})
    CallbackDomain = NS(RUNTIME_API=1, DRIVER_API=2)

    def __init__(self):
        self.t = 1_000

    def get_callback_name(self, domain, cbid):
        return {(1, 41): "cudaMemcpyAsync_v3020", (2, 307): "cuLaunchKernel"}[(domain, cbid)]

    def get_timestamp(self):
        self.t += 1_000_000
        return self.t


def _collector(**kw):
    c = CuptiCollector(**kw)
    cupti = c._cupti = FakeCupti()
    c.load_names(cupti)  # (API domains: RUNTIME -> 1, DRIVER -> 2, as FakeCupti.CallbackDomain)
    return c


def _kernel(corr):
    return NS(kind=10, start=5, end=9, device_id=0, context_id=1, stream_id=7, correlation_id=corr, name="_Z1kv",
              grid_x=1, grid_y=2, grid_z=3, block_x=4, block_y=5, block_z=6, registers_per_thread=8,
              static_shared_memory=0, dynamic_shared_memory=16)


def test_records_become_plain_dicts_with_enum_names():
    c = _collector()
    c._completed([
        _kernel(3),
        NS(kind=1, start=1, end=2, device_id=0, context_id=1, stream_id=7, correlation_id=4, bytes=64, copy_kind=1,
           src_kind=1, dst_kind=3),
        NS(kind=5, start=0, end=1, correlation_id=4, cbid=41, thread_id=99, process_id=9),
        NS(kind=6, start=0, end=1, correlation_id=3, cbid=307, thread_id=99, process_id=9),
        NS(kind=31, correlation_id=3, external_id=17, external_kind=5),
        NS(kind=12, id=1, timestamp=3, flags_=2, name="step", domain=None, object_id=NS(pt=NS(thread_id=99))),
        NS(kind=25),  # a kind gputrace does not use: skipped, not dropped
        NS(kind=1),  # broken record (fields missing): dropped and counted, never raised into CUPTI
    ])
    recs = c.collect()
    assert [r["kind"] for r in recs] == ["CONCURRENT_KERNEL", "MEMCPY", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION",
                                         "MARKER"]
    assert recs[0]["grid_z"] == 3 and recs[0]["name"] == "_Z1kv"
    assert (recs[1]["copy_kind"], recs[1]["src_kind"], recs[1]["dst_kind"]) == ("HTOD", "PAGEABLE", "DEVICE")
    assert recs[2]["name"] == "cudaMemcpyAsync" and recs[3]["name"] == "cuLaunchKernel"  # version suffix dropped
    assert recs[4]["external_kind"] == "CUSTOM0" and recs[4]["external_id"] == 17
    assert recs[5] == {"id": 1, "timestamp": 3, "flags": 2, "name": "step", "domain": "", "thread_id": 99,
                       "kind": "MARKER"}
    assert c.dropped == 1 and c.records == 6 and c.collect() == []


def test_held_records_are_bounded_and_drops_counted():
    c = _collector(max_pending=5)
    c._completed([_kernel(i) for i in range(3)])
    c._completed([_kernel(i) for i in range(4)])
    assert len(c.collect()) == 5 and c.dropped == 2
    assert c.resource()["gputrace.cupti.dropped"] == 2 and c.resource()["gputrace.cupti.records"] == 5


def test_clock_offset_is_re_measured_and_drift_recorded(monkeypatch):
    from gputrace.trace import clock

    c = _collector()
    now = iter(range(10_000_000, 10_000_000 + 10_000_000_000, 100))
    monkeypatch.setattr(clock, "now_ns", lambda: next(now))
    first = c.measure_offset()
    second = c.measure_offset()
    assert c.offset_first_ns == first and c.offset_ns == second and c.max_drift_ns == abs(second - first) > 0
    assert c.offset_bracket_ns == 100


def test_dump_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CUPTI_DUMP", str(tmp_path / "d.jsonl"))
    c = _collector()
    c._completed([_kernel(1)])
    c.collect()
    (line,) = (tmp_path / "d.jsonl").read_text().splitlines()
    assert json.loads(line)["correlation_id"] == 1


def test_start_without_cupti_raises_unavailable(monkeypatch):
    import builtins

    from gputrace.trace.cupti_collect import CuptiUnavailable, available

    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda n, *a, **k: (_ for _ in ()).throw(ImportError("none"))
                        if n == "cupti" else real(n, *a, **k))
    with pytest.raises(CuptiUnavailable, match="cupti-python not usable"):
        CuptiCollector().start()
    assert "not usable" in available()


# -- the per-kind converters (issue 24) against the reference conversion ``_plain`` -----------------------------
class AllKinds(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 5
    RUNTIME = 6
    CONCURRENT_KERNEL = 10
    MARKER = 12
    OVERHEAD = 25
    EXTERNAL_CORRELATION = 31
    SYNCHRONIZATION = 38


class FakeCuptiAllKinds(FakeCupti):
    ActivityKind = AllKinds
    ActivitySynchronizationType = enum.IntEnum("ST2", {"UNKNOWN": 0, "EVENT_SYNCHRONIZE": 1, "STREAM_SYNCHRONIZE": 3})

    def get_callback_name(self, domain, cbid):
        return {(2, 41): "cudaMemcpyAsync_v3020", (1, 307): "cuLaunchKernel"}[(domain, cbid)]


def _every_kind():
    dev = {"start": 5, "end": 9, "device_id": 0, "context_id": 1, "stream_id": 7, "correlation_id": 3}
    kernel = {**vars(_kernel(3)), **dev}
    return [
        NS(**{**kernel, "kind": 10}),
        NS(**{**kernel, "kind": 3}),  # the older KERNEL kind
        NS(kind=1, **dev, bytes=64, copy_kind=1, src_kind=1, dst_kind=3),
        NS(kind=1, **dev, bytes=64, copy_kind=99, src_kind=1, dst_kind=42),  # values the enums lack: UNKNOWN
        NS(kind=2, **dev, bytes=4096, memory_kind=3),
        NS(kind=38, start=1, end=2, context_id=1, stream_id=7, correlation_id=4, cuda_event_id=0xFFFFFFFF, type=3),
        NS(kind=6, start=0, end=1, correlation_id=4, cbid=41, thread_id=99, process_id=9),
        NS(kind=5, start=0, end=1, correlation_id=3, cbid=307, thread_id=99, process_id=9),
        NS(kind=5, start=0, end=1, correlation_id=3, cbid=9999, thread_id=99, process_id=9),  # unnamed call
        NS(kind=31, correlation_id=3, external_id=17, external_kind=5),
        NS(kind=12, id=1, timestamp=3, flags_=2, name="step", domain=None, object_id=NS(pt=NS(thread_id=99))),
        NS(kind=12, id=2, timestamp=4, flags_=4, name=None, domain="d", object_id=None),  # no thread id
        NS(kind=AllKinds.CONCURRENT_KERNEL, **{k: v for k, v in kernel.items() if k != "kind"}),  # an enum member
    ]


def _all_kinds_collector(**kw):
    c = CuptiCollector(**kw)
    c._cupti = FakeCuptiAllKinds()
    c.load_names(c._cupti)
    return c


def test_converters_give_exactly_the_reference_dicts_for_every_kind():
    c = _all_kinds_collector()
    recs = _every_kind()
    want = [c._plain(a) for a in recs]
    assert {r["kind"] for r in want} == {"CONCURRENT_KERNEL", "KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION",
                                         "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION", "MARKER"}
    c._completed(recs + [NS(kind=25), NS(kind=77)])  # kinds not used (one the enum lacks): skipped, not dropped
    got = c.collect()
    assert got == want
    assert [list(r) for r in got] == [list(r) for r in want]  # same keys in the same order (the dump's JSON)
    assert [type(v) for r in got for v in r.values()] == [type(v) for r in want for v in r.values()]
    assert c.dropped == 0 and c.records == len(recs)


class _Raising:
    """A record whose every attribute but ``kind`` raises (a view into a buffer gone bad)."""

    def __init__(self, kind):
        self.kind = kind

    def __getattr__(self, name):
        raise RuntimeError(f"cannot read {name}")


def test_a_record_raising_on_attribute_access_is_dropped_and_the_rest_kept():
    c = _all_kinds_collector()
    good = _every_kind()
    c._completed([_Raising(10), good[0], _Raising(1), _Raising(31), good[2], NS(), good[6]])  # NS(): no kind
    got = c.collect()
    assert got == [c._plain(good[0]), c._plain(good[2]), c._plain(good[6])]
    assert c.dropped == 4 and c.records == 3
    assert c.errors[0] == "record: RuntimeError: cannot read start"


def test_a_buffer_whose_iteration_fails_keeps_what_came_before():
    c = _all_kinds_collector()
    good = _every_kind()

    def buffer():
        yield good[0]
        raise OSError("buffer gone")

    c._completed(buffer())
    assert c.collect() == [c._plain(good[0])] and c.dropped == 1
    assert c.errors[0] == "buffer: OSError: buffer gone"


def test_the_split_modules_keep_the_collectors_names_importable_and_import_no_cupti():
    import subprocess
    import sys

    code = ("import sys\n"
            "from gputrace.trace.cupti_collect import (MAX_PAUSED_KEPT, CuptiCollector, CuptiUnavailable, available,\n"
            "    library_path)\n"
            "from gputrace.trace import cupti_convert, cupti_pause, cupti_probe\n"
            "assert available is cupti_probe.available and library_path is cupti_probe.library_path\n"
            "assert MAX_PAUSED_KEPT == cupti_pause.MAX_PAUSED_KEPT == 1024\n"
            "c = CuptiCollector()\n"
            "assert c.paused == [] and c.paused_count == 0 and c.toggle_errors == [] and not c.is_paused\n"
            "assert c.resource()['gputrace.cupti.records'] == 0 and c.paused_resource() == {}\n"
            "assert 'cupti' not in sys.modules, 'cupti imported at import time'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_collect_flushes_cupti_only_when_forced_or_after_a_quiet_spell(monkeypatch):
    """A flush from the exporter while the program launches stalls the launching thread (H200, attach_cost.py
    --variants): ``collect`` leaves full buffers to CUPTI's worker and flushes only when forced or when no
    buffer came for ``idle_flush_s``."""
    from gputrace.trace import cupti_collect

    now = [100.0]
    monkeypatch.setattr(cupti_collect.time, "monotonic", lambda: now[0])
    c = _collector(idle_flush_s=2.0)
    flushes = []
    c._cupti.activity_flush_all = flushes.append
    c._completed([_kernel(1)])  # CUPTI's worker delivered a buffer at t=100
    now[0] = 101.5
    assert len(c.collect()) == 1 and flushes == []  # busy: no flush from the exporter
    now[0] = 102.4
    c._completed([_kernel(2)])
    now[0] = 104.0
    assert len(c.collect()) == 1 and flushes == []  # 1.6 s since the last delivery
    now[0] = 104.5
    assert c.collect() == [] and flushes == [0]  # quiet for 2.1 s: completed buffers asked for
    now[0] = 105.0
    assert c.collect() == [] and flushes == [0]  # the flush counts as a delivery: not again at once
    assert c.collect(force=True) == [] and flushes == [0, 1]  # forced: every buffer, at any time
    assert c.errors == []
