"""Python processes of a launch that started without the recorder (Linux ``/proc``; elsewhere nothing).

A child started with its own ``PYTHONPATH`` (``env={"PYTHONPATH": ...}``, ``env -i``), or with ``-I``/``-E``/
``-S``, never imports ``record``'s bootstrap and records nothing. ``gputrace record`` calls ``Watch.scan``
while the launch runs (every 0.25 s): it lists the processes of the launch (its process group, and the
descendants of the command), and for each Python interpreter among them (the executable's name starts with
``python``) notes why the bootstrap cannot have run, read from its command line and environment. The
closing line names those that never checked in. A process that lives less than one scan interval can be
missed. Contract: never raises; the scan reads ``/proc`` only (no signal, no ptrace).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["Watch", "Unrecorded", "why_unrecorded"]

_MP_HELPERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


@dataclass
class Unrecorded:
    """A Python process of the launch that cannot have started the recorder."""

    pid: int
    command: str  # its command line, shortened
    why: str


def why_unrecorded(argv: list[str], env: dict[str, str], site: str) -> str | None:
    """Why an interpreter with ``argv`` and ``env`` does not run ``record``'s bootstrap (in folder ``site``), or
    None when it does (or is one of multiprocessing's helpers, which record nothing by design)."""
    flags: set[str] = set()
    for a in argv[1:]:
        if a in ("-c", "-m") or not a.startswith("-") or a == "-":
            break
        if a.startswith("-") and not a.startswith("--"):
            flags.update(a[1:])
    if any(h in " ".join(argv) for h in _MP_HELPERS):
        return None
    for f, why in (("I", "started with -I"), ("E", "started with -E"), ("S", "started with -S")):
        if f in flags:
            return why
    if not env.get("GPUTRACE_RECORD_TRACE"):
        return "its environment lost GPUTRACE_RECORD_*"
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if os.path.abspath(site) not in paths:
        return "its PYTHONPATH lost record's bootstrap folder"
    return None


@dataclass
class Watch:
    """The launch's processes seen so far that cannot be recorded (``found``, by pid)."""

    root: int  # the command's pid (its process group is the same number)
    site: str  # record's bootstrap folder
    found: dict[int, Unrecorded] = field(default_factory=dict)
    _known: dict[int, bool] = field(default_factory=dict)  # pid -> one of the launch's (decided when first seen)

    def scan(self) -> None:
        """Look at the launch's processes once (see the module doc). Never raises. Reads the status of a
        process once, when it first appears (a scan costs a listing of ``/proc`` plus the launch's own
        processes, not every process of the machine each time)."""
        try:
            live = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        except OSError:
            return
        for pid in [p for p in self._known if p not in live]:
            del self._known[pid]  # (gone: its number may come back as another process)
        ours = {p for p, mine in self._known.items() if mine} | {self.root}
        pending = {}
        for pid in live - self._known.keys():
            st = _stat(pid)
            if st is not None:
                pending[pid] = st
        grew = True
        while grew:  # (a child may be listed before its parent)
            grew = False
            for pid, (ppid, pgid) in list(pending.items()):
                if pid == self.root or pgid == self.root or ppid in ours:
                    ours.add(pid)
                    del pending[pid]
                    grew = True
        for pid in live - self._known.keys():
            self._known[pid] = pid in ours
        for pid in ours & live:
            if pid in self.found:
                continue  # (the others are looked at again: a process may exec another program later)
            info = _python_process(pid)
            if info is None:
                continue
            argv, env = info
            why = why_unrecorded(argv, env, self.site)
            if why is not None:
                self.found[pid] = Unrecorded(pid, _short(argv), why)

    def unrecorded(self, checked_in: set[int]) -> list[Unrecorded]:
        """Those found that did not check in after all, by pid."""
        return [u for pid, u in sorted(self.found.items()) if pid not in checked_in]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # (the command name may hold spaces and parentheses)
    try:
        return int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def _python_process(pid: int) -> tuple[list[str], dict[str, str]] | None:
    """(argv, environment) of a process whose executable is a Python interpreter, else None."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        if not exe.startswith("python"):
            return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = {}
            for item in f.read().split(b"\0"):
                k, eq, v = item.partition(b"=")
                if eq:
                    env[k.decode(errors="replace")] = v.decode(errors="replace")
    except OSError:
        return None
    return argv, env


def _short(argv: list[str], limit: int = 60) -> str:
    text = " ".join([os.path.basename(argv[0]) if argv else "python", *argv[1:]])
    return text if len(text) <= limit else text[: limit - 1] + "…"
