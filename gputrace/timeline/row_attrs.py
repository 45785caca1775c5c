"""``RowAttrs``: a row's attributes as one shared dict plus a few per-row values, without a dict per row.

A million kernel launches of a handful of kernels share their static attributes (name, grid, block,
stream, ...) but each has its own correlation id and launch-call start. A plain dict per row costs
about 650 bytes; this read-only Mapping costs one small object (``__slots__``) pointing at the shared
dict, so readers such as the nsys importer keep ``Timeline.attrs`` small. It behaves as a Mapping
everywhere attributes are read (``get``, ``items``, ``in``, ``dict(a)``, equality with a dict).
Immutable; safe to share between threads.

``TemplateAttrs``: the same over a template holding every key in the row's order (the Chrome reader's
shared ``args``, ``gputrace.timeline.formats.chrome.args_share``), so iteration keeps the order of the dict it replaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class RowAttrs(Mapping):
    """``shared`` (a dict, never modified) overlaid with ``keys``/``values`` (per-row, win on clashes)."""

    __slots__ = ("shared", "keys_", "values_")

    def __init__(self, shared: dict, keys: tuple, values: tuple) -> None:
        self.shared, self.keys_, self.values_ = shared, keys, values

    def __getitem__(self, key):
        ks = self.keys_
        if key in ks:
            return self.values_[ks.index(key)]
        return self.shared[key]

    def __contains__(self, key) -> bool:
        return key in self.keys_ or key in self.shared

    def __iter__(self) -> Iterator:
        yield from self.keys_
        for k in self.shared:
            if k not in self.keys_:
                yield k

    def __len__(self) -> int:
        return len(self.shared) + sum(1 for k in self.keys_ if k not in self.shared)

    def merged(self) -> dict:
        """A new dict equal to this Mapping, in its iteration order (C-level passes: writers and the
        cache iterate items() of a million rows, where Mapping's per-key ``__getitem__`` cost ~1 us each)."""
        over = dict(zip(self.keys_, self.values_, strict=True))
        out = dict(over)
        out.update(self.shared)
        out.update(over)
        return out

    def items(self):
        return self.merged().items()

    def values(self):
        return self.merged().values()

    def __repr__(self) -> str:
        return f"RowAttrs({dict(self)!r})"


class TemplateAttrs(RowAttrs):
    """A ``RowAttrs`` whose ``shared`` dict is a template holding every key in the row's order (the
    overlay's keys with placeholder values): iteration follows the template, so the key order of the
    dict it stands for is kept. ``keys`` must all be keys of ``shared``."""

    __slots__ = ()

    def __contains__(self, key) -> bool:
        return key in self.shared

    def __iter__(self) -> Iterator:
        return iter(self.shared)

    def __len__(self) -> int:
        return len(self.shared)

    def merged(self) -> dict:
        out = dict(self.shared)
        out.update(zip(self.keys_, self.values_, strict=True))
        return out

    def keys(self):
        return self.shared.keys()

    def __repr__(self) -> str:
        return f"TemplateAttrs({dict(self)!r})"
