"""Reading the same file gives the same tables whatever Python's hash seed (trace ids, lane names, lanes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gputrace.testing.synthetic import write_synthetic

_PRINT = """
import json, sys
from gputrace.timeline import read_trace
tl = read_trace(sys.argv[1])
print(json.dumps({"trace_ids": list(tl.trace_ids), "lanes": [repr(l) for l in tl.lanes]}))
"""


def _tables(path, seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", _PRINT, str(path)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def test_tables_do_not_follow_the_hash_seed(tmp_path):
    path = tmp_path / "t.jsonl"
    write_synthetic(path, hosts=2, gpus=4, batches=6, spans_per_line=64, shuffle_lines=True)
    first = _tables(path, "1")
    assert len(first["trace_ids"]) > 8 and len(first["lanes"]) > 8
    for seed in ("2", "3", "4"):
        assert _tables(path, seed) == first
