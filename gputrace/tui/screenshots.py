"""SVG screenshots of the viewers: the first screen of an app run headless, and the
``xml:space="preserve"`` mark every SVG the viewers export carries.

`screenshot_svg` runs its own event loop (call it from plain code, not from inside a running app).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, cast

from textual.app import App

from gputrace.textsafe import visible


class Viewer(Protocol):
    """What `screenshot_svg` needs of an app (`GputraceApp`, `CompareApp`)."""

    trace_title: str

    async def wait_ready(self, timeout: float = ...) -> None: ...


def preserve_space(svg: str) -> str:
    """Mark an SVG screenshot ``xml:space="preserve"``: Textual's SVGs rely on browsers keeping
    runs of spaces, other renderers (rsvg, Inkscape) collapse them and shift every column."""
    if 'xml:space="preserve"' in svg[:400]:
        return svg
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


async def _screenshot(app: App[Any], viewer: Viewer, size: tuple[int, int], timeout: float) -> str:
    async with app.run_test(size=size) as pilot:
        await viewer.wait_ready(timeout)
        await pilot.pause()
        await pilot.pause(0.05)
        return app.export_screenshot(title=visible(f"gputrace view {viewer.trace_title}"))


def screenshot_svg(app: App[Any], size: tuple[int, int] = (160, 48), timeout: float = 120.0) -> str:
    """Run ``app`` (a viewer: it has ``wait_ready`` and ``trace_title``) headless until loaded and analysed,
    and return its first screen as SVG."""
    return asyncio.run(_screenshot(app, cast(Viewer, app), size, timeout))
