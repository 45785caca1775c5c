"""``gputrace record``'s bootstrap in a bare Python process (one that never touches CUDA or NVTX: ``python -c
pass``, a tool the launch runs, a spawned worker) imports neither numpy nor nvtx (issue 24: they cost
~50-110 ms per process), at start or at exit, and still records the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gputrace.commands.record import launch_env, write_bootstrap

PROGRAM = "import sys; print(sorted(m for m in ('numpy', 'nvtx', 'opentelemetry') if m in sys.modules))"


def test_a_bare_process_under_the_bootstrap_imports_no_numpy_nor_nvtx(tmp_path):
    (tmp_path / "procs").mkdir()
    segments = tmp_path / "t.jsonl.d"  # (record's segment folder: each process writes its own file there)
    segments.mkdir()
    env = launch_env(segments, tmp_path / "procs", write_bootstrap(tmp_path), False, None)
    for k in [k for k in env if k.startswith("NVTX_INJECTION")]:  # no NVTX tool attached
        del env[k]
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", PROGRAM], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout  # nothing of them while the program runs
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    assert "numpy" not in imported and "nvtx" not in imported  # nor at exit (the root span's export)
    assert "sitecustomize" in imported  # (the bootstrap did run)
    # ... and the process was recorded: its check-in is final and its root span is in the launch's file.
    (checkin,) = (tmp_path / "procs").glob("*.json")
    info = json.loads(checkin.read_text())
    assert info["final"] and info["spans"] >= 1 and info["label"] == "python -c"
    (segment,) = segments.glob("*.jsonl")
    assert '"name":"python -c"' in segment.read_text() and segment.name == f"{info['pid']}-0.jsonl"
    assert os.path.basename(checkin) == f"{info['pid']}.json"
