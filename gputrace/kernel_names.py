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
* :func:`kernel_key`: the identity of a kernel, one per distinct kernel: the demangled name without its return
  type and parameter list, its template arguments kept (``reduce_kernel<128, 4, ...>`` and
  ``reduce_kernel<256, 2, ...>`` are two kernels) and spelled one way whoever wrote them (Nsight's ``(int)4``,
  ``(bool)1``, ``(unsigned long)2``, ``<unnamed>``, ``[lambda() (instance 2)]``, ``char *`` and ``> >`` become the C++
  runtime's ``4``, ``true``, ``2``, ``(anonymous namespace)``, ``{lambda()#2}``, ``char*``, ``>>``), so the kernels of
  one program recorded by torch.profiler and by Nsight Systems have the same keys.
* :func:`distinct_display`: short names for a set of kernels that tell them apart: :func:`display_name`, and where
  several kernels share it, the template arguments in which they differ (``reduce_kernel<128, 4, …>`` and
  ``reduce_kernel<256, 2, …>``), else a number.

Pure functions, any thread; results of :func:`demangle` and :func:`display_name` are cached (kernel
names repeat thousands of times in a trace). Never raise on odd input.
"""

from __future__ import annotations

import re
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


_CAST_BOOL = re.compile(r"\(bool\)([01])\b")
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|unsigned|bool|size_t|"
                   r"unsigned long|unsigned int|unsigned short|unsigned char)\)(?=-?\d)")
_INT_SUFFIX = re.compile(r"\b(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NSYS_LAMBDA = re.compile(r"\[lambda(\([^()]*\)) \(instance (\d+)\)\]")
_SPACE_STAR = re.compile(r"\s+([*&])")
_OPERATOR_SPACE = re.compile(r"operator \(\)")


def _drop_params(s: str) -> str:
    """``s`` without its top-level trailing parameter list (and a ``const`` after it)."""
    t = s.rstrip()
    if t.endswith(" const"):
        t = t[:-6].rstrip()
    if not t.endswith(")"):
        return t
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        ch = t[i]
        if ch in ")>]}":
            depth += 1
        elif ch in "(<[{":
            depth -= 1
            if depth == 0:
                head = t[:i]
                return head if head and not head.endswith("operator") else t
    return t


@lru_cache(maxsize=65536)
def kernel_key(name: str) -> str:
    """The identity of a kernel (see the module docstring): two names are one kernel when their keys are equal."""
    if not isinstance(name, str):
        return str(name)
    full = demangle(name.strip()).replace("<unnamed>", "(anonymous namespace)")
    full = _NSYS_LAMBDA.sub(lambda m: "{lambda" + m.group(1) + "#" + m.group(2) + "}", full)
    full = _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", full)
    full = _CAST.sub("", full)
    full = _INT_SUFFIX.sub(r"\1", full)
    full = _OPERATOR_SPACE.sub("operator()", full)
    full = _SPACE_STAR.sub(r"\1", full).replace("> >", ">>")
    if not any(c in full for c in "<("):
        return full
    return _drop_params(_strip_return_type(full))


def _top_args(key: str) -> list[str]:
    """The top-level template arguments of a kernel key's last template list (``f<a, b<c>>`` -> ``[a, b<c>]``)."""
    t = key.rstrip()
    if not t.endswith(">"):
        return []
    depth, end = 0, len(t) - 1
    args: list[str] = []
    cur: list[str] = []
    for i in range(end, -1, -1):
        ch = t[i]
        if ch in ">)]}":
            depth += 1
            if depth == 1:
                continue
        elif ch in "<([{":
            depth -= 1
            if depth == 0:
                args.append("".join(reversed(cur)).strip())
                return list(reversed(args))
        elif ch == "," and depth == 1:
            args.append("".join(reversed(cur)).strip())
            cur = []
            continue
        cur.append(ch)
    return []


def _last_part(a: str) -> tuple[str, str]:
    """(``a`` up to its last top-level ``::``, the part after it)."""
    depth, cut = 0, 0
    for i, ch in enumerate(a):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif depth == 0 and a.startswith("::", i):
            cut = i + 2
    return a[:max(cut - 2, 0)], a[cut:]


def _short_arg(arg: str) -> str:
    """A template argument for a table cell: nested lists elided, leading namespaces dropped; a lambda is named by
    the function it is defined in (``GeluCUDAKernelImpl(…) lambda``)."""
    a = _elide(arg)
    head, last = _last_part(a)
    if last.startswith("{lambda") and head:  # a lambda: named by the function it is defined in
        outer = head.split("::{lambda", 1)[0]
        return _last_part(outer)[1] + " lambda"
    return last or a


def distinct_display(names: list[str]) -> dict[str, str]:
    """For each kernel key in ``names`` (:func:`kernel_key` values, or full names), a short name that no other
    kernel of ``names`` has (see the module docstring)."""
    keys = {n: kernel_key(n) for n in names}
    by_disp: dict[str, list[str]] = {}
    for k in dict.fromkeys(keys.values()):
        by_disp.setdefault(display_name(k), []).append(k)
    out_key: dict[str, str] = {}
    for disp, ks in by_disp.items():
        if len(ks) == 1:
            out_key[ks[0]] = disp
            continue
        argl = [[_short_arg(x) for x in _top_args(k)] for k in ks]  # compared as shown
        width = max(len(a) for a in argl)
        differ = [i for i in range(width) if len({a[i] if i < len(a) else None for a in argl}) > 1]
        base = disp[:-len("<" + ELLIPSIS + ">")] if disp.endswith("<" + ELLIPSIS + ">") else disp
        base = _last_part(base)[1] or base  # the template arguments tell them apart: the namespaces can go
        seen: dict[str, int] = {}
        for k, a in zip(ks, argl, strict=True):
            cells: list[str] = []
            for i in range(len(a)):
                cell = a[i] if i in differ else ELLIPSIS
                if not (cell == ELLIPSIS and cells and cells[-1] == ELLIPSIS):
                    cells.append(cell)
            d = f"{base}<{', '.join(cells)}>" if cells and differ else disp
            seen[d] = seen.get(d, 0) + 1
            out_key[k] = d if seen[d] == 1 else f"{d} #{seen[d]}"
    return {n: out_key[k] for n, k in keys.items()}

