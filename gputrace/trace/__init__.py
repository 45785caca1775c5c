"""gputrace.trace: the recorder (phases -> NVTX ranges, span records, CUDA-event device times -> sinks).

Public API (re-exported lazily by ``gputrace``): ``phase``, ``start_phase``, ``current_context``,
``configure``, ``shutdown``, ``get_recorder``, ``MemorySink``, ``RunSummary``, and the module ``record_control``
(pause/resume CUDA activity collection: ``gputrace.record_control.pause()``). See docs/tracer.md.
Importing this package does not import the OTel SDK or CuPy (sinks and CUDA timing import them lazily).
"""

from gputrace.trace import record_control
from gputrace.trace.hotpath import Phase, current_context, phase, start_phase
from gputrace.trace.recorder import Recorder, configure, get_recorder, shutdown
from gputrace.trace.sinks import MemorySink, Sink
from gputrace.trace.summary import RunSummary, SinkSummary

__all__ = [
    "Phase",
    "phase",
    "start_phase",
    "current_context",
    "configure",
    "shutdown",
    "get_recorder",
    "Recorder",
    "MemorySink",
    "Sink",
    "RunSummary",
    "SinkSummary",
    "record_control",
]
