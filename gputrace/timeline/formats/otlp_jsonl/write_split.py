"""Writing one big OTLP JSONL file with two processes: the second half of the lines is encoded by a forked
child into a part file beside the output, then appended (``os.copy_file_range``: no copy through Python).

Encoding a million Nsight rows is ~3 CPU-s of Python that one process cannot spread over cores (the GIL);
a fork shares the Timeline without pickling it. Used only where it can pay: a big Timeline, at least two
CPUs available to this process with one of them idle by the load average, and no other thread running
(a fork copies only the calling thread, and locks other threads hold would stay held in the child).
If the child fails in any way, the parent encodes its half itself: the output is the same bytes either
way, and a failure here never loses lines. Call from the main thread of a CLI process.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["MIN_SPLIT_ROWS", "split_workers", "write_split"]

#: Below this many rows a split does not pay for the fork and the copy.
MIN_SPLIT_ROWS = 200_000


def split_workers(rows: int) -> int:
    """2 where a split write of ``rows`` rows should pay now (see the module doc), else 1."""
    if rows < MIN_SPLIT_ROWS or threading.active_count() > 1 or not hasattr(os, "fork"):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 1
    return 2 if cpus >= 2 and busy <= cpus - 1 else 1  # (the load counts this process too)


def _write(f: IO[bytes], lines: Iterator[bytes]) -> None:
    for line in lines:
        f.write(line)
        f.write(b"\n")


def write_split(f: IO[bytes], path: Path, requests: Callable[[range], Iterator[bytes]], total: int,
                half: int) -> None:
    """Write lines ``0..total`` of ``requests`` (a function of a range of line numbers giving those lines)
    to ``f``: lines from ``half`` on encoded by a forked child. Raises what writing ``f`` raises."""
    half = min(max(half, 0), total)
    fd, part = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.", suffix=".part")
    pid = -1
    try:
        gc.freeze()  # the child's collections then leave the shared objects (and their pages) alone
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                gc.unfreeze()
        if pid == 0:  # the child: its half into the part file, then out without the parent's cleanup
            code = 1
            try:
                with os.fdopen(fd, "wb", buffering=1 << 20) as pf:
                    _write(pf, requests(range(half, total)))
                code = 0
            finally:
                os._exit(code)
        _write(f, requests(range(0, half)))
        _, status = os.waitpid(pid, 0)
        pid = -1
        f.flush()
        if os.waitstatus_to_exitcode(status) == 0:
            _append(fd, f)
        else:  # the child failed: encode its half here
            _write(f, requests(range(half, total)))
    finally:
        if pid > 0:  # interrupted while the child runs: stop it
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
        os.unlink(part)


def _append(src_fd: int, f: IO[bytes]) -> None:
    """Append the whole file ``src_fd`` to ``f`` (flushed), in the kernel where it can."""
    size = os.fstat(src_fd).st_size
    out = f.fileno()
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src_fd, out, size - done, done)
            if n == 0:
                break
            done += n
    except (AttributeError, OSError):
        pass
    if done < size:  # no copy_file_range (or it stopped): through user space
        os.lseek(src_fd, done, os.SEEK_SET)
        with os.fdopen(os.dup(src_fd), "rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)
        f.flush()
