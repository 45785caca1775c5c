"""`gputrace import nsys|chrome` in a subprocess; the output is an OTLP JSONL trace gputrace reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_chrome import KINETO  # noqa: E402
from test_nsys import EPOCH, build_report  # noqa: E402

from gputrace.timeline import read_trace  # noqa: E402


def gputrace(*args):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_import_nsys(tmp_path):
    rep = build_report(tmp_path / "prove.sqlite")
    out = tmp_path / "out.jsonl"
    r = gputrace("import", "nsys", rep, "-o", out, "--host", "node9")
    assert r.returncode == 0, r.stderr
    assert "spans" in r.stdout and "1 GPUs" in r.stdout
    tl = read_trace(out)
    names = {tl.name_of(i): i for i in range(tl.n)}
    assert {"prove", "ntt", "ntt_kernel", "cudaLaunchKernel", "[CUDA memcpy HtoD]"} <= set(names)
    assert tl.parent[names["ntt_kernel"]] == names["ntt"]
    assert int(tl.start[names["prove"]]) == EPOCH + 1_000
    assert {ln.host for ln in tl.lanes} == {"node9"}


def test_import_nsys_default_output_and_no_runtime(tmp_path):
    rep = build_report(tmp_path / "rep.sqlite")
    r = gputrace("import", "nsys", rep, "--no-runtime", "--correlation-ids")
    assert r.returncode == 0, r.stderr
    tl = read_trace(tmp_path / "rep.jsonl")
    assert not any(tl.name_of(i).startswith("cuda") for i in range(tl.n))
    k = next(i for i in range(tl.n) if tl.name_of(i) == "ntt_kernel")
    assert tl.attrs[k]["cuda.correlation_id"] == 10


def test_import_chrome(tmp_path):
    src = tmp_path / "torch.json"
    src.write_text(json.dumps(KINETO))
    r = gputrace("import", "chrome", src, "-o", tmp_path / "t.jsonl")
    assert r.returncode == 0, r.stderr
    tl = read_trace(tmp_path / "t.jsonl")
    names = {tl.name_of(i): i for i in range(tl.n)}
    # a kernel hangs under the phase (annotation) around its launch, not under the aten:: operator
    assert tl.name_of(int(tl.parent[names["vectorized_elementwise_kernel"]])) == "ntt"
    assert tl.attrs[names["vectorized_elementwise_kernel"]]["gputrace.activity"] == "kernel"


def test_import_errors(tmp_path):
    notdb = tmp_path / "x.sqlite"
    notdb.write_text("nope")
    r = gputrace("import", "nsys", notdb, "-o", tmp_path / "o.jsonl")
    assert r.returncode == 1 and "x.sqlite" in r.stderr and "not a SQLite" in r.stderr
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"x")
    r = gputrace("import", "nsys", rep)
    assert r.returncode == 1 and "nsys export --type sqlite" in r.stderr


def test_import_of_a_missing_file_says_what_is_wrong(tmp_path):
    r = gputrace("import", "nsys", tmp_path / "report.sqlite")
    assert r.returncode == 2 and "report.sqlite: no such file" in r.stderr and "nsys export" in r.stderr
    r = gputrace("import", "chrome", tmp_path)
    assert r.returncode == 2 and "is a directory" in r.stderr
