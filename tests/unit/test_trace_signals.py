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
