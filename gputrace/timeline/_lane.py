"""`Lane`: one horizontal track of a `Timeline` (a stream on a device, or a thread on a host) and the order
of the lane tree (host > device > stream/thread).

Moved out of gputrace/timeline/model.py unchanged; ``gputrace.timeline.model`` and ``gputrace.timeline``
re-export it, and they are the paths to import it from. A frozen value: any thread; raises nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputrace.activity import ANNOTATION_LANE_PREFIX


@dataclass(frozen=True)
class Lane:
    """One horizontal track: a stream on a device, or a thread on a host.

    ``device`` is the GPU index, or -1 for host-only work (CPU lanes). ``name`` is the
    lane attribute as recorded (``stream:N`` or ``thread:NAME``; an import adds ``api:NAME`` beside a thread
    and ``annotations:stream N`` beside a stream).
    """

    host: str
    pid: int
    device: int
    name: str

    @property
    def device_label(self) -> str:
        return "CPU" if self.device < 0 else f"GPU {self.device}"

    @property
    def group(self) -> tuple[str, str]:
        """(host, device label): the two outer levels of the lane tree."""
        return (self.host, self.device_label)

    @property
    def sort_key(self) -> tuple:
        # Hosts, then GPUs before CPU lanes, then streams before threads, then name; a stream's annotation
        # lane (``annotations:stream N``) right after the stream's own lane (``stream:N``).
        name = self.name
        ann = name.startswith(ANNOTATION_LANE_PREFIX)
        if ann:
            name = "stream:" + name[len(ANNOTATION_LANE_PREFIX):]
        return (self.host, self.device < 0, self.device, self.pid, not name.startswith("stream:"), name, ann)
