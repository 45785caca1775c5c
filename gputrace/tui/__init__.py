"""The terminal timeline viewer behind ``gputrace view`` (Textual).

Entry point: `gputrace.tui.app.GputraceApp` (and `screenshot_svg` for headless SVG). The pure
parts (`layout`, `index`, `render`, `rows`, `query`, `loader`, `overlays`) do not import
Textual (only numpy, the timeline read side and `gputrace.analysis`) and are tested on their own.
Importing this package imports nothing (see docs/tui.md for the module map).
"""
