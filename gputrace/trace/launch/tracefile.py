"""``gputrace record``'s trace file: claimed at start, written as one segment per process, joined at the end.

Contract (docs/record.md, "The trace file"; the segment layout is ``gputrace.otlp.segments``):

* ``claim(trace)`` refuses a ``--trace`` that is a symbolic link, a directory or another non-regular file
  (record never writes through a link, and renames a new file over ``trace`` at the end), then creates the
  segment folder ``<trace>.d`` with its marker ``.record.lock``, holding an exclusive ``flock`` on it (a
  descriptor of ``record``'s own, close-on-exec) and this pid in it. A folder that already exists means another
  ``record`` is writing the same path (its lock is held) or one did not finish (killed: its segments are still
  there): both are refused with one line saying which, so a second run never erases or mixes into another's
  spans. ``trace`` itself is not touched until ``finish``.
* Each recorded process writes only its own segment (``LaunchFileSink``): a process killed mid-write can cut
  only its own last line, never another's.
* ``finish()`` joins the segments' whole lines into a new file beside ``trace`` and renames it over
  ``trace`` (an earlier file there is replaced, never truncated: a reader holding it keeps its copy), then
  removes the folder. It returns what each segment held (spans counted in the file, cut last lines left
  out). A failure leaves the segments in place and raises OSError; ``gputrace view <trace>.d`` reads them.

Runs in the ``record`` process only (main thread).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gputrace.otlp.segments import LOCK_NAME, Segment, folder_of, merge, segment_files

__all__ = ["TraceRefused", "LaunchTrace", "claim"]


class TraceRefused(ValueError):
    """``--trace`` cannot be recorded to; ``str`` is one line saying why and what to do."""


@dataclass
class LaunchTrace:
    """A claimed trace path: its segment folder and the lock that says a ``record`` is writing it."""

    path: Path
    folder: str
    lock_fd: int
    segments: list[Segment] = field(default_factory=list)

    def finish(self) -> list[Segment]:
        """Join the segments into ``path`` (see the module contract): no segment (no process started
        recording) writes no file; segments without a line (a process killed before its first flush) an
        empty one. Returns the segments. Raises OSError (the folder stays)."""
        if segment_files(self.folder):
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            try:
                self.segments = merge(self.folder, fd)
                os.fsync(fd)
                os.fchmod(fd, 0o666 & ~_umask())  # (mkstemp made it 0600: as a plain open would)
            except BaseException:
                os.close(fd)
                os.unlink(tmp)
                raise
            os.close(fd)
            os.replace(tmp, self.path)
        self.release()
        return self.segments

    def release(self) -> None:
        """Remove the folder (its segments and marker) and drop the lock."""
        for name in [*segment_files(self.folder), LOCK_NAME]:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.folder, name))
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)
        with contextlib.suppress(OSError):
            os.close(self.lock_fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def claim(trace: Path) -> LaunchTrace:
    """Claim ``trace`` for one ``record`` run (see the module contract). Raises ``TraceRefused`` (one line)
    and OSError (the folder cannot be made)."""
    if trace.is_symlink():
        raise TraceRefused(f"{trace} is a symbolic link: record writes a new file at --trace and never through a "
                           f"link; give the file's own path ({os.path.realpath(trace)})")
    if trace.is_dir():
        raise TraceRefused(f"{trace} is a directory: give a file name, e.g. {trace / 'record.jsonl'}")
    if trace.exists() and not trace.is_file():
        raise TraceRefused(f"{trace} is not a regular file (a pipe or a device): record writes a new file at "
                           f"--trace when the launch ends; give a file name")
    trace.parent.mkdir(parents=True, exist_ok=True)
    folder = folder_of(trace)
    try:
        os.mkdir(folder)
    except FileExistsError:
        raise TraceRefused(_busy(trace, folder)) from None
    lock = os.path.join(folder, LOCK_NAME)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:
        os.close(fd)
        raise
    return LaunchTrace(trace, folder, fd)


def _busy(trace: Path, folder: str) -> str:
    """Why ``folder`` (which exists) stops this run."""
    lock = os.path.join(folder, LOCK_NAME)
    fd = -1
    for _ in range(20):  # (a record started at the same moment may not have made its marker yet)
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
            break
        except FileNotFoundError:
            time.sleep(0.01)
        except OSError:
            break
    if fd < 0:
        return (f"{folder} exists and is not a record segment folder: remove or rename it, or give another "
                f"--trace")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip()
            return (f"another gputrace record (pid {pid if pid.isdigit() else '?'}) is writing {trace}: give "
                    f"this one another --trace")
        return (f"{folder} holds the segments of a record that did not finish (killed?): read them with "
                f"`gputrace view {folder}`, then remove the folder (or give another --trace)")
    finally:
        os.close(fd)
