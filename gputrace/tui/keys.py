"""The integers the drawing code shares: colour keys of a cell and kinds of overlay mark.

A *colour key* is what `gputrace.tui.render` writes per cell and `gputrace.tui.palette.Palette`
turns into a colour: a phase id (>= 0), ``phase + DIM`` for a span faded by a search, or one of
the negative special keys below. A *mark kind* says which analysis result an overlay mark comes
from (`gputrace.tui.overlays.Overlays.marks_kind`). Constants only: any module of the TUI may
import this one, and it imports nothing.
"""

from __future__ import annotations

BG, SEL, IDLE, UNATTR, INK, WAIT = -1, -2, -3, -4, -5, -6
LAUNCH, PAGEABLE, PINNED = -7, -8, -9  # launch-gap marks; copies from/to pageable or pinned host memory
RANGE, CURSOR = -10, -11  # measuring: the range's background, the cursor and mark lines
DIM = 1 << 20  # added to a phase id: the span is faded (it does not match the search)

#: Overlay mark kinds: host time past a span's device time, a parent's time no child covers, a launch gap
#: (the GPU idle inside a phase that had work to enqueue).
MARK_WAIT, MARK_UNATTR, MARK_LAUNCH = 0, 1, 2

__all__ = ["BG", "CURSOR", "DIM", "IDLE", "INK", "LAUNCH", "MARK_LAUNCH", "MARK_UNATTR", "MARK_WAIT", "PAGEABLE",
           "PINNED", "RANGE", "SEL", "UNATTR", "WAIT"]
