"""Read a byte stream (stdin) to its end."""

from __future__ import annotations

import os
from typing import BinaryIO

from .base import LineBuffer, LineSink, Source, SourceState


class StreamSource(Source):
    kind = "stdin"

    def __init__(self, stream: BinaryIO, sink: LineSink) -> None:
        super().__init__()
        self._stream = stream
        self._buffer = LineBuffer(sink)

    def run(self) -> None:
        self.set_state(SourceState.FOLLOWING, "standard input")
        fd = self._stream.fileno()
        try:
            while not self.stop_event.is_set():
                # os.read returns what is there (no waiting for a full buffer), so lines piped
                # in one by one are seen at once.
                data = os.read(fd, 1024 * 1024)
                if not data:
                    break
                self._buffer.write(data)
        finally:
            self._buffer.flush()
            self.set_state(SourceState.STOPPED, "end of input")
