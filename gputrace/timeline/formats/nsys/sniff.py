"""Is this head (raw bytes, not decompressed) an SQLite database, as an Nsight Systems export is?"""

from __future__ import annotations

__all__ = ["is_nsys"]


def is_nsys(head: bytes) -> bool:
    """True when the file starts with SQLite's magic string."""
    return head.startswith(b"SQLite format 3\x00")
