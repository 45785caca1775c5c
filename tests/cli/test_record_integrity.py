"""``gputrace record``'s trace file against hostile programs and signals (issue 33 part 2, issue 35): in a
subprocess, on a machine without CUDA. Each test fails on the one-shared-file recorder."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # each test runs `gputrace record` on a process tree (about 2 s each)


def _gt_popen(*args, cwd):
    return subprocess.Popen([sys.executable, "-m", "gputrace", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _record(tmp_path, *command, trace="rec.jsonl"):
    return subprocess.run([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace",
                           str(tmp_path / trace), "--", *command], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def _spans(path):
    """[(resource attributes, span)] of an OTLP JSON Lines file (json.loads of every line: strict), without the
    stack-sample batches (spans named ``gputrace.samples``: the closing line counts them as samples)."""
    out = []
    for line in Path(path).read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res = {kv["key"]: next(iter(kv["value"].values())) for kv in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                out.extend((res, s) for s in ss["spans"] if s["name"] != "gputrace.samples")
    return out


def _closing_count(stderr):
    m = re.search(r"trace: (\d+) spans?", stderr)
    assert m, stderr
    return int(m.group(1))


CLOSES_ALL_FDS = """
import os, gputrace
with gputrace.phase("before"):
    pass
import time; time.sleep(0.7)  # one drain: the recorder has written
os.closerange(3, 4096)  # a daemonising program, a sandbox helper
with open("mydata.txt", "w") as f:
    for i in range(20):
        with gputrace.phase("after"):
            f.write(f"row {i}\\n")
            f.flush()
        time.sleep(0.05)
"""


def test_a_program_that_closes_every_fd_never_gets_trace_lines_in_its_file(tmp_path):
    (tmp_path / "p.py").write_text(CLOSES_ALL_FDS)
    r = _record(tmp_path, "python", "p.py")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "mydata.txt").read_text() == "".join(f"row {i}\n" for i in range(20))
    names = [s["name"] for _, s in _spans(tmp_path / "rec.jsonl")]
    assert names.count("after") == 20 and "before" in names and "python p.py" in names


SLOW = """
import time, gputrace
for i in range(40):
    with gputrace.phase("tick"):
        time.sleep(0.05)
"""


def test_a_second_record_on_the_same_path_is_refused_and_the_first_keeps_its_spans(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    first = _gt_popen("record", "--no-cuda-activity", "--trace", "rec.jsonl", "--", "python", "slow.py", cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "rec.jsonl.d").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = _record(tmp_path, "python", "-c", "pass")
    _, err = first.communicate(timeout=120)
    assert second.returncode == 2 and "another gputrace record (pid" in second.stderr, second.stderr
    assert first.returncode == 0, err
    names = [s["name"] for _, s in _spans(tmp_path / "rec.jsonl")]
    assert names.count("tick") == 40
    assert _closing_count(err) == len(names) == 41


def test_a_symlinked_trace_is_refused_and_its_target_kept(tmp_path):
    (tmp_path / "precious.txt").write_text("keep")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "precious.txt")
    r = _record(tmp_path, "python", "-c", "pass", trace="link.jsonl")
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep"


KILLED_CHILD = """
import multiprocessing as mp, os, signal, time
import gputrace

def child():
    with gputrace.phase("drained"):
        pass
    with gputrace.phase("long"):  # open for 1.5 s when the child is killed: lost
        time.sleep(30)

if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=child)
    p.start()
    time.sleep(1.5)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
"""


def test_a_killed_child_is_counted_from_the_file_and_named_by_report(tmp_path):
    (tmp_path / "k.py").write_text(KILLED_CHILD)
    r = _record(tmp_path, "python", "k.py")
    assert r.returncode == 0, r.stderr
    spans = _spans(tmp_path / "rec.jsonl")
    assert _closing_count(r.stderr) == len(spans) == 2  # the parent's root + the child's drained phase
    assert "1 process ended without a final flush (killed?): pid" in r.stderr and "< 1 s" not in r.stderr
    rep = subprocess.run([sys.executable, "-m", "gputrace", "report", "rec.jsonl"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert "1 process ended without a final flush (killed?)" in rep.stdout, rep.stdout + rep.stderr


RESETS_PYTHONPATH = """
import os, subprocess, sys
env = dict(os.environ, PYTHONPATH="/nowhere")
subprocess.run([sys.executable, "-c", "import time; time.sleep(1)"], env=env, check=True)
"""


def test_a_child_that_resets_pythonpath_is_named_in_the_closing_line(tmp_path):
    (tmp_path / "r.py").write_text(RESETS_PYTHONPATH)
    r = _record(tmp_path, "python", "r.py")
    assert r.returncode == 0, r.stderr
    assert re.search(r"record: 1 python process started without the recorder, not in the trace: pid \d+ "
                     r"`python -c import time; time.sleep\(1\)` \(its PYTHONPATH lost record's bootstrap folder\)",
                     r.stderr), r.stderr


HUP = """
import sys, time, gputrace
with gputrace.phase("waiting"):
    print("ready", flush=True)
    time.sleep(30)
"""


def test_sighup_to_record_flushes_like_sigterm(tmp_path):
    (tmp_path / "h.py").write_text(HUP)
    p = _gt_popen("record", "--no-cuda-activity", "--trace", "rec.jsonl", "--", "python", "h.py", cwd=tmp_path)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGHUP, err
    spans = {s["name"]: s for _, s in _spans(tmp_path / "rec.jsonl")}
    assert set(spans) == {"waiting", "python h.py"}  # the phase open at the signal and the root span
    assert spans["waiting"]["status"]["message"].endswith("SIGHUP")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_trace_kills", ROOT / "benchmarks" / "bench_trace_kills.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_random_sigkills_cost_the_other_processes_nothing(tmp_path):
    """The stress case, small: 5 processes, 2 jobs, one process SIGKILLed at a random moment of each
    (benchmarks/bench_trace_kills.py runs 32 processes x 50 kills)."""
    bench = _bench()
    for seed in (1, 2):
        r = bench.trial(5, 4000, 1000, seed, workdir=str(tmp_path), pause=0.1, window_s=0.8)
        assert r["strict_ok"], r["strict_error"]
        assert r["survivors"] == 4 and r["survivors_losing"] == 0, r
