"""``gputrace view TRACE...``: the terminal timeline viewer (Textual).

Argument wiring only; the app is `gputrace.tui.app.GputraceApp` (``--compare A... --vs B...``:
`gputrace.tui.compare_view.CompareApp`). Textual is imported
only when the command runs, so ``gputrace --help`` stays light.
"""

from __future__ import annotations

import argparse
import sys

from gputrace.textsafe import visible


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "view",
        help="open traces in the terminal timeline viewer",
        description=(
            "Per-GPU Gantt timeline of one or more OTLP JSON Lines trace files, with GPU idle gaps, "
            "host waits, pinning and unattributed time drawn on it. Press ? inside for keys. "
            "With --compare A... --vs B...: the per-phase comparison of two sets of runs over their "
            "representative timelines."
        ),
    )
    p.add_argument("traces", nargs="*", metavar="TRACE",
                   help="trace files, by content: OTLP JSON Lines (optionally gzipped), Chrome/Perfetto JSON, "
                   "or an Nsight Systems SQLite export (nsys export --type sqlite); rep.sqlite opens directly")
    p.add_argument("--follow", action="store_true", help="keep reading a trace file that is still being written")
    p.add_argument("--listen", metavar="ADDR",
                   help="receive OTLP gRPC at ADDR (host:port; OTLP/HTTP on the next port) and show spans as "
                        "they arrive; loopback only")
    p.add_argument("--out", metavar="FILE",
                   help="with --listen: the trace file to write (default runs/live-<time>.jsonl)")
    p.add_argument("--screenshot", metavar="OUT.svg",
                   help="write the first screen (after loading) as SVG and exit; needs no terminal")
    p.add_argument("--compare", nargs="+", metavar="A", help="compare view: baseline trace files (one run each; "
                   "a file holding several runs is split by run id); give the variant with --vs")
    p.add_argument("--vs", nargs="+", metavar="B", help="with --compare: the variant trace files")
    p.add_argument("--correction", choices=("fdr", "holm", "none"), default="holm",
                   help="with --compare: how rows are decided together (default holm; fdr: Benjamini-Hochberg; "
                        "see docs/analysis.md)")
    p.add_argument("--confidence", type=_confidence, default=0.95,
                   help="with --compare: confidence of the intervals (default 95%%; 3 vs 3 runs need 90%% or less)")
    p.add_argument("--focus", metavar="PHASE",
                   help="start zoomed to the first span of PHASE (e.g. prove), selected; with --screenshot too")
    p.add_argument("--size", default="160x48", metavar="COLSxROWS",
                   help="screen size for --screenshot (default 160x48)")
    p.set_defaults(func=run)
    return p


def _confidence(text: str) -> float:
    from gputrace.commands.compare import parse_confidence

    return parse_confidence(text)


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"gputrace view: --size wants COLSxROWS, e.g. 160x48 (got {text!r})") from None
    if w < 40 or h < 10:
        raise SystemExit("gputrace view: --size must be at least 40x10")
    if w > MAX_SIZE[0] or h > MAX_SIZE[1]:  # a headless screen of that size would take minutes and gigabytes
        raise SystemExit(f"gputrace view: --size is at most {MAX_SIZE[0]}x{MAX_SIZE[1]} (got {text!r})")
    return w, h


#: The largest --size: a 4K screen at a small font is about 480x135 cells.
MAX_SIZE = (1000, 400)


def _run_compare(args: argparse.Namespace) -> int:
    if args.traces or args.listen or args.follow:
        print("gputrace view: --compare takes its files after --compare and --vs; give no TRACE, --listen or "
              "--follow with it", file=sys.stderr)
        return 2
    if args.focus:
        print("gputrace view: --focus zooms the timeline; the --compare view has none", file=sys.stderr)
        return 2
    if not args.vs:
        print("gputrace view: --compare A... needs --vs B...", file=sys.stderr)
        return 2
    from gputrace.tui.app import screenshot_svg
    from gputrace.tui.compare_view import CompareApp

    if not args.screenshot and not sys.stdout.isatty():
        print("gputrace view: standard output is not a terminal; for a picture use --screenshot FILE.svg",
              file=sys.stderr)
        return 2
    app = CompareApp(args.compare, args.vs, confidence=args.confidence, correction=args.correction)
    if args.screenshot:
        if not _write_screenshot(args.screenshot, screenshot_svg(app, _size(args.size))):
            return 1
    else:
        app.run()
    if app.error:
        print(f"gputrace view: {visible(app.error)}", file=sys.stderr)
        return 1
    if args.screenshot:
        print(f"wrote {args.screenshot}")
    return 0


def _write_screenshot(path: str, svg: str) -> bool:
    """Write the SVG; False after a one-line error on stderr when the file cannot be written."""
    from gputrace.atomic_write import write_atomic

    try:
        write_atomic(path, svg)
    except OSError as e:
        print(f"gputrace view: cannot write {visible(path)}: {visible(e.strerror or e)}", file=sys.stderr)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return _run_compare(args)
    if args.vs:
        print("gputrace view: --vs goes with --compare A...", file=sys.stderr)
        return 2
    if not args.traces and not args.listen:
        print("gputrace view: give a TRACE file (or --listen ADDR)", file=sys.stderr)
        return 2
    if args.listen and args.traces:
        print("gputrace view: --listen shows the spans it receives; give no TRACE with it", file=sys.stderr)
        return 2
    from gputrace.tui.app import GputraceApp, screenshot_svg

    receiver = None
    paths = list(args.traces)
    follow = bool(args.follow)
    title = None
    if args.listen:
        from gputrace.tui.listen import ListenError, start_receiver

        try:
            receiver, path = start_receiver(args.listen, args.out)
        except ListenError as e:
            print(f"gputrace view: {visible(e)}", file=sys.stderr)
            return 2
        paths, follow = [path], True
        title = f"listening: grpc {receiver.grpc_endpoint} · {receiver.http_endpoint} → {path}"
    try:
        if args.screenshot:
            app = GputraceApp(paths, follow=False, focus=args.focus)
            if not _write_screenshot(args.screenshot, screenshot_svg(app, _size(args.size))):
                return 1
            if app.error:
                print(f"gputrace view: {visible(app.error)}", file=sys.stderr)
                return 1
            print(f"wrote {args.screenshot}")
            return 0
        if not sys.stdout.isatty():
            # The full-screen app would draw into a file or pipe and wait for keys that never come.
            print("gputrace view: standard output is not a terminal; for a picture use --screenshot FILE.svg "
                  "(e.g. gputrace view run.jsonl --screenshot run.svg)", file=sys.stderr)
            return 2
        app = GputraceApp(paths, follow=follow, title=title, focus=args.focus)
        app.run()
        if app.error:
            print(f"gputrace view: {visible(app.error)}", file=sys.stderr)
            return 1
        return 0
    finally:
        if receiver is not None:
            receiver.stop()
