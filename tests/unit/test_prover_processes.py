"""The prover's fork pools leave Ctrl-C to their parent (gputrace/prover/processes.py).

A terminal's Ctrl-C reaches every process of the group: a pool worker that took it would die with a
KeyboardInterrupt traceback of its own. Workers of ``fork_pool`` ignore it, and ``stop(interrupted=True)`` ends
them at once instead of waiting for their jobs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from gputrace.prover.processes import _sigint_held, fork_pool, stop


def _pids(pool) -> list[int]:
    return sorted(pool._processes)


def test_workers_ignore_sigint_and_the_pool_stays_usable():
    pool = fork_pool(2)
    try:
        pids = _pids(pool)
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        time.sleep(0.3)
        assert all(pool._processes[pid].is_alive() for pid in pids)
        assert [pool.submit(pow, 2, k).result(timeout=10) for k in range(4)] == [1, 2, 4, 8]
    finally:
        stop(pool, interrupted=False)


def test_stop_interrupted_ends_busy_workers_without_waiting():
    pool = fork_pool(1)
    (proc,) = pool._processes.values()
    fut = pool.submit(time.sleep, 60)
    time.sleep(0.3)  # the job is running in the worker
    t0 = time.perf_counter()
    stop(pool, interrupted=True)
    assert time.perf_counter() - t0 < 10
    assert not proc.is_alive()
    assert isinstance(fut.exception(timeout=5), BrokenProcessPool)
    stop(pool, interrupted=True)  # twice is fine


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_sigint_while_workers_are_forked_is_held_then_raised():
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with _sigint_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # a KeyboardInterrupt here would leave a pool half started
            reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
