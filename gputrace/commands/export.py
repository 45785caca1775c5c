"""``gputrace export --format chrome|jaeger|otlp TRACE... -o OUT``: write traces for other tools.

Argument wiring only: reading is the entrance, `gputrace.timeline.load.read_any` (any format with a reader, by
content) through `gputrace.commands._inputs.read_inputs`; writing is the entrance's `write_as`, which takes the
writer from the format table (`gputrace.timeline.formats.FORMATS`: every format with a writer is a choice).
"""

from __future__ import annotations

import argparse
import sys

from gputrace.textsafe import visible


def _writable() -> dict[str, str]:
    """Format name -> summary of every format with a writer (the table is light: no reader is imported)."""
    from gputrace.timeline.formats import FORMATS

    return {f.name: f.summary for f in FORMATS.values() if f.has("write")}


def register(subparsers) -> argparse.ArgumentParser:
    formats = _writable()
    p = subparsers.add_parser(
        "export",
        help="write traces as Perfetto/Chrome JSON, Jaeger JSON or OTLP JSONL",
        description="Convert trace files (OTLP JSON Lines, Nsight Systems SQLite exports or Chrome JSON; "
                    "several are merged) for other tools. Formats: "
                    + "; ".join(f"{k}: {formats[k]}" for k in sorted(formats)),
    )
    p.add_argument("traces", nargs="+", metavar="TRACE", help="input trace files")
    p.add_argument("--format", "-f", required=True, choices=sorted(formats), help="output format")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file")
    p.add_argument("--lenient", action="store_true", help="skip unreadable OTLP lines instead of failing")
    p.add_argument("--no-flows", action="store_true", help="chrome: no parent -> child arrows across lanes")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from gputrace.commands._inputs import read_inputs
    from gputrace.commands._progress import MIN_SPANS, stage
    from gputrace.timeline.load import write_as

    tl = read_inputs("export", args.traces, args.lenient, "no spans in the input")
    if tl is None:
        return 1
    try:
        with stage("export", f"writing {tl.n:,} spans as {args.format} to {visible(args.output)}",
                   show=tl.n >= MIN_SPANS):
            what = write_as(tl, args.output, args.format, flows=not args.no_flows)
    except OSError as exc:
        print(f"gputrace export: {visible(exc)}", file=sys.stderr)
        return 1
    print(f"wrote {what} to {args.output} ({args.format})")
    return 0
