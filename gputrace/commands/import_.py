"""``gputrace import nsys|chrome FILE -o OUT.jsonl``: bring other tools' traces into gputrace.

Argument wiring only: the entrance's `gputrace.timeline.load.convert` reads the input with its format's
reader (from the format table, `gputrace.timeline.formats.FORMATS`), writes it as OTLP JSONL and stores what
a read of the output gives as its columnar-cache entry (big outputs; ``GPUTRACE_CACHE=0`` turns it off), so
the first ``gputrace view`` of the output is a cache re-open. The output opens in ``gputrace view`` and every
other gputrace command (which also open .sqlite and Chrome files directly).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputrace.textsafe import visible


def importable() -> tuple[str, ...]:
    """The formats ``import`` reads: those of the format table with a reader, but the native one (the table is
    light: no reader is imported)."""
    from gputrace.timeline.formats import FORMATS, NATIVE

    return tuple(f.name for f in FORMATS.values() if f.has("read") and f.name != NATIVE)


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import",
        help="convert an Nsight Systems SQLite export or a Chrome/PyTorch trace to OTLP JSONL",
        description="Read an Nsight Systems report exported with `nsys export --type sqlite` (NVTX ranges, "
                    "CUDA kernels, memcpys, API calls) or a Chrome Trace Event JSON file (e.g. the PyTorch "
                    "profiler's) and write it as an OTLP JSON Lines trace.",
    )
    p.add_argument("source", choices=importable(), help="input kind")
    p.add_argument("input", metavar="FILE", help="REPORT.sqlite (nsys) or TRACE.json[.gz] (chrome)")
    p.add_argument("-o", "--output", metavar="OUT.jsonl", help="output (default: FILE with .jsonl)")
    p.add_argument("--host", help="host name for the lanes (default: from the report, else the file name)")
    p.add_argument("--no-runtime", action="store_true",
                   help="nsys: leave CUDA API calls out (still used to link kernels)")
    p.add_argument("--correlation-ids", action="store_true",
                   help="nsys: keep each API call's and kernel's cuda.correlation_id attribute (more memory)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from gputrace.timeline.load import convert

    src = Path(args.input)
    if not src.is_file():
        why = "is a directory, not a file" if src.is_dir() else "no such file"
        hint = " (export the report first: nsys export --type sqlite REPORT.nsys-rep)" if args.source == "nsys" else ""
        print(visible(f"gputrace import: {src}: {why}{hint}"), file=sys.stderr)
        return 2
    out = Path(args.output) if args.output else src.with_name(src.name.split(".")[0] + ".jsonl")
    if out.resolve() == src.resolve():
        print(visible(f"gputrace import: output {out} would overwrite the input"), file=sys.stderr)
        return 2
    try:  # each reader takes the options it knows (chrome: host alone)
        done = convert(src, args.source, out, host=args.host, runtime=not args.no_runtime,
                       correlation_ids=args.correlation_ids)
    except OSError as exc:  # str() of some OSErrors is the path alone: say what went wrong
        print(visible(f"gputrace import: {exc.filename or src}: {exc.strerror or exc}"), file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"gputrace import: {visible(exc)}", file=sys.stderr)
        return 1
    print(f"wrote {done.spans} spans ({done.lanes} lanes, {done.gpus} GPUs) in {done.lines} lines to {out}")
    return 0
