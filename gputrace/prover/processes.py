"""Fork pools of worker processes that leave Ctrl-C to their parent.

A terminal sends SIGINT to every process of its foreground process group: the parent and each pool worker. A
worker that takes it dies with a ``KeyboardInterrupt`` traceback of its own, and the pool it belonged to is
broken. So the pools here start their workers with SIGINT ignored, and the parent, which does get the
``KeyboardInterrupt``, ends them: ``stop(pool, interrupted=True)`` terminates the workers instead of waiting for
their queued jobs (whose futures then fail with ``BrokenProcessPool``).

There is no moment at which a worker could take the signal: the workers are forked while the forking thread
blocks SIGINT, and each one ignores SIGINT before it unblocks it. Nor is a pool half started: on the main
thread, a SIGINT that arrives while the workers are forked is held back and raised as soon as they all are
(``stop`` can then end every one of them; a worker forked but not yet in the pool's table would be left
waiting for work forever).

``fork``, not ``spawn``: ``spawn``/``forkserver`` re-import the caller's ``__main__``, which breaks scripts
without a main guard; the workers only run pure functions of their arguments (synthesis, witness plans,
fixed-base multiples). Threads: call ``fork_pool`` and ``stop`` for one pool from one thread at a time.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context


def _ignore_sigint() -> None:
    """A worker's initializer: SIGINT ignored, then unblocked (it was blocked when the worker was forked)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread and, on the main thread (the only one Python raises KeyboardInterrupt
    in), a SIGINT delivered to another thread held back until the block ends, then raised again."""
    on_main = threading.current_thread() is threading.main_thread()
    held: list[int] = []
    old_handler = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum)) if on_main else None
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if on_main:
            signal.signal(signal.SIGINT, old_handler if old_handler is not None else signal.SIG_DFL)
            if held:
                signal.raise_signal(signal.SIGINT)  # through the caller's handler, now that the pool is whole


def fork_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` fork processes, all started before this returns, each ignoring SIGINT.

    Raises whatever starting them raises (the workers already started are ended first), ValueError for
    ``workers`` < 1."""
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork"), initializer=_ignore_sigint)
    try:
        with _sigint_held():  # with fork, CPython starts every worker in the first submit, in this thread
            started = [pool.submit(os.getpid) for _ in range(workers)]
        for f in started:
            f.result()
    except BaseException:
        stop(pool, interrupted=True)
        raise
    return pool


def stop(pool: ProcessPoolExecutor, *, interrupted: bool) -> None:
    """Shut ``pool`` down and wait for it: queued jobs are cancelled; running ones finish, or with
    ``interrupted`` the workers are terminated now (SIGTERM; they ignore only SIGINT). Safe to call twice."""
    if interrupted:
        terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
        if terminate is not None:
            terminate()
        else:
            # CPython's worker table (pid -> Process) until 3.14 names it; None once the pool is shut down.
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                if proc.is_alive():
                    proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
