"""Turn chunks of complete log lines into state updates, fast.

The reference parser (parser.py) reads one line at a time. Most of an SGLang log is stats lines of
one layout printed by one rank, so for a chunk whose stats lines all share the layout ("shape",
shape.py) and rank of the last ones parsed, the chunk scanner (_scan.c) reads every stats line of
the chunk in one call and returns the histograms and sums the metrics need. Gauges only show the
last window, so they are set from the chunk's last line through the reference parser. Both paths
hand the state a Window (window.py) of what they read, through the one `LogState.observe`. Anything
else (a new shape, several ranks, non-ASCII bytes, a line not of the shape) takes the reference
parser for that chunk, which also learns the new shapes. Property tests keep the two paths equal.
"""

from __future__ import annotations

import re
import time

from specserve.adaptive import INIT_MARKER, SWITCH_MARKER, SWITCH_PATTERN

from .fields import Feed, Kind, every_line
from .parser import MAX_LINE_BYTES, Ranks, Rejected, StatsLine, parse_line
from .shape import MARKERS, HistogramSpec, Shape
from .state import LogState
from .window import Sums, Window, WindowReader

# How much of a chunk the reference path reads before the fast path is tried again.
_SLOW_PIECE_BYTES = 64 * 1024
# What the scanner sums for each kind: the field table's EVERY_LINE feeds.
_SPECS: dict[Kind, tuple[tuple[Feed, HistogramSpec], ...]] = {
    kind: tuple((feed, HistogramSpec.of(feed)) for feed in every_line(kind)) for kind in Kind
}
# The line specserve-launch's tee writes into the log file when the file comes back after it
# could not be written (specserve/launch/logtee.py GAP_MARKER): lines the exporter never saw.
LOG_GAP_MARKER = b"specserve-launch: log file unavailable from "
_LOG_GAP = re.compile(
    rb"^" + re.escape(LOG_GAP_MARKER) + rb"\S+ to \S+, (\d+) bytes not written", re.MULTILINE
)


class Ingestor:
    def __init__(self, state: LogState) -> None:
        self.state = state
        self._shapes: dict[Kind, Shape] = {}
        self._ranks: Ranks | None = None

    def feed(self, chunk: bytes, now: float | None = None) -> None:
        """`chunk` holds complete lines, each ending with b"\\n"."""
        if not chunk:
            return
        now = time.time() if now is None else now
        with self.state.lock:
            if LOG_GAP_MARKER in chunk:  # rare: a substring test keeps the common chunk cheap
                for gap in _LOG_GAP.finditer(chunk):
                    self.state.log_file_gaps += 1
                    self.state.log_file_gap_bytes += int(gap.group(1))
            if SWITCH_MARKER in chunk or INIT_MARKER in chunk:
                self._adaptive(chunk)
            while chunk:
                n_lines = chunk.count(b"\n")
                if self._fast(chunk, n_lines, now):
                    self.state.lines_read += n_lines
                    return
                # Read a small piece line by line (which learns new shapes), then try the fast
                # path again on the rest, unless the piece taught nothing new: then the rest is
                # not of a learnable shape (several ranks, damaged lines) and all of it goes slow.
                learned = dict(self._shapes)
                cut = chunk.find(b"\n", _SLOW_PIECE_BYTES) + 1 or len(chunk)
                piece, chunk = chunk[:cut], chunk[cut:]
                self.state.lines_read += piece.count(b"\n")
                self._slow(piece, now)
                if self._shapes == learned:
                    self.state.lines_read += chunk.count(b"\n")
                    self._slow(chunk, now)
                    return

    def _adaptive(self, chunk: bytes) -> None:
        """--speculative-adaptive changed steps and draft tokens (a switch line), or a server
        started afresh at its configured steps (its start line): the later of the two wins."""
        switches = list(SWITCH_PATTERN.finditer(chunk))
        self.state.adaptive_switches += len(switches)
        started = chunk.rfind(INIT_MARKER)
        if switches and switches[-1].start() > started:
            last = switches[-1]
            self.state.adaptive_shape = (int(last.group(2)), int(last.group(4)))
        elif started >= 0:
            self.state.adaptive_shape = None

    # --- the reference path ----------------------------------------------------------------

    def _slow(self, chunk: bytes, now: float) -> None:
        state = self.state
        reader = WindowReader()
        last: dict[Kind, tuple[bytes, StatsLine]] = {}
        for line in chunk.split(b"\n")[:-1]:
            result = parse_line(line)
            if result is None:
                state.lines_ignored += 1
            elif isinstance(result, Rejected):
                state.rejected[result.reason] += 1
            else:
                reader.add(result)
                last[result.kind] = (line, result)
        for window in reader.windows():
            state.observe(window, now)
        self._learn(last)

    def _learn(self, last: dict[Kind, tuple[bytes, StatsLine]]) -> None:
        ranks = {parsed.ranks for _, parsed in last.values()}
        if len(ranks) != 1:
            if last:
                self._shapes.clear()
            return
        self._ranks = ranks.pop()
        for kind, (line, parsed) in last.items():
            if len(line) > MAX_LINE_BYTES:
                self._shapes.pop(kind, None)
                continue
            try:
                self._shapes[kind] = Shape(kind, line, parsed)
            except ValueError:  # not a layout the scanner can hold: the reference path reads it
                self._shapes.pop(kind, None)

    # --- the fast path ---------------------------------------------------------------------

    def _fast(self, chunk: bytes, n_lines: int, now: float) -> bool:
        ranks = self._ranks
        if ranks is None or not chunk.isascii():
            return False
        found: dict[Kind, tuple[Shape, int, dict[Feed, Sums]]] = {}
        for kind, marker in MARKERS.items():
            if marker not in chunk:  # stops at the first occurrence: cheap
                continue
            shape = self._shapes.get(kind)
            if shape is None:
                return False
            if not shape.bracketed and b"] " + marker in chunk:
                return False  # a custom-prefix shape must not swallow default-format lines
            specs = _SPECS[kind]
            scanned = shape.scan(chunk, [spec for _, spec in specs])
            if scanned is None:
                return False  # a line holding the marker is not of this shape
            sums = {
                feed: scanned.histograms[spec.value]
                for feed, spec in specs if spec.value in scanned.histograms
            }
            found[kind] = (shape, scanned.lines, sums)
        # Every check passed: only now change state, so a fallback never counts a line twice.
        n_stats = 0
        for kind, (shape, lines, sums) in found.items():
            n_stats += lines
            last = parse_line(_last_line_containing(chunk, MARKERS[kind]))
            assert isinstance(last, StatsLine)  # it matched the shape, so it parses
            window = Window.scanned(
                kind, ranks, lines, shape.unknown_fields * lines, sums, last)
            self.state.observe(window, now)
        self.state.lines_ignored += n_lines - n_stats
        return True


def _last_line_containing(chunk: bytes, marker: bytes) -> bytes:
    pos = chunk.rfind(marker)
    start = chunk.rfind(b"\n", 0, pos) + 1
    return chunk[start: chunk.find(b"\n", pos)]
