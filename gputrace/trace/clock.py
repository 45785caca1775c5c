"""The recorder's clock: ``perf_counter_ns()`` readings mapped to epoch nanoseconds by one offset.

``EPOCH_OFFSET_NS`` is ``time.time_ns() - perf_counter_ns()`` taken once at import (the one ``time_ns``
anchor of the run), so span times are monotonic within a process and comparable to epoch times of other
processes to within the system clock's own accuracy.
"""

from __future__ import annotations

import time


def _anchor() -> tuple[int, int]:
    # Bracket time_ns() between two perf_counter_ns() reads and take the midpoint: halves the error of
    # a preemption between the two clock reads. Returns (offset, half the bracket).
    a = time.perf_counter_ns()
    w = time.time_ns()
    b = time.perf_counter_ns()
    return w - (a + b) // 2, (b - a + 1) // 2


EPOCH_OFFSET_NS: int
#: How far ``EPOCH_OFFSET_NS`` may be from the true offset because of the read itself (half the
#: perf_counter bracket around the time_ns read; the system clock's own error comes on top).
ANCHOR_UNCERTAINTY_NS: int
EPOCH_OFFSET_NS, ANCHOR_UNCERTAINTY_NS = _anchor()


def now_ns() -> int:
    """Current time on the recorder's epoch clock (ns)."""
    return time.perf_counter_ns() + EPOCH_OFFSET_NS


def to_epoch_ns(perf_ns: int) -> int:
    """A ``perf_counter_ns()`` reading on the recorder's epoch clock (ns)."""
    return perf_ns + EPOCH_OFFSET_NS
