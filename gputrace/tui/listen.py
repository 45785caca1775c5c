"""``gputrace view --listen ADDR``: start the OTLP receiver, then follow the file it writes.

The receiver (`gputrace.interop.receiver.OtlpReceiver`, the interop engineer's) accepts OTLP
gRPC at ``ADDR`` and OTLP/HTTP at the next port (``4317`` -> ``4318``, the OTLP defaults;
port 0 picks free ports), appends every request as one OTLP JSON line to ``out_path`` and
flushes before answering, so following that file shows spans as they arrive. It keeps no
in-memory queue here (``max_buffer_bytes=0``): the file is the only channel.
"""

from __future__ import annotations

import time


class ListenError(Exception):
    """The receiver could not start (bad or non-loopback address, port in use)."""


def start_receiver(addr: str, out_path: str | None = None):
    """Start a receiver for ``addr``; returns ``(receiver, out_path)``. Raises `ListenError`."""
    from gputrace.interop.receiver import OtlpReceiver, ReceiverAddressError, parse_address

    try:
        host, port = parse_address(addr)
    except ReceiverAddressError as e:
        raise ListenError(str(e)) from None
    hp = f"[{host}]" if ":" in host else host
    http = f"{hp}:{port + 1}" if 0 < port < 65535 else f"{hp}:0"
    path = out_path or f"runs/live-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    rec = OtlpReceiver(grpc_addr=addr, http_addr=http, out_path=path, max_buffer_bytes=0)
    try:
        rec.start()
    except (OSError, ReceiverAddressError) as e:
        raise ListenError(f"cannot listen on {addr}: {e}") from None
    return rec, path
