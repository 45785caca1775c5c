"""CUDA-event device times for phases given ``stream=``. Imports CuPy (only module of the recorder that does).

Caller's thread (``record_start``/``record_end``, from ``Phase.__enter__``/``__exit__``): take an event from
a per-device pool (``cupy.cuda.Event()``, created on the stream's device) and record it on the stream. Nothing
waits. Lane: ``stream:N``, N = the order in which this stream (``stream.ptr``) was first seen on its device.

Exporter thread (``resolve``): a phase is ready when its end event has completed (``Event.done``). For each
device with ready phases, record a *fresh reference event* on a private idle stream, synchronise it, and
bracket that with two host clock reads (best of three; the GPU stamped the reference inside the bracket, so the
alignment error is at most half the bracket, typically a few microseconds). Then
``gpu_time(ev) = ref_host - elapsed_time(ev, ref)``. Events go back to the pool.

Why a fresh reference per batch instead of one per run: ``cudaEventElapsedTime`` returns float32
milliseconds, whose resolution decays with distance (~60 ns at 1 s, ~250 us at an hour), and the GPU and host
clocks drift by ppm; a reference taken right after the events keeps both errors at the level of the bracket.

Errors (a destroyed stream, a CUDA fault) never reach the caller through ``resolve``: those phases keep their
host times and are counted as unresolved.
"""

from __future__ import annotations

import time
from time import perf_counter_ns

import cupy

__all__ = ["record_start", "record_end", "resolve", "lane_of", "calibrate"]

#: False while CUDA activity (CUPTI) is collected and the recorder chose to skip the per-phase events: the
#: phase keeps its device and stream lane, and its kernels/copies (child spans) say when the GPU was busy.
EVENTS = True
#: Set by the CUPTI collector: (device, stream pointer) -> CUPTI stream id, so a phase's lane ``stream:N`` is
#: the lane of its kernels (N = CUPTI's stream id, as Nsight Systems numbers streams). None: first-seen order.
stream_id_hook = None

_cdev: dict = {}  # (stream pointer, device argument, stream's device) -> (device, lane, None, None), EVENTS off
_pools: dict[int, list] = {}
_lanes: dict[int, dict[int, str]] = {}  # device -> stream pointer -> lane name
_side_streams: dict[int, object] = {}
#: device -> (half bracket width in ns) of the last reference taken; exposed for tests/diagnostics.
last_alignment_error_ns: dict[int, int] = {}


def _device_of(stream, device) -> int:
    d = getattr(stream, "device_id", None)  # -1 for the null stream and external streams
    if d is None or d < 0:
        d = device if device is not None else cupy.cuda.runtime.getDevice()
    return int(d)


def lane_of(device: int, stream_ptr: int) -> str:
    """``stream:N`` for a stream pointer on a device (N counted per device in first-seen order)."""
    lanes = _lanes.get(device)
    if lanes is None:
        lanes = _lanes.setdefault(device, {})
    n = lanes.get(stream_ptr)
    if n is None:
        sid = None
        if stream_id_hook is not None:
            try:
                sid = stream_id_hook(device, stream_ptr)
            except Exception:  # noqa: BLE001 a failing hook only costs the CUPTI stream number
                sid = None
        n = lanes.setdefault(stream_ptr, f"stream:{sid if sid is not None else len(lanes)}")
    return n


def _event(device: int):
    pool = _pools.get(device)
    if pool:
        try:
            return pool.pop()
        except IndexError:  # another thread emptied it in between
            pass
    with cupy.cuda.Device(device):
        return cupy.cuda.Event()


def record_start(p, stream, device) -> None:
    """Record the start event of phase ``p`` on ``stream`` (caller's thread). Raises CuPy errors."""
    if not EVENTS:
        # (device, lane) per stream pointer and device argument, looked up once: this is the whole cost of a
        # stream phase here. Not cached for a stream that names no device with no device= (the null stream
        # follows the thread's current device).
        ptr = stream.ptr
        sd = getattr(stream, "device_id", None)
        key = (ptr, device, sd)
        cd = _cdev.get(key)
        if cd is None:
            dev = _device_of(stream, device)
            cd = (dev, lane_of(dev, ptr), None, None)
            if device is not None or (sd is not None and sd >= 0):
                if len(_cdev) >= 4096:
                    _cdev.clear()
                _cdev[key] = cd
        p.cdev = cd
        return
    dev = _device_of(stream, device)
    ev = _event(dev)
    ev.record(stream)
    p.ev0 = ev
    p.ev1 = None
    p.cdev = (dev, lane_of(dev, stream.ptr), None, None)


def record_end(p) -> None:
    """Record the end event of phase ``p`` on its stream (caller's thread, or the thread calling end())."""
    if p.ev0 is None:  # no events for this phase (EVENTS off when it started)
        return
    ev = _event(p.cdev[0])
    ev.record(p.stream)
    p.ev1 = ev


def calibrate(device: int, tries: int = 3) -> tuple[int, int, object]:
    """Reference for ``device``: (host perf_counter_ns estimate, half bracket ns, event). Exporter thread."""
    side = _side_streams.get(device)
    with cupy.cuda.Device(device):
        if side is None:
            side = _side_streams[device] = cupy.cuda.Stream(non_blocking=True)
        best: tuple[int, int, object] | None = None
        for _ in range(max(1, tries)):
            ev = cupy.cuda.Event()
            h0 = perf_counter_ns()
            ev.record(side)
            ev.synchronize()
            h1 = perf_counter_ns()
            if best is None or h1 - h0 < best[1] * 2:
                best = ((h0 + h1) // 2, (h1 - h0) // 2, ev)
    assert best is not None  # (at least one try)
    last_alignment_error_ns[device] = best[1]
    return best


def _release(p) -> None:
    dev = p.cdev[0]
    pool = _pools.setdefault(dev, [])
    for ev in (p.ev0, p.ev1):
        if ev is not None:
            pool.append(ev)
    p.ev0 = p.ev1 = None


def resolve(phases: list, wait_s: float = 0.0) -> tuple[list, list, int]:
    """Split phases into (ready with device times set, still pending, number failed).

    ``wait_s`` > 0 polls pending events up to that long (final drain). Failed phases are returned in the
    ready list with host times only. Exporter thread only.
    """
    deadline = time.monotonic() + wait_s
    ready: list = []
    pending: list = []
    failed = 0
    todo = phases
    while True:
        pending = []
        for p in todo:
            try:
                # ev1 is None only when record_end raised: that phase would wait forever.
                done = p.ev1.done
            except Exception:  # noqa: BLE001 counted as unresolved; the exporter must go on
                failed += 1
                _release_quiet(p)
                ready.append(p)
                continue
            (ready if done else pending).append(p)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.001)
        todo = pending
    by_dev: dict[int, list] = {}
    for p in ready:
        if p.ev0 is not None:
            by_dev.setdefault(p.cdev[0], []).append(p)
    for dev, ps in by_dev.items():
        try:
            ref_host, _err, ref = calibrate(dev)
        except Exception:  # noqa: BLE001 counted as unresolved; the exporter must go on
            failed += len(ps)
            for p in ps:
                _release_quiet(p)
            continue
        for p in ps:
            try:
                g0 = ref_host - int(cupy.cuda.get_elapsed_time(p.ev0, ref) * 1e6)
                g1 = ref_host - int(cupy.cuda.get_elapsed_time(p.ev1, ref) * 1e6)
            except Exception:  # noqa: BLE001 counted as unresolved; the exporter must go on
                failed += 1
                _release_quiet(p)
                continue
            d, lane = p.cdev[0], p.cdev[1]
            # Stored on the perf_counter clock; records.to_span adds the epoch offset like for host times.
            p.cdev = (d, lane, g0, g1)
            _release(p)
    return ready, pending, failed


def _release_quiet(p) -> None:
    try:
        _release(p)
    except Exception:  # noqa: BLE001 releasing is best effort; the events are dropped
        p.ev0 = p.ev1 = None
