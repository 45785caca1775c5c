"""The read side: readers, the columnar Timeline model and writers for other formats."""

from gputrace.timeline.model import COLUMNS, KIND_CODES, KIND_NAMES, Lane, Timeline

__all__ = ["COLUMNS", "KIND_CODES", "KIND_NAMES", "Lane", "Timeline"]
