"""The read side: readers, the columnar Timeline model and writers for other formats."""

from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.incremental import LoadProgress, follow, iter_load
from gputrace.timeline.load import load_runs, load_steps, read_any, read_otlp as read_trace, sniff
from gputrace.timeline.model import COLUMNS, KIND_CODES, KIND_NAMES, Lane, Timeline

__all__ = ["COLUMNS", "KIND_CODES", "KIND_NAMES", "Lane", "LoadProgress", "LoadReport", "Timeline", "TraceFormatError",
           "follow", "iter_load", "read_trace", "read_any", "load_runs", "load_steps", "sniff"]
