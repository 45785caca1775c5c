"""What the torch capture installed and what failed, as resource attributes of the process's trace.

Contract: ``note_installed(parts)`` and ``note_error(part, exc)`` never raise; they set
``gputrace.torch_capture`` (the parts installed, comma-separated) and ``gputrace.torch_capture.error`` (one
line: ``part: Type: message`` per failure, ``; ``-joined, each part once) on the running recorder's resource
and its sinks (``Sink.update_resource``: the lines exported from then on carry them). Without a recorder
they are only kept here (``state``). Any thread.
"""

from __future__ import annotations

import threading
from typing import Any

INSTALLED = "gputrace.torch_capture"
ERROR = "gputrace.torch_capture.error"
_MAX_MESSAGE = 200

state: dict[str, Any] = {"installed": [], "errors": {}}
_lock = threading.Lock()


def note_installed(parts: list[str]) -> None:
    with _lock:
        state["installed"] = list(parts)
    _publish()


def note_error(part: str, e: BaseException) -> None:
    """Record the first failure of ``part`` (later ones of the same part are not repeated)."""
    try:
        msg = str(e)
    except Exception:  # noqa: BLE001 - a broken __str__
        msg = "?"
    msg = " ".join(msg.split())[:_MAX_MESSAGE]
    with _lock:
        if part in state["errors"]:
            return
        state["errors"][part] = f"{part}: {type(e).__name__}: {msg}"
    _publish()


def attributes() -> dict[str, str]:
    with _lock:
        out = {INSTALLED: ",".join(state["installed"])}
        if state["errors"]:
            out[ERROR] = "; ".join(state["errors"].values())
    return out


def _publish() -> None:
    try:
        from gputrace.trace import recorder

        rec = recorder.get_recorder()
        if rec is None:
            return
        attrs = attributes()
        rec.resource.update(attrs)
        for s in rec.sinks:
            try:
                s.update_resource(attrs)
            except Exception:  # noqa: BLE001, S110 - a sink that cannot take it keeps its resource
                pass
    except Exception:  # noqa: BLE001, S110 - reporting must never break the program
        pass
