"""Readable GPU kernel names: demangle a C++ symbol, then shorten it for one table cell.

* :func:`demangle`: ``_Z3nttILi256EEvP2Fri`` -> ``void ntt<256>(Fr*, int)``. Uses the ``cxxfilt``
  package (ctypes over the C++ runtime's own ``abi::__cxa_demangle``, the demangler ``c++filt`` and
  Nsight use), so every Itanium-ABI name demangles exactly; a name that is not mangled, or that the
  runtime refuses, comes back unchanged. Without the C++ runtime library the name comes back unchanged.
* :func:`display_name`: the demangled name with its return type dropped and its template and
  argument lists elided: ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
  ``at::native::vectorized_elementwise_kernel<…>``. The full name stays in the span's
  ``cuda.kernel.name`` attribute, the details panel and ``--json``.
* :func:`fit`: a one-line cell of at most ``width`` characters (an ellipsis where cut), so a table never
  wraps a name over several lines.

Pure functions, any thread; results of :func:`demangle` and :func:`display_name` are cached (kernel
names repeat thousands of times in a trace). Never raise on odd input.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

ELLIPSIS = "…"
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}


@lru_cache(maxsize=1)
def _demangler() -> Any:
    try:
        import cxxfilt  # type: ignore[import-untyped]  # the package ships no type information

        return cxxfilt.default_demangler  # raises LibraryNotFound at first use if libstdc++ is absent
    except Exception:  # noqa: BLE001 (no demangler available: names stay as they are, documented above)
        return None


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-ABI symbol (``_Z...``); anything else unchanged."""
    if not isinstance(name, str) or not name.startswith("_Z"):
        return name
    d = _demangler()
    if d is None:
        return name
    try:
        return str(d.demangle(name))
    except Exception:  # noqa: BLE001 (an invalid or unsupported symbol stays as recorded)
        return name


def _elide(s: str) -> str:
    """``s`` with every top-level ``<...>`` replaced by ``<…>`` and ``(...)`` by ``(…)`` (nested brackets
    inside are dropped with them). ``operator<``/``operator()`` and the ``(anonymous namespace)`` of a
    qualified name are kept as written."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch in "<(" and not s[:i].endswith("operator"):
            if s.startswith("(anonymous namespace)", i):
                out.append("(anonymous namespace)")
                i += len("(anonymous namespace)")
                continue
            close, depth, j = _OPEN[ch], 0, i
            while j < n:
                c = s[j]
                if c in "<([{":
                    depth += 1
                elif c in ">)]}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(ch + ELLIPSIS + close)
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _strip_return_type(s: str) -> str:
    """Drop a leading return type (``void ``, ``int ``, ...): the part before the last top-level space
    that comes before the first top-level ``(``/``<``."""
    depth = 0
    last_space = -1
    for i, ch in enumerate(s):
        if ch in "<([{":
            if depth == 0 and ch == "(" and not s[:i].endswith("operator"):
                break
            depth += 1
        elif ch in ">)]}":
            depth = max(depth - 1, 0)
        elif ch == " " and depth == 0:
            if s[i + 1:].startswith("namespace)"):
                continue
            last_space = i
    return s[last_space + 1:] if last_space >= 0 else s


@lru_cache(maxsize=65536)
def display_name(name: str) -> str:
    """The readable short form of a kernel name (mangled or not): return type dropped, template and
    argument lists elided; names with no C++ decoration (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``,
    ``sm80_xmma_gemm_...``) come back as they are."""
    if not isinstance(name, str):
        return str(name)
    # Nsight's demangler writes an anonymous namespace as "<unnamed>", the C++ runtime's as
    # "(anonymous namespace)": one spelling, so that the names of one kernel agree across sources.
    full = demangle(name.strip()).replace("<unnamed>", "(anonymous namespace)")
    if not any(c in full for c in "<("):
        return full
    short = _elide(_strip_return_type(full))
    if short.endswith("(…)"):
        short = short[:-3]
    return short or full


def fit(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters: line breaks become spaces, and a longer
    text is cut with an ellipsis as its last character."""
    t = " ".join(str(text).split())
    if width <= 0:
        return ""
    return t if len(t) <= width else t[: width - 1] + ELLIPSIS
