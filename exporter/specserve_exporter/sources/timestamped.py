"""Shared by the Docker and Kubernetes sources: both APIs can prefix every line with an RFC 3339
timestamp, which is what lets a reconnect resume exactly after the last line already counted."""

from __future__ import annotations

import re
from datetime import datetime

from .base import LineSink

# "2026-02-23T17:53:14.123456789Z " at the start of each line.
_TIMESTAMP = re.compile(rb"^\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d) ", re.MULTILINE)


def parse_rfc3339(stamp: bytes) -> float:
    """Unix time of an RFC 3339 timestamp with up to nanoseconds (Python reads microseconds)."""
    text = stamp.decode("ascii").strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    head, _, rest = text.partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return datetime.fromisoformat(text).timestamp()


class TimestampStripper:
    """Strips the API's timestamps before lines reach the sink, remembering the last one seen.

    After a reconnect, lines at or before the last timestamp already counted are dropped, so a
    restart neither loses nor double-counts a window.
    """

    def __init__(self, sink: LineSink) -> None:
        self._sink = sink
        self.last_stamp: bytes | None = None
        self.last_time: float | None = None
        self._skip_until: float | None = None

    def resume(self, floor: float | None = None) -> None:
        """Call before reading a new stream that may repeat lines already seen; `floor`: also
        drop lines up to this time when none was seen yet (history skipped at start)."""
        self._skip_until = self.last_time if self.last_time is not None else floor

    def __call__(self, chunk: bytes) -> None:
        if self._skip_until is not None:
            chunk = self._drop_seen(chunk, self._skip_until)
            if not chunk:
                return
        last_line_start = chunk.rfind(b"\n", 0, len(chunk) - 1) + 1
        match = _TIMESTAMP.match(chunk, last_line_start)
        if match:
            self.last_stamp = match.group(0)
            self.last_time = parse_rfc3339(match.group(0))
        self._sink(_TIMESTAMP.sub(b"", chunk))

    def _drop_seen(self, chunk: bytes, until: float) -> bytes:
        kept: list[bytes] = []
        lines = chunk.split(b"\n")[:-1]
        for index, line in enumerate(lines):
            match = _TIMESTAMP.match(line)
            if match and parse_rfc3339(match.group(0)) <= until:
                continue
            # The first line newer than the last one counted: everything after it is new too.
            self._skip_until = None
            kept = lines[index:]
            break
        return b"".join(line + b"\n" for line in kept)
