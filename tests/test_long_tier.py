"""The long tier (tests/conftest.py) stays small and each of its tests names a cheaper test that
CI runs for the same mechanism; that test must exist."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _long_marks() -> dict[str, str]:
    """test node id -> the counterpart its `long` mark names."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call) and ast.unparse(decorator.func)
                        == "pytest.mark.long"):  # fmt: skip
                    assert len(decorator.args) == 1, f"{path}::{node.name}: long(counterpart)"
                    counterpart = ast.literal_eval(decorator.args[0])
                    found[f"{path.relative_to(ROOT)}::{node.name}"] = counterpart
    return found


def _defines(node_id: str) -> bool:
    file, name = node_id.split("::")
    path = ROOT / file
    return path.is_file() and any(
        isinstance(node, ast.FunctionDef) and node.name == name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def test_every_long_test_names_a_counterpart_ci_runs() -> None:
    marks = _long_marks()
    assert marks, "no long tier found: the scan is broken"
    for test, counterpart in marks.items():
        assert _defines(counterpart), f"{test}: counterpart {counterpart} does not exist"
        assert counterpart not in marks, f"{test}: counterpart {counterpart} is long itself"


def test_the_long_tier_is_listed_in_the_docs() -> None:
    docs = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    for test in _long_marks():
        assert f"`{test}`" in docs, f"{test} is long but docs/testing.md does not list it"


def test_a_run_under_xdist_says_how_many_long_tests_it_left_out() -> None:
    # Deselection happens in xdist's workers; the controller must still print the count. The
    # -k matches nothing, so nothing runs: only collection, deselection and the summary.
    file = "tests/ansible/test_multinode.py"
    expected = sum(1 for test in _long_marks() if test.startswith(f"{file}::"))
    assert expected, f"{file} has no long test to count"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", file,
         "-k", "no_test_is_called_this"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert f"\n{expected} long-tier tests not run (deselected)" in run.stdout, run.stdout[-3000:]
