"""Follow a file like `tail -F`, modelled on google/mtail's tailer.

Polling, not inotify: it works on every filesystem (overlay, NFS, bind mounts into containers) and
one stat() per interval is nothing next to SGLang's output rate. Handles: start at the end (default)
or the beginning; the file missing at start, deleted, or recreated; rotation by rename + create
(the old file is read to its end first); copytruncate and truncation (restart from offset 0); a
cut that keeps the file's start (`truncate -s N`: go on at the new end); a partial last line (held
until its newline arrives, or passed on when the file is rotated away or truncated); permission
errors, and a path that is not a regular file (a directory, a FIFO, a device: reported with a
reason, retried every poll, never opened in a way that blocks or reads forever).

Truncation is detected by content, not only by size. mtail and grok_exporter see it only while
the file is shorter than what they have read; under copytruncate a busy server refills the file
past that offset before the next poll, and everything it wrote up to the old offset is skipped
(200k lines, copytruncate every 20k at 40k lines/s: 176,900 counted). So each source keeps a
fingerprint of the file's first FINGERPRINT_SIZE bytes and checks it after every read: different
first bytes mean the file was truncated and rewritten, however long it now is, and reading
restarts at offset 0. What was written between the last read and the truncation is taken from
the copy copytruncate made just before it (a sibling named like the file, sglang.log.1, that
starts with the same fingerprint), read from the old offset to its end; without such a copy
(`> file`, a compressed copy) those lines are all that is lost. (A rewrite whose first
FINGERPRINT_SIZE bytes equal the old ones is invisible; log lines start with a timestamp and
carry counters, so that does not happen with real logs.)

The first bytes alone miss a cut that keeps them (`truncate -s 5000` of a bigger file: 19,915 of
51,000 lines lost once). So the MARK_SIZE bytes just before the read offset are checked too
after every read: shorter than the offset, or other bytes there (refilled past it since), and
the file was cut below the offset. Its start was read already, so reading goes on at its new
end (re-reading from 0 would count the kept start twice); what the server wrote between the cut
and that poll is lost, since where the cut fell is no longer known.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections import deque
from enum import Enum
from pathlib import Path

from .base import ErrorReason, LineBuffer, LineSink, Source, SourceState

# Large enough that per-read overhead vanishes, small enough that glibc serves each buffer from
# its heap: 4 MiB reads got fresh mmap'ed pages every time and spent more in page faults (0.15 s
# per 180 MB) than in copying (0.04 s at 512 KiB).
READ_SIZE = 512 * 1024
# Enough bytes to hold several log lines (timestamps, counters), so two generations of a file
# never share them; one pread of this size per read buffer costs nothing.
FINGERPRINT_SIZE = 1024
# Files next to ours a truncation looks through for logrotate's copy (sglang.log.1, ...).
MAX_COPY_CANDIDATES = 1024
# How often the copies are listed again when one was renamed between its listing and its open.
RELISTS = 3
# The bytes before the read offset kept to notice a cut below it that keeps the first bytes:
# enough to hold a timestamp, so no two places of a log share them.
MARK_SIZE = 256


class _Check(Enum):
    """What the file is, compared with what was read of it."""

    SAME = "same"  # the same content, perhaps grown
    REWRITTEN = "rewritten"  # other first bytes: truncated (copytruncate) and written again
    SHRUNK = "shrunk"  # the first bytes kept, cut below the read offset (`truncate -s N`)


class FileSource(Source):
    kind = "file"

    def __init__(
        self,
        path: Path,
        sink: LineSink,
        *,
        from_beginning: bool = False,
        poll_interval: float = 0.1,
    ) -> None:
        super().__init__()
        self.path = path
        self.poll_interval = poll_interval
        self._from_beginning = from_beginning
        self._buffer = LineBuffer(sink)
        self._read_buffer = bytearray(READ_SIZE)
        self._file: object | None = None
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        # The file's first bytes as last seen (up to FINGERPRINT_SIZE): which "generation" of
        # the file the offset belongs to.
        self._fingerprint = b""
        # The MARK_SIZE bytes just before the offset, as read: a truncation that keeps the
        # first bytes (`truncate -s 5000`) changes or removes them.
        self._mark = b""
        # A partial last line left in the file at the last read: passed on if the file is
        # truncated before its newline arrives (it was read; only its end may be lost).
        self._tail = b""
        self._first_open = True
        self.recovered_bytes = 0
        # Set while the file has no fingerprint (just truncated, or empty at open): a whole
        # generation may be written, copied and truncated before the next poll, leaving only
        # its copy; when content appears, copies not known yet are read first.
        self._unseen_possible = False
        # First bytes of every copy known (there at open, or read live or from a copy): such a
        # copy is never read (again). Recognised by content, not mtime: file systems stamp
        # mtimes from a coarse clock, so a copy can look newer than the truncation after it.
        self._finished: deque[bytes] = deque(maxlen=4 * MAX_COPY_CANDIDATES)
        # Copies older than this (2 s before the first open) are history, never read.
        self._history_floor_ns: int | None = None
        # Where "start at the end" points: the file's identity and size when the exporter
        # started. Taken with stat(), which needs no read permission, so lines written while
        # the file was missing or unreadable are not skipped once it can be opened.
        self._start_point: tuple[tuple[int, int], int] | None = None
        if not from_beginning:
            try:
                st = os.stat(path)
                self._start_point = ((st.st_dev, st.st_ino), st.st_size)
            except OSError:
                pass  # missing at start: when it appears, all of it is new output

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self._poll_guarded()
                self.stop_event.wait(self.poll_interval)
            self._poll_guarded()  # lines written just before a stop still count
        finally:
            self._close()
            self.set_state(SourceState.STOPPED)

    def _poll_guarded(self) -> None:
        """One poll that cannot end the thread: the exporter exits when its source thread dies,
        so one surprise (a bug, a file system that answers oddly) would crash-loop it. It is an
        error state instead, reported, counted and retried from a fresh open next poll."""
        try:
            self.poll_once()
        except Exception as exc:  # any surprise: report and retry, never die
            self._close()
            self.set_state(
                SourceState.ERROR,
                f"unexpected error following {self.path}: {type(exc).__name__}: {exc} "
                "(retrying; please report it)",
                ErrorReason.UNEXPECTED,
            )

    def poll_once(self) -> None:
        """One round: (re)open when needed, read what is new, notice rotation and truncation."""
        if self._fd is None and not self._open():
            return
        self._read_available()
        self._check_rotation_and_truncation()

    # --- internals -------------------------------------------------------------------------

    def _open(self) -> bool:
        """Open the path if it is a regular file. Anything else (a directory, a FIFO, a device,
        a symlink to one) is an error retried every poll: a directory is unreadable, opening a
        FIFO blocks until a writer comes and /dev/zero never ends and never has a newline. The
        type is checked with stat() before the open and with fstat() after it, and the open is
        O_NONBLOCK, so a FIFO swapped in between cannot block it either."""
        try:
            kind = _not_regular(os.stat(self.path).st_mode)
            if kind is None:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
                try:
                    kind = _not_regular(os.fstat(fd).st_mode)
                except OSError:
                    os.close(fd)
                    raise
                if kind is not None:
                    os.close(fd)
        except FileNotFoundError:
            self.set_state(SourceState.WAITING, f"{self.path} does not exist (yet)")
            return False
        except PermissionError:
            self.set_state(
                SourceState.ERROR,
                f"permission denied reading {self.path}: give the exporter's user read access",
                ErrorReason.PERMISSION,
            )
            return False
        except OSError as exc:
            self.set_state(
                SourceState.ERROR, f"cannot open {self.path}: {exc.strerror}", ErrorReason.OPEN
            )
            return False
        if kind is not None:
            what, reason = kind
            self.set_state(
                SourceState.ERROR,
                f"{self.path} is {what}, not a regular file: point --file at the server's log "
                "file (retrying)",
                reason,
            )
            return False
        st = os.fstat(fd)
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)
        # Only the file that was there at start may be skipped, and only to where it ended then:
        # a file that appears later (after a rotation or while the exporter waited) is new
        # output and is read from its start.
        start, self._start_point = self._start_point, None
        if self._first_open and start is not None and start[0] == self._ino:
            self._offset = min(start[1], st.st_size)
        else:
            self._offset = 0
        try:
            self._fingerprint = os.pread(fd, FINGERPRINT_SIZE, 0)
            self._mark = self._bytes_before(self._offset)
        except OSError:
            self._fingerprint = self._mark = b""  # EIO: the first read reports it
        self._unseen_possible = not self._fingerprint
        if self._history_floor_ns is None:
            self._history_floor_ns = time.time_ns() - 2 * 10**9
        for _, _, path in self._siblings():  # copies there now are history: never read
            head = _head(path) if self._rotated_name(path) else None
            if head:
                self._finished.append(head)
        self._tail = b""
        if not self._first_open:
            self.count_reopen()
        self._first_open = False
        self.set_state(SourceState.FOLLOWING, str(self.path))
        return True

    def _read_available(self, *, to_the_end: bool = False) -> None:
        """Pass on every complete line written since the last read. A partial last line stays
        in the file, to be read again with its end, unless `to_the_end` (the file was rotated
        away): then it goes to the line buffer, whose flush ends it. Every read is checked
        against the file's first bytes before it is passed on (see the module docstring)."""
        assert self._fd is not None
        buffer = self._read_buffer
        while True:
            try:
                size = os.preadv(self._fd, [buffer], self._offset)
                same = self._same_generation(buffer, size)
                if same is _Check.SHRUNK:
                    # Cut below the offset, first bytes kept: what was just read (if anything)
                    # is the new content past the cut, read again from the new end.
                    self._resume_after_shrink()
                    continue
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.set_state(
                    SourceState.ERROR, f"read error on {self.path}: {exc.strerror}",
                    ErrorReason.READ,
                )
                self._close()
                return
            if same is _Check.REWRITTEN:
                # Truncated since the last read: what was just read may already be the new
                # content at the old offset, so it is dropped and read again from the top.
                self._restart_from_top()
                continue
            if not size:
                return
            take = buffer.rfind(b"\n", 0, size) + 1
            if not take:
                if size < READ_SIZE and not to_the_end:
                    self._tail = bytes(memoryview(buffer)[:size])
                    return  # a partial last line: read it again once its newline is written
                take = size  # a line longer than the read buffer: the line buffer joins it
            self._offset += take
            self._tail = bytes(memoryview(buffer)[take:size]) if size < READ_SIZE else b""
            # The one copy of the data: the read buffer is reused, and staying in the CPU's
            # cache and mapped, it makes reads three times cheaper than a fresh buffer each.
            data = bytes(memoryview(buffer)[:take])
            self._mark = data[-MARK_SIZE:] if take >= MARK_SIZE else (self._mark + data)[
                -MARK_SIZE:]
            self._buffer.write(data)
            # Freed before the next read's copy, which then reuses its memory: held one
            # iteration longer, every copy got fresh pages (reads 40% slower).
            del data

    def _same_generation(self, data: bytearray, size: int) -> _Check:
        """Whether the file still holds, read *after* `data` (`size` bytes at the current
        offset), the first bytes it started with (else it was truncated and rewritten:
        REWRITTEN) and the bytes just before the offset (else it was cut below the offset,
        keeping its start: SHRUNK). Size alone misses a file refilled past the offset between
        two polls; first bytes alone miss `truncate -s 5000` of a bigger file."""
        assert self._fd is not None
        head = os.pread(self._fd, FINGERPRINT_SIZE, 0)
        known = len(self._fingerprint)
        if head[:known] != self._fingerprint:
            return _Check.REWRITTEN  # shorter than before (truncated) or other first bytes
        if len(head) < min(FINGERPRINT_SIZE, self._offset + size):
            # Shorter than what was just read: truncated after the read. Even with no
            # fingerprint yet (just after a restart), or the offset would carry into the
            # next generation and skip its start.
            return _Check.REWRITTEN
        overlap = min(size, len(head) - self._offset)
        if overlap > 0 and data[:overlap] != head[self._offset : self._offset + overlap]:
            return _Check.REWRITTEN  # the read saw other bytes than the file holds now
        if self._offset > FINGERPRINT_SIZE and self._bytes_before(self._offset) != self._mark:
            return _Check.SHRUNK  # shorter than the offset (or refilled past it since)
        if len(head) > known:
            if not known and self._unseen_possible:
                self._drain_gap(head)
            self._fingerprint = head  # the file grew: learn more of its first bytes
        return _Check.SAME

    def _bytes_before(self, offset: int) -> bytes:
        """The file's MARK_SIZE bytes before `offset` (fewer when it is shorter)."""
        assert self._fd is not None
        start = max(0, offset - MARK_SIZE)
        return os.pread(self._fd, offset - start, start)

    def _resume_after_shrink(self) -> None:
        """`truncate -s N` below the offset: the file keeps its first N bytes, which were read
        already, and the writer appends after them. Reading goes on at the file's end now:
        the kept bytes are not counted twice (re-reading from 0, as mtail does, would count a
        kept gigabyte again), and what was written between the cut and this poll is lost (at
        most one poll interval of output; where the cut was is not known). The partial last
        line read before the cut is passed on as a line, as at any truncation."""
        assert self._fd is not None
        if self._tail:
            self._buffer.write(self._tail)
            self._tail = b""
        self._buffer.flush()
        self._offset = os.fstat(self._fd).st_size
        self._mark = self._bytes_before(self._offset)
        self.count_reopen()

    def _restart_from_top(self) -> None:
        """copytruncate or `> file`: read the new content from 0. What the old content held
        past the last read is taken from the copy logrotate made of it, when one is there (and
        whole generations rotated away between two polls from the numbered copies after it);
        otherwise its partial last line is passed on as a line, as at a rotation."""
        drained = False
        for _ in range(RELISTS):
            copy = self._find_copy()
            if copy is None:
                break
            if self._drain_copy(copy, self._offset, expect=self._fingerprint):
                drained = True
                break
            # Renamed between the listing and the open (logrotate shifting .1 to .2): the
            # path holds another generation now; look again.
        if self._fingerprint:
            self._finished.append(self._fingerprint)
        if drained:
            self._tail = b""  # it was in the copy, with its end
            self._drain_unseen()
        elif self._tail:
            self._buffer.write(self._tail)
            self._tail = b""
        self._buffer.flush()
        self._offset = 0
        self._fingerprint = self._mark = b""
        self._unseen_possible = True
        self.count_reopen()

    def _siblings(self) -> list[tuple[int, int, str]]:
        """(mtime, size, path) of the regular files next to ours whose names start with its
        name, oldest first; our own file (same inode) left out."""
        name, found = self.path.name, []
        try:
            with os.scandir(self.path.parent) as entries:
                for entry in entries:
                    if entry.name == name or not entry.name.startswith(name):
                        continue
                    if len(found) >= MAX_COPY_CANDIDATES:
                        break
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) != self._ino:
                        found.append((st.st_mtime_ns, st.st_size, entry.path))
        except OSError:
            return []
        return sorted(found)

    def _rotated_name(self, path: str) -> bool:
        """sglang.log.1, sglang.log-20261201: a name logrotate gives a copy (not .gz, .lock)."""
        return (
            re.fullmatch(re.escape(self.path.name) + r"[.-]\d+", os.path.basename(path)) is not None
        )

    def _unseen_generations(self, live: bytes | None = None) -> list[tuple[str, bytes]]:
        """Copies with a rotated name whose first bytes are not known, oldest first, with
        those first bytes: content written, copied and truncated between two looks. One that
        starts like the live file is left out: copied, not yet truncated, it is read from the
        live file."""
        assert self._fd is not None
        if live is None:
            try:
                live = os.pread(self._fd, FINGERPRINT_SIZE, 0)
            except OSError:
                return []
        floor = self._history_floor_ns or 0
        unseen = []
        for mtime, _, path in self._siblings():
            if mtime < floor or not self._rotated_name(path):
                continue
            head = _head(path)
            if not head or (live and head.startswith(live)):
                continue
            if any(head.startswith(done) for done in self._finished):
                continue  # there at open, or read already (the copy just drained included)
            unseen.append((path, head))
        return unseen

    def _find_copy(self) -> str | None:
        """The copy copytruncate made of the content we were reading: the newest file next to
        ours, named like it, that starts with the old content's fingerprint and reaches past
        the offset read (a compressed copy cannot match)."""
        fingerprint = self._fingerprint
        if not fingerprint or self._fd is None:
            return None  # nothing of the old content was seen: no way to recognise its copy
        return next(
            (
                path
                for _, size, path in reversed(self._siblings())
                if size >= self._offset and _starts_with(path, fingerprint)
            ),
            None,
        )

    def _drain_gap(self, live: bytes) -> None:
        """The file had no fingerprint and now has content (`live`, its first bytes, as just
        read and about to be passed on): pass on the generations written, copied and
        truncated in between. A copy of `live` itself is what we are reading: not it."""
        self._unseen_possible = False
        self._drain_unseen(live)

    def _drain_unseen(self, live: bytes | None = None) -> None:
        """Pass on the generations never seen live, each whole. A copy is judged by its first
        bytes and then opened again by name; logrotate may shift the names in between (the
        judged .1 is .2 now, a copy of the live file is the new .1, which read as well counted
        a generation twice in benchmarks/exporter_copytruncate.py). So each open checks the
        first bytes again, and a miss lists the copies again."""
        for _ in range(RELISTS):
            missed = False
            for path, head in self._unseen_generations(live):
                self._buffer.flush()
                if not self._drain_copy(path, 0, expect=head, whole=True):
                    missed = True
            self._buffer.flush()
            if not missed:
                return

    def _drain_copy(self, copy: str, offset: int, *, expect: bytes, whole: bool = False) -> bool:
        """Pass on a copy's lines from `offset` to its end (its last line ends that content),
        if it still starts with `expect`; False (nothing read) when it does not. `whole`: a
        generation never seen live, remembered as read."""
        fd = _open_regular(copy)
        if fd is None:
            return False
        try:
            head = os.pread(fd, FINGERPRINT_SIZE, 0)
        except OSError:
            os.close(fd)
            return False
        if not head.startswith(expect):
            os.close(fd)
            return False
        if whole:
            self._finished.append(head)
        start = offset
        try:
            while True:
                data = os.pread(fd, READ_SIZE, offset)
                if not data:
                    break
                self._buffer.write(data)
                offset += len(data)
        except OSError:
            pass
        finally:
            os.close(fd)
        self.count_recovered(offset - start)
        return True

    def _check_rotation_and_truncation(self) -> None:
        if self._fd is None:
            return  # the read failed and closed it (reported): reopened next poll
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            # Renamed away or deleted: drain what the old file got between the read above and
            # the rename, then wait for the path to come back, reading it from its start.
            self._read_available(to_the_end=True)
            self._buffer.flush()
            self._close()
            self.set_state(SourceState.WAITING, f"{self.path} was removed or rotated away")
            return
        except OSError:
            return
        if (st.st_dev, st.st_ino) != self._ino:
            # Rotated by rename + create: drain the old file, then switch to the new one.
            self._read_available(to_the_end=True)
            self._buffer.flush()
            self._close()
            if self._open():
                self._read_available()

    def count_recovered(self, size: int) -> None:
        """Bytes taken from a rotated copy; kept for tests and the detail line."""
        self.recovered_bytes += size

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _not_regular(mode: int) -> tuple[str, ErrorReason] | None:
    """What a file of `mode` is, when it is not a regular file (None when it is)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory", ErrorReason.DIRECTORY
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)", ErrorReason.FIFO
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device", ErrorReason.DEVICE
    if stat.S_ISSOCK(mode):
        return "a socket", ErrorReason.SOCKET
    return "not a regular file", ErrorReason.OTHER_TYPE


def _open_regular(path: str) -> int | None:
    """A descriptor on `path` if it is a regular file now: a sibling swapped for a FIFO or a
    link to /dev/zero after it was listed must not block or feed endless bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _head(path: str) -> bytes | None:
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        return os.pread(fd, FINGERPRINT_SIZE, 0)
    except OSError:
        return None
    finally:
        os.close(fd)


def _starts_with(path: str, prefix: bytes) -> bool:
    fd = _open_regular(path)
    if fd is None:
        return False
    try:
        return os.pread(fd, len(prefix), 0) == prefix
    except OSError:
        return False
    finally:
        os.close(fd)
