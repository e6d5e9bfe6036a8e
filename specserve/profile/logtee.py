"""Copy the server's output to stdout and to a size-rotated log file for the exporter.

Runs in a small child process forked by the launcher: the launcher then execs SGLang with its
stdout/stderr on the pipe, so SGLang keeps the launcher's PID (and receives its signals) while
this child reads the pipe until every writer has closed it.
"""

from __future__ import annotations

import logging
import os
import signal
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import BinaryIO

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
    source: BinaryIO, sink: BinaryIO, path: Path, max_bytes: int, backup_count: int
) -> None:
    """Copy `source` to `sink` as it arrives and line by line to the rotated file, until EOF."""
    logger = _file_logger(path, max_bytes, backup_count)
    pending = b""
    while True:
        chunk = source.read1(CHUNK) if hasattr(source, "read1") else source.read(CHUNK)
        if not chunk:
            break
        try:
            sink.write(chunk)
            sink.flush()
        except OSError:
            pass  # stdout gone (closed terminal): keep feeding the file for the exporter
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            logger.info(line.decode("utf-8", errors="backslashreplace"))
    if pending:
        logger.info(pending.decode("utf-8", errors="backslashreplace"))
    for handler in logger.handlers:
        handler.close()


def run_child(read_fd: int, path: Path, max_bytes: int, backup_count: int) -> None:
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
            copy_stream(source, sink, path, max_bytes, backup_count)
    except Exception as exc:  # a crash here must not take the server's output down silently
        os.write(2, f"specserve-launch: log tee failed: {exc}\n".encode())
        code = 1
    os._exit(code)


def start_tee(path: Path, max_bytes: int, backup_count: int) -> int:
    """Fork the tee child and point this process's stdout/stderr at it; returns the child PID."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write_fd)
        run_child(read_fd, path, max_bytes, backup_count)
    os.close(read_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    return pid
