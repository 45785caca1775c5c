"""Output files written whole or not at all: every file gputrace produces (exports, screenshots, keys,
proofs, vk.json, manifests) goes through :func:`atomic_output` / :func:`write_atomic`.

Contract:

- The data goes to a private temporary file in the target's own directory (``mkstemp``: a fresh name,
  ``O_CREAT|O_EXCL`` so an existing file or planted symlink is never opened, mode 0600 while written).
- On success it is flushed, fsynced, given the mode a plain ``open()`` would give (0666 & ~umask) and
  renamed over the target with ``os.replace``: readers see the old file or the whole new one. A symlink
  at the target is replaced by the file, never followed.
- On any failure (an exception in the ``with`` body, a write or rename error) the temporary file is
  removed and the exception propagates; the target is untouched.

Stdlib only, so every layer may import it. Thread-safe (no shared state).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["atomic_output", "write_atomic"]


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
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=encoding if mode == "w" else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str | os.PathLike, data: bytes | str, encoding: str = "utf-8") -> None:
    """Write ``data`` (bytes, or str encoded with ``encoding``) to ``path`` atomically (module contract)."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_output(path, "wb") as f:
        f.write(data)
