"""Open a trace file of any supported format by its content, not its name.

The sniffing and reading live in the one entrance, :mod:`gputrace.timeline.load`; this module keeps
the names ``sniff`` and ``read_any`` importable from here for older callers.
"""

from __future__ import annotations

from gputrace.timeline._lines import PathLike  # noqa: F401 - re-export
from gputrace.timeline.load import read_any, sniff

__all__ = ["sniff", "read_any"]
