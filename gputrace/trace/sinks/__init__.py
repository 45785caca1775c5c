"""Span sinks: memory, OTLP JSON Lines file, OTLP over gRPC/HTTP (through the OTel SDK exporters)."""

from gputrace.trace.sinks.base import Sink
from gputrace.trace.sinks.memory import MemorySink

__all__ = ["Sink", "MemorySink"]
