"""What a lane is called and when it counts as busy: one answer for every view.

* :func:`device_name`: the device column's name everywhere (report, compare, ab, the TUI): ``GPU N``
  for a GPU, ``CPU`` for host-only work (device -1), ``all`` for a row over every device. The CPU's
  threads are lanes ``thread:NAME`` under ``CPU``, as the TUI's lane tree shows them.
* :func:`occupies_lane`: which spans make their lane busy; a ``kind=sync`` span is a host wait.

Pure numpy; any thread.
"""

from __future__ import annotations

import numpy as np

from gputrace.timeline.model import KIND_CODES, Timeline

__all__ = ["CPU", "device_name", "occupies_lane"]

#: The name of the host-only (device -1) lanes' device, as ``Lane.device_label`` spells it.
CPU = "CPU"
_SYNC = KIND_CODES["sync"]


def device_name(device: int | None) -> str:
    """``"GPU N"`` for a GPU index, ``"CPU"`` for host-only work (a negative device), ``"all"`` for None."""
    if device is None:
        return "all"
    return CPU if device < 0 else f"GPU {device}"


def occupies_lane(tl: Timeline, rows: np.ndarray) -> np.ndarray:
    """Bool mask over ``rows``: the spans that count as their lane being busy. A ``kind=sync`` span is
    a host waiting for a device (it sits on the stream it waits for), not work on that lane, so it is
    left out: a stream whose only span in a range is a 46 s sync is idle in that range, as its GPU is."""
    return np.asarray(tl.cols["kind"][rows] != _SYNC)
