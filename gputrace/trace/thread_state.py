"""Per-thread phase state: one ``_ThreadState`` per thread that ever opened or ended a phase.

Contract: plain data, no locks and nothing that raises. Created by ``hotpath._new_state`` on the thread it
describes (the first phase that thread opens) and registered there under ``hotpath``'s registry lock. The
owning thread (and any thread ending a ``start_phase`` handle) appends to ``buf``, links ``cur`` and counts
``dropped``; the recorder's exporter thread only removes a prefix of ``buf`` and reads ``dropped`` (the
buffer rules: ``gputrace.trace.hotpath``). Split out of ``hotpath`` unchanged; ``hotpath`` binds the class
at import, so creating a state costs what it did.
"""

from __future__ import annotations

import threading

__all__ = ["_ThreadState"]


class _ThreadState:
    """Per-thread recorder state. ``buf``/``dropped`` are written by the owning thread only
    (and by threads ending a ``start_phase`` handle); the exporter thread only reads ``dropped``
    and removes a prefix of ``buf``."""

    __slots__ = ("buf", "cur", "dropped", "ident", "name", "thread", "lane")

    def __init__(self) -> None:
        t = threading.current_thread()
        self.buf: list = []
        self.cur = None
        self.dropped = 0
        self.ident = threading.get_native_id()  # the OS thread id, as Nsight Systems shows it
        self.name = t.name
        self.thread = t
        self.lane = "thread:" + t.name
