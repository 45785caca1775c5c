"""Processes that ended without their final flush (killed, ``os._exit``), from the trace alone.

``gputrace record`` gives each process a resource attribute ``gputrace.launch.command`` and a root span of
that name, open while the process runs and written by its final flush (at exit, on SIGTERM or SIGHUP). A
process whose spans are in the trace but whose root span is not ended without that flush: SIGKILL (the OOM
killer, a job scheduler), ``os._exit``, a crash in C. Its phases still open then are missing, so figures
about it may be short. ``report`` and ``view`` say so in one line.

Contract: pure function of a ``Timeline``; a trace without ``gputrace.launch.command`` gives ``[]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gputrace.timeline.model import Timeline

__all__ = ["Unfinished", "unfinished_processes", "unfinished_note"]

LAUNCH_COMMAND = "gputrace.launch.command"


@dataclass(frozen=True)
class Unfinished:
    """A recorded process without its root span: where and what it was, and its last span end seen."""

    host: str
    pid: int
    command: str
    spans: int
    last_end_ns: int

    def to_dict(self) -> dict:
        return {"host": self.host, "pid": self.pid, "command": self.command, "spans": self.spans,
                "last_end_ns": self.last_end_ns}


def unfinished_processes(tl: Timeline) -> list[Unfinished]:
    """The processes of ``tl`` recorded by ``gputrace record`` whose root span is missing, by host and pid."""
    if tl.n == 0 or not tl.resources:
        return []
    res_col = tl.cols["resource"]
    groups: dict[tuple[str, int], tuple[str, list[int]]] = {}
    for i, r in enumerate(tl.resources):
        cmd = r.get(LAUNCH_COMMAND) if isinstance(r, dict) else None
        if not isinstance(cmd, str):
            continue
        pid = r.get("process.pid", -1)
        key = (str(r.get("host.name", "")), int(pid) if isinstance(pid, int) else -1)
        groups.setdefault(key, (cmd, []))[1].append(i)
    out = []
    phase_of = {name: k for k, name in enumerate(tl.phases)}
    for (host, pid), (cmd, idx) in groups.items():
        rows = np.flatnonzero(np.isin(res_col, idx))
        if not len(rows):
            continue
        k = phase_of.get(cmd)
        if k is not None and bool((tl.cols["phase"][rows] == k).any()):
            continue
        if any(tl.names.get(int(r)) == cmd for r in rows if int(r) in tl.names):
            continue
        out.append(Unfinished(host, pid, cmd, len(rows), int(tl.cols["end"][rows].max())))
    return sorted(out, key=lambda u: (u.host, u.pid))


def unfinished_note(items: list[Unfinished]) -> str:
    """One line for ``report`` and ``view``, or '' when every recorded process finished."""
    if not items:
        return ""
    n = len(items)
    named = ", ".join(f"pid {u.pid} ({u.command})" for u in items[:3]) + (f" and {n - 3} more" if n > 3 else "")
    who = "1 process" if n == 1 else f"{n} processes"
    return (f"{who} ended without a final flush (killed?): {named}; {'its' if n == 1 else 'their'} phases still "
            f"open then are missing")
