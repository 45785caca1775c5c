"""``--device-flow`` on ``gputrace prove`` and ``gputrace ab`` reaches ``ProveOptions.device_flow``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gputrace.cli import build_parser
from gputrace.commands.ab import prover_runner
from gputrace.commands.prove import options_from_args


def test_prove_device_flow_defaults_to_stream_and_takes_batch():
    parse = build_parser().parse_args
    assert options_from_args(parse(["prove"])).device_flow == "stream"
    assert options_from_args(parse(["prove", "--device-flow", "batch"])).device_flow == "batch"
    assert options_from_args(parse(["prove", "--device-flow", "stream-sync"])).device_flow == "stream-sync"
    with pytest.raises(SystemExit):
        parse(["prove", "--device-flow", "graph"])


def test_ab_passes_device_flow_to_each_run(tmp_path, monkeypatch):
    args = build_parser().parse_args(["ab", "--switches", "B1", "--device-flow", "batch", "--constraints", "1024"])
    assert args.device_flow == "batch"
    seen = []
    monkeypatch.setattr("gputrace.prover.run_prove", lambda opts: seen.append(opts))
    args.subprocess = False
    prover_runner(args, tmp_path)(frozenset({"B1"}), tmp_path / "t.jsonl")
    assert seen and seen[0].device_flow == "batch" and seen[0].opts == frozenset({"B1"})


def test_ab_subprocess_command_carries_device_flow(tmp_path, monkeypatch):
    args = build_parser().parse_args(["ab", "--switches", "B1", "--device-flow", "batch", "--constraints", "1024"])
    args.subprocess = True
    calls = []
    monkeypatch.setattr("subprocess.run", lambda cmd, **kw: calls.append(cmd) or SimpleNamespace(returncode=0))
    prover_runner(args, tmp_path)(frozenset(), tmp_path / "t.jsonl")
    cmd = calls[0]
    assert cmd[cmd.index("--device-flow") + 1] == "batch"
