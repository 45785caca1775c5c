"""What the interrupt tests ask of processes they started: is one still running, which of a group still run.
A zombie (killed, waiting for its parent or init to reap it) has ended. Linux reads ``/proc/PID/stat``;
elsewhere a process that answers signal 0 counts as running."""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...), None when unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    fields = _stat(pid)
    return fields is None or fields[0] not in ("Z", "X")


def group_alive(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies have ended). Without /proc, ``[pgid]`` while the group
    answers signal 0."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [pgid]
    alive = []
    for d in proc.iterdir():
        if d.name.isdigit():
            fields = _stat(int(d.name))
            if fields is not None and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                alive.append(int(d.name))
    return alive
