"""Interop with other tools over the network: a live OTLP receiver.

:class:`gputrace.interop.receiver.OtlpReceiver` accepts OTLP/gRPC and OTLP/HTTP and appends every request to a
JSONL file (grpc and opentelemetry-proto are imported only when it starts). Trace files of other formats are
read and written by ``gputrace.timeline.formats`` (through the entrance, ``gputrace.timeline.load``).

Importing this package loads none of it; import the submodule.
"""
