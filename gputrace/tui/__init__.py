"""The terminal timeline viewer behind ``gputrace view`` (Textual).

Entry points: `gputrace.tui.app.GputraceApp` (its default screen `timeline_screen.TimelineScreen`),
`gputrace.tui.compare_view.CompareApp` (``view --compare``) and `screenshots.screenshot_svg` for a
headless SVG. One class per widget and screen (the Gantt in two layers: `gantt_display.GanttDisplay`
draws, `gantt.Gantt` adds keys and mouse), no mixins; apps hand data down to screens, widgets post
messages up. The pure parts (`layout`, `index`, `keys`, `render`, `gantt_cells`, `gantt_navigation`, `rows`, `status`,
`query`, `loader`, `overlays`, `range_stats`, `compare_table`) do not import Textual and are tested on
their own, as is `legend.legend_text`. Importing this package imports nothing (docs/tui.md
has the module map; an import-linter contract keeps the layers).
"""
