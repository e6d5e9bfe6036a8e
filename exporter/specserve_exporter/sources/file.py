"""Follow a file like `tail -F`, modelled on google/mtail's tailer.

Polling, not inotify: it works on every filesystem (overlay, NFS, bind mounts into containers) and
one stat() per interval is nothing next to SGLang's output rate. Handles: start at the end (default)
or the beginning; the file missing at start, deleted, or recreated; rotation by rename + create
(the old file is read to its end first); copytruncate and truncation (restart from offset 0); a
partial last line (held until its newline arrives, or passed on when the file is rotated away or
truncated); permission errors (reported, retried).

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
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections import deque
from pathlib import Path

from .base import LineBuffer, LineSink, Source, SourceState

# Large enough that per-read overhead vanishes, small enough that glibc serves each buffer from
# its heap: 4 MiB reads got fresh mmap'ed pages every time and spent more in page faults (0.15 s
# per 180 MB) than in copying (0.04 s at 512 KiB).
READ_SIZE = 512 * 1024
# Enough bytes to hold several log lines (timestamps, counters), so two generations of a file
# never share them; one pread of this size per read buffer costs nothing.
FINGERPRINT_SIZE = 1024
# Files next to ours a truncation looks through for logrotate's copy (sglang.log.1, ...).
MAX_COPY_CANDIDATES = 1024


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
                self.poll_once()
                self.stop_event.wait(self.poll_interval)
            self.poll_once()  # lines written just before a stop still count
        finally:
            self._close()
            self.set_state(SourceState.STOPPED)

    def poll_once(self) -> None:
        """One round: (re)open when needed, read what is new, notice rotation and truncation."""
        if self._fd is None and not self._open():
            return
        self._read_available()
        self._check_rotation_and_truncation()

    # --- internals -------------------------------------------------------------------------

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self.set_state(SourceState.WAITING, f"{self.path} does not exist (yet)")
            return False
        except PermissionError:
            self.set_state(
                SourceState.ERROR,
                f"permission denied reading {self.path}: give the exporter's user read access",
            )
            return False
        except OSError as exc:
            self.set_state(SourceState.ERROR, f"cannot open {self.path}: {exc.strerror}")
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
        except OSError:
            self._fingerprint = b""  # unreadable (a directory, EIO): the first read reports it
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
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.set_state(SourceState.ERROR, f"read error on {self.path}: {exc.strerror}")
                self._close()
                return
            if not same:
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
            self._buffer.write(bytes(memoryview(buffer)[:take]))

    def _same_generation(self, data: bytearray, size: int) -> bool:
        """Whether the file still starts with the bytes it started with, read *after* `data`
        (`size` bytes at the current offset): a truncation before that read changes them."""
        assert self._fd is not None
        head = os.pread(self._fd, FINGERPRINT_SIZE, 0)
        known = len(self._fingerprint)
        if head[:known] != self._fingerprint:
            return False  # shorter than before (truncated) or rewritten with other bytes
        if len(head) < min(FINGERPRINT_SIZE, self._offset + size):
            # Shorter than what was just read: truncated after the read. Even with no
            # fingerprint yet (just after a restart), or the offset would carry into the
            # next generation and skip its start.
            return False
        overlap = min(size, len(head) - self._offset)
        if overlap > 0 and data[:overlap] != head[self._offset : self._offset + overlap]:
            return False  # the read saw other bytes than the file holds now: truncated between
        if len(head) > known:
            if not known and self._unseen_possible:
                self._drain_gap(head)
            self._fingerprint = head  # the file grew: learn more of its first bytes
        return True

    def _restart_from_top(self) -> None:
        """copytruncate or `> file`: read the new content from 0. What the old content held
        past the last read is taken from the copy logrotate made of it, when one is there (and
        whole generations rotated away between two polls from the numbered copies after it);
        otherwise its partial last line is passed on as a line, as at a rotation."""
        copies = self._find_copies()
        if self._fingerprint:
            self._finished.append(self._fingerprint)
        if copies:
            self._drain_copy(copies[0], self._offset)
            self._tail = b""  # it was in the copy, with its end
            for later in copies[1:]:
                self._buffer.flush()
                self._drain_copy(later, 0, whole=True)
        elif self._tail:
            self._buffer.write(self._tail)
            self._tail = b""
        self._buffer.flush()
        self._offset = 0
        self._fingerprint = b""
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

    def _unseen_generations(
        self, siblings: list[tuple[int, int, str]], skip: str = "", live: bytes | None = None
    ) -> list[str]:
        """Copies with a rotated name whose first bytes are not known, oldest first: content
        written, copied and truncated between two looks. One that starts like the live file
        is left out: copied, not yet truncated, it is read from the live file."""
        assert self._fd is not None
        if live is None:
            try:
                live = os.pread(self._fd, FINGERPRINT_SIZE, 0)
            except OSError:
                return []
        floor = self._history_floor_ns or 0
        unseen = []
        for mtime, _, path in siblings:
            if path == skip or mtime < floor or not self._rotated_name(path):
                continue
            head = _head(path)
            if not head or (live and head.startswith(live)):
                continue
            if any(head.startswith(done) for done in self._finished):
                continue  # there at open, or read already
            unseen.append(path)
        return unseen

    def _find_copies(self) -> list[str]:
        """The copy copytruncate made of the content we were reading, then the generations
        copied after it that we never saw, oldest first. The copy is the newest file next to
        ours, named like it, that starts with the old content's fingerprint and reaches past
        the offset read (a compressed copy cannot match)."""
        fingerprint = self._fingerprint
        if not fingerprint or self._fd is None:
            return []  # nothing of the old content was seen: no way to recognise its copy
        siblings = self._siblings()
        copy = next(
            (
                path
                for _, size, path in reversed(siblings)
                if size >= self._offset and _starts_with(path, fingerprint)
            ),
            None,
        )
        if copy is None:
            return []
        self._finished.append(fingerprint)
        return [copy, *self._unseen_generations(siblings, skip=copy)]

    def _drain_gap(self, live: bytes) -> None:
        """The file had no fingerprint and now has content (`live`, its first bytes, as just
        read and about to be passed on): pass on the generations written, copied and
        truncated in between. A copy of `live` itself is what we are reading: not it."""
        self._unseen_possible = False
        for path in self._unseen_generations(self._siblings(), live=live):
            self._drain_copy(path, 0, whole=True)
            self._buffer.flush()

    def _drain_copy(self, copy: str, offset: int, *, whole: bool = False) -> None:
        """Pass on a copy's lines from `offset` to its end (its last line ends that content).
        `whole`: a generation never seen live, remembered as read."""
        try:
            fd = os.open(copy, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        if whole:
            with contextlib.suppress(OSError):
                self._finished.append(os.pread(fd, FINGERPRINT_SIZE, 0))
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

    def _check_rotation_and_truncation(self) -> None:
        assert self._fd is not None
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


def _head(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.pread(fd, FINGERPRINT_SIZE, 0)
    except OSError:
        return None
    finally:
        os.close(fd)


def _starts_with(path: str, prefix: bytes) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.pread(fd, len(prefix), 0) == prefix
    except OSError:
        return False
    finally:
        os.close(fd)
