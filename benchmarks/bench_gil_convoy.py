#!/usr/bin/env python3
"""GIL convoy: what a GIL-releasing call costs one thread while other threads turn limbs into Scalars.

Usage: python3 benchmarks/bench_gil_convoy.py [--hogs 0,1,4] [--switch-ms 5,1,0.2] [--calls 200]

A device worker launches kernels and waits on streams; CuPy releases the GIL for those calls and
must take it back afterwards. Threads running Python meanwhile (``limbs_to_scalars`` for a host MSM
holds the GIL for about 0.5 us per scalar) make each take-back wait up to one switch interval per
GIL-holding thread. The worker here makes ``time.sleep(0)`` calls (GIL-releasing, no work) while
``--hogs`` threads convert 2^16 scalars in a loop; prints the median per-call time for each switch
interval. This is why ``HostMsm`` converts an MSM's scalars once, on the calling thread, instead of
in every part thread (docs/prover.md).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hogs", default="0,1,4")
    ap.add_argument("--switch-ms", default="5,1,0.2")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    rng = random.Random(1)
    limbs = ints_to_limbs([rng.randrange(R) for _ in range(1 << 16)])
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; ms per GIL-releasing call, median of {a.repeats} x {a.calls} calls")
    old = sys.getswitchinterval()
    try:
        for ms in (float(x) for x in a.switch_ms.split(",")):
            sys.setswitchinterval(ms / 1e3)
            cells = []
            for hogs in (int(x) for x in a.hogs.split(",")):
                stop = threading.Event()

                def hog():
                    while not stop.is_set():
                        limbs_to_scalars(limbs)

                threads = [threading.Thread(target=hog) for _ in range(hogs)]
                for t in threads:
                    t.start()
                time.sleep(0.05)
                per = []
                for _ in range(a.repeats):
                    t0 = time.perf_counter()
                    for _ in range(a.calls):
                        time.sleep(0)
                    per.append((time.perf_counter() - t0) * 1e3 / a.calls)
                stop.set()
                for t in threads:
                    t.join()
                cells.append(f"{hogs} converting threads {statistics.median(per):.3f}")
            print(f"switch interval {ms:g} ms: " + "; ".join(cells))
    finally:
        sys.setswitchinterval(old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
