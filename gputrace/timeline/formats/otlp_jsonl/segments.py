"""Reading a segment folder (``gputrace.otlp.segments``) as one OTLP JSON Lines trace.

``gputrace record`` joins its processes' segments into the trace file when the launch ends; until then
(the launch still runs), or when ``record`` itself was killed, the spans are in ``<trace>.d/``. A path that
is such a folder, or a trace path that does not exist while its folder does, reads as the folder's
segments joined: ``view``, ``report`` and ``export`` open it like the file ``record`` would have written.

What "strict" means here: every whole line must be a valid request, as in any trace file. A segment's
unterminated last line is not a line of the trace: its writer died in the middle of writing it, and no
other writer's line can follow it in that file (one writer per segment). It is left out and reported in
the Timeline's ``load_report`` (reason ``cut last line``, naming the segment and line), never refused.

Contract: ``joined`` writes the joined copy to a temporary folder removed at exit, once per folder state
(a segment that grew is joined again). Any thread. Raises OSError from the file system.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading

from gputrace.otlp.segments import Segment, folder_of, is_segment_folder, merge, segment_files
from gputrace.timeline.errors import CUT_REASON, LoadReport, TraceFormatError

__all__ = ["CUT_REASON", "segment_folder", "joined", "cut_report", "describe"]


_lock = threading.Lock()
_cache: dict[str, tuple[tuple, str, list[Segment]]] = {}
_tmp: list[str] = []


def segment_folder(path: str | os.PathLike) -> str | None:
    """The segment folder ``path`` stands for: itself, or ``<path>.d`` when ``path`` does not exist; else None."""
    p = os.fspath(path)
    if is_segment_folder(p):
        return p
    if not os.path.lexists(p) and is_segment_folder(folder_of(p)):
        return folder_of(p)
    return None


def joined(folder: str) -> tuple[str, list[Segment]]:
    """(path of a file holding the folder's segments joined, what each segment held). Raises OSError."""
    names = segment_files(folder)
    key = tuple((n, os.stat(os.path.join(folder, n)).st_size) for n in names)
    with _lock:
        hit = _cache.get(folder)
        if hit is not None and hit[0] == key and os.path.exists(hit[1]):
            return hit[1], hit[2]
        if not _tmp:
            _tmp.append(tempfile.mkdtemp(prefix="gputrace-segments-"))
            atexit.register(shutil.rmtree, _tmp[0], True)
        fd, path = tempfile.mkstemp(prefix=os.path.basename(folder) + ".", suffix=".jsonl", dir=_tmp[0])
        try:
            segs = merge(folder, fd)
        finally:
            os.close(fd)
        if hit is not None:
            with contextlib.suppress(OSError):
                os.unlink(hit[1])
        _cache[folder] = (key, path, segs)
        return path, segs


def cut_report(folder: str, segs: list[Segment]) -> LoadReport | None:
    """The segments' cut last lines as a ``LoadReport`` (one problem each), or None when there is none."""
    cut = [s for s in segs if s.cut_bytes]
    if not cut:
        return None
    rep = LoadReport()
    for s in cut:
        rep.add(TraceFormatError(os.path.join(folder, s.name), s.lines + 1, None,
                                 f"unterminated last line ({s.cut_bytes} bytes): its writer died while writing it; "
                                 "left out", reason=CUT_REASON), line_skipped=True)
    return rep


def describe(folder: str, segs: list[Segment]) -> str:
    """One line: what was read instead of a finished trace file."""
    n = len(segs)
    return (f"{folder}: {n} segment{'s' * (n != 1)} that record did not join yet (still running, or killed), "
            f"read together")

