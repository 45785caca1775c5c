"""OTLP span constants, the span-dict shape, and trace/span ids both ways (``hex_id`` writes, ``parse_id`` reads).

Shared by the encoder (:mod:`gputrace.otlp.encode`), the reader's column builders and the OTLP receiver.
Pure and thread-safe.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = [
    "SpanDict",
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
    "STATUS_UNSET",
    "STATUS_OK",
    "STATUS_ERROR",
    "STATUS_NAMES",
    "hex_id",
    "parse_id",
]

SPAN_KIND_UNSPECIFIED, SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, SPAN_KIND_CLIENT = 0, 1, 2, 3
SPAN_KIND_PRODUCER, SPAN_KIND_CONSUMER = 4, 5
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
#: Protobuf-JSON enum names of ``Status.code`` (readers accept them as well as the integers).
STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_HEX_DIGITS = frozenset("0123456789abcdef")


class _SpanRequired(TypedDict):
    trace_id: bytes | str | int
    span_id: bytes | str | int
    name: str
    start_ns: int
    end_ns: int


class SpanDict(_SpanRequired, total=False):
    """One span as handed to :func:`encode_request` (keys in snake_case; see ``encode_span``)."""

    parent_span_id: bytes | str | int | None
    attributes: Mapping[str, Any]
    #: The attributes already encoded (what ``attributes_json`` returns for them: comma-joined KeyValue texts),
    #: used when ``attributes`` is absent or empty; writers that repeat attribute sets encode each set once.
    attributes_json: str
    kind: int
    status_code: int
    status_message: str


def hex_id(v: bytes | bytearray | memoryview | str | int | None, nbytes: int) -> str:
    """Lowercase hex of an id given as bytes, hex string or int; '' for None/empty/zero.

    Raises ValueError for a string that is not hex or an id of the wrong length.
    """
    if v is None:
        return ""
    if type(v) is bytes or isinstance(v, (bytearray, memoryview)):  # exact type first: the common case, fastest
        if len(v) == 0:
            return ""
        if len(v) != nbytes:
            raise ValueError(f"id must be {nbytes} bytes, got {len(v)}")
        return bytes(v).hex()
    if isinstance(v, int):
        if v == 0:
            return ""
        if v < 0 or v.bit_length() > nbytes * 8:
            raise ValueError(f"id {v} does not fit in {nbytes} bytes")
        return f"{v:0{nbytes * 2}x}"
    if isinstance(v, str):
        if v == "":
            return ""
        if len(v) != nbytes * 2:
            raise ValueError(f"id must be {nbytes * 2} hex characters, got {v!r}")
        s = v.lower()
        if not _HEX_DIGITS.issuperset(s):  # (int(s, 16) also takes "0x", "_", "+" and spaces)
            raise ValueError(f"id must be {nbytes * 2} hex characters, got {v!r}")
        return s
    raise ValueError(f"id must be bytes, hex str or int, got {type(v).__name__}")


def parse_id(s: str, nbytes: int) -> int:
    """Hex (the spec) or base64 (old protobuf-JSON writers) id of ``nbytes`` bytes -> int. Raises ValueError."""
    if len(s) == 2 * nbytes:
        try:
            return int(s, 16)
        except ValueError:
            pass
    elif s and len(s) in (4 * ((nbytes + 2) // 3), (8 * nbytes + 5) // 6):
        try:
            raw = base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
        except ValueError:
            raw = b""
        if len(raw) == nbytes:
            return int.from_bytes(raw, "big")
    raise ValueError(f"expected {2 * nbytes} hex characters, got {s!r}")
