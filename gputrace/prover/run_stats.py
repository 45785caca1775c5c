"""A run's phase clock and its cancellation point: ``_Stats`` and ``RunCancelled``.

``_Stats.phase(name, label, **attrs)`` opens a ``gputrace.phase`` and adds its seconds to ``sec[(name, label)]``
(``ProveResult.phase_seconds``), measured on the same interval as the span. Every phase of a run starts there, so
that is where the run's threads stop once ``_Stats.cancel()`` was called: a phase that starts after it raises
``RunCancelled`` (phases already running finish).

Threads: ``phase`` is called from every thread of a run (the totals are kept under a lock); ``cancel`` from the
caller's thread, when the batch is interrupted or fails there (``batch_run._Batch``).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager

import gputrace


class RunCancelled(Exception):
    """Raised in a worker thread at its next phase once the run is cancelled (the caller was interrupted)."""


class _Stats:
    """Thread-safe per-(phase, device-label) seconds, measured on the same intervals as the spans. Every phase
    of a run starts here, so it is also where the run's threads stop once ``cancel`` was called: a phase that
    starts after it raises ``RunCancelled`` (phases already running finish)."""

    def __init__(self) -> None:
        self.sec: dict[tuple[str, str], float] = defaultdict(float)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @contextmanager
    def phase(self, name: str, label: str, **kw):
        if self._cancelled.is_set():
            raise RunCancelled(f"run cancelled before its {name} phase")
        t0 = time.perf_counter()
        try:
            with gputrace.phase(name, **kw) as p:
                yield p
        finally:
            dt = time.perf_counter() - t0
            with self._lock:
                self.sec[(name, label)] += dt
