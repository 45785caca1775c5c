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
    """On exit, what the block allocated is handed to the oldest generation (``freeze`` then
    ``unfreeze``, two list splices) before the collector is re-enabled: otherwise its next young
    collection, at the first allocation after the block, walks every object the read kept (~0.4 s
    for the attribute dicts of a 1 M-event PyTorch trace). They are walked again only by a full
    collection. Skipped when something else holds frozen objects (``gc.get_freeze_count()``), so a
    freeze made elsewhere (the TUI's progressive load, a pre-fork server) is never undone here."""
    was_enabled = gc.isenabled()
    frozen_before = gc.get_freeze_count()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if frozen_before == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
