"""``gputrace export --format chrome|jaeger|otlp TRACE... -o OUT``: write traces for other tools.

Argument wiring only: reading is the entrance, `gputrace.timeline.load.read_any` (OTLP JSONL, nsys SQLite or
Chrome JSON, by content) through `gputrace.commands._inputs.read_inputs`; writing is
`gputrace.timeline.chrome.write_chrome`, `gputrace.timeline.jaeger.write_jaeger` or
`gputrace.interop.otlp_file.write_otlp_jsonl`.
"""

from __future__ import annotations

import argparse
import sys

from gputrace.textsafe import visible

FORMATS = {
    "chrome": "Chrome Trace Event / Perfetto JSON (ui.perfetto.dev, chrome://tracing); .gz compresses",
    "jaeger": "Jaeger JSON for Jaeger UI's 'Upload JSON' (no backend needed)",
    "otlp": "OTLP JSON Lines (gputrace's own trace format)",
}


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "export",
        help="write traces as Perfetto/Chrome JSON, Jaeger JSON or OTLP JSONL",
        description="Convert trace files (OTLP JSON Lines, Nsight Systems SQLite exports or Chrome JSON; "
                    "several are merged) for other tools. Formats: "
                    + "; ".join(f"{k}: {v}" for k, v in FORMATS.items()),
    )
    p.add_argument("traces", nargs="+", metavar="TRACE", help="input trace files")
    p.add_argument("--format", "-f", required=True, choices=sorted(FORMATS), help="output format")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file")
    p.add_argument("--lenient", action="store_true", help="skip unreadable OTLP lines instead of failing")
    p.add_argument("--no-flows", action="store_true", help="chrome: no parent -> child arrows across lanes")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from gputrace.commands._inputs import read_inputs

    from gputrace.commands._progress import MIN_SPANS, stage

    tl = read_inputs("export", args.traces, args.lenient, "no spans in the input")
    if tl is None:
        return 1
    try:
        with stage("export", f"writing {tl.n:,} spans as {args.format} to {visible(args.output)}",
                   show=tl.n >= MIN_SPANS):
            if args.format == "chrome":
                from gputrace.timeline.chrome import write_chrome

                n = write_chrome(tl, args.output, flows=not args.no_flows)
                what = f"{n} events"
            elif args.format == "jaeger":
                from gputrace.timeline.jaeger import write_jaeger

                n = write_jaeger(tl, args.output)
                what = f"{n} spans"
            else:
                from gputrace.interop.otlp_file import write_otlp_jsonl

                n = write_otlp_jsonl(tl, args.output)
                what = f"{tl.n} spans in {n} lines"
    except OSError as exc:
        print(f"gputrace export: {visible(exc)}", file=sys.stderr)
        return 1
    print(f"wrote {what} to {args.output} ({args.format})")
    return 0
