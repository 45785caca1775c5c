"""Command-line entry point: argument wiring only.

Each subcommand lives in ``gputrace/commands/<name>.py`` and defines
``register(subparsers) -> argparse.ArgumentParser`` whose parser sets ``func`` to a callable
``func(args) -> int`` that calls library code. Modules are imported only when their
command runs (or for ``--help``), so ``gputrace --version`` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import signal
import sys

import gputrace

#: Subcommand modules under gputrace.commands, in help order.
COMMANDS: tuple[str, ...] = ("demo", "prove", "record", "verify", "view", "export", "import_", "report", "compare",
                             "ab")


class Parser(argparse.ArgumentParser):
    """The top-level parser. Options are never matched by prefix (``allow_abbrev=False`` here and on
    every subcommand: ``ab --switch A1`` must not be taken as ``--switches``), and an unknown option
    is reported by its subcommand's parser, with that subcommand's usage and the closest option."""

    def parse_args(self, args=None, namespace=None):  # (argparse's overloads: the untyped form)
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = self.subcommands.get(subcommand(ns), self)
            hint = ""
            flags = [o for a in sub._actions for o in a.option_strings]
            typed = extras[0].split("=")[0]
            close: list[str] = []
            if typed.startswith("-"):
                close = ([f for f in flags if f.startswith(typed) and typed.startswith("--")]
                         or difflib.get_close_matches(typed, flags, n=1))
            if close:
                hint = f" (did you mean {' or '.join(close[:3])}?)"
            sub.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return ns

    subcommands: dict[str, argparse.ArgumentParser]


def subcommand(ns: argparse.Namespace) -> str:
    """The subcommand's name as typed (``record``), "" when none was given. Read from ``_subcommand``, a
    default each subcommand's parser sets, not from ``command``: ``record`` has a positional of that name
    (COMMAND ...) that overwrites the subparsers' ``dest`` with a list."""
    return str(getattr(ns, "_subcommand", "") or "")


def build_parser() -> Parser:
    parser = Parser(
        prog="gputrace",
        description="Trace-based profiler and terminal timeline viewer for multi-GPU compute pipelines.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"gputrace {gputrace.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    parser.subcommands = {}
    for name in COMMANDS:
        p = importlib.import_module(f"gputrace.commands.{name}").register(sub)
        p.allow_abbrev = False  # (read at parse time; the commands' add_parser calls need not say it)
        p.set_defaults(_subcommand=p.prog.split()[-1])
        parser.subcommands[p.prog.split()[-1]] = p
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv``; returns the exit status. A command that returns ``-SIGINT`` (``record``
    whose program died of Ctrl-C) ends this process by SIGINT instead (``end_by_signal``)."""
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
        rc = int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a file error no command caught: the user's path and what is wrong, no traceback
        from gputrace.commands._errors import describe_error

        print(f"gputrace {subcommand(args)}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"gputrace {subcommand(args)}: out of memory (the input is too large "
              "for this machine's memory)", file=sys.stderr)
        return 1
    return end_by_signal(-rc) if rc == -signal.SIGINT else rc


def end_by_signal(signum: int) -> int:
    """End this process by ``signum`` with its default action, as the program a command ran ended (``record``
    returns ``-SIGINT`` when the program died of Ctrl-C): a shell sees "killed by SIGINT" and stops a loop
    (``for i in 1 2 3; do gputrace record -- python t.py; done``), which an exit status of 130 does not.
    Python ends an uncaught KeyboardInterrupt the same way. Output is flushed first; returns the shell's
    status (128 + N) only where the signal did not end the process (blocked)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # (a closed or broken stream: nothing left to flush)
            stream.flush()
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
