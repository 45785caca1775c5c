"""What ``gputrace prove`` prints about its keys and progress (the command's helpers, in process)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from types import SimpleNamespace

from rich.console import Console

from gputrace.commands.prove import keys_summary, progress_bar
from tests.cli.processes import running


def _render(progress) -> str:
    buf = io.StringIO()
    Console(file=buf, force_terminal=False, width=100).print(progress.get_renderable())
    return buf.getvalue()


def _python(script: str) -> subprocess.CompletedProcess:
    """``script`` run by a fresh interpreter (``python -c``), its output captured as text."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


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


def test_cleanup_that_hangs_after_ctrl_c_ends_after_the_grace_time(tmp_path):
    """If what runs after the first Ctrl-C hangs, the process still ends (grace_s later): its worker processes
    killed, 'interrupted' once, exit status 130."""
    import time

    script = (
        "import multiprocessing as mp, os, signal, time\n"
        "from gputrace.commands.prove import Interrupts\n"
        "def child():\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "    time.sleep(60)\n"
        "p = mp.get_context('fork').Process(target=child)\n"
        "p.start()\n"
        "print(p.pid, flush=True)\n"
        "with Interrupts(grace_s=0.3):\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(5)\n"
        "    except KeyboardInterrupt:\n"
        "        time.sleep(30)  # a cleanup that never ends\n"
    )
    t0 = time.monotonic()
    r = _python(script)
    assert time.monotonic() - t0 < 20
    assert (r.returncode, r.stderr) == (130, "interrupted\n")
    child = int(r.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and running(child):
        time.sleep(0.05)
    assert not running(child), f"worker process {child} outlived the interrupted command"


def test_after_the_interrupt_is_reported_a_ctrl_c_is_ignored():
    # The interpreter's finalisation resets a Python SIGINT handler to the default action, after atexit hooks;
    # a second Ctrl-C in that window ended the process by the signal (-2), not with 130 (seen under load in
    # test_prove_interrupt's "twice" case). Once the command has reported the interrupt, SIGINT is ignored.
    script = (
        "import os, signal, sys\n"
        "from gputrace.commands.prove import Interrupts\n"
        "with Interrupts(grace_s=5) as it:\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        import time; time.sleep(5)\n"
        "    except KeyboardInterrupt:\n"
        "        status = it.report()\n"
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n"
        "sys.exit(status)\n"
    )
    r = _python(script)
    assert (r.returncode, r.stderr, r.stdout) == (130, "interrupted\n", "True\n")


def test_a_ctrl_c_after_the_work_is_done_is_ignored():
    # A Ctrl-C that came as a successful run ended used to end the process by the signal (-2) once the
    # interpreter's finalisation had reset the handler; after ``finished`` it is ignored and the status stays 0.
    script = (
        "import os, signal, time\n"
        "from gputrace.commands.prove import Interrupts\n"
        "with Interrupts(grace_s=5) as it:\n"
        "    it.finished()\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.2)\n"
        "print(it.hit, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n"
    )
    r = _python(script)
    assert (r.returncode, r.stderr, r.stdout) == (0, "", "False True\n")
