"""Which CUDA runtime/driver API calls CUPTI records: only those that launch, copy, set or wait.

A program makes thousands of calls such as ``cudaGetDevice``; recording them costs records and host time and says
nothing about the GPU. ``restrict_api`` switches CUPTI's per-callback-id API recording off for every other call.

Contract: ``restrict_api`` runs on the thread that starts or resumes collection (``CuptiCollector``); it is best
effort and never raises for a refused id (a CUPTI without per-callback control keeps every API record). It imports
nothing from CUPTI itself: the caller passes the ``cupti`` module (or a stand-in with the same names).
"""

from __future__ import annotations

from typing import Any

__all__ = ["API_KEEP", "restrict_api"]

#: Substrings of the API call names that stay recorded.
API_KEEP = ("Launch", "Memcpy", "Memset", "Synchronize", "StreamWaitEvent", "GraphLaunch")


def restrict_api(cupti: Any) -> list[str]:
    """Switch off the API calls that neither launch, copy, set nor wait. Returns one message per API domain
    whose enable function refused some ids (``"activity_enable_runtime_api: 43 callback ids refused"``)."""
    problems: list[str] = []
    for enum_name, fn_name in (("RuntimeApiTraceCbid", "activity_enable_runtime_api"),
                               ("DriverApiTraceCbid", "activity_enable_driver_api")):
        cbids = getattr(cupti, enum_name, None)
        enable = getattr(cupti, fn_name, None)
        if cbids is None or enable is None:
            continue
        failed = 0
        for m in cbids:
            name = m.name
            if name.endswith(("INVALID", "SIZE", "FORCE_INT")):
                continue
            try:  # one at a time: CUPTI refuses ids it does not know (reserved, removed calls)
                enable(int(m), 1 if any(s in name for s in API_KEEP) else 0)
            except Exception:  # noqa: BLE001 counted and reported to the caller
                failed += 1
        if failed:
            problems.append(f"{fn_name}: {failed} callback ids refused")
    return problems
