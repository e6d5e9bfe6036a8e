"""Copy the server's output to stdout and to a size-rotated log file for the exporter.

The launcher (supervise.py beside it) reads the server's output pipe and hands every chunk to a
Tee. The tee is also where secrets are removed: SGLang logs its resolved arguments, API key
included (`server_args={... 'api_key': '...' ...}`), so every byte it copies to stdout or to the
file first passes through a StreamRedactor built from the secrets the launcher injected.

Everything works on whole chunks, never line by line: the redactor scans the chunk (holding
back only an unfinished last line's tail that could start a secret, so a secret split across
two reads is still caught), stdout gets the chunk in one write, and the file gets every complete
line of it in one write, split only where rotation must fall between two lines. A per-line copy
through Python's logging cost 26 us of CPU a line (74x coreutils `tee`); docs/benchmarks.md
has the figures of this one (benchmarks/tee_redaction.py).

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
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

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


class LogFile:
    """The tee's log file: whole lines appended in blocks, rotated by rename at `max_bytes`
    (sglang.log -> sglang.log.1 ... .`backup_count`, the pattern log tailers detect, and
    RotatingFileHandler's: a line goes into the current file only while the file stays under
    `max_bytes`, so rotation never splits a line; a non-regular file, /dev/full say, is never
    rotated), surviving its file being deleted, replaced or unwritable.

    Every open goes through `_open` (rotation included), which records the file's identity;
    every failure turns the file off (an Outage) instead of raising. `redact` cleans the tee's
    own messages like the server's lines.
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
        self.baseFilename = os.path.abspath(os.fspath(path))
        self.max_bytes, self.backup_count = max_bytes, backup_count
        self.redact: Callable[[str], str] = lambda text: text
        self._clock, self._wall, self._report = clock, wall, report
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._rotates = False
        self._checked = 0.0
        self._unwritten = 0
        # The file (identity) a write of ours failed on, perhaps mid-line: see _ends_mid_line.
        self._partial_in: tuple[int, int] | None = None
        self.outage: Outage | None = None
        self.gaps = 0

    # -- opening ---------------------------------------------------------------------------
    def _open(self) -> int:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.baseFilename, flags, 0o666)
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        self._identity = (st.st_dev, st.st_ino)
        self._rotates = self.max_bytes > 0 and self.backup_count > 0 and stat.S_ISREG(st.st_mode)
        self._checked = self._clock()
        if stat.S_ISREG(st.st_mode) and st.st_size and self._ends_mid_line(st):
            # A write cut short (the disk filled mid-line), or a file someone else left without
            # its last newline: what comes next, the gap marker first of all, must start a line
            # of its own, or the exporter (which counts only a marker at a line's start) and
            # the server's next line are both lost in the fragment.
            try:
                _write_all(fd, b"\n")
            except OSError:
                os.close(fd)
                raise
        self._partial_in = None
        return fd

    def _ends_mid_line(self, st: os.stat_result) -> bool:
        """Whether the file just opened (`st`) ends without a newline. Read through a read-only
        descriptor of the same file; where the tee may not read it, a file one of its own
        writes failed on is taken to end mid-line (an empty line costs nothing, a marker glued
        to a fragment costs the count)."""
        try:
            fd = os.open(self.baseFilename, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return self._partial_in == (st.st_dev, st.st_ino)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not now.st_size:
                return self._partial_in == (st.st_dev, st.st_ino)
            return os.pread(fd, 1, now.st_size - 1) != b"\n"
        except OSError:
            return self._partial_in == (st.st_dev, st.st_ino)
        finally:
            os.close(fd)

    def open_now(self) -> None:
        """Open at start, so an unwritable log directory is reported before the first line."""
        try:
            self._fd = self._open()
        except Exception as exc:
            self._fail(exc, 0)

    def _same_file(self) -> bool:
        try:
            st = os.stat(self.baseFilename)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def _close_quietly(self) -> None:
        fd, self._fd = self._fd, None
        self._identity = None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        self._close_quietly()

    # -- writing ---------------------------------------------------------------------------
    def write(self, *parts: bytes | memoryview) -> None:
        """Append whole lines (the parts, in order, end with a line break), rotating between
        lines; what cannot be written is counted for the gap marker."""
        size = sum(len(part) for part in parts)
        if not size:
            return
        now = self._clock()
        if self.outage is not None and not (now >= self.outage.retry_at and self._recover(now)):
            self.outage.lost += size
            return
        if self._fd is not None and now - self._checked >= CHECK_S:
            self._checked = now
            if not self._same_file():
                self._reopen()
                if self.outage is not None:
                    self.outage.lost += size
                    return
        self._unwritten = size
        try:
            if self._fd is None:
                self._fd = self._open()
            if self._rotates and os.fstat(self._fd).st_size + size >= self.max_bytes:
                self._append(b"".join(parts))
            else:
                self._write_parts(parts)  # the common case: one writev, no copy
        except Exception as exc:
            self._fail(exc, self._unwritten)

    def _write_parts(self, parts: tuple[bytes | memoryview, ...]) -> None:
        assert self._fd is not None
        views = [memoryview(part) for part in parts if len(part)]
        while views:
            written = os.writev(self._fd, views)
            self._unwritten -= written
            while views and written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            if written:
                views[0] = views[0][written:]

    def emit(self, record: logging.LogRecord) -> None:
        """One record's message as one line (a logging-style entry point)."""
        self.write((str(record.msg) + "\n").encode("utf-8", "backslashreplace"))

    def _append(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            assert self._fd is not None
            stop = end
            if self._rotates:
                size = os.fstat(self._fd).st_size
                room = self.max_bytes - size - 1  # the file stays under max_bytes
                if end - pos > room:
                    stop = data.rfind(b"\n", pos, pos + max(room, 0)) + 1
                    if stop <= pos:  # not even the next line fits
                        if size > 0:
                            self._rollover()
                            continue
                        # An empty file takes one line, however long.
                        stop = data.find(b"\n", pos) + 1 or end
            view = memoryview(data)[pos:stop]
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._unwritten -= written
            pos = stop

    def _rollover(self) -> None:
        self._close_quietly()
        base = self.baseFilename
        # os.replace: each generation name always exists once it has, no window without it.
        for i in range(self.backup_count - 1, 0, -1):
            if os.path.exists(f"{base}.{i}"):
                os.replace(f"{base}.{i}", f"{base}.{i + 1}")
        if os.path.exists(base):
            os.replace(base, f"{base}.1")
        self._fd = self._open()

    def tick(self) -> None:
        """While the server is quiet: retry a file that is off, notice one deleted or replaced,
        so the marker (and the exporter's count) does not wait for the next line."""
        # Same thread as write (the supervisor's loop): no lock needed.
        now = self._clock()
        if self.outage is not None:
            if now >= self.outage.retry_at:
                self._recover(now)
        elif self._fd is not None and now - self._checked >= CHECK_S:
            self._checked = now
            if not self._same_file():
                self._reopen()

    def _reopen(self) -> None:
        self._close_quietly()
        try:
            self._fd = self._open()
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
        if self._fd is not None:
            self._partial_in = self._identity
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
            self._fd = self._open()
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
        assert self._fd is not None
        try:
            _write_all(self._fd, (self.redact(text) + "\n").encode("utf-8", "backslashreplace"))
        except OSError:
            self._partial_in = self._identity
            return False
        return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _clean(lines: bytes) -> bytes:
    """The file's text: invalid UTF-8 as backslash escapes (a backslash, x, ff), as the log file
    always had it. A line break never sits inside a UTF-8 sequence, so a block of lines decodes
    as each of its lines would."""
    if lines.isascii():
        return lines
    return lines.decode("utf-8", "backslashreplace").encode("utf-8", "backslashreplace")


class Tee:
    """Redacts what the server writes and copies it to `sink` as it arrives and, whole lines
    only, to the rotated file at `path` (None: stdout only, for a server with secrets and no
    file)."""

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
        self.file: LogFile | None = None
        if path is not None:
            self.file = LogFile(path, max_bytes, backup_count)
            self.file.redact = redactor.redact_text
            self.file.open_now()

    def feed(self, chunk: bytes) -> None:
        self._emit(self._stream.feed(chunk))

    def tick(self) -> None:
        """Called when no output arrived for a while (the supervisor's poll timeout)."""
        if self.file is not None:
            self.file.tick()

    def close(self) -> None:
        self._emit(self._stream.close())
        if self.file is None:
            return
        if self._pending:
            pending, self._pending = self._pending, b""
            self.file.write(_clean(pending + b"\n"))
        self.file.close()

    def _emit(self, safe: bytes) -> None:
        """Redacted bytes to the sink at once, their complete lines to the file in one write;
        the unfinished last line waits for its end."""
        if not safe:
            return
        try:
            self._sink.write(safe)
            self._sink.flush()
        except OSError:
            pass  # stdout gone (closed terminal): keep feeding the file for the exporter
        if self.file is None:
            return
        end = safe.rfind(b"\n") + 1
        if end == 0:
            self._pending += safe
            return
        head, self._pending = self._pending, safe[end:]
        if head.isascii() and safe.isascii():
            # Slices of a memoryview: the read is not copied again on its way to the file.
            self.file.write(head, memoryview(safe)[:end])
        else:
            self.file.write(_clean(head + safe[:end]))


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
