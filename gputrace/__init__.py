"""gputrace: trace-based profiler and terminal timeline viewer for multi-GPU pipelines.

Record::

    import gputrace
    gputrace.configure(trace_file="run.jsonl")
    with gputrace.phase("ntt", device=0, stream=s, circuit=3, bytes=n):
        ...
    summary = gputrace.shutdown()

Under ``gputrace record``, ``gputrace.record_control.pause()`` / ``resume()`` switch CUDA activity collection
off and on (docs/record.md).

Importing this package loads neither CuPy, Textual nor the OpenTelemetry SDK; names are
resolved lazily on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public name -> module that defines it. Resolved on first attribute access (PEP 562).
_LAZY = {
    "phase": "gputrace.trace",
    "start_phase": "gputrace.trace",
    "current_context": "gputrace.trace",
    "configure": "gputrace.trace",
    "shutdown": "gputrace.trace",
    "get_recorder": "gputrace.trace",
    "MemorySink": "gputrace.trace",
    "record_control": "gputrace.trace",
    "Timeline": "gputrace.timeline",
    "Lane": "gputrace.timeline",
    "read_trace": "gputrace.timeline",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'gputrace' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
