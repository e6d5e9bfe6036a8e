"""tests/zipimport_cache: the tests' bytecode cache for zip imports must run exactly the code its
source compiles to, whatever archive it comes from, and never a stale one."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import ZIPIMPORT_CACHE

PROGRAM = """
import sys
sys.path.insert(0, sys.argv[1])
import pkg.mod
print("value", pkg.mod.VALUE)
pkg.mod.boom()
"""


def _archive(path: Path, value: int) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        source = f"VALUE = {value}\n\ndef boom():\n    raise RuntimeError('boom')\n"
        archive.writestr("pkg/mod.py", source)
    return path


def _run(archive: Path, cache: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPECSERVE_ZIPIMPORT_CACHE"}
    env["PYTHONPATH"] = str(ZIPIMPORT_CACHE)
    if cache is not None:
        env["SPECSERVE_ZIPIMPORT_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-c", PROGRAM, str(archive)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_cached_code_is_the_sources_own_and_names_the_archive_it_came_from(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(_archive(tmp_path / "a.zip", 42), cache)
    assert "value 42" in first.stdout, first.stderr
    entries = sorted(cache.iterdir())
    assert len(entries) == 2  # pkg/__init__.py and pkg/mod.py

    # The same sources in another archive: served from the cache, and the traceback names the
    # archive this run imported from, not the one that filled the cache.
    second = _run(_archive(tmp_path / "b.zip", 42), cache)
    assert "value 42" in second.stdout, second.stderr
    assert sorted(cache.iterdir()) == entries
    assert f"{tmp_path / 'b.zip'}{os.sep}pkg{os.sep}mod.py" in second.stderr
    assert "a.zip" not in second.stderr

    # Changed source at the same path: compiled again, never the stale code.
    third = _run(_archive(tmp_path / "c.zip", 7), cache)
    assert "value 7" in third.stdout, third.stderr
    assert len(list(cache.iterdir())) == 3


def test_without_the_variable_nothing_is_cached(tmp_path: Path) -> None:
    done = _run(_archive(tmp_path / "a.zip", 42), None)
    assert "value 42" in done.stdout and "RuntimeError: boom" in done.stderr
    assert not (tmp_path / "cache").exists()
