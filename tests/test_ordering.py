"""The run's file order (tests/ordering.py): heaviest measured file first, each file's tests
together, and figures read from a real pytest JUnit report or output."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.ordering import (
    ROOT,
    heaviest_files_first,
    load_seconds,
    seconds_from_junit,
    seconds_from_progress,
)


@dataclass
class _Item:
    nodeid: str


def test_heaviest_file_first_and_each_file_kept_whole_and_in_order() -> None:
    items = [_Item(n) for n in ("a.py::1", "a.py::2", "b.py::1", "c.py::1", "c.py::2", "d.py::1")]
    ordered = heaviest_files_first(items, {"c.py": 300.0, "a.py": 20.0})
    assert [i.nodeid for i in ordered] == [
        "c.py::1", "c.py::2", "a.py::1", "a.py::2", "b.py::1", "d.py::1"]  # fmt: skip


def test_figures_come_from_a_real_junit_report_and_the_runs_output(tmp_path: Path) -> None:
    junit = tmp_path / "run.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
         "tests/test_ordering.py", "-k", "real_collection"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    seconds = seconds_from_junit(junit)
    assert list(seconds) == ["tests/test_ordering.py"], seconds
    assert seconds["tests/test_ordering.py"] > 0
    # tests/progress.py's line for the finished file, in the same output a CI run keeps.
    assert list(seconds_from_progress(run.stdout)) == ["tests/test_ordering.py"], run.stdout


def test_the_recorded_figures_name_test_files_that_exist() -> None:
    seconds = load_seconds()
    assert len(seconds) > 50, "tests/file_seconds.json is missing or nearly empty"
    missing = [file for file in seconds if not (ROOT / file).is_file()]
    assert not missing, f"refresh tests/file_seconds.json (scripts/test-file-seconds): {missing}"


def test_a_real_collection_puts_the_heavier_file_first() -> None:
    seconds = load_seconds()
    light, heavy = sorted(seconds, key=seconds.__getitem__)[0], max(seconds, key=seconds.get)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         light, heavy],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    assert ids and ids[0].startswith(f"{heavy}::"), run.stdout[-2000:]
    assert ids[-1].startswith(f"{light}::"), run.stdout[-2000:]
