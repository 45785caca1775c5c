"""How long a valid OTLP/HTTP sender waits behind stalled local connections (prints one line per count).

    .venv/bin/python benchmarks/bench_receiver_stalls.py [--stalled 220] [--repeats 3]

Starts an ``OtlpReceiver`` with its defaults (32 workers, 256 waiting, 10 s timeout), opens ``--stalled``
connections that send nothing (half of them half a request head), then times one valid JSON POST of one
span (median of ``--repeats``, each behind a fresh set of stalled connections), against a reference taken
in the same run: the same POST with no stalled connection.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
import urllib.request

import orjson

from gputrace.interop.receiver import OtlpReceiver

BODY = orjson.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [
    {"traceId": "ab" * 16, "spanId": "00000000000000a1", "name": "s", "kind": 1, "startTimeUnixNano": "1000",
     "endTimeUnixNano": "2000"}]}]}]})


def post(url: str) -> float:
    req = urllib.request.Request(url, data=BODY, headers={"Content-Type": "application/json"}, method="POST")
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as r:
        r.read()
    return time.perf_counter() - t


def once(stalled: int) -> float:
    with tempfile.TemporaryDirectory() as d, OtlpReceiver(None, "127.0.0.1:0", f"{d}/live.jsonl") as rx:
        socks = []
        try:
            for i in range(stalled):
                s = socket.create_connection(("127.0.0.1", rx.http_port))
                if i % 2:
                    s.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Type: appl")
                socks.append(s)
            time.sleep(0.3)
            return post(str(rx.http_endpoint))
        finally:
            for s in socks:
                s.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stalled", type=int, default=220)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    ref = statistics.median(once(0) for _ in range(a.repeats))
    got = statistics.median(once(a.stalled) for _ in range(a.repeats))
    print(f"valid POST: {ref * 1e3:.1f} ms alone, {got * 1e3:.1f} ms behind {a.stalled} stalled connections "
          f"(x{got / ref:.1f})")


if __name__ == "__main__":
    main()
