"""What ``gputrace record``'s bootstrap adds to the start-up and exit of every Python process of a launch.

Usage::

    .venv/bin/python benchmarks/bench_record_startup.py                 # python -c pass
    .venv/bin/python benchmarks/bench_record_startup.py "import numpy"  # a program that imports numpy anyway

Runs ``python -c CODE`` plain and with the environment ``record`` gives a launch (the sitecustomize bootstrap
first on PYTHONPATH, host-side recording), alternating the two, and prints the median wall time of each.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gputrace.commands.record import launch_env, write_bootstrap


def main(argv: list[str]) -> int:
    code = argv[0] if argv else "pass"
    repeats = int(argv[1]) if len(argv) > 1 else 12
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "procs").mkdir()
        env = launch_env(t / "s.jsonl", t / "procs", write_bootstrap(t), False, None)
        plain: list[float] = []
        rec: list[float] = []
        for _ in range(repeats):
            for env_, out in ((None, plain), (env, rec)):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", code], env=env_, check=True)
                out.append(time.perf_counter() - t0)
    p, r = statistics.median(plain), statistics.median(rec)
    print(f"python -c {code!r}: plain {p * 1e3:.0f} ms, under record {r * 1e3:.0f} ms, +{(r - p) * 1e3:.0f} ms "
          f"(medians of {repeats}, alternating)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
