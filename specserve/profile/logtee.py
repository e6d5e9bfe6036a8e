"""Copy the server's output to stdout and to a size-rotated log file for the exporter.

Runs in a small child process forked by the launcher: the launcher then execs SGLang with its
stdout/stderr on the pipe, so SGLang keeps the launcher's PID (and receives its signals) while
this child reads the pipe until every writer has closed it.

The tee is also where secrets are removed: SGLang logs its resolved arguments, API key
included (`server_args={... 'api_key': '...' ...}`), so every byte it copies to stdout or to the
file first passes through a StreamRedactor built from the secrets the launcher injected.
"""

from __future__ import annotations

import logging
import os
import signal
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import BinaryIO

from specserve.secrets import Redactor

CHUNK = 65536


def _file_logger(path: Path, max_bytes: int, backup_count: int) -> logging.Logger:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Rotation by rename (sglang.log -> sglang.log.1 ...), the pattern log tailers detect.
    handler = RotatingFileHandler(
        path,
        maxBytes=max_bytes,
        backupCount=backup_count,
        encoding="utf-8",
        errors="backslashreplace",
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(f"specserve.logtee.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = [handler]
    return logger


def copy_stream(
    source: BinaryIO,
    sink: BinaryIO,
    path: Path | None,
    max_bytes: int,
    backup_count: int,
    secrets: tuple[str, ...] = (),
) -> None:
    """Copy `source` to `sink` as it arrives and line by line to the rotated file, until EOF.

    With `secrets`, each of their forms is replaced by the marker in both copies; `path` None
    copies to `sink` only (a server with secrets but no log file still gets the redaction).
    """
    logger = _file_logger(path, max_bytes, backup_count) if path is not None else None
    redactor = Redactor(secrets).stream()
    pending = b""
    while True:
        chunk = source.read1(CHUNK) if hasattr(source, "read1") else source.read(CHUNK)
        if not chunk:
            break
        pending = _emit(redactor.feed(chunk), sink, logger, pending)
    pending = _emit(redactor.close(), sink, logger, pending)
    if logger is None:
        return
    if pending:
        logger.info(pending.decode("utf-8", errors="backslashreplace"))
    for handler in logger.handlers:
        handler.close()


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


def run_child(
    read_fd: int, path: Path | None, max_bytes: int, backup_count: int, secrets: tuple[str, ...]
) -> None:
    """Body of the forked tee process; never returns."""
    # Shutdown signals are meant for the server; the tee must outlive it to record its last
    # lines, and stops on EOF once the server and its children have exited.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    code = 0
    try:
        with (
            os.fdopen(read_fd, "rb", buffering=0) as source,
            os.fdopen(os.dup(1), "wb", buffering=0) as sink,
        ):
            copy_stream(source, sink, path, max_bytes, backup_count, secrets)
    except Exception as exc:  # a crash here must not take the server's output down silently
        os.write(2, f"specserve-launch: log tee failed: {exc}\n".encode())
        code = 1
    os._exit(code)


def start_tee(
    path: Path | None, max_bytes: int, backup_count: int, secrets: tuple[str, ...] = ()
) -> int:
    """Fork the tee child and point this process's stdout/stderr at it; returns the child PID.

    `path` None: no log file, the tee only redacts `secrets` from what reaches stdout.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write_fd)
        run_child(read_fd, path, max_bytes, backup_count, secrets)
    os.close(read_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    return pid
