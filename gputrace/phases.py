"""The shared phase vocabulary: names, kinds and one ARGB colour per phase name.

NVTX ranges, the TUI and every exporter take colours from here, so a phase looks the
same in Nsight Systems, the terminal and Perfetto. Names outside the vocabulary get a
stable colour derived from a hash of the name.
"""

from __future__ import annotations

import zlib

#: Phase name -> (ARGB colour, default kind). Kinds: gpu, host, sync, pin.
PHASES: dict[str, tuple[int, str]] = {
    "prove": (0xFF5B6770, "host"),
    "synthesis": (0xFF4E79A7, "host"),
    "pin": (0xFFE15759, "pin"),
    "h2d": (0xFFF28E2B, "gpu"),
    "ntt": (0xFF59A14F, "gpu"),
    "intt_abc": (0xFF8CD17D, "gpu"),
    "coset_ntt": (0xFF499894, "gpu"),
    "h_eval": (0xFF86BCB6, "gpu"),
    "intt_h": (0xFFB6992D, "gpu"),
    "msm_h": (0xFFB07AA1, "gpu"),
    "batch_add": (0xFFFF9DA7, "gpu"),
    "msm_l": (0xFF9C755F, "gpu"),
    "msm_a": (0xFFD4A6C8, "gpu"),
    "msm_b_g1": (0xFFF1CE63, "gpu"),
    "b_g2": (0xFF79706E, "host"),
    "assemble": (0xFFA0CBE8, "host"),
    "d2h": (0xFFFFBE7D, "gpu"),
    "unpin": (0xFFD37295, "pin"),
    "sync": (0xFFBAB0AC, "sync"),
}

KINDS = ("gpu", "host", "sync", "pin")


def phase_color(name: str) -> int:
    """ARGB colour (0xAARRGGBB) for a phase name; stable across processes and runs."""
    entry = PHASES.get(name)
    if entry is not None:
        return entry[0]
    h = zlib.crc32(name.encode("utf-8"))
    # Keep user colours mid-bright so black or white text stays readable on them.
    r, g, b = 64 + (h & 0x7F), 64 + ((h >> 8) & 0x7F), 64 + ((h >> 16) & 0x7F)
    return 0xFF000000 | (r << 16) | (g << 8) | b


def phase_hex(name: str) -> str:
    """'#rrggbb' colour for a phase name (for CSS, rich styles and JSON exports)."""
    return "#%06x" % (phase_color(name) & 0xFFFFFF)


def phase_kind(name: str) -> str:
    """Default kind for a phase name: 'gpu', 'host', 'sync' or 'pin' ('host' if unknown)."""
    entry = PHASES.get(name)
    return entry[1] if entry is not None else "host"
