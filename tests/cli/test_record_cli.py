"""``gputrace record -- python script.py args`` in a subprocess, on a machine without CUDA (CI)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gputrace.commands.record import child_command, summary_line


def _gt(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gputrace", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


PROG = """
import sys
import gputrace
print("argv", sys.argv[1:])
with gputrace.phase("work", bytes=8):
    sum(range(1000))
sys.exit(int(sys.argv[1]))
"""


def _spans(path):
    out = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                out.extend(ss["spans"])
    return out


@pytest.mark.parametrize("status", [0, 3])
def test_record_without_gpu_writes_host_trace_and_says_so(tmp_path, status):
    (tmp_path / "prog.py").write_text(PROG)
    trace = tmp_path / "out" / "rec.jsonl"
    r = _gt("record", "--trace", str(trace), "--", "python", "prog.py", str(status), cwd=tmp_path)
    assert r.returncode == status, r.stderr
    assert f"argv ['{status}']" in r.stdout  # the program saw its own arguments
    spans = {s["name"]: s for s in _spans(trace)}
    root, work = spans["python prog.py"], spans["work"]
    assert work["parentSpanId"] == root["spanId"]
    if "cupti" not in sys.modules:
        try:
            import cupti  # noqa: F401
        except ImportError:
            last = r.stderr.strip().splitlines()[-1]
            assert last.startswith("trace: 2 spans in ") and "no CUDA activity was collected" in last
            assert len([ln for ln in r.stderr.splitlines() if "CUDA activity" in ln]) == 1  # one line
    # view/report read it
    rep = _gt("report", str(trace), "--json")
    assert rep.returncode == 0, rep.stderr
    assert "work" in rep.stdout


def test_record_module_form_and_bad_commands(tmp_path):
    pkg = tmp_path / "mymod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys; print('mod', sys.argv[1:])")
    trace = tmp_path / "m.jsonl"
    r = _gt("record", "--trace", str(trace), "--no-cuda-activity", "--", "python", "-m", "mymod", "x", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mod ['x']" in r.stdout and "(--no-cuda-activity)" in r.stderr
    assert [s["name"] for s in _spans(trace)] == ["python -m mymod"]
    bad = _gt("record", "--trace", str(trace), "--", "ls", "-l", cwd=tmp_path)
    assert bad.returncode == 2 and "record runs Python programs" in bad.stderr


def test_child_command_and_summary_line():
    assert child_command(["--", "python", "a.py", "1"])[1:] == ["-m", "gputrace.commands._record_child", "a.py", "1"]
    assert child_command(["/usr/bin/python3.12", "-m", "m"])[0] == "/usr/bin/python3.12"
    for bad in ([], ["--"], ["python"], ["python", "-c", "1"], ["python", "-m"], ["bash", "x"]):
        with pytest.raises(ValueError):
            child_command(bad)
    line = summary_line({"spans": 10, "activity_spans": 7, "cuda_activity_asked": True}, "t.jsonl")
    assert line == "trace: 10 spans in t.jsonl; 7 from CUDA activity and NVTX ranges (CUPTI)"
    line = summary_line({"spans": 1, "activity_spans": 0, "cuda_activity_asked": True}, "t.jsonl")
    assert line.endswith("no CUDA activity was collected (the program launched no CUDA work)")


def test_prove_cuda_activity_flag_reaches_the_recorder(tmp_path):
    """`prove --cuda-activity` turns collection on; without CUPTI the proof still runs and the trace says why."""
    try:
        import cupti  # noqa: F401

        pytest.skip("cupti-python installed: this checks the machine without it")
    except ImportError:
        pass
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--batch", "1", "--backend", "cpu", "--cuda-activity",
            "--out", str(tmp_path), "--trace", str(tmp_path / "p.jsonl"), "--quiet", "--no-verify")
    assert r.returncode == 0, r.stderr
    res = {}
    for line in (tmp_path / "p.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res.update({kv["key"]: kv["value"] for kv in rs["resource"]["attributes"]})
    assert "cupti-python not usable" in res["gputrace.cupti.unavailable"]["stringValue"]
