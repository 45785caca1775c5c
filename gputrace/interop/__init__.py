"""Interop with other tools: trace files in other formats and a live OTLP receiver.

* :func:`gputrace.interop.formats.read_any` opens OTLP JSON Lines, Nsight Systems SQLite exports and
  Chrome Trace Event JSON by content.
* :func:`gputrace.interop.otlp_file.write_otlp_jsonl` writes any Timeline as an OTLP JSONL trace file.
* :class:`gputrace.interop.receiver.OtlpReceiver` accepts OTLP/gRPC and OTLP/HTTP and appends every
  request to a JSONL file (grpc and opentelemetry-proto are imported only when it starts).

Importing this package loads none of them; import the submodules.
"""
