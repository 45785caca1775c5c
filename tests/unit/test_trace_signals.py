"""SIGTERM during the recorder's own final flush waits for that flush (gputrace.trace.signals.deferred)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap


def test_sigterm_during_shutdown_waits_for_the_flush(tmp_path):
    marker = tmp_path / "closed"
    code = textwrap.dedent(f"""
        import os, signal, time
        import gputrace
        from gputrace.trace.sinks import MemorySink

        class SlowClose(MemorySink):
            def close(self):
                os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of the final flush
                time.sleep(0.2)
                open({str(marker)!r}, "w").write(str(len(self.spans)))
                super().close()

        gputrace.configure(sinks=[SlowClose()], collect_gpu_info=False)
        with gputrace.phase("work"):
            pass
        gputrace.shutdown()
        print("after shutdown", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGTERM, r.stderr  # the signal's own action still happens, afterwards
    assert marker.read_text() == "1"  # the flush that was under way completed first
    assert "after shutdown" not in r.stdout


def test_sigterm_taken_off_the_main_thread_still_ends_a_blocked_main_thread(tmp_path):
    """The C-level handler may run while the main thread is blocked in a wait that no EINTR ends (here: the
    signal is delivered to another thread). The Python handler must still run (the watchdog nudges the main
    thread), flush, and end the process as SIGTERM does; without it the process waits forever."""
    trace = tmp_path / "t.jsonl"
    code = textwrap.dedent(f"""
        import signal, threading, time
        import gputrace

        gputrace.configure(trace_file={str(trace)!r}, collect_gpu_info=False)
        lock = threading.Lock()
        lock.acquire()

        def other():
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # the C handler runs on this thread
            time.sleep(30)

        threading.Thread(target=other, daemon=True).start()
        with gputrace.phase("blocked"):
            lock.acquire()  # never released
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert r.returncode == -signal.SIGTERM, r.stderr
    assert '"name":"blocked"' in trace.read_text() and "Terminated: SIGTERM" in trace.read_text()
