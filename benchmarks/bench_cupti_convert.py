"""What converting CUPTI activity records into plain dicts costs on CUPTI's thread (holding the GIL), per record.

Usage::

    .venv/bin/python benchmarks/bench_cupti_convert.py [--records 20000] [--repeats 15]

No CUDA: fake record objects (a class with ``__slots__`` and the attribute names of the cupti-python records,
int ``kind`` values) go through two ways of converting a buffer, in the same run, alternating:

* ``old``: the conversion before issue 24, one record at a time: ``CuptiCollector._plain`` (the kind's name
  looked up, an if-chain, ``{f: getattr(a, f) for f in FIELDS}``) inside a ``try`` per record;
* ``new``: ``CuptiCollector._completed`` (a dispatch dict on the int kind, one ``operator.attrgetter`` per
  kind, ``dict(zip(...))``, one ``try`` per buffer).

Prints ns per record (median of the repeats) for each kind alone and for a training-step mix, and the
ratio new/old. Checks first that both give the same dicts.
"""

from __future__ import annotations

import argparse
import enum
import statistics
import sys
import time
from types import SimpleNamespace as NS

from gputrace.trace.cupti_collect import CuptiCollector

# Values as CUPTI's enums have them (cupti_activity.h).
AK = enum.IntEnum("ActivityKind", {"MEMCPY": 1, "MEMSET": 2, "KERNEL": 3, "DRIVER": 5, "RUNTIME": 6,
                                   "MARKER": 12, "CONCURRENT_KERNEL": 10, "EXTERNAL_CORRELATION": 31,
                                   "SYNCHRONIZATION": 38})
FAKE_CUPTI = NS(
    ActivityKind=AK,
    ActivityMemcpyKind=enum.IntEnum("MK", {"UNKNOWN": 0, "HTOD": 1, "DTOH": 2, "DTOD": 8}),
    ActivityMemoryKind=enum.IntEnum("MemK", {"UNKNOWN": 0, "PAGEABLE": 1, "PINNED": 2, "DEVICE": 3}),
    ActivitySynchronizationType=enum.IntEnum("ST", {"UNKNOWN": 0, "EVENT_SYNCHRONIZE": 1,
                                                    "STREAM_SYNCHRONIZE": 3}),
    ExternalCorrelationKind=enum.IntEnum("EK", {"INVALID": 0, "CUSTOM0": 5}),
    CallbackDomain=NS(RUNTIME_API=1, DRIVER_API=2),
    get_callback_name=lambda domain, cbid: {1: "cudaLaunchKernel_v7000", 2: "cuLaunchKernel"}[domain],
    get_timestamp=time.time_ns,
)


class Kernel:
    __slots__ = ("kind", "start", "end", "device_id", "context_id", "stream_id", "correlation_id", "name",
                 "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
                 "static_shared_memory", "dynamic_shared_memory")


class Memcpy:
    __slots__ = ("kind", "start", "end", "device_id", "context_id", "stream_id", "correlation_id", "bytes",
                 "copy_kind", "src_kind", "dst_kind")


class Memset:
    __slots__ = ("kind", "start", "end", "device_id", "context_id", "stream_id", "correlation_id", "bytes",
                 "memory_kind")


class Sync:
    __slots__ = ("kind", "start", "end", "context_id", "stream_id", "correlation_id", "cuda_event_id", "type")


class Api:
    __slots__ = ("kind", "start", "end", "correlation_id", "cbid", "thread_id", "process_id")


class External:
    __slots__ = ("kind", "correlation_id", "external_id", "external_kind")


class Marker:
    __slots__ = ("kind", "id", "timestamp", "flags_", "name", "domain", "object_id")


def _make(cls, **kw):
    o = cls()
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def record(kind: str, i: int):
    """One fake record of ``kind`` (CONCURRENT_KERNEL, MEMCPY, MEMSET, SYNCHRONIZATION, RUNTIME, DRIVER,
    EXTERNAL_CORRELATION, MARKER), number ``i``."""
    t = 1_000_000 + 10 * i
    dev = {"start": t, "end": t + 7, "device_id": 0, "context_id": 1, "stream_id": 7, "correlation_id": i}
    if kind == "CONCURRENT_KERNEL":
        return _make(Kernel, kind=int(AK.CONCURRENT_KERNEL), **dev, name="_Z6kernelPfi", grid_x=128, grid_y=1,
                     grid_z=1, block_x=256, block_y=1, block_z=1, registers_per_thread=32,
                     static_shared_memory=0, dynamic_shared_memory=4096)
    if kind == "MEMCPY":
        return _make(Memcpy, kind=int(AK.MEMCPY), **dev, bytes=1 << 20, copy_kind=1, src_kind=2, dst_kind=3)
    if kind == "MEMSET":
        return _make(Memset, kind=int(AK.MEMSET), **dev, bytes=4096, memory_kind=3)
    if kind == "SYNCHRONIZATION":
        return _make(Sync, kind=int(AK.SYNCHRONIZATION), start=t, end=t + 9, context_id=1, stream_id=7,
                     correlation_id=i, cuda_event_id=0xFFFFFFFF, type=3)
    if kind in ("RUNTIME", "DRIVER"):
        return _make(Api, kind=int(AK[kind]), start=t, end=t + 3, correlation_id=i,
                     cbid=211 if kind == "RUNTIME" else 307, thread_id=4242, process_id=77)
    if kind == "EXTERNAL_CORRELATION":
        return _make(External, kind=int(AK.EXTERNAL_CORRELATION), correlation_id=i, external_id=i // 3,
                     external_kind=5)
    if kind == "MARKER":
        return _make(Marker, kind=int(AK.MARKER), id=i, timestamp=t, flags_=2, name="step", domain=None,
                     object_id=NS(pt=NS(thread_id=4242)))
    raise ValueError(kind)


KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION",
         "MARKER")
#: A PyTorch training step's mix (per launched kernel: its record, the launch call, one external correlation).
MIX = (("CONCURRENT_KERNEL", 30), ("RUNTIME", 25), ("DRIVER", 5), ("EXTERNAL_CORRELATION", 30), ("MEMCPY", 4),
       ("MEMSET", 3), ("SYNCHRONIZATION", 2), ("MARKER", 1))


def buffer_of(kinds: list[str], n: int) -> list:
    return [record(kinds[i % len(kinds)], i) for i in range(n)]


def collector() -> CuptiCollector:
    c = CuptiCollector(max_pending=1 << 30)
    c._cupti = FAKE_CUPTI
    c.load_names(FAKE_CUPTI)
    return c


def old_completed(c: CuptiCollector, activities) -> None:
    """``_completed`` as it was before issue 24 (a ``try`` and ``_plain`` per record)."""
    c.buffers += 1
    out = []
    conv = c._plain
    for a in activities:
        try:
            r = conv(a)
        except Exception as e:  # noqa: BLE001 as the old code
            c.dropped += 1
            if len(c.errors) < 20:
                c.errors.append(f"record: {type(e).__name__}: {e}")
            continue
        if r is not None:
            out.append(r)
    with c._lock:
        c._pending.extend(out)
        c.records += len(out)


def new_completed(c: CuptiCollector, activities) -> None:
    c._completed(activities)


def time_per_record(fn, c: CuptiCollector, buf: list) -> float:
    c._pending = []
    t0 = time.perf_counter_ns()
    fn(c, buf)
    dt = time.perf_counter_ns() - t0
    assert len(c._pending) == len(buf)
    c._pending = []
    return dt / len(buf)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20_000, help="records per buffer")
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args(argv)
    mix = [k for k, w in MIX for _ in range(w)]
    cases = [(k, buffer_of([k], a.records)) for k in KINDS] + [("training-step mix", buffer_of(mix, a.records))]
    c_old, c_new = collector(), collector()
    for name, buf in cases:  # same dicts, both ways
        old_completed(c_old, buf)
        new_completed(c_new, buf)
        assert c_old.collect() == c_new.collect(), name
    print(f"CUPTI record -> plain dict, ns per record (median of {a.repeats} buffers of {a.records}, old and new "
          f"alternating; Python {sys.version.split()[0]})")
    print(f"{'kind':22s} {'old':>8s} {'new':>8s} {'new/old':>8s}")
    summary = {}
    for name, buf in cases:
        old: list[float] = []
        new: list[float] = []
        for _ in range(a.repeats):
            old.append(time_per_record(old_completed, c_old, buf))
            new.append(time_per_record(new_completed, c_new, buf))
        mo, mn = statistics.median(old), statistics.median(new)
        summary[name] = (mo, mn)
        print(f"{name:22s} {mo:8.0f} {mn:8.0f} {mn / mo:8.2f}")
    mo, mn = summary["training-step mix"]
    print(f"BENCH cupti_convert old_ns={mo:.0f} new_ns={mn:.0f} ratio={mn / mo:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
