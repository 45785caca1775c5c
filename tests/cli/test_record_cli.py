"""``gputrace record -- COMMAND ...`` in a subprocess, on a machine without CUDA (CI): every Python process of
the launch recorded into one trace, exit statuses as a shell gives them, signals forwarded to the tree."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gputrace.commands.record import exit_status, launch_command, summary_line
from gputrace.trace.launch.process import command_label

ROOT = Path(__file__).resolve().parents[2]

# Every test but test_helpers launches `gputrace record` on a process tree (about 29 s together).
pytestmark = pytest.mark.slow


def _gt(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "gputrace", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


def _record(tmp_path, *command, trace="rec.jsonl", env=None):
    return _gt("record", "--no-cuda-activity", "--trace", str(tmp_path / trace), "--", *command, cwd=tmp_path,
               env=env)


def _spans(path, samples=False):
    """[(resource attributes, span)] of an OTLP JSON Lines file; the stack sampler's batch spans
    (``gputrace.samples``) only with ``samples=True``."""
    out = []
    for line in Path(path).read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res = {}
            for kv in rs["resource"]["attributes"]:
                v = kv["value"]
                res[kv["key"]] = next(iter(v.values()))
            for ss in rs["scopeSpans"]:
                out.extend((res, s) for s in ss["spans"] if samples or s["name"] != "gputrace.samples")
    return out


def _names_by_pid(path):
    got: dict = {}
    for res, s in _spans(path):
        got.setdefault(int(res["process.pid"]), set()).add(s["name"])
    return got


def _no_cupti() -> bool:
    try:
        import cupti  # noqa: F401
    except ImportError:
        return True
    return False


PROG = """
import sys
import gputrace
print("argv", sys.argv[1:])
with gputrace.phase("work", bytes=8):
    sum(range(1000))
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_record_without_gpu_writes_host_trace_and_says_so(tmp_path, status):
    (tmp_path / "prog.py").write_text(PROG)
    trace = tmp_path / "out" / "rec.jsonl"
    r = _gt("record", "--trace", str(trace), "--", "python", "prog.py", str(status), cwd=tmp_path)
    assert r.returncode == status, r.stderr
    assert f"argv ['{status}']" in r.stdout  # the program saw its own arguments
    spans = {s["name"]: (res, s) for res, s in _spans(trace)}
    (res, root), (_, work) = spans["python prog.py"], spans["work"]
    assert work["parentSpanId"] == root["spanId"]
    assert res["gputrace.launch.command"] == "python prog.py" and int(res["process.parent_pid"]) > 0
    assert int(res["gputrace.clock.anchor_uncertainty_ns"]) >= 0 and "gputrace.clock.epoch_offset_ns" in res
    if _no_cupti():
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("trace: 2 spans in ") and "no CUDA activity was collected" in last
        assert len([ln for ln in r.stderr.splitlines() if "CUDA activity" in ln]) == 1  # one line
    rep = _gt("report", str(trace), "--json")
    assert rep.returncode == 0, rep.stderr
    assert "work" in rep.stdout


def test_module_and_c_forms(tmp_path):
    pkg = tmp_path / "mymod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys; print('mod', sys.argv[1:])")
    r = _record(tmp_path, "python", "-m", "mymod", "x", trace="m.jsonl")
    assert r.returncode == 0, r.stderr
    assert "mod ['x']" in r.stdout and "(--no-cuda-activity)" in r.stderr
    assert [s["name"] for _, s in _spans(tmp_path / "m.jsonl")] == ["python -m mymod"]
    code = "import gputrace, sys\nwith gputrace.phase('inline'):\n    print('c', sys.argv[1:])"
    r = _record(tmp_path, "python", "-c", code, "y", trace="c.jsonl")
    assert r.returncode == 0, r.stderr
    assert "c ['y']" in r.stdout
    spans = {s["name"]: s for _, s in _spans(tmp_path / "c.jsonl")}
    assert spans["inline"]["parentSpanId"] == spans["python -c"]["spanId"]


def test_shell_script_that_starts_python_and_rank_attributes(tmp_path):
    (tmp_path / "w.py").write_text("import gputrace\nwith gputrace.phase('step'):\n    pass\n")
    script = tmp_path / "launch.sh"
    script.write_text(f'#!/bin/sh\nRANK=0 LOCAL_RANK=0 WORLD_SIZE=2 "{sys.executable}" w.py &\n'
                      f'RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 "{sys.executable}" w.py\nwait\nexit 5\n')
    script.chmod(0o755)
    r = _record(tmp_path, "./launch.sh")
    assert r.returncode == 5, r.stderr  # the launcher's status passes through
    assert "from 2 processes" in r.stderr
    spans = _spans(tmp_path / "rec.jsonl")
    ranks = sorted(int(res["gputrace.rank"]) for res, s in spans if s["name"] == "step")
    assert ranks == [0, 1]
    assert {int(res["gputrace.world_size"]) for res, _ in spans} == {2}
    assert len({res["gputrace.run_id"] for res, _ in spans}) == 1  # one run: readers show the launch as one
    assert len({res["process.pid"] for res, _ in spans}) == 2


MP = """
import multiprocessing as mp
import sys
import numpy as np
import gputrace

def work(i):
    with gputrace.phase(f"work{i}"):
        return float(np.linalg.norm(np.arange(10000.0) * i))

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with gputrace.phase("parent"):
        with ctx.Pool(2) as pool:
            print(sum(pool.map(work, range(4))))
        p = ctx.Process(target=work, args=(9,))
        p.start()
        p.join()
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_children_are_recorded(tmp_path, method):
    (tmp_path / "mp.py").write_text(MP)
    r = _record(tmp_path, "python", "mp.py", method)
    assert r.returncode == 0, r.stderr
    by_pid = _names_by_pid(tmp_path / "rec.jsonl")
    works = set().union(*by_pid.values())
    assert {"parent", "python mp.py", "work0", "work1", "work2", "work3", "work9"} <= works
    assert len([p for p, names in by_pid.items() if names & {"work0", "work1", "work2", "work3", "work9"}]) >= 2
    # every span in the file is counted by the closing line (no process lost its check-in). (A pool worker
    # that pool.terminate() stops while it is still starting may end before its root span: not asserted.)
    n = len(_spans(tmp_path / "rec.jsonl"))
    assert f"trace: {n} spans from " in r.stderr
    rep = _gt("report", str(tmp_path / "rec.jsonl"), "--json")
    assert rep.returncode == 0 and "work9" in rep.stdout, rep.stderr


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGKILL, 137), (signal.SIGTERM, 143)])
def test_exit_status_of_a_killed_program_is_the_shells(tmp_path, sig, status):
    code = f"import os, gputrace\nwith gputrace.phase('before'):\n    pass\nos.kill(os.getpid(), {int(sig)})"
    r = _record(tmp_path, "python", "-c", code)
    assert r.returncode == status, r.stderr
    names = {s["name"] for _, s in _spans(tmp_path / "rec.jsonl")}
    if sig == signal.SIGTERM:  # flushed by the SIGTERM handler: the trace was written and record says so
        assert {"before", "python -c"} <= names
        assert "trace: 2 spans in" in r.stderr and "not written" not in r.stderr


def test_sys_exit_message_and_missing_script_and_non_python(tmp_path):
    r = _record(tmp_path, "python", "-c", "import sys; sys.exit('stopped: bad input')")
    assert r.returncode == 1 and "stopped: bad input" in r.stderr, r.stderr
    r = _record(tmp_path, "python", "missing.py")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "missing.py" in r.stderr, r.stderr
    r = _record(tmp_path, "/bin/sleep", "0.1", trace="native.jsonl")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nsys profile" in lines[0] and "gputrace view rep.sqlite" in lines[0]
    assert not (tmp_path / "native.jsonl").exists()
    r = _record(tmp_path, "python", "-I", "-c", "pass", trace="isolated.jsonl")
    assert r.returncode == 0 and "-I, -E or -S" in r.stderr and not (tmp_path / "isolated.jsonl").exists()
    r = _record(tmp_path, "/no/such/program")
    assert r.returncode == 127 and "Traceback" not in r.stderr


def test_cupy_script_without_cupy_gives_host_trace_and_one_notice(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy installed: this checks the machine without it")
    except ImportError:
        pass
    r = _gt("record", "--trace", str(tmp_path / "c.jsonl"), "--", "python", str(ROOT / "examples/record_cupy.py"))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr, r.stderr
    assert "pip install -e '.[gpu]'" in r.stderr
    assert [s["name"] for _, s in _spans(tmp_path / "c.jsonl")] == ["python record_cupy.py"]


def test_program_that_configures_its_own_recorder_still_fills_the_record_trace(tmp_path):
    code = textwrap.dedent("""
        import gputrace
        with gputrace.phase("early"):
            pass
        gputrace.configure(trace_file="own.jsonl")
        with gputrace.phase("mine"):
            pass
        gputrace.shutdown()
    """)
    r = _record(tmp_path, "python", "-c", code)
    assert r.returncode == 0, r.stderr
    names = [s["name"] for _, s in _spans(tmp_path / "rec.jsonl")]
    assert "early" in names and "mine" in names
    assert "python -c" in names  # the root span, though the program had shut its recorder down
    assert "mine" in [s["name"] for _, s in _spans(tmp_path / "own.jsonl")]
    n = len(names)
    assert f"trace: {n} spans in" in r.stderr, r.stderr


SLOW_CLEANUP = """
import multiprocessing as mp, sys, time
import gputrace

def child():
    try:
        with gputrace.phase("child"):
            time.sleep(30)
    finally:
        with gputrace.phase("child-cleanup"):
            time.sleep(0.5)

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    with gputrace.phase("outer"):
        time.sleep(1.5)  # (the child is up)
        try:
            print("ready", flush=True)  # (inside the try: the SIGINT that follows must find the finally)
            time.sleep(30)
        finally:
            with gputrace.phase("cleanup"):
                time.sleep(0.6)  # longer than the 0.25 s record used to allow
                p.join()
"""


def test_sigint_reaches_every_process_and_record_waits_for_cleanup(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_CLEANUP)
    p = subprocess.Popen([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace",
                          str(tmp_path / "rec.jsonl"), "--", "python", "slow.py"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGINT)  # to record alone: it forwards to the program's process group
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == -signal.SIGINT, err  # the program died of SIGINT: record ends by it too (130 in a shell)
    names = {s["name"] for _, s in _spans(tmp_path / "rec.jsonl")}
    assert {"outer", "cleanup", "child", "child-cleanup", "python slow.py"} <= names, err


KILLED_CHILD = """
import multiprocessing as mp, os, signal, time
import gputrace

def child():
    with gputrace.phase("drained"):
        pass
    time.sleep(30)

if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=child)
    p.start()
    time.sleep(1.5)  # three drains of the child's exporter
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    print("child", p.exitcode)
"""


def test_a_sigkilled_child_keeps_what_it_had_drained(tmp_path):
    (tmp_path / "k.py").write_text(KILLED_CHILD)
    r = _record(tmp_path, "python", "k.py")
    assert r.returncode == 0, r.stderr
    assert "child -9" in r.stdout
    by_pid = _names_by_pid(tmp_path / "rec.jsonl")
    assert any("drained" in names for names in by_pid.values())
    assert "1 process ended without a final flush" in r.stderr


def test_helpers():
    assert launch_command(["--", "python", "a.py", "1"]) == [sys.executable, "a.py", "1"]
    assert launch_command(["torchrun", "--nproc-per-node", "2", "t.py"])[0] == "torchrun"
    for bad in ([], ["--"]):
        with pytest.raises(ValueError):
            launch_command(bad)
    assert [exit_status(c) for c in (0, 3, -2, -9, -15)] == [0, 3, 130, 137, 143]
    assert command_label(["py", "-u", "train.py", "--lr", "1"]) == ("python train.py", "program")
    assert command_label(["py", "-m", "torch.distributed.run", "x.py"]) == ("python -m torch.distributed.run",
                                                                           "program")
    assert command_label(["py", "-X", "dev", "-c", "pass"]) == ("python -c", "program")
    assert command_label(["/usr/bin/python3", "/venv/bin/torchrun", "--nproc-per-node", "2", "t.py"]) == (
        "python torchrun", "program")  # a console script: its interpreter runs the launcher file
    assert command_label(["py", "-c", "from multiprocessing.forkserver import main; main()"])[1] == "forkserver"
    assert command_label(["py", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()",
                          "--multiprocessing-fork"])[1] == "spawn"
    line = summary_line([{"spans": 10, "activity_spans": 7, "final": True}], "t.jsonl")
    assert line == "trace: 10 spans in t.jsonl; 7 from CUDA activity and NVTX ranges (CUPTI)"
    line = summary_line([{"spans": 1, "final": True, "cuda_activity_asked": True},
                         {"spans": 2, "final": False}], "t.jsonl")
    assert line.startswith("trace: 3 spans from 2 processes in t.jsonl; 1 process ended without a final flush")
    assert line.endswith("no CUDA activity was collected (the program launched no CUDA work)")


def test_prove_cuda_activity_flag_reaches_the_recorder(tmp_path):
    """`prove --cuda-activity` turns collection on; without CUPTI the proof still runs and the trace says why."""
    if not _no_cupti():
        pytest.skip("cupti-python installed: this checks the machine without it")
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--batch", "1", "--backend", "cpu", "--cuda-activity",
            "--out", str(tmp_path), "--trace", str(tmp_path / "p.jsonl"), "--quiet", "--no-verify")
    assert r.returncode == 0, r.stderr
    res = {}
    for line in (tmp_path / "p.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res.update({kv["key"]: kv["value"] for kv in rs["resource"]["attributes"]})
    assert "cupti-python not usable" in res["gputrace.cupti.unavailable"]["stringValue"]


def test_bootstrap_chains_to_an_existing_sitecustomize(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = dict(os.environ, PYTHONPATH=str(other))
    code = "import os, sys, gputrace\nprint('chained', os.environ.get('CHAINED'))\nprint('clean', " \
           "not any('gputrace-record-' in p for p in sys.path))"
    r = _record(tmp_path, "python", "-c", code, env=env)
    assert r.returncode == 0, r.stderr
    assert "chained yes" in r.stdout and "clean True" in r.stdout
    assert [s["name"] for _, s in _spans(tmp_path / "rec.jsonl")] == ["python -c"]


TTY_PROG = """
import time
import gputrace
with gputrace.phase("outer"):
    line = input("ready> ")
    try:
        print("got", line, flush=True)  # (inside the try: the Ctrl-C that follows must find the finally)
        time.sleep(30)
    finally:
        with gputrace.phase("cleanup"):
            time.sleep(0.3)
"""


def test_in_a_terminal_the_program_reads_stdin_and_gets_ctrl_c(tmp_path):
    """record in a terminal's foreground hands the terminal to the program's group: input() works (no
    SIGTTIN stop) and Ctrl-C reaches the program once; record ends by SIGINT (130 in a shell) after the cleanup
    is recorded."""
    pty = pytest.importorskip("pty")
    (tmp_path / "t.py").write_text(TTY_PROG)
    trace = tmp_path / "tty.jsonl"
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        os.chdir(tmp_path)
        os.execv(sys.executable, [sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace",
                                  str(trace), "--", "python", "t.py"])
    buf = b""
    status = None
    try:
        deadline = time.monotonic() + 30
        for want, send in ((b"ready> ", b"hi\n"), (b"got hi", b"\x03")):
            while want not in buf and time.monotonic() < deadline:
                if select.select([fd], [], [], 0.5)[0]:
                    buf += os.read(fd, 1024)
            assert want in buf, buf
            os.write(fd, send)
        while True:
            try:
                chunk = os.read(fd, 1024)
            except OSError:  # EIO: the terminal's last user closed it
                break
            if not chunk:
                break
            buf += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
        if status is None:  # record is stuck: SIGTERM makes it end the program's group, then itself
            os.kill(pid, signal.SIGTERM)
            time.sleep(2)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGINT, buf  # (a shell reports 130)
    names = {s["name"] for _, s in _spans(trace)}
    assert {"outer", "cleanup", "python t.py"} <= names, buf


def test_one_ctrl_c_stops_a_shell_loop_of_record_runs(tmp_path):
    """A shell loop stops on Ctrl-C only when its command died of SIGINT (bash's wait-and-cooperative-exit):
    record ends by SIGINT itself, after its closing line, where the program did. The loop runs as a
    non-interactive bash in a session of its own; Ctrl-C is SIGINT to its foreground process group (bash
    and record; record forwards it to the program's group)."""
    bash = "/bin/bash"
    if not os.path.exists(bash):
        pytest.skip("no bash")
    prog = "import time; print('ready', flush=True); time.sleep(20)"
    loop = (f"for i in 1 2; do {sys.executable} -m gputrace record --no-cuda-activity --trace rec$i.jsonl -- "
            f"python -c \"{prog}\"; echo \"after $i: $?\"; done")
    p = subprocess.Popen([bash, "-c", loop], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    assert "after" not in out and not (tmp_path / "rec2.jsonl").exists(), (out, err)
    assert p.returncode == -signal.SIGINT, (out, err)
    assert "trace: 1 span in" in err  # the flush and the closing line came first
