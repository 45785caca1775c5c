"""Command-line entry point: argument wiring only.

Each subcommand lives in ``gputrace/commands/<name>.py`` and defines
``register(subparsers) -> argparse.ArgumentParser`` whose parser sets ``func`` to a callable
``func(args) -> int`` that calls library code. Modules are imported only when their
command runs (or for ``--help``), so ``gputrace --version`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import gputrace

#: Subcommand modules under gputrace.commands, in help order.
COMMANDS: tuple[str, ...] = ("demo", "prove", "record", "verify", "view", "export", "import_", "report", "compare", "ab")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputrace",
        description="Trace-based profiler and terminal timeline viewer for multi-GPU compute pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"gputrace {gputrace.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"gputrace.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the command modules load (the first 0.2 s of every command)
        print("interrupted", file=sys.stderr)
        return 130
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError:
        print(f"gputrace {args.command}: out of memory (the input is too large "
              "for this machine's memory)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
