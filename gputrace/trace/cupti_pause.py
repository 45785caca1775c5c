"""The bookkeeping of pausing CUDA activity collection (``CuptiCollector.pause``/``resume``): the pause in
force, the intervals that ended, and the toggle errors, as the resource attributes ``gputrace.record.paused_*``.

``PauseLog`` makes no CUPTI call and reads no clock: the collector passes the times (trace epoch ns).

Threads: no lock of its own. ``begin``, ``end``, ``error`` and ``take`` run holding the collector's toggle
lock (any thread: pause, resume, stop, the exporter's ``take_paused``); ``resource`` and the plain attributes
are read without it (the exporter thread), as before. Raises nothing, except ``end`` (AssertionError) when no
pause is in force.
"""

from __future__ import annotations

__all__ = ["MAX_PAUSED_KEPT", "PauseLog"]

#: Paused intervals kept for the resource attribute ``gputrace.record.paused_ns`` (the first ones; all are
#: counted in ``gputrace.record.paused_count`` / ``paused_total_ns`` and each still becomes a span).
MAX_PAUSED_KEPT = 1024


class PauseLog:
    """Pauses of one collector."""

    def __init__(self) -> None:
        #: (trace epoch ns, thread name) of the pause in force, or None while collecting.
        self.at: tuple[int, str] | None = None
        #: (start ns, end ns, thread name) of the first MAX_PAUSED_KEPT pauses that ended, oldest first.
        self.paused: list[tuple[int, int, str]] = []
        self.count = 0
        self.total_ns = 0
        self.toggle_errors: list[str] = []
        self._new: list[tuple[int, int, str]] = []  # ended, not yet taken by ``take``

    def begin(self, t: int, thread: str) -> None:
        """A pause starts at ``t`` (trace epoch ns) on thread ``thread``."""
        self.at = (t, thread)

    def end(self, t_end: int) -> None:
        """The pause in force ends at ``t_end`` (an end before its start is taken as the start)."""
        assert self.at is not None
        t0, name = self.at
        self.at = None
        iv = (t0, max(t0, t_end), name)
        self.count += 1
        self.total_ns += iv[1] - iv[0]
        if len(self.paused) < MAX_PAUSED_KEPT:
            self.paused.append(iv)
        self._new.append(iv)

    def take(self) -> list[tuple[int, int, str]]:
        """(start ns, end ns, thread name) of the pauses that ended since the last call."""
        out, self._new = self._new, []
        return out

    def error(self, msg: str) -> bool:
        """A refused flush, disable or enable: kept in ``toggle_errors`` (the first 20). True when kept (the
        collector then also keeps it in its ``errors``)."""
        if len(self.toggle_errors) < 20:
            self.toggle_errors.append(msg)
            return True
        return False

    def resource(self) -> dict:
        """``gputrace.record.paused_*`` resource attributes (none before the first pause): count, total ns,
        and the intervals as a flat list ``[start0, end0, start1, end1, ...]`` of trace epoch ns (the first
        MAX_PAUSED_KEPT), plus ``gputrace.record.pause_errors`` when a toggle failed."""
        if not self.count and self.at is None and not self.toggle_errors:
            return {}
        out: dict = {
            "gputrace.record.paused_count": int(self.count),
            "gputrace.record.paused_total_ns": int(self.total_ns),
            "gputrace.record.paused_ns": [int(t) for iv in self.paused for t in iv[:2]],
        }
        if self.toggle_errors:
            out["gputrace.record.pause_errors"] = list(self.toggle_errors)
        return out
