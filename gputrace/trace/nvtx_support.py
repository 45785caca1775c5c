"""NVTX emission for phases: one domain ``gputrace``, attributes registered once per phase shape.

Contract
--------
* The domain is created on first import of this module (``nvtx.get_domain("gputrace")``). NVTX loads an
  injection tool (Nsight Systems, or the test recorder via ``NVTX_INJECTION64_PATH``) at that moment, so the
  environment variable must be set before ``gputrace.trace`` is imported.
* With no tool attached the ``nvtx`` package hands back a ``DummyDomain`` whose calls do nothing;
  ``ENABLED`` is then False and the hot path skips the calls entirely (same effect, ~120 ns less per phase).
* NVTX attaches a tool only through ``NVTX_INJECTION64_PATH`` (Nsight Systems and ``gputrace record`` set
  it). Without that variable this module does not import ``nvtx`` at all (``domain`` is None): the ``nvtx``
  package imports numpy, ~50-110 ms that every process of a ``gputrace record`` launch paid at start, even
  ``python -c pass`` and workers that never touch CUDA (issue 24). ``GPUTRACE_NVTX=1`` imports it anyway
  (a tool injected some other way, e.g. linked statically).
* ``attributes(name, device, payload)`` returns a pre-built ``EventAttributes``: message = phase name
  (a registered string), colour = ``gputrace.phases.phase_color(name)`` (ARGB), category = device index
  (categories are named ``gpu N``; -1/None means no category), payload = ``bytes`` when given (uint64).
  Attribute objects are cached per ``(name, device, payload)`` (bounded; beyond the bound they are built
  per call, never dropped). Thread-safe: a race builds an equal object twice, both valid.
"""

from __future__ import annotations

import os
from typing import Any

from gputrace.phases import phase_color

DOMAIN_NAME = "gputrace"
_CACHE_MAX = 8192


def tool_configured() -> bool:
    """True when NVTX can have a tool attached here (``NVTX_INJECTION64_PATH`` set, or ``GPUTRACE_NVTX=1``)."""
    return bool(os.environ.get("NVTX_INJECTION64_PATH")) or os.environ.get("GPUTRACE_NVTX", "") == "1"


domain: Any = None
if tool_configured():
    import nvtx

    domain = nvtx.get_domain(DOMAIN_NAME)
# Bound below: the nvtx library's functions when a tool is attached, None otherwise.
handle: Any
push_range: Any
pop_range: Any
start_range: Any
end_range: Any
ENABLED: bool = domain is not None and type(domain).__name__ != "DummyDomain"

if ENABLED:
    # The module-level functions of nvtx._lib.lib take (attributes, domain handle) positionally: ~50 ns
    # cheaper per push/pop pair than the Domain methods, which accept **kwargs.
    from nvtx._lib import lib as _lib

    handle = domain.handle
    push_range = _lib.push_range  # (attributes, handle)
    pop_range = _lib.pop_range  # (handle)

    def _start_range(attributes, h):
        """Start a process range; returns its id (lib.start_range returns an (id, domain) pair)."""
        return _lib.start_range(attributes, h)[0]

    start_range = _start_range

    end_range = _lib.end_range  # (range id, handle)
else:
    handle = None
    push_range = pop_range = start_range = end_range = None  # never called: the hot path checks ENABLED

#: (name, device, bytes) -> EventAttributes; read directly by the hot path (a miss calls attributes()).
cache: dict = {}
_cache = cache
_categories: dict = {}


def _category(device) -> int | None:
    if device is None or device < 0:
        return None
    cat = _categories.get(device)
    if cat is None:
        # NVTX categories are per-domain ids > 0; name them so Nsight shows "gpu 0" rather than a number.
        cat = domain.get_category_id(f"gpu {device}")
        _categories[device] = cat
    return cat


def attributes(name: str, device=None, payload=None):
    """Pre-registered ``EventAttributes`` for one phase shape (None when NVTX is disabled)."""
    key = (name, device, payload)
    attrs = _cache.get(key)
    if attrs is None:
        if not ENABLED:
            return None
        attrs = domain.get_event_attributes(
            message=name,
            color=phase_color(name),
            category=_category(device),
            payload=int(payload) if payload is not None else None,
        )
        if len(_cache) < _CACHE_MAX:
            _cache[key] = attrs
    return attrs
