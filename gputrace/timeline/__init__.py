"""The read side: the entrance (``load``), the columnar Timeline model, the cache and ``formats/`` (one folder
per trace format, reading and writing it).

The public names below are imported on first use (PEP 562), so importing a submodule, such as the format
table ``gputrace.timeline.formats``, does not import the readers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputrace.timeline.errors import LoadReport, TraceFormatError
    from gputrace.timeline.formats.otlp_jsonl.incremental import LoadProgress, follow, iter_load
    from gputrace.timeline.load import load_runs, load_steps, read_any, read_otlp as read_trace, sniff
    from gputrace.timeline.model import COLUMNS, KIND_CODES, KIND_NAMES, Lane, Timeline

__all__ = ["COLUMNS", "KIND_CODES", "KIND_NAMES", "Lane", "LoadProgress", "LoadReport", "Timeline", "TraceFormatError",
           "follow", "iter_load", "read_trace", "read_any", "load_runs", "load_steps", "sniff"]

_HOME = {
    "LoadReport": "errors", "TraceFormatError": "errors",
    "LoadProgress": "formats.otlp_jsonl.incremental", "follow": "formats.otlp_jsonl.incremental",
    "iter_load": "formats.otlp_jsonl.incremental",
    "load_runs": "load", "load_steps": "load", "read_any": "load", "read_trace": "load", "sniff": "load",
    "COLUMNS": "model", "KIND_CODES": "model", "KIND_NAMES": "model", "Lane": "model", "Timeline": "model",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), "read_otlp" if name == "read_trace" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
