"""Copy the server's output to stdout and to a size-rotated log file for the exporter.

The launcher (specserve/supervise.py) reads the server's output pipe and hands every chunk to a
Tee. The tee is also where secrets are removed: SGLang logs its resolved arguments, API key
included (`server_args={... 'api_key': '...' ...}`), so every byte it copies to stdout or to the
file first passes through a StreamRedactor built from the secrets the launcher injected.

The file is a best effort that never stops the copy to stdout (issue 16 item 6): a log file
deleted or replaced under the tee is noticed (path identity against the open file, at most every
CHECK_S) and reopened; a write or open error (ENOSPC, EROFS, EACCES, directory gone) turns the
file off, retried with backoff, with one stderr line when it goes and one when it comes back.
When it comes back the file gets a GAP_MARKER line saying for how long and how many bytes were
not written, which the exporter counts (specserve_log_file_gaps_total).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO, Any, BinaryIO

from specserve.secrets import Redactor

CHUNK = 65536
# How often the path's identity is compared with the open file's: a stat per second is free,
# and bounds what goes into a deleted file to about a second of output.
CHECK_S = 1.0
RETRY_MIN_S, RETRY_MAX_S = 0.5, 30.0
# The line the tee writes into the file when it comes back; the exporter matches this prefix.
GAP_MARKER = "specserve-launch: log file unavailable from "
REOPEN_MARKER = "specserve-launch: log file reopened at "
PREFIX = "specserve-launch: "


def _stderr(line: str) -> None:
    with contextlib.suppress(OSError):  # no stderr either: nothing left to tell
        os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))


def _utc(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno:
        return f"{errno.errorcode.get(exc.errno, exc.errno)}: {os.strerror(exc.errno)}"
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Outage:
    """The file is off: since when, why, how many bytes it missed, when to try again."""

    since_wall: float
    reason: str
    retry_at: float
    delay: float
    lost: int = 0


class LogFile(RotatingFileHandler):
    """A RotatingFileHandler that survives its file being deleted, replaced or unwritable.

    Every open goes through `_open` (rotation included), which records the file's identity;
    every failure goes through `handleError`, which turns the file off instead of printing a
    traceback per line. `redact` cleans the tee's own messages like the server's lines.
    """

    def __init__(
        self,
        path: Path,
        max_bytes: int,
        backup_count: int,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        report: Callable[[str], None] = _stderr,
    ) -> None:
        # delay: the first open is ours (open_now), so a failure there is an outage, not a crash.
        super().__init__(
            path,
            maxBytes=max_bytes,
            backupCount=backup_count,
            encoding="utf-8",
            errors="backslashreplace",
            delay=True,
        )
        self.redact: Callable[[str], str] = lambda text: text
        self._clock, self._wall, self._report = clock, wall, report
        self._identity: tuple[int, int] | None = None
        self._checked = 0.0
        self.outage: Outage | None = None
        self.gaps = 0

    # -- opening ---------------------------------------------------------------------------
    def _open(self) -> IO[Any]:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        stream = super()._open()
        st = os.fstat(stream.fileno())
        self._identity = (st.st_dev, st.st_ino)
        self._checked = self._clock()
        return stream

    def open_now(self) -> None:
        """Open at start, so an unwritable log directory is reported before the first line."""
        try:
            self.stream = self._open()
        except Exception as exc:
            self._fail(exc, 0)

    def _same_file(self) -> bool:
        try:
            st = os.stat(self.baseFilename)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def _close_quietly(self) -> None:
        stream, self.stream = self.stream, None
        self._identity = None
        if stream is not None:
            # close() closes the fd even when flushing what is buffered fails.
            with contextlib.suppress(Exception):
                stream.close()

    # -- writing ---------------------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        now = self._clock()
        if self.outage is not None and not (now >= self.outage.retry_at and self._recover(now)):
            self.outage.lost += _size(record)
            return
        if self.stream is not None and now - self._checked >= CHECK_S:
            self._checked = now
            if not self._same_file():
                self._reopen()
                if self.outage is not None:
                    self.outage.lost += _size(record)
                    return
        super().emit(record)  # rotation, write, flush; any error lands in handleError

    def tick(self) -> None:
        """While the server is quiet: retry a file that is off, notice one deleted or replaced,
        so the marker (and the exporter's count) does not wait for the next line."""
        # Same thread as emit (the supervisor's loop): no lock needed.
        now = self._clock()
        if self.outage is not None:
            if now >= self.outage.retry_at:
                self._recover(now)
        elif self.stream is not None and now - self._checked >= CHECK_S:
            self._checked = now
            if not self._same_file():
                self._reopen()

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        self._fail(exc if exc is not None else OSError("write failed"), _size(record))

    def _reopen(self) -> None:
        self._close_quietly()
        try:
            self.stream = self._open()
        except Exception as exc:
            self._fail(exc, 0)
            return
        when = _utc(self._wall())
        self._report(
            self.redact(
                f"{PREFIX}log file {self.baseFilename} was deleted or replaced; reopened it"
            )
        )
        self._write_marker(f"{REOPEN_MARKER}{when}: the previous file was deleted or replaced")

    def _fail(self, exc: BaseException, lost: int) -> None:
        self._close_quietly()
        now = self._clock()
        if self.outage is not None:  # still off (the marker write failed): back off further
            self.outage.lost += lost
            self._backoff(now)
            return
        reason = _why(exc)
        self.outage = Outage(self._wall(), reason, now + RETRY_MIN_S, RETRY_MIN_S, lost)
        self._report(
            self.redact(
                f"{PREFIX}log file {self.baseFilename} unavailable ({reason}); the server's "
                "output still goes to stdout, retrying the file"
            )
        )

    def _backoff(self, now: float) -> None:
        assert self.outage is not None
        self.outage.delay = min(self.outage.delay * 2, RETRY_MAX_S)
        self.outage.retry_at = now + self.outage.delay

    def _recover(self, now: float) -> bool:
        """Try the file again; True when it is open and carries the gap marker."""
        assert self.outage is not None
        try:
            self.stream = self._open()
        except Exception:
            self._close_quietly()
            self._backoff(now)
            return False
        outage = self.outage
        marker = (
            f"{GAP_MARKER}{_utc(outage.since_wall)} to {_utc(self._wall())}, "
            f"{outage.lost} bytes not written ({outage.reason})"
        )
        if not self._write_marker(marker):
            self._close_quietly()
            self._backoff(now)
            return False
        self.outage = None
        self.gaps += 1
        self._report(self.redact(f"{PREFIX}log file {self.baseFilename} writable again: {marker}"))
        return True

    def _write_marker(self, text: str) -> bool:
        assert self.stream is not None
        try:
            self.stream.write(self.redact(text) + "\n")
            self.stream.flush()
        except Exception:
            return False
        return True


def _size(record: logging.LogRecord) -> int:
    return len(str(record.msg).encode("utf-8", "backslashreplace")) + 1


def _file_logger(path: Path, max_bytes: int, backup_count: int) -> logging.Logger:
    # Rotation by rename (sglang.log -> sglang.log.1 ...), the pattern log tailers detect.
    handler = LogFile(path, max_bytes, backup_count)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(f"specserve.logtee.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = [handler]
    return logger


class Tee:
    """Redacts what the server writes and copies it to `sink` as it arrives and line by line
    to the rotated file at `path` (None: stdout only, for a server with secrets and no file)."""

    def __init__(
        self,
        sink: BinaryIO,
        path: Path | None,
        max_bytes: int,
        backup_count: int,
        secrets: tuple[str, ...] = (),
    ) -> None:
        redactor = Redactor(secrets)
        self.redacts = bool(redactor)
        self._sink = sink
        self._stream = redactor.stream()
        self._pending = b""
        self._logger = _file_logger(path, max_bytes, backup_count) if path is not None else None
        self.file: LogFile | None = None
        if self._logger is not None:
            self.file = next(h for h in self._logger.handlers if isinstance(h, LogFile))
            self.file.redact = redactor.redact_text
            self.file.open_now()

    def feed(self, chunk: bytes) -> None:
        self._pending = _emit(self._stream.feed(chunk), self._sink, self._logger, self._pending)

    def tick(self) -> None:
        """Called when no output arrived for a while (the supervisor's poll timeout)."""
        if self.file is not None:
            self.file.tick()

    def close(self) -> None:
        self._pending = _emit(self._stream.close(), self._sink, self._logger, self._pending)
        if self._logger is None:
            return
        if self._pending:
            self._logger.info(self._pending.decode("utf-8", errors="backslashreplace"))
        for handler in self._logger.handlers:
            handler.close()


def copy_stream(
    source: BinaryIO,
    sink: BinaryIO,
    path: Path | None,
    max_bytes: int,
    backup_count: int,
    secrets: tuple[str, ...] = (),
) -> None:
    """Copy `source` to `sink` and the rotated file through a Tee, until EOF."""
    tee = Tee(sink, path, max_bytes, backup_count, secrets)
    while True:
        chunk = source.read1(CHUNK) if hasattr(source, "read1") else source.read(CHUNK)
        if not chunk:
            break
        tee.feed(chunk)
    tee.close()


def _emit(safe: bytes, sink: BinaryIO, logger: logging.Logger | None, pending: bytes) -> bytes:
    """Write redacted bytes to the sink and whole lines to the file; returns the unfinished line."""
    if not safe:
        return pending
    try:
        sink.write(safe)
        sink.flush()
    except OSError:
        pass  # stdout gone (closed terminal): keep feeding the file for the exporter
    if logger is None:
        return b""
    pending += safe
    *lines, pending = pending.split(b"\n")
    for line in lines:
        logger.info(line.decode("utf-8", errors="backslashreplace"))
    return pending
