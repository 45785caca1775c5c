"""Progress for CLI steps that can take more than a few seconds (reading or writing a million spans).

`stage` prints ``gputrace <command>: <what>…`` on stderr, then a heartbeat line every ``every``
seconds while the step runs (from a daemon thread: the readers and writers are single calls that
offer no progress hook of their own), then ``<what>: done in 12.3 s``. With ``show=False`` (the
caller's judgement: small inputs finish in well under a second) it prints nothing. Not a subcommand.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

#: Inputs with fewer spans, or smaller files, are quick: no progress lines.
MIN_SPANS = 100_000
MIN_BYTES = 32 << 20


@contextmanager
def stage(command: str, what: str, *, show: bool, every: float = 5.0, out: TextIO | None = None) -> Iterator[None]:
    """Report the step ``what`` (see the module docstring). Exceptions pass through after the
    heartbeat stops; no "done" line then."""
    out = out or sys.stderr
    if not show:
        yield
        return
    t0 = time.perf_counter()
    print(f"gputrace {command}: {what}…", file=out, flush=True)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            print(f"gputrace {command}: {what}… {time.perf_counter() - t0:.0f} s", file=out, flush=True)

    th = threading.Thread(target=beat, name="gputrace-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
    print(f"gputrace {command}: {what}: done in {time.perf_counter() - t0:.1f} s", file=out, flush=True)
