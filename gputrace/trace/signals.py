"""SIGTERM and SIGHUP: deliver what was recorded, close the open spans as failed, then do what the signal would
have done. Installed by ``configure()`` (main thread only), removed by ``shutdown()``.

Contract
--------
* ``install(shutdown)`` replaces the SIGTERM handler when ``configure()`` runs on the main thread and the
  signal is not ignored (``SIG_IGN`` stays: the process asked not to be stopped by it). Off the main
  thread nothing is installed (Python allows handlers only there) and SIGTERM loses the last flush
  interval, as SIGKILL does.
* On SIGTERM (the handler runs on the main thread, between bytecodes): every phase still open on any
  thread's ``with`` stack is recorded as a span ending now with error status ``Terminated: SIGTERM``;
  ``shutdown`` then drains, writes and closes the sinks (a phase with a CUDA stream keeps host times
  only). A phase that ends on another thread while the handler runs is not recorded. Afterwards the
  previous handler runs: a Python handler is called with the same arguments; the default action is
  restored and the signal raised again, so the process ends exactly as it would have without gputrace
  (killed by SIGTERM, status -15).
* ``start_phase()`` handles still open are not on any stack and are not recorded (nothing tracks them).
* SIGHUP (a closed terminal, ``record`` forwarding one) is handled exactly as SIGTERM: both end the
  process by default, and both leave the open phases and the last flush in the file.
* SIGINT needs nothing here: KeyboardInterrupt unwinds the ``with`` blocks (spans end with error status)
  and the ``atexit`` hook shuts the recorder down. SIGKILL cannot be caught: at most the last flush
  interval (<= 1 s) is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from gputrace.trace import hotpath as _ph

log = logging.getLogger("gputrace.trace")

SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_installed: dict[int, Any] = {}  # signal -> the handler it had before ours
_shutdown: Callable[[], object] | None = None
_deferring = 0  # > 0 while a shutdown runs on the main thread (see deferred())
_pending: list[tuple[int, Any, Any]] = []  # signals that arrived meanwhile: (signum, frame, previous handler)


class Terminated(Exception):
    """The error type recorded on spans that were open when a terminating signal arrived."""


def install(shutdown: Callable[[], object]) -> None:
    """Install the handler for SIGTERM (idempotent; see the module contract). Never raises."""
    global _shutdown
    _shutdown = shutdown
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        if sig in _installed:
            continue
        try:
            prev = signal.getsignal(sig)
            if prev is signal.SIG_IGN or prev is None:  # ignored, or set outside Python: leave it
                continue
            signal.signal(sig, _on_signal)
        except (ValueError, OSError) as e:  # e.g. an embedded interpreter without signal support
            log.debug("gputrace: no %s handler: %s", sig, e)
            continue
        _installed[sig] = prev
    if _installed:
        _watch()


# -- the watchdog ----------------------------------------------------------------------------------
# A Python signal handler runs when the main thread next checks for signals. A SIGTERM that arrives just
# before the main thread blocks in C (a multiprocessing worker entering sem_wait for its task queue, which
# pool.terminate() then SIGTERMs) is taken by the C-level handler and never wakes that wait: the Python
# handler never runs and the process waits forever, where without gputrace SIGTERM would have killed it. So
# the C handler also writes the signal number to a wakeup pipe (signal.set_wakeup_fd), and a watchdog
# thread that sees SIGTERM there and no Python handler run within 0.25 s sends SIGTERM to the main thread
# again (pthread_kill): the wait fails with EINTR and the handler runs. Not used when the program already
# has a wakeup fd (asyncio sets its own: its loop runs handlers itself).

_term_seen = False  # set by the Python handler: the watchdog has nothing to do
_watch_pid = 0  # the process whose watchdog runs (a forked child starts its own)


def _watch() -> None:
    global _watch_pid
    if _watch_pid == os.getpid():
        return
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError) as e:
        log.debug("gputrace: no signal watchdog: %s", e)
        return
    if old != -1:  # the program's own wakeup fd: leave it
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _watch_pid = os.getpid()
    main = threading.main_thread().ident
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))  # (the watchdog never takes them itself)
    try:
        threading.Thread(target=_watchdog, args=(r, main), name="gputrace-signal-watch", daemon=True).start()
    finally:
        if not set(SIGNALS) <= mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _watchdog(r: int, main: int) -> None:
    while True:
        try:
            data = os.read(r, 64)
        except OSError:
            return
        if not data:
            return
        sig = next((s for s in SIGNALS if s in data), None)
        if sig is None:
            continue
        for _ in range(20):  # (5 s of nudges at most)
            time.sleep(0.25)
            if _term_seen or _watch_pid != os.getpid() or signal.getsignal(sig) is not _on_signal:
                break  # (handled, or no longer ours to handle: never call another handler twice)
            with contextlib.suppress(OSError, ValueError):
                signal.pthread_kill(main, sig)


def uninstall() -> None:
    """Put back the handlers ``install`` replaced, where ours is still the one installed (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, prev in list(_installed.items()):
        try:
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, prev)
        except (ValueError, OSError):
            pass
        del _installed[sig]


def close_open_phases(reason: str) -> int:
    """Stop recording, then record every phase open on a thread's ``with`` stack as ending now with error
    status ``reason``. Returns how many. The phases themselves are appended (their ids, and so their
    children's parent links, stay as they are); recording is off first, so a phase whose thread gets to
    its end later is not appended twice. Called on the main thread from the signal handler; never blocks
    on a lock the interrupted main thread may hold."""
    if not _ph.stop_recording():
        return 0
    states = _ph.thread_states(timeout=0.5)  # the interrupted main thread may hold the registry lock
    if states is None:
        return 0
    now = _ph.now_ns()
    n = 0
    for st in states:
        p = st.cur
        while p is not None:
            p.t1 = now
            p.err = Terminated
            p.errmsg = reason
            st.buf.append(p)  # (past the buffer bound: these are the last spans of the run)
            n += 1
            p = p.up
    return n


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """While the body runs (a recorder's shutdown), a SIGTERM waits: the handler only notes it, and it is
    acted on (flush, then the signal's previous action) when the body ends. Without this, a SIGTERM
    arriving during the final flush at exit would end the process half-way through it. Main thread only
    matters: handlers run there."""
    global _deferring
    if threading.current_thread() is not threading.main_thread():
        yield  # (handlers run on the main thread only: nothing to hold back for a shutdown elsewhere)
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            signum, frame, prev = _pending.pop(0)
            del _pending[:]
            _act(signum, frame, prev)


def _on_signal(signum, frame) -> None:
    global _term_seen
    _term_seen = True
    prev = _installed.get(signum, signal.SIG_DFL)
    if _deferring:
        _pending.append((signum, frame, prev))
        return
    _act(signum, frame, prev)


def _act(signum, frame, prev) -> None:
    name = signal.Signals(signum).name
    try:
        close_open_phases(name)
        if _shutdown is not None:
            summary = _shutdown()
            log.info("gputrace: %s: recorder shut down:\n%s", name, summary)
    except Exception:  # the signal's own action must still happen
        log.exception("gputrace: flushing on %s failed", name)
    if callable(prev) and prev not in (signal.SIG_DFL, signal.SIG_IGN):
        prev(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _after_fork_in_child() -> None:
    global _deferring, _term_seen
    _deferring = 0  # (a fork taken while another thread was shutting down: nothing is deferred here)
    del _pending[:]
    _term_seen = False
    if _watch_pid and threading.current_thread() is threading.main_thread():
        # The parent's wakeup pipe is shared with it and its watchdog thread is not here: a pipe and a
        # watchdog of our own (the parent's wakeup fd is closed here only when it is ours).
        with contextlib.suppress(ValueError, OSError):
            fd = signal.set_wakeup_fd(-1)
            if fd != -1:
                os.close(fd)
        _watch()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
