"""A nesting-depth guard for JSON text handed to msgspec (untrusted trace lines).

msgspec bounds its recursion with ``Py_EnterRecursiveCall``; before Python 3.12 that check uses the
interpreter's recursion limit, which libraries raise process-wide (``py_ecc`` sets 100,000 on import).
A hostile line nested 20,000 levels deep then overflows the C stack (a segfault, every recorded span
lost) instead of raising ``RecursionError``. ``too_deep`` answers before the decoder runs: free while
the recursion limit is the default, one linear scan otherwise. Pure function, any thread.
"""

from __future__ import annotations

import re
import sys

import numpy as np

#: The deepest JSON nesting handed to the decoder when the recursion limit no longer protects the stack.
MAX_JSON_DEPTH = 512
#: Up to this recursion limit msgspec's own guard is safe on an 8 MiB stack and no scan is made.
_SAFE_RECURSION_LIMIT = 2000
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("{"), ord("[")]] = 1
_OPEN[[ord("}"), ord("]")]] = -1


def depth_scan_needed() -> bool:
    """True when ``too_deep`` scans text (the recursion limit no longer protects the stack)."""
    return sys.version_info < (3, 12) and sys.getrecursionlimit() > _SAFE_RECURSION_LIMIT


def too_deep(text: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``text`` nests objects/arrays deeper than ``limit`` and the decoder would not stop it.

    Returns False without scanning while ``sys.getrecursionlimit()`` is at most ``_SAFE_RECURSION_LIMIT``
    (the decoder then raises ``RecursionError`` itself) or the text has too few brackets to be that deep.
    """
    if not depth_scan_needed():
        return False
    if text.count(b"{") + text.count(b"[") <= limit:
        return False
    body = _STRING.sub(b'""', text)
    steps = _OPEN[np.frombuffer(body, np.uint8)]
    return bool(steps.size) and int(np.cumsum(steps, dtype=np.int64).max()) > limit
