"""``collector_paused()``: the cyclic garbage collector off for the length of a read.

A read makes millions of objects and no cycles, and the collector's passes over the attribute dicts
already read grow with the trace (~35 % of reading a PyTorch-profiler trace). Process-wide: the
collector is re-enabled afterwards only if it was on when the block started. Not for the TUI's
progressive load, which must leave the UI its collector (``load.py`` freezes instead).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
