"""A line per finished test file, with its seconds and the run's: CI keeps only the output of a
run, and a run stopped at its time limit prints no --durations table, so these lines are what
says where the time went.

--dist loadfile runs each file whole on one worker, so a worker's report for another file means
its previous file is done: it ended at its own last report, and the next file began there. The
line comes when the worker's next file reports (its first test's setup done), or at the end of
the session; the figures are the file's own either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.ordering import file_of


@dataclass
class _Open:
    file: str
    started: float
    last: float  # its latest report


class FileProgress:
    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._start = time.monotonic()
        self._open: dict[str, _Open] = {}  # worker id (or "main") -> the file it runs

    def _say(self, done: _Open) -> None:
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            # On a line of its own: -q's progress dots leave their line open.
            reporter.write(f"\n[{done.last - self._start:5.0f} s] {done.file}: "
                           f"{done.last - done.started:.0f} s\n")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker = getattr(getattr(report, "node", None), "gateway", None)
        key = getattr(worker, "id", "main")
        file, now = file_of(report.nodeid), time.monotonic()
        current = self._open.get(key)
        if current is not None and current.file == file:
            current.last = now
            return
        if current is not None:
            self._say(current)
        started = current.last if current is not None else self._start
        self._open[key] = _Open(file, started, now)

    def pytest_sessionfinish(self) -> None:
        for still_open in self._open.values():
            self._say(still_open)
        self._open.clear()


def register(config: pytest.Config) -> None:
    """The xdist controller, or a run without workers, reports; workers do not."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileProgress(config), "specserve-file-progress")
