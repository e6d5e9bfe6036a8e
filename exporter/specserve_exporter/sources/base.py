"""What every source shares: a sink for complete lines, a line buffer, and a reported state."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

# Receives bytes holding only complete lines, each ending with b"\n".
LineSink = Callable[[bytes], None]

# A line longer than this is cut: one runaway line must not grow the exporter's memory.
MAX_PENDING_BYTES = 1024 * 1024


class SourceState(StrEnum):
    STARTING = "starting"
    WAITING = "waiting"  # the file, container or pod does not exist (yet): normal during deploys
    FOLLOWING = "following"
    ERROR = "error"  # something the operator must fix (permissions, API unreachable)
    STOPPED = "stopped"


@dataclass(frozen=True)
class SourceStatusReport:
    kind: str
    state: SourceState
    detail: str
    since: float
    reopens: int


class LineBuffer:
    """Joins arbitrary byte chunks into complete lines; keeps the partial tail for later."""

    def __init__(self, sink: LineSink, on_overflow: Callable[[], None] | None = None) -> None:
        self._sink = sink
        self._pending = b""
        self._on_overflow = on_overflow

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending and data.endswith(b"\n"):
            self._sink(data)  # the common case for files: no copy
            return
        cut = data.rfind(b"\n") + 1
        if cut:
            # One copy: the pending head and the complete lines of `data`, joined.
            self._sink(b"".join((self._pending, memoryview(data)[:cut])))
            self._pending = data[cut:]
        else:
            self._pending += data
        if len(self._pending) > MAX_PENDING_BYTES:
            # Keep the head of the runaway line; it is passed on as one (too long) line at flush.
            self._pending = self._pending[:MAX_PENDING_BYTES]
            if self._on_overflow is not None:
                self._on_overflow()

    def flush(self) -> None:
        """End of a stream (rotation, restart): its unterminated last line is still a line."""
        if self._pending:
            pending, self._pending = self._pending, b""
            self._sink(pending + b"\n")

    @property
    def pending(self) -> bytes:
        return self._pending


class Source:
    """Base class: state bookkeeping and a stop event. Subclasses implement run()."""

    kind = "source"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = SourceState.STARTING
        self._detail = ""
        self._since = time.time()
        self._reopens = 0
        self.stop_event = threading.Event()

    def set_state(self, state: SourceState, detail: str = "") -> None:
        with self._lock:
            if state != self._state or detail != self._detail:
                self._state, self._detail, self._since = state, detail, time.time()

    def count_reopen(self) -> None:
        with self._lock:
            self._reopens += 1

    def status(self) -> SourceStatusReport:
        with self._lock:
            return SourceStatusReport(
                self.kind, self._state, self._detail, self._since, self._reopens
            )

    def is_up(self) -> bool:
        return self.status().state is SourceState.FOLLOWING

    def reopens(self) -> int:
        return self.status().reopens

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        raise NotImplementedError


class ReconnectingSource(Source):
    """A source that follows an API log stream and reconnects when it ends (container or pod
    restarts), waiting `retry_interval` between attempts. Subclasses implement _follow_once()."""

    def __init__(self, retry_interval: float) -> None:
        super().__init__()
        self.retry_interval = retry_interval

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self._follow_once()
                self.stop_event.wait(self.retry_interval)
        finally:
            self.set_state(SourceState.STOPPED)

    def _follow_once(self) -> None:
        raise NotImplementedError
