"""One way to say what went wrong with a file, for every command's error line.

``describe_error(exc)``: an OSError as ``PATH: what is wrong, in words`` (no ``[Errno N]``, the path the
user gave, control characters made visible); an :class:`gputrace.atomic_write.OutputError` as it says
itself (``cannot write PATH: ...``); anything else as ``str(exc)`` made visible. Never raises.
"""

from __future__ import annotations

import errno

from gputrace.atomic_write import OutputError
from gputrace.textsafe import visible

__all__ = ["describe_error"]

_READ_WORDS = {
    errno.ENOENT: "no such file",
    errno.EISDIR: "it is a folder, not a file",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many symbolic links",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EADDRINUSE: "the address is already in use",
}


def describe_error(exc: BaseException) -> str:
    """The text after ``gputrace <command>: `` for ``exc`` (module docstring)."""
    if isinstance(exc, OutputError) or not isinstance(exc, OSError):
        return visible(str(exc))
    words = _READ_WORDS.get(exc.errno or 0) or (exc.strerror or "").rstrip(".").lower() or str(exc)
    if exc.filename is None:
        return visible(words if exc.strerror else str(exc))
    return visible(f"{exc.filename}: {words}")
