"""What the processes of a parallel read share: the claim board and the part files (``parallel``'s plumbing).

* ``ClaimBoard``: a file cut at line starts into pieces; the caller claims pieces from the front and the
  workers from the back until the claims meet, so every process reads until the file is done and none
  waits for another longer than one piece. Shared memory (an anonymous file whose descriptor the workers
  inherit), updated under a POSIX record lock: record locks belong to a process, so the caller and each
  worker exclude each other (``flock`` would not: an inherited descriptor shares its lock).
* part files: a worker's result, pickled (protocol 5, numpy buffers out of band) into an anonymous file
  that the caller created and handed down, then mapped copy-on-write by the caller, so the columns are
  views of the mapping (never copied, no pipe drained while the caller reads).

Only our own processes write these files (see ``parallel``). Linux/POSIX only, like ``parallel``.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import pickle
import struct
import tempfile
import time

__all__ = ["ClaimBoard", "new_anonymous_file", "dump_part", "load_part", "PART_ERRORS"]

#: What ``load_part`` raises for a missing, short or damaged part file (a worker that died while writing).
PART_ERRORS = (OSError, ValueError, EOFError, pickle.UnpicklingError, struct.error)

_COUNTERS = struct.Struct("<qq")  # front, back
_HEAD = struct.Struct("<QQ")  # part file: pickle length, number of out-of-band buffers
_ALIGN = 64


def new_anonymous_file() -> int:
    """A new anonymous file (an fd; shared memory where the system has ``memfd_create``, else an unlinked
    temporary file). Raises OSError."""
    if hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("gputrace-part", os.MFD_CLOEXEC)
        except OSError:
            pass
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


#: The longest a process waits for the claim board's lock (held for microseconds by a live process).
CLAIM_WAIT_S = 10.0


class ClaimTimeout(OSError):
    """The claim board's lock stayed taken (its holder stopped or hung); the read falls back to one process."""


class ClaimBoard:
    """The pieces of one parallel read and who has claimed them: pieces ``[0, front)`` by the caller,
    ``[back, n)`` by workers. Layout: front, back, n, then the n + 1 piece bounds (int64). Each process
    uses its own ``ClaimBoard`` object on the shared descriptor, from one thread."""

    def __init__(self, fd: int, cuts: list[int]) -> None:
        self.fd, self.cuts = fd, cuts
        self.n = len(cuts) - 1

    @classmethod
    def create(cls, cuts: list[int]) -> ClaimBoard:
        """A board for pieces ``cuts[i]:cuts[i + 1]``, nothing claimed. Raises OSError."""
        fd = new_anonymous_file()
        n = len(cuts) - 1
        os.pwrite(fd, struct.pack(f"<3q{len(cuts)}q", 0, n, n, *cuts), 0)
        return cls(fd, cuts)

    @classmethod
    def open(cls, fd: int) -> ClaimBoard:
        """The board behind an inherited descriptor (a worker)."""
        (n,) = struct.unpack("<q", os.pread(fd, 8, 16))
        cuts = list(struct.unpack(f"<{n + 1}q", os.pread(fd, 8 * (n + 1), 24)))
        return cls(fd, cuts)

    def piece(self, i: int) -> tuple[int, int]:
        return self.cuts[i], self.cuts[i + 1]

    def taken(self) -> tuple[int, int]:
        """(front, back) now."""
        front, back = _COUNTERS.unpack(os.pread(self.fd, _COUNTERS.size, 0))
        return front, back

    def _lock(self) -> None:
        """Take the board's lock, waiting at most ``CLAIM_WAIT_S`` (a process stopped while it held the lock
        would otherwise keep every other waiting forever). Raises ``ClaimTimeout``."""
        end = time.monotonic() + CLAIM_WAIT_S
        delay = 0.0005
        while True:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, _COUNTERS.size, 0)
                return
            except (BlockingIOError, PermissionError):  # held by another process (EAGAIN or EACCES)
                if time.monotonic() >= end:
                    raise ClaimTimeout(f"the claim board's lock was held for {CLAIM_WAIT_S:g} s") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)

    def _claim(self, from_back: bool) -> int | None:
        self._lock()
        try:
            front, back = self.taken()
            if front >= back:
                return None
            if from_back:
                back -= 1
                i = back
            else:
                i = front
                front += 1
            os.pwrite(self.fd, _COUNTERS.pack(front, back), 0)
            return i
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, _COUNTERS.size, 0)

    def claim_front(self) -> int | None:
        """The next piece from the front (the caller's), or None when every piece is claimed."""
        return self._claim(False)

    def claim_back(self) -> int | None:
        """The next piece from the back (a worker's), or None when every piece is claimed."""
        return self._claim(True)


def dump_part(res: object, fd: int) -> None:
    """Append ``res`` to the part file ``fd`` as one record (``load_part``'s format): header, pickle
    (protocol 5), then each out-of-band buffer (numpy columns) at a 64-byte boundary of the file. A worker
    appends a record per piece as soon as it is read, so little is left to write when the claims meet."""
    bufs: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(res, protocol=5, buffer_callback=bufs.append)
    raws = [b.raw() for b in bufs]
    head = _HEAD.pack(len(meta), len(raws)) + struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    with os.fdopen(fd, "wb", closefd=False) as f:
        f.write(b"\0" * (-pos % _ALIGN))
        pos += -pos % _ALIGN
        f.write(head)
        f.write(meta)
        pos += len(head) + len(meta)
        for r in raws:
            pad = -pos % _ALIGN
            f.write(b"\0" * pad)
            f.write(r)
            pos += pad + r.nbytes


def load_part(fd: int) -> list:
    """Every record of a part file (written by our own worker), in order. The numpy columns are views of a
    copy-on-write mapping of the file, alive while they are. Raises one of ``PART_ERRORS`` for a short or
    damaged file."""
    size = os.fstat(fd).st_size
    if size == 0:
        return []
    mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    view = memoryview(mm)
    out = []
    pos = 0
    while pos < size:
        pos += -pos % _ALIGN
        nmeta, nbuf = _HEAD.unpack_from(view, pos)
        lens = struct.unpack_from(f"<{nbuf}Q", view, pos + _HEAD.size)
        pos += _HEAD.size + 8 * nbuf
        meta = view[pos:pos + nmeta]
        pos += nmeta
        bufs = []
        for n in lens:
            pos += -pos % _ALIGN
            bufs.append(view[pos:pos + n])
            pos += n
        if pos > size:
            raise ValueError("part file shorter than its header says")
        out.append(pickle.loads(meta, buffers=bufs))
    return out
