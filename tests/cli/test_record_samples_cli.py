"""End to end: ``gputrace record`` samples Python stacks of an unmodified program and ``report`` names the line it
spent its time in (gputrace.trace.stack_sampler -> timeline.samples -> analysis.host_samples)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each test records a process tree (about 7 s, 3 s and 30 s).
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""\
    import time


    def burst(n):
        s = 0
        for i in range(n):
            s += i * i
        return s


    def wait_for_input():
        time.sleep(0.03)  # THE LINE


    for _ in range(12):
        burst(20000)
        wait_for_input()
""")


def _gt(*args, cwd, timeout=180):
    return subprocess.run([sys.executable, "-m", "gputrace", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def _line_of(text: str, mark: str) -> int:
    """The first line whose code (stripped) starts with ``mark``."""
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip().startswith(mark))


def test_report_names_the_line_a_plain_script_sleeps_in(tmp_path):
    (tmp_path / "loader.py").write_text(SCRIPT)
    r = _gt("record", "--no-cuda-activity", "--sample-hz", "100", "--trace", "t.jsonl", "--", "python", "loader.py",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Python stack samples" in r.stderr
    line = _line_of(SCRIPT, "time.sleep(0.03)")
    rep = _gt("report", "t.jsonl", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert f"loader.py:{line} in wait_for_input" in rep.stdout, rep.stdout
    doc = json.loads(_gt("report", "--json", "t.jsonl", cwd=tmp_path).stdout)
    [proc] = doc["host_samples"]["processes"]
    top = proc["sites"][0]
    assert (top["user"]["line"], top["user"]["func"]) == (line, "wait_for_input")
    assert top["share"] > 0.5 and proc["hz"] == 100
    # --sample-hz 0: no samples, the document keeps its shape
    r = _gt("record", "--no-cuda-activity", "--sample-hz", "0", "--trace", "off.jsonl", "--", "python", "loader.py",
            cwd=tmp_path)
    assert r.returncode == 0 and "stack sample" not in r.stderr
    assert "host_samples" not in json.loads(_gt("report", "--json", "off.jsonl", cwd=tmp_path).stdout)


def test_samples_are_flushed_when_the_program_is_terminated(tmp_path):
    (tmp_path / "forever.py").write_text("import time\n\n\ndef serve():\n    while True:\n        time.sleep(0.01)\n\n\n"
                                         "serve()\n")
    p = subprocess.Popen([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--sample-hz", "50",
                          "--trace", "t.jsonl", "--", "python", "forever.py"], cwd=tmp_path, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    doc = json.loads(_gt("report", "--json", "t.jsonl", cwd=tmp_path).stdout)
    [proc] = doc["host_samples"]["processes"]
    assert proc["sites"][0]["user"]["func"] == "serve" and proc["samples"] >= 10
    # the final drain at SIGTERM wrote the last samples (a periodic drain runs every 0.5 s)
    from gputrace.timeline.load import read_any
    from gputrace.timeline.samples import host_samples

    tl = read_any(tmp_path / "t.jsonl")
    root = next(r for r in range(tl.n) if tl.name_of(r) == "python forever.py")
    assert int(tl.cols["end"][root]) - int(host_samples(tl).t_ns[-1]) < 200_000_000


def test_ddp_plain_under_torchrun_names_rank_1s_late_line(tmp_path):
    pytest.importorskip("torch")
    prog = ROOT / "benchmarks/real_programs/ddp_plain.py"
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("no torchrun beside this interpreter")
    r = _gt("record", "--no-cuda-activity", "--trace", "ddp.jsonl", "--", str(torchrun), "--standalone",
            "--nproc-per-node", "2", str(prog), "--steps", "16", "--warmup", "1", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    truth = [ln for ln in r.stdout.splitlines() if ln.startswith("DDP_PLAIN rank=1")]
    assert truth and "slept_median_ms=5" in truth[0], r.stdout
    line = _line_of(prog.read_text(), "time.sleep(late_s)")
    doc = json.loads(_gt("report", "--json", "ddp.jsonl", cwd=tmp_path).stdout)
    procs = doc["host_samples"]["processes"]
    # rank 1's main process (not its forked DataLoader workers: their sites are parked or elsewhere)
    rank1 = [p for p in procs if p["rank"] == 1 and p["sites"]]
    labels = [s["label"] for p in rank1 for s in p["sites"][:3]]  # (with `import torch` and set-up)
    assert f"ddp_plain.py:{line} in load_batch" in labels, labels
    rank0 = [s["label"] for p in procs if p["rank"] == 0 for s in p["sites"]]
    assert f"ddp_plain.py:{line} in load_batch" not in rank0  # only the late rank sleeps there
    # Issue 32's target, on the CPU: the first finding names the slow rank and its line, and the others' wait per
    # step near the program's own figure (rank 0's backward, which holds DDP's all-reduce, minus rank 1's). That
    # figure assumes both ranks compute alike; on a loaded 2-core box they do not (rank 1's backward took 5-18 ms),
    # and rank 0 also waits out rank 1's slower compute, so 25 % here; the 10 % target is checked on the H200
    # trace (tests/unit/test_collectives.py::test_h200_ddp_plain_trace_meets_the_wait_target).
    first = doc["findings"][0]
    assert first["rule"] == "straggler" and "rank 1" in first["title"], doc["findings"][:2]
    assert f"ddp_plain.py:{line} in load_batch" in first["title"], first["title"]
    back = {int(m.group(1)): float(m.group(2)) for m in
            (re.search(r"rank=(\d+) .*backward_median_ms=([0-9.]+)", ln) for ln in r.stdout.splitlines()) if m}
    want_ms = back[0] - back[1]
    s = doc["collectives"]["stragglers"][0]
    assert s["rank"] == 1 and abs(s["median_merged_wait_ns"] / 1e6 - want_ms) <= 0.25 * want_ms, (s, back)
