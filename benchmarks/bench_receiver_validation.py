"""OTLP receiver throughput with validation (what ``receiver_validate.clean_request`` costs).

    python benchmarks/bench_receiver_validation.py            # this checkout
    PYTHONPATH=/path/to/other/checkout python benchmarks/bench_receiver_validation.py

One client POSTs 60 OTLP/HTTP JSON requests of 512 spans (a synthetic prover trace) to an
``OtlpReceiver`` on 127.0.0.1; prints the package used, spans per request and the median spans/s
of 3 runs. Compare two checkouts by alternating runs on the same machine (absolute rates move with
load; the alternation keeps the comparison fair).
"""

import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

import gputrace
from gputrace.timeline.formats.otlp_jsonl.write import timeline_requests
from gputrace.interop.receiver import OtlpReceiver
from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline


def main() -> int:
    tl = synthetic_timeline(SyntheticSpec(target_spans=5000))
    body = next(timeline_requests(tl, max_spans=512))
    n = sum(len(ss["spans"]) for rs in orjson.loads(body)["resourceSpans"] for ss in rs["scopeSpans"])
    tmp = Path(tempfile.mkdtemp())

    def once(posts: int = 60) -> float:
        with OtlpReceiver(None, "127.0.0.1:0", tmp / "rx.jsonl", max_buffer_bytes=0) as rx:
            t = time.perf_counter()
            for _ in range(posts):
                r = urllib.request.Request(rx.http_endpoint, data=body, headers={"Content-Type": "application/json"})
                urllib.request.urlopen(r, timeout=10).read()
            return posts * n / (time.perf_counter() - t)

    print(gputrace.__file__, n, round(statistics.median([once() for _ in range(3)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
