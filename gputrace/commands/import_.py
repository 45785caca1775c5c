"""``gputrace import nsys|chrome FILE -o OUT.jsonl``: bring other tools' traces into gputrace.

Argument wiring only: the entrance's `gputrace.timeline.load.read_as` (nsys / chrome readers)
read, `gputrace.interop.otlp_file.write_otlp_jsonl` writes, and
`gputrace.interop.otlp_readback.cache_entry`/`store_cache_entry` store what a read of the output gives as its
columnar-cache entry (big outputs; ``GPUTRACE_CACHE=0`` turns it off), so the first ``gputrace view``
of the output is a cache re-open. The output opens in ``gputrace view`` and every other gputrace
command (which also open .sqlite and Chrome files directly).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputrace.textsafe import visible


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import",
        help="convert an Nsight Systems SQLite export or a Chrome/PyTorch trace to OTLP JSONL",
        description="Read an Nsight Systems report exported with `nsys export --type sqlite` (NVTX ranges, "
                    "CUDA kernels, memcpys, API calls) or a Chrome Trace Event JSON file (e.g. the PyTorch "
                    "profiler's) and write it as an OTLP JSON Lines trace.",
    )
    p.add_argument("source", choices=("nsys", "chrome"), help="input kind")
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
    from gputrace.interop.otlp_file import groups, span_ids, write_otlp_jsonl
    from gputrace.interop.otlp_readback import cache_entry, store_cache_entry

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
    try:
        from gputrace.timeline.load import read_as

        if args.source == "nsys":
            tl = read_as(src, "nsys", host=args.host, runtime=not args.no_runtime, correlation_ids=args.correlation_ids)
        else:
            tl = read_as(src, "chrome", host=args.host)
        plan = (groups(tl), span_ids(tl))
        lines = write_otlp_jsonl(tl, out, plan=plan)
        n, lanes, gpus = tl.n, len(tl.lanes), len({ln.device for ln in tl.lanes if ln.device >= 0})
        entry = cache_entry(tl, out, lines, *plan, consume=True)  # what a read of OUT gives (never raises)
        del tl, plan  # (its columns went into the entry's as they were built)
        store_cache_entry(out, entry)  # the first `view` of OUT re-opens it (never raises)
    except OSError as exc:  # str() of some OSErrors is the path alone: say what went wrong
        print(visible(f"gputrace import: {exc.filename or src}: {exc.strerror or exc}"), file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"gputrace import: {visible(exc)}", file=sys.stderr)
        return 1
    print(f"wrote {n} spans ({lanes} lanes, {gpus} GPUs) in {lines} lines to {out}")
    return 0
