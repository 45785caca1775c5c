"""docs/nsight.md against the code: NVTX domain, phase names and colours, and the recipe's flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gputrace.cli import build_parser
from gputrace.phases import PHASES, phase_hex, phase_kind
from gputrace.trace import nvtx_support

DOC = (Path(__file__).resolve().parents[2] / "docs" / "nsight.md").read_text()


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```sh\n(.*?)```", DOC, flags=re.S)
    return [shlex.split(line, comments=True) for b in blocks for line in b.splitlines() if line.strip()]


def _recipe() -> list[str]:
    (cmd,) = [c for c in _commands() if c[:2] == ["nsys", "profile"]]
    return cmd


def test_domain_is_the_one_the_recorder_uses():
    assert nvtx_support.DOMAIN_NAME == "gputrace"
    assert f"`{nvtx_support.DOMAIN_NAME}` (`gputrace.trace.nvtx_support.DOMAIN_NAME`)" in DOC


def test_phase_table_matches_the_vocabulary():
    rows = re.findall(r"^\| `(\w+)` \| `(#[0-9a-f]{6})` \| (\w+) \|$", DOC, flags=re.M)
    assert [r[0] for r in rows] == list(PHASES), "table must list every phase, in vocabulary order"
    for name, colour, kind in rows:
        assert colour == phase_hex(name), name
        assert kind == phase_kind(name), name


def test_recipe_flags_match_our_names():
    cmd = _recipe()
    assert cmd[cmd.index("-t") + 1] == "cuda,nvtx"
    opts = dict(a.split("=", 1) for a in cmd if a.startswith("--") and "=" in a)
    assert opts["--capture-range"] == "nvtx"
    message, domain = opts["--nvtx-capture"].split("@")
    assert domain == nvtx_support.DOMAIN_NAME
    assert message == "prove" and message in PHASES and phase_kind(message) == "host"
    assert opts["--capture-range-end"] == "stop"


def test_recipe_runs_a_real_gputrace_command():
    cmd = _recipe()
    prog = cmd.index("gputrace")
    args = build_parser().parse_args(cmd[prog + 1:])
    assert args.command == "prove" and args.backend == "cuda" and args.trace is not None
    assert args.func.__module__ == "gputrace.commands.prove"


def test_recipe_files_chain():
    cmds = _commands()
    rep = _recipe()[_recipe().index("-o") + 1]
    export = next(c for c in cmds if c[:3] == ["nsys", "export", "--type"])
    assert export[3] == "sqlite" and export[-1] == rep + ".nsys-rep"
    sqlite = export[export.index("-o") + 1]
    parser = build_parser()
    imp = next(c for c in cmds if c[:3] == ["gputrace", "import", "nsys"])
    a = parser.parse_args(imp[1:])
    assert a.input == sqlite and a.source == "nsys"
    exp = next(c for c in cmds if c[:2] == ["gputrace", "export"])
    a = parser.parse_args(exp[1:])
    assert a.traces == [sqlite] and a.format == "chrome"
