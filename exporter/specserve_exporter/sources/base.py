"""What every source shares: a sink for complete lines, a line buffer, and a reported state."""

from __future__ import annotations

import threading
import time
from collections import Counter
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


class ErrorReason(StrEnum):
    """Why a source is in the error state: the `reason` label of specserve_source_errors_total,
    a fixed set so the label stays bounded whatever the path or the API says."""

    DIRECTORY = "directory"  # the log path is a directory
    FIFO = "fifo"  # a named pipe: opening it for reading would block, reading it never ends
    DEVICE = "device"  # a character or block device (/dev/zero: endless bytes, no newline)
    SOCKET = "socket"
    OTHER_TYPE = "other_type"  # any other file type that is not a regular file
    PERMISSION = "permission_denied"
    OPEN = "open_failed"  # ELOOP, ENAMETOOLONG, EIO... on open
    READ = "read_failed"  # EIO on read
    API = "api_error"  # Docker Engine or Kubernetes API unreachable or refusing
    UNEXPECTED = "unexpected"  # a bug in the exporter: reported and retried, never fatal


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
        self._reason: ErrorReason | None = None
        self._errors: Counter[ErrorReason] = Counter()
        self.stop_event = threading.Event()

    def set_state(
        self, state: SourceState, detail: str = "", reason: ErrorReason | None = None
    ) -> None:
        """`reason` says why, for ERROR (ignored otherwise; ERROR without one is UNEXPECTED).
        Entering ERROR for a reason counts once per episode: a path that stays a directory is
        one error, not one per poll."""
        reason = (reason or ErrorReason.UNEXPECTED) if state is SourceState.ERROR else None
        with self._lock:
            if reason is not None and (self._state is not SourceState.ERROR
                                       or self._reason is not reason):
                self._errors[reason] += 1
            self._reason = reason
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

    def errors(self) -> dict[ErrorReason, int]:
        """Times the source went into the error state, by reason (every reason, 0 included)."""
        with self._lock:
            return {reason: self._errors[reason] for reason in ErrorReason}

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
