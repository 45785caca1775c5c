"""Reading the trace files named on a command line, shared by the subcommands that take ``TRACE...``.

Not a subcommand (``gputrace.cli.COMMANDS`` does not list it). Runs on the CLI's main thread.
"""

from __future__ import annotations

import sys

from gputrace.textsafe import visible
from gputrace.timeline.model import Timeline


def read_inputs(command: str, paths, lenient: bool, empty_message: str) -> Timeline | None:
    """All of ``paths`` merged into one Timeline by the entrance, :func:`gputrace.timeline.load.read_any`
    (OTLP JSONL, nsys SQLite or Chrome JSON, by content).

    Returns None after printing ``gputrace <command>: <reason>`` (control characters made visible) to stderr when a
    file cannot be read
    (OSError, or ValueError for a malformed file) or the traces hold no spans (``empty_message``); the
    caller then exits with status 1. With ``lenient``, what was skipped is printed to stderr
    (``gputrace <command>: --lenient skipped 2 lines skipped, ...``); the cut last lines left out of a
    ``record`` segment folder read as a trace are printed in any case (``gputrace <command>: left out ...``).
    Raises nothing else.
    """
    import os

    from gputrace.commands._progress import MIN_BYTES, stage
    from gputrace.timeline.load import read_any

    size = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    try:
        with stage(command, f"reading {len(paths)} file{'s' * (len(paths) != 1)} ({size / 1e6:,.0f} MB)",
                   show=size >= MIN_BYTES):
            tl = read_any(paths, lenient=lenient)
    except (OSError, ValueError) as exc:
        from gputrace.commands._errors import describe_error

        print(f"gputrace {command}: {describe_error(exc)}", file=sys.stderr)
        return None
    if lenient:
        print_skipped(command, tl)
    else:
        print_cut(command, tl)
    if tl.n == 0:
        print(f"gputrace {command}: {empty_message}", file=sys.stderr)
        return None
    return tl


def read_runs(command: str, paths, lenient: bool) -> tuple[list[Timeline], list[str]]:
    """(Timelines, labels), one per run, as :func:`gputrace.timeline.load.load_runs` gives them (a file
    holding several runs is split by run id, labelled ``name#i``; runs without spans are dropped). Read
    here one file at a time so that, with ``lenient``, what each file's read skipped is printed to stderr
    (:func:`print_skipped`) before the split by run drops the read's report. Raises OSError / ValueError
    as ``read_any`` does."""
    from pathlib import Path

    from gputrace.timeline.load import read_any
    from gputrace.timeline.runs import split_runs

    tls, labels = [], []
    for p in paths:
        name = Path(p).name
        whole = read_any([p], lenient=lenient)
        if lenient:
            print_skipped(command, whole, name)
        parts = split_runs(whole)
        for i, t in enumerate(parts):
            if t.n:
                tls.append(t)
                labels.append(name if len(parts) == 1 else f"{name}#{i}")
    return tls, labels


def print_cut(command: str, tl: Timeline) -> None:
    """Print what a strict read of a segment folder left out (segments' cut last lines), if anything."""
    from gputrace.timeline.errors import CUT_REASON, LoadReport

    rep = tl.load_report
    if isinstance(rep, LoadReport) and rep.reasons.get(CUT_REASON):
        print(f"gputrace {command}: left out {visible(rep.summary())}", file=sys.stderr)


def print_skipped(command: str, tl: Timeline, source: str | None = None) -> None:
    """Print ``gputrace <command>: [<source>: ]--lenient skipped <what>`` to stderr when the read of
    ``tl`` skipped anything (:func:`skipped_note`; ``source``, a file name, made inert too)."""
    note = skipped_note(tl)
    if note:
        where = f"{visible(source)}: " if source else ""
        print(f"gputrace {command}: {where}--lenient skipped {note}", file=sys.stderr)


def skipped_note(tl: Timeline) -> str:
    """What a lenient read skipped, as the reader counted it (``LoadReport.summary()``, made inert),
    or '' when nothing was skipped."""
    from gputrace.timeline.errors import LoadReport

    rep = tl.load_report
    return visible(rep.summary()) if isinstance(rep, LoadReport) and not rep.ok else ""
