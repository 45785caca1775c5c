"""Starting the worker processes of a parallel read (``parallel``): a fork of the caller where that is safe,
else a fresh interpreter.

A fork has everything imported already and starts reading at once; a fresh interpreter spends ~0.16 CPU-s
importing numpy, msgspec, orjson and our modules first (benchmarks/RESULTS.md, step 18). A fork is only
safe while the caller has no other Python thread: a thread that holds a lock at the moment of the fork (the
import lock, a logging handler's, an executor's) leaves it held forever in the child. So the caller forks
only when it is the process's only Python thread (the CLI, a script); otherwise (the TUI, a test runner with
helper threads) the worker is ``python -c WORKER``, as before.

Not ``multiprocessing``: its spawn/forkserver start methods re-import the caller's ``__main__`` (re-running
an unguarded script's top level in every worker), and its fork method does not check for threads.

Either way a worker gets the claim board and its part file as inherited descriptors, reads pieces until the
claims meet, and exits 0 once its part file is complete (anything else: non-zero).

Liveness: the caller never waits on a worker without bound. ``Worker.finish`` returns None for a worker that
is stopped (SIGSTOP, a debugger: seen in ``/proc``) or still runs ``stall_s`` after the caller asked, and kills
it; the caller then reads that worker's pieces itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["start_worker", "Worker", "FORK"]

#: Whether a worker may be a fork of the caller (tests turn it off to cover the interpreter path).
FORK = hasattr(os, "fork")

#: A fresh interpreter's program. ``python -c`` (like ``-m``) puts the working directory first on ``sys.path``;
#: it is taken off, so that the worker imports the caller's ``gputrace`` (``PYTHONPATH``), never a ``gputrace``
#: directory that happens to be in the caller's working directory (another checkout).
WORKER = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
          "from gputrace.timeline.formats.otlp_jsonl.parallel import _main; sys.exit(_main(sys.argv[1:]))")


class Worker:
    """A started worker: ``wait()`` -> exit status (0: its part file is complete), ``kill()``."""

    def __init__(self, popen: subprocess.Popen | None = None, pid: int = 0) -> None:
        self.popen, self.pid = popen, pid
        self.status: int | None = None  # a fork's exit status, once reaped

    def wait(self) -> int:
        if self.popen is not None:
            return self.popen.wait()
        if self.status is None:
            _, st = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(st)
        return int(self.status)

    def running(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status is None

    def stopped(self) -> bool:
        """Whether the process is stopped (state T or t in ``/proc/PID/stat``: SIGSTOP, SIGTSTP, a tracer);
        False where that cannot be seen (no ``/proc``)."""
        pid = self.popen.pid if self.popen is not None else self.pid
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return False
        state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
        return state in (b"T", b"t")

    def finish(self, stall_s: float) -> int | None:
        """Its exit status once it exits; None (after killing it) where it is stopped, or still runs after
        ``stall_s`` seconds. Polls (1 ms, doubling to 50 ms); never blocks longer than ``stall_s``."""
        end = time.monotonic() + stall_s
        delay = 0.001
        while self.running():
            if self.stopped() or time.monotonic() >= end:
                self.kill()
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.wait()

    def kill(self) -> None:
        """Kill it if it still runs, and reap it."""
        if self.running():
            if self.popen is not None:
                self.popen.kill()
            else:
                os.kill(self.pid, signal.SIGKILL)
        self.wait()


def start_worker(work: Callable[[], object], argv: list[str], fds: tuple[int, ...]) -> Worker:
    """Start one worker: a fork that runs ``work()`` and leaves (status 0 unless it raised), or, where a fork is
    not safe, ``python -c WORKER *argv`` with ``fds`` inherited. Raises OSError when neither can start."""
    if FORK and threading.active_count() == 1:
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code, runs no cleanup of the caller's
            code = 1
            try:
                work()
                code = 0
            finally:
                os._exit(code)
        return Worker(pid=pid)
    import gputrace

    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(gputrace.__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return Worker(subprocess.Popen([sys.executable, "-c", WORKER, *argv], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, pass_fds=fds))
