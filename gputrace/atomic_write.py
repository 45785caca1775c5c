"""Output files written whole or not at all: every file gputrace produces (exports, screenshots, keys,
proofs, vk.json, manifests) goes through :func:`atomic_output` / :func:`write_atomic`.

Contract:

- The data goes to a private temporary file in the target's own directory (``mkstemp``: a fresh name,
  ``O_CREAT|O_EXCL`` so an existing file or planted symlink is never opened, mode 0600 while written).
- On success it is flushed, fsynced, given the mode a plain ``open()`` would give (0666 & ~umask) and
  renamed over the target with ``os.replace``: readers see the old file or the whole new one. A symlink
  at the target is replaced by the file, never followed.
- On any failure (an exception in the ``with`` body, a write or rename error) the temporary file is
  removed and the exception propagates; the target is untouched. An OSError of the file system itself
  (creating, writing, syncing or renaming) is raised as :class:`OutputError`: an OSError whose
  ``filename`` is the caller's path (never the hidden temporary name) and whose ``str()`` says in words
  what is wrong (``cannot write out/o.json: the folder out does not exist``).

Stdlib only, so every layer may import it. Thread-safe (no shared state).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["OutputError", "atomic_output", "describe_errno", "write_atomic"]


def describe_errno(code: int | None, path: str | os.PathLike, fallback: str = "") -> str:
    """What an errno means for ``path``, in words (no ``[Errno N]``): ``the folder X does not exist``."""
    p = Path(path)
    parent = str(p.parent) if str(p.parent) not in ("", ".") else "the current folder"
    missing = f"the folder {parent} does not exist" if not p.parent.is_dir() else f"files cannot be created in {parent}"
    words = {
        errno.ENOENT: missing,
        errno.ENOTDIR: f"{parent} is not a folder",
        errno.EACCES: f"permission denied (no write access to {parent})",
        errno.EPERM: f"permission denied (no write access to {parent})",
        errno.EISDIR: "it is a folder",
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "the file system is read-only",
        errno.ENAMETOOLONG: "the name is too long",
        errno.EEXIST: "a file of that name is in the way",
    }
    return words.get(code or 0) or (fallback or os.strerror(code or 0)).rstrip(".").lower()


class OutputError(OSError):
    """An output file could not be written: ``filename`` is the target the caller named; ``str()`` is
    ``cannot write TARGET: <what is wrong, in words>``."""

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _output_error(exc: OSError, target: Path) -> OutputError:
    return OutputError(exc.errno or 0, describe_errno(exc.errno, target, exc.strerror or str(exc)), str(target))


def _umask() -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """``with atomic_output("out.json", "w") as f: f.write(...)``: see the module contract.
    ``mode`` is ``"wb"`` or ``"w"``. Raises OSError (directory missing, not writable, target is a directory)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_output: mode must be 'wb' or 'w', got {mode!r}")
    p = Path(path)
    if p.is_dir() and not p.is_symlink():  # (os.replace's EISDIR/ENOTEMPTY would come only after the whole write)
        raise OutputError(errno.EISDIR, "it is a folder", str(p))
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise _output_error(exc, p) from None
    try:
        with os.fdopen(fd, mode, encoding=encoding if mode == "w" else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        # The file system's own errors (ours, or the body's writes to ``f``: no filename, or the temporary
        # one) name the target; an OSError about some other file (an input the body read) passes unchanged.
        if isinstance(exc, OSError) and not isinstance(exc, OutputError) and exc.filename in (None, tmp):
            raise _output_error(exc, p) from None
        raise


def write_atomic(path: str | os.PathLike, data: bytes | str, encoding: str = "utf-8") -> None:
    """Write ``data`` (bytes, or str encoded with ``encoding``) to ``path`` atomically (module contract)."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_output(path, "wb") as f:
        f.write(data)
