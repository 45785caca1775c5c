# Regenerate tests/data/otel_official_exporter.jsonl (needs opentelemetry-exporter-otlp-json-file, which pins
# opentelemetry-exporter-otlp-common==0.66b1 and so is not a project dependency; use a scratch venv):
#   python tests/data/otel_official_exporter_gen.py tests/data/otel_official_exporter.jsonl
"""Generates tests/data/otel_official_exporter.jsonl with opentelemetry-exporter-otlp-json-file 0.66b1."""
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.trace import Status, StatusCode

out = sys.argv[1]
with open(out, "w") as stream:
    for host, pid in (("node-a", 4242), ("node-b", 777)):
        exp = FileSpanExporter(stream=stream)
        tp = TracerProvider(resource=Resource.create({"service.name": "official", "host.name": host, "process.pid": pid}))
        tp.add_span_processor(SimpleSpanProcessor(exp))
        tr = tp.get_tracer("fixture.scope", "1.2.3")
        with tr.start_as_current_span("prove", attributes={"gputrace.batch": 1}) as root:
            with tr.start_as_current_span("ntt", attributes={"gputrace.device": 0, "gputrace.lane": "stream:1",
                                                             "gputrace.bytes": 1 << 20, "ratio": 0.5, "ok": True,
                                                             "tags": ["a", "b"], "sizes": [1, 2]}) as ntt:
                ntt.add_event("launched", {"grid": 128})
                with tr.start_as_current_span("coset_ntt", attributes={"gputrace.device": 0, "gputrace.lane": "stream:1"}):
                    pass
            with tr.start_as_current_span("synthesis") as s:
                s.set_status(Status(StatusCode.ERROR, "boom"))
        tp.shutdown()
