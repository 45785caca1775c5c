"""The switch interval while gputrace's own threads hold the GIL for long stretches (draining, record conversion).

CPython hands the GIL to a waiting thread only after the holder has run for ``sys.getswitchinterval()`` (5 ms by
default). A program thread that releases the GIL around every call (every PyTorch op, every CuPy launch) must take
it back after each one, so while the exporter drains a batch each of the program's calls may wait up to 5 ms: the
GIL convoy. On an H200 a 3 ms, ~50-op CNN step took 100-400 ms about every half second under ``record`` (the
exporter's drain period); neither CUPTI's buffer size (64 KiB to 2 MiB) nor its flush period changed that
(benchmarks/RESULTS.md, "record's cost on a launch-bound step"). ``benchmarks/bench_gil_convoy.py`` on the 2-core CI
machine: one GIL-holding thread makes a GIL-releasing call cost 5.27 ms at 5 ms, 0.33 ms at 0.1 ms.

``shared()`` lowers the interval to :data:`SHARE_INTERVAL_S` while at least one such stretch runs (a count, so
overlapping stretches on several threads restore once), and puts back the program's own value at the end unless
the program changed it meanwhile. Any thread; never raises.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SHARE_INTERVAL_S", "shared"]

#: The switch interval while gputrace's threads work (s): a program call waits at most about this for the GIL.
SHARE_INTERVAL_S = 0.0001

_lock = threading.Lock()
_depth = 0
_saved: float | None = None  # the program's interval, while lowered


def _enter() -> None:
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth == 1:
            prev = sys.getswitchinterval()
            if prev > SHARE_INTERVAL_S:
                _saved = prev
                sys.setswitchinterval(SHARE_INTERVAL_S)


def _exit() -> None:
    global _depth, _saved
    with _lock:
        _depth -= 1
        if _depth == 0 and _saved is not None:
            # (the set value reads back rounded to microseconds: compare with a tolerance)
            if abs(sys.getswitchinterval() - SHARE_INTERVAL_S) < 1e-6:
                sys.setswitchinterval(_saved)
            _saved = None


@contextmanager
def shared() -> Iterator[None]:
    """Within this block the GIL changes hands every :data:`SHARE_INTERVAL_S` (see the module docstring)."""
    _enter()
    try:
        yield
    finally:
        _exit()
