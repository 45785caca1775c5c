"""Pause and resume CUDA activity collection in a recorded process (``gputrace record``).

    from gputrace.trace import record_control

    record_control.pause()      # CUPTI collects nothing from here ...
    run_some_steps()
    record_control.resume()     # ... to here
    record_control.is_collecting()

What it controls: the process's CUPTI activity collection (kernels, copies, memsets, synchronizations, the
CUDA API calls that launch them, external correlation, NVTX markers), started by ``gputrace record`` or by
``gputrace.configure(cuda_activity=True)``. ``pause`` flushes CUPTI's buffers first, so every record made
before it is kept, then disables each activity kind the collector enabled (``cupti.activity_disable``);
``resume`` enables the same kinds again and registers nothing else. The recorder itself keeps running:
``gputrace.phase`` spans are recorded while paused, the program's NVTX calls keep working (but CUPTI does
not see them: an NVTX range that starts before a pause and ends after it, or the other way round, is lost;
pause between ranges), and the process's root span stays open. ``pause(drain=True)`` also hands what was
recorded so far to the sinks on the calling thread, so the exporter's work on the collected interval does not
run during the paused one (benchmarks/real_programs/train_step.py ``--toggle-blocks`` uses it).

What the trace says: each paused interval becomes a span named ``gputrace.record.paused`` (under the
process's root span, on its own lane ``thread:gputrace.record.paused``, attribute
``gputrace.record.paused`` true), and the process's resource gets ``gputrace.record.paused_count``,
``gputrace.record.paused_total_ns`` and ``gputrace.record.paused_ns`` (``[start0, end0, start1, ...]``, trace
epoch ns). A reader must not take a paused interval for an idle GPU: it is an interval with no records.

Contract:

* Any thread may call any of these, at any time (they are serialised inside the collector). ``pause`` and
  ``resume`` run CUPTI's flush and enable/disable calls on the calling thread (``pause`` converts the
  flushed records there too: call them between units of work, not inside a timed one).
* They never raise. Outside ``gputrace record`` (no recorder, or one without CUDA activity, e.g.
  ``--no-cuda-activity``, no cupti-python, no GPU, ``GPUTRACE_DISABLE``) each is a no-op returning False. A
  flush, disable or enable that CUPTI refuses is kept in the collector's ``errors`` and in the resource
  attribute ``gputrace.record.pause_errors``; the call still returns as if it had worked.
* Idempotent: ``pause`` while paused and ``resume`` while collecting change nothing and make no CUPTI call.
* GPU work already enqueued when ``pause`` is called may or may not be recorded: pause where the GPU is
  synchronised (after a training step's ``loss.item()``, say).
* Only this process: a recorded child process (DataLoader workers, torchrun ranks) has its own collector.

Stdlib only; imports nothing from CUPTI itself.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["pause", "resume", "is_collecting", "is_paused", "paused_intervals"]

log = logging.getLogger("gputrace.trace")


def _active() -> tuple[Any, Any]:
    """(recorder, its CUPTI collector) when the collector can pause, else (None, None). Never raises."""
    try:
        from gputrace.trace import recorder

        rec = recorder.get_recorder()
        if rec is None or not rec.record:
            return None, None
        col = rec.cupti
        if col is None or not callable(getattr(col, "pause", None)):
            return None, None
        return rec, col
    except Exception:  # noqa: BLE001 the contract: never raise
        return None, None


def _collector() -> Any:
    return _active()[1]


def pause(drain: bool = False) -> bool:
    """Stop CUDA activity collection (records so far are flushed and kept). True when collection is paused
    after the call (also when it already was), False when nothing is collected here (not under ``gputrace
    record`` or CUPTI off). ``drain``: also hand everything recorded so far to the sinks now, on this thread
    (``Recorder.drain``), so the exporter's work on the collected interval does not run during the paused one
    (what an on/off measurement wants; it makes this call as slow as that work). Any thread; never raises."""
    rec, col = _active()
    if col is None:
        return False
    try:
        ok = bool(col.pause())
    except Exception:  # noqa: BLE001 the contract: never raise (the collector itself records its failures)
        log.exception("gputrace: pausing CUDA activity collection failed")
        return False
    if drain:
        try:
            rec.drain()
        except Exception:  # noqa: BLE001 the contract: never raise (the exporter drains again later)
            log.exception("gputrace: draining at a pause failed")
    return ok


def resume() -> bool:
    """Collect CUDA activity again after ``pause``. True when collecting after the call (also when it was not
    paused), False when nothing is collected here. Any thread; never raises."""
    col = _collector()
    if col is None:
        return False
    try:
        return bool(col.resume())
    except Exception:  # noqa: BLE001 the contract: never raise
        log.exception("gputrace: resuming CUDA activity collection failed")
        return False


def is_collecting() -> bool:
    """True when this process collects CUDA activity now (under ``gputrace record`` with CUPTI, not paused)."""
    col = _collector()
    return col is not None and not bool(getattr(col, "is_paused", False))


def is_paused() -> bool:
    """True when CUDA activity collection is paused now (False outside ``gputrace record`` or CUPTI off)."""
    col = _collector()
    return col is not None and bool(getattr(col, "is_paused", False))


def paused_intervals() -> list[tuple[int, int]]:
    """(start, end) trace epoch ns of the pauses that ended so far (the first 1024); [] when none."""
    col = _collector()
    if col is None:
        return []
    return [(int(a), int(b)) for a, b, *_ in list(getattr(col, "paused", ()))]
