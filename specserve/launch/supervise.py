"""Run the server as this process's child, read its output, forward signals, reap, pass its exit on.

Why not exec in place: SGLang's `launch_server` ends with `kill_process_tree(os.getpid(),
include_parent=False)`, which SIGKILLs every descendant of SGLang (psutil children(recursive=
True)). A tee forked before the exec is such a descendant and dies before it copies SGLang's
last traceback; a double-forked tee would be reparented to PID 1, which in a container is
SGLang itself, so it is a descendant again. Only the tee's *parent* is out of reach, so the
launcher stays the parent, like tini:

- SGLang runs in its own process group: with SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION its scheduler
  does `os.killpg(os.getpgrp(), SIGKILL)`, which must not reach the launcher.
- SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 are forwarded to SGLang's PID only, as
  `docker stop` / the kubelet delivered them when SGLang was PID 1 (SGLang's TokenizerManager
  drains on SIGTERM and tears down its own children).
- Zombies are reaped (orphans reparent to the launcher when it is PID 1).
- The output pipe is read until EOF, or at most DRAIN_S after SGLang exits when something it
  left behind still holds the pipe; the exit status is SGLang's (128+N when killed by signal N).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

from specserve.launch.logtee import CHUNK, Tee

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
DRAIN_S = 3.0  # after SGLang exits; well inside docker stop's and the kubelet's grace periods
POLL_S = 0.25  # how late a zombie is reaped at worst while output is quiet


class _Forwarder:
    """Signal handlers that pass each signal to the child; those before it exists are queued."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self._queued: list[int] = []
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def started(self, pid: int) -> None:
        self.pid = pid
        for sig in self._queued:
            self._send(sig)
        self._queued.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.pid is None:
            self._queued.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128+N for death by signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _reap(main: int, block: bool) -> int | None:
    """Reap every exited child; the main child's exit code once it is among them."""
    result = None
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block and result is None else os.WNOHANG)
        except ChildProcessError:
            return result
        if pid == 0:
            return result
        if pid == main:
            result = exit_code(status)


def run(argv: Sequence[str], env: Mapping[str, str], tee: Tee | None) -> int:
    """Start `argv` and supervise it; returns its exit code. Raises OSError if it cannot start.

    With `tee`, the child's stdout and stderr go into a pipe this process copies through the
    tee; without, the child writes to this process's stdout/stderr directly.
    """
    read_fd, write_fd = os.pipe() if tee is not None else (-1, -1)
    forwarder = _Forwarder()
    forwarder.install()
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=write_fd if tee is not None else None,
            stderr=write_fd if tee is not None else None,
            process_group=0,
        )
    except OSError:
        forwarder.restore()
        if tee is not None:
            os.close(read_fd)
            os.close(write_fd)
        raise
    if tee is not None:
        os.close(write_fd)  # EOF once the child and everything it started are gone
    forwarder.started(proc.pid)
    code = _pump(read_fd, tee, proc.pid) if tee is not None else None
    if code is None:
        code = _reap(proc.pid, block=True)
    forwarder.pid = None  # its PID may be reused from here on
    proc.returncode = code  # reaped here, not by Popen.wait
    return code if code is not None else 1


def _pump(read_fd: int, tee: Tee, main: int) -> int | None:
    """Copy the pipe through the tee until EOF or DRAIN_S after the main child's exit."""
    code: int | None = None
    deadline: float | None = None
    broken = False
    while True:
        timeout = POLL_S if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([read_fd], [], [], timeout)
        if ready:
            data = os.read(read_fd, CHUNK)
            if not data:
                break
            if not broken:
                broken = not _call(tee, tee.feed, data)
            elif not tee.redacts:
                _raw(data)  # the tee failed; nothing to redact, so stdout still gets it all
            # else: the tee failed with secrets to remove: read and drop, never block the server
        elif not broken:
            broken = not _call(tee, tee.tick)
        if code is None:
            code = _reap(main, block=False)
            if code is not None:
                deadline = time.monotonic() + DRAIN_S
        else:
            _reap(main, block=False)  # orphans SGLang left behind, when this is PID 1
        if deadline is not None and time.monotonic() >= deadline:
            break
    os.close(read_fd)
    if not broken:
        with contextlib.suppress(Exception):
            tee.close()
    return code


def _call(tee: Tee, step: Callable[..., None], *args: bytes) -> bool:
    """Run one tee step; False (and one stderr line) if the tee failed."""
    try:
        step(*args)
    except Exception as exc:  # the tee must never leave the server's pipe unread
        action = "dropping the output" if tee.redacts else "copying the output to stdout as is"
        # The type only: an exception's text could quote the data it failed on.
        sys.stderr.write(f"specserve-launch: log tee failed ({type(exc).__name__}); {action}\n")
        sys.stderr.flush()
        if not tee.redacts and args:
            _raw(args[0])
        return False
    return True


def _raw(data: bytes) -> None:
    view = memoryview(data)
    with contextlib.suppress(OSError):
        while view:
            view = view[os.write(1, view) :]
