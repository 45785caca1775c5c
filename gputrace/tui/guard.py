"""`while_mounted`: the guard every message handler of the timeline screen and the app wears.

A load or analysis message can arrive after the screen was torn down (the app quitting while a worker
still posts); the handler's ``query_one`` then finds nothing. Those `NoMatches` are ignored while the
app shuts down or once the screen's main widgets are gone; any other time they are real bugs and raise.
UI thread only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from textual.css.query import NoMatches
from textual.dom import DOMNode

F = TypeVar("F", bound=Callable[..., Any])

#: The widgets a live timeline screen always holds (a query that misses one of them: the screen is going).
MAIN_WIDGETS = "#body, #gantt, #side"


def while_mounted(handler: F) -> F:
    """Wrap a handler of a `DOMNode` method: see the module docstring."""

    @functools.wraps(handler)
    def wrapped(self: DOMNode, *args: Any, **kw: Any) -> Any:
        try:
            return handler(self, *args, **kw)
        except NoMatches:
            app = self.app
            if app._exit or app._closing:
                return None
            try:  # the screen is torn down leaves first: any of these gone means shutting down
                alive = len(self.query(MAIN_WIDGETS)) == 3
            except Exception:  # noqa: BLE001 - no screen at all: shutting down, the NoMatches is expected
                alive = False
            if alive:
                raise
            return None

    return cast(F, wrapped)
