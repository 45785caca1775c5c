"""What ``gputrace prove`` prints about its keys and progress (the command's helpers, in process)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from rich.console import Console

from gputrace.commands.prove import keys_summary, progress_bar


def _render(progress) -> str:
    buf = io.StringIO()
    Console(file=buf, force_terminal=False, width=100).print(progress.get_renderable())
    return buf.getvalue()


def test_progress_bar_shows_its_total_from_the_start():
    err = Console(file=io.StringIO(), force_terminal=True, width=100)
    progress, on_progress = progress_bar(err, batch=2, devices=2, quiet=False)
    first = _render(progress)
    assert "None" not in first and "0/8" in first and "keys" in first
    on_progress("synthesis", 1, 8)
    assert "1/8" in _render(progress) and "proving (synthesis)" in _render(progress)


def _vk(tmp_path, **doc):
    path = tmp_path / "vk.json"
    path.write_text(json.dumps(doc))
    return path


def test_keys_summary_does_not_call_cached_keys_fresh(tmp_path):
    cached = SimpleNamespace(key_cached=True, setup_s=0.06, vk_path=_vk(tmp_path, test_key=False))
    line = keys_summary(cached)
    assert line == "keys loaded from the cache in 0.06 s (random single-party setup)"
    assert "fresh" not in line
    made = SimpleNamespace(key_cached=False, setup_s=2.27, vk_path=_vk(tmp_path, test_key=True, test_key_seed=2))
    assert keys_summary(made).startswith("keys generated in 2.27 s (TEST key from --seed 2: anyone can forge")


def test_ctrl_c_while_the_command_modules_load_is_one_line(monkeypatch, capsys):
    """The first 0.2 s of every command import the command modules: a Ctrl-C there printed an import traceback."""
    from gputrace import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["prove"]) == 130
    assert capsys.readouterr().err == "interrupted\n"
