"""Heaviest test files first, so the run does not end waiting on one long file.

scripts/test runs whole files per xdist worker (--dist loadfile). By default xdist orders the
files by how many tests they hold, so the Ansible scenario files, with few tests that take
minutes each (tests/ansible/test_tune.py about 19 min), started last and the run ended with
one worker busy and the others idle. scripts/test passes --no-loadscope-reorder, and this
module sorts the files by their measured seconds, heaviest first: longest processing time
first. The figures are in tests/file_seconds.json, written by `scripts/test-file-seconds` from
a run's JUnit XML or its output (tests/progress.py's line per finished file). Stale figures
change only the order, never what runs; a file without a figure runs after the measured ones,
in collection order.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parents[1]
SECONDS_FILE = ROOT / "tests" / "file_seconds.json"


class _Item(Protocol):
    nodeid: str


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load_seconds(path: Path = SECONDS_FILE) -> dict[str, float]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {str(name): float(seconds) for name, seconds in data.items()}


def heaviest_files_first(items: Sequence[_Item], seconds: dict[str, float]) -> list[_Item]:
    # A stable sort: each file's tests stay together and in their order, and files of equal
    # (or no) figure keep the collection's order.
    return sorted(items, key=lambda item: -seconds.get(file_of(item.nodeid), 0.0))


def _file_of_classname(classname: str) -> str | None:
    """tests.ansible.test_tune (or ...test_x.TestClass) -> tests/ansible/test_tune.py."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (ROOT / candidate).is_file():
            return candidate
    return None


def seconds_from_junit(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown: JUnit's testcase time) of one run."""
    totals: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        file = _file_of_classname(case.get("classname", ""))
        if file is not None:
            totals[file] = totals.get(file, 0.0) + float(case.get("time") or 0.0)
    return {file: round(total, 1) for file, total in sorted(totals.items())}


_PROGRESS_LINE = re.compile(r"^\[\s*\d+ s\] (?P<file>tests/\S+\.py): (?P<seconds>\d+) s$")


def seconds_from_progress(output: str) -> dict[str, float]:
    """Seconds per test file from a run's output: tests/progress.py's `[ 812 s] FILE: 95 s`."""
    totals: dict[str, float] = {}
    for line in output.splitlines():
        match = _PROGRESS_LINE.match(line.strip())
        if match and (ROOT / match["file"]).is_file():
            totals[match["file"]] = float(match["seconds"])
    return dict(sorted(totals.items()))
