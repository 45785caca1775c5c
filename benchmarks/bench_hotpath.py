"""Where a plain phase's caller time goes, step by step, and the phase itself with and without recycled objects.

Usage::

    .venv/bin/python benchmarks/bench_hotpath.py                # budget table + phase A/B
    .venv/bin/python benchmarks/bench_hotpath.py --repeats 11 -n 50000

All figures are the CPU time of the timing thread (``time.thread_time_ns``) per iteration of a ``for`` loop
(the empty loop is the first row; every other row includes it), min and median over ``--repeats`` runs of
``-n`` iterations, the variants alternated in one process so the shared machine's load hits them alike.

Budget rows (each one step of ``with phase("ntt", device=0, bytes=n): pass`` on its own): an empty context
manager with Python ``__enter__``/``__exit__``; a call of a function with ``phase``'s signature; the two
clock reads; a ``threading.local`` read; a tuple appended to a list; an NVTX push/pop on the ``nvtx``
package's dummy domain (what a phase would pay without the ``ENABLED`` check); allocating a ``Phase``-like
object with seven slot stores.

Phase rows: the real hot path (``gputrace.phase``) recording into a file sink with the exporter thread
parked, the buffer drained by ``Recorder.drain()`` between repeats (untimed): "fresh" with the phase pool
off (every phase a new object), "recycled" with it on (``hotpath.recycle`` refills it at each drain). This
is the caller's own cost. "paced": the exporter thread running (50 ms interval), each timed loop followed by
an idle wait until the exporter has taken its phases. ``bench_tracer.py`` times the same phase in a burst
that the exporter cannot keep up with (it runs the whole time, and most phases find the pool empty).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from time import perf_counter_ns

CLOCK = time.thread_time_ns


def _budget_steps():
    import nvtx

    class Empty:
        __slots__ = ()

        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            pass

    e = Empty()

    def factory(name, *, device=None, bytes=None, stream=None, **kw):
        return e

    class Obj:
        __slots__ = ("name", "device", "nbytes", "st", "up", "t0", "t1", "__dict__")

    new = object.__new__
    loc = threading.local()
    loc.st = 1
    dom = nvtx.get_domain("gputrace-bench-dummy")
    buf: list = []

    def loop(k):
        for _ in range(k):
            pass

    def with_empty(k):
        for _ in range(k):
            with e:
                pass

    def call(k):
        for _ in range(k):
            factory("ntt", device=0, bytes=1048576)

    def clocks(k):
        pc = perf_counter_ns
        for _ in range(k):
            pc()
            pc()

    def tl(k):
        for _ in range(k):
            loc.st

    def append(k):
        # (an existing object, as the hot path appends itself: a fresh object per append would add the
        # allocation and the young collections walking the list's new entries)
        for _ in range(k):
            buf.append(e)
        buf.clear()

    def nv(k):
        for _ in range(k):
            dom.push_range()
            dom.pop_range()

    def alloc(k):
        for _ in range(k):
            o = new(Obj)
            o.name = "ntt"
            o.device = 0
            o.nbytes = 1
            o.st = None
            o.up = None
            o.t0 = 1
            o.t1 = 2

    return [
        ("empty for loop", loop),
        ("with on an object with Python __enter__/__exit__", with_empty),
        ("call f(name, device=, bytes=) (phase's signature)", call),
        ("perf_counter_ns() x 2", clocks),
        ("threading.local attribute read", tl),
        ("list.append of an existing object", append),
        ("NVTX push+pop, dummy domain (skipped: no tool)", nv),
        ("object.__new__ + 7 slot stores, freed at once", alloc),
    ]


def _time(fn, n):
    t0 = CLOCK()
    fn(n)
    return (CLOCK() - t0) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=11)
    args = ap.parse_args(argv)

    import gputrace
    from gputrace.trace import hotpath

    steps = _budget_steps()
    res: dict[str, list[float]] = {name: [] for name, _ in steps}
    for _ in range(args.repeats):
        for name, fn in steps:
            res[name].append(_time(fn, args.n * 5))

    tmp = tempfile.mkdtemp(prefix="gputrace-bench-")
    try:
        rec = gputrace.configure(trace_file=os.path.join(tmp, "t.jsonl"), collect_gpu_info=False,
                                 buffer_size=1 << 22)
        rec._stop.set()  # park the exporter thread: drain() below, untimed, does its work
        phase = gputrace.phase

        def ours(k):
            for _ in range(k):
                with phase("ntt", device=0, bytes=1048576):
                    pass

        pool_max = hotpath.POOL_MAX
        ours(1000)
        rec.drain()
        cases = {"phase, fresh objects (pool off)": 0, "phase, recycled objects (pool on)": pool_max}
        for name in cases:
            res[name] = []
        for _ in range(args.repeats):
            for name, cap in cases.items():
                hotpath.POOL_MAX = cap
                if cap == 0:
                    hotpath.clear_pool()
                else:  # fill the pool as a drain keeping up with the caller would
                    ours(args.n)
                    rec.drain()
                res[name].append(_time(ours, args.n))
                rec.drain()
        hotpath.POOL_MAX = pool_max
        summary = gputrace.shutdown()
        assert summary.spans_dropped == 0

        # Paced: the exporter thread running (every 50 ms), the caller timing n phases, then idle until the
        # exporter has taken them, as in a program whose phases come slower than the exporter writes them.
        rec = gputrace.configure(trace_file=os.path.join(tmp, "p.jsonl"), collect_gpu_info=False,
                                 buffer_size=1 << 22, flush_interval_s=0.05)
        st = hotpath._state()
        paced = {"phase, paced, exporter running, pool off": 0, "phase, paced, exporter running, pool on": pool_max}
        for name in paced:
            res[name] = []
        for _ in range(args.repeats):
            for name, cap in paced.items():
                hotpath.POOL_MAX = cap
                if cap == 0:
                    hotpath.clear_pool()
                res[name].append(_time(ours, args.n))
                while st.buf:
                    time.sleep(0.01)
                time.sleep(0.06)  # the drain's recycle() runs after its sinks
        hotpath.POOL_MAX = pool_max
        summary = gputrace.shutdown()
        assert summary.spans_dropped == 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{'step':52s} {'min ns':>8s} {'median ns':>10s}")
    for name, v in res.items():
        print(f"{name:52s} {min(v):8.0f} {statistics.median(v):10.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
