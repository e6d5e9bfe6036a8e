"""The chunk scanner built with AddressSanitizer and UndefinedBehaviorSanitizer, running the
scanner's and the fast path's property tests: a read past a line or a chunk, or undefined
arithmetic, fails here instead of corrupting a production exporter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "exporter" / "specserve_exporter"


def _runtime(name: str) -> str:
    path = subprocess.run(
        ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert os.path.isabs(path), f"gcc has no {name}: install gcc (scripts/setup/system-packages.sh)"
    return path


@pytest.mark.slow
def test_scanner_is_memory_safe_under_sanitizers(tmp_path: Path) -> None:
    assert shutil.which("gcc"), "gcc is needed: scripts/setup/system-packages.sh installs it"
    package = tmp_path / "specserve_exporter"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-Wall", "-Wextra",
         "-Werror", f"-I{sysconfig.get_paths()['include']}", str(package / "_scan.c"),
         "-o", str(package / "_scan.abi3.so")],
        check=True,
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "LD_PRELOAD": f"{_runtime('libasan.so')} {_runtime('libubsan.so')}",
        # CPython itself "leaks" at exit. Reports go to files: pytest's capture would lose them.
        "ASAN_OPTIONS": f"detect_leaks=0:log_path={tmp_path / 'asan'}",
        "UBSAN_OPTIONS": f"print_stacktrace=1:log_path={tmp_path / 'ubsan'}",
        # Every object from malloc, so a read past a bytes object leaves its allocation.
        "PYTHONMALLOC": "malloc",
    }
    where = subprocess.run(
        [sys.executable, "-c", "import specserve_exporter._scan as s; print(s.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert where == str(package / "_scan.abi3.so"), where
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/exporter/test_scan.py", "tests/exporter/test_ingest.py",
         "tests/exporter/test_fields.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    reports = "".join(p.read_text() for p in sorted(tmp_path.glob("*san.*")))
    assert run.returncode == 0 and not reports, reports[:4000] + run.stdout[-4000:]
    assert "passed" in run.stdout and "failed" not in run.stdout
