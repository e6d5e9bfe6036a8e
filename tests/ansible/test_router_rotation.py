"""The router's rotation without Docker: the specserve_rotation module (run as Ansible runs it,
a child process with its arguments file) and the router's launcher (files/launch.sh, run by the
POSIX shell with a stand-in for the image's entrypoint that prints its argv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "ansible" / "plugins" / "modules" / "specserve_rotation.py"
LAUNCHER = ROOT / "ansible" / "roles" / "router" / "files" / "launch.sh"
A, B, C = "http://10.0.0.1:30001", "http://10.0.0.2:30001", "https://node3.internal:443"


def rotation(path: Path, check: bool = False, **args: Any) -> dict[str, Any]:
    """Run the module on `path` with `args`; its JSON result."""
    params: dict[str, Any] = {"path": str(path), **args}
    if check:
        params["_ansible_check_mode"] = True
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as args_file:
        json.dump({"ANSIBLE_MODULE_ARGS": params}, args_file)
        args_file.flush()
        proc = subprocess.run([sys.executable, str(MODULE), args_file.name],
                              capture_output=True, text=True, check=False)
    return dict(json.loads(proc.stdout))


def urls(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


def test_a_missing_rotation_is_seeded_then_changed_in_place(tmp_path: Path) -> None:
    path = tmp_path / "workers"
    first = rotation(path, seed=[A, B])
    assert first["changed"] and first["created"] and first["rotation"] == [A, B]
    assert urls(path) == [A, B]
    # The seed is for a missing file only.
    again = rotation(path, seed=[C])
    assert not again["changed"] and not again["created"] and again["rotation"] == [A, B]
    out = rotation(path, absent=[A])
    assert out["changed"] and urls(path) == [B]
    back = rotation(path, present=[A, B])
    assert back["changed"] and urls(path) == [B, A]
    assert not rotation(path, present=[A])["changed"]
    assert not rotation(path, absent=[C])["changed"]


def test_nodes_gone_from_the_inventory_leave_the_rotation(tmp_path: Path) -> None:
    path = tmp_path / "workers"
    rotation(path, seed=[A, B, C])
    result = rotation(path, keep_only=[A, C])
    assert result["changed"] and result["dropped"] == [B] and urls(path) == [A, C]


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "workers"
    rotation(path, seed=[A])
    result = rotation(path, check=True, present=[B])
    assert result["changed"] and result["rotation"] == [A, B] and urls(path) == [A]
    missing = tmp_path / "not-yet" / "workers"
    result = rotation(missing, check=True, seed=[A])
    assert result["changed"] and result["created"] and not missing.parent.exists()


def test_a_malformed_line_is_counted_and_dropped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "workers"
    path.write_text(f"# comment\n{A}\nnot a url\n  {B}  \nhttp://x y:1\n", encoding="utf-8")
    result = rotation(path)
    assert result["malformed"] == 2 and result["rotation"] == [A, B] and result["changed"]
    assert "2 line(s) that are not a worker URL" in json.dumps(result["warnings"])
    assert urls(path) == [A, B]


def test_a_wrong_url_is_refused_naming_it_and_the_fix(tmp_path: Path) -> None:
    result = rotation(tmp_path / "workers", present=["10.0.0.1:30001"])
    assert result["failed"]
    assert result["msg"] == ("not a worker URL: 10.0.0.1:30001; want http://HOST:PORT "
                             "(router_worker_url of each node)")
    assert not (tmp_path / "workers").exists()


def test_concurrent_changes_are_all_kept(tmp_path: Path) -> None:
    # Two plays on one router host: each read-modify-write holds the directory's lock.
    path = tmp_path / "workers"
    rotation(path, seed=[])
    new = [f"http://10.0.1.{i}:30001" for i in range(24)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda url: rotation(path, present=[url]), new))
    assert all(r["changed"] for r in results)
    assert sorted(urls(path)) == sorted(new)


def launch(tmp_path: Path, text: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The launcher with the rotation `text` (None: no file), the image's entrypoint replaced
    by a script that prints each argument on a line."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    entry = bindir / "specserve-router"
    entry.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', encoding="utf-8")
    entry.chmod(0o755)
    file = tmp_path / "workers"
    if text is not None:
        file.write_text(text, encoding="utf-8")
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "SPECSERVE_ROUTER_ROTATION_FILE": str(file)}
    shell = shutil.which("sh")
    assert shell, "no POSIX shell"
    return subprocess.run([shell, str(LAUNCHER), *args], capture_output=True, text=True,
                          env=env, check=False)


def test_the_launcher_starts_the_router_with_the_rotation(tmp_path: Path) -> None:
    proc = launch(tmp_path, f"# the rotation\n{A}\r\n\n  {C}\nbad\n", "--port", "30080")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["--port", "30080", "--worker-urls", A, C]
    assert "2 worker(s) from the rotation" in proc.stderr
    assert "1 malformed line(s) skipped" in proc.stderr


def test_an_empty_rotation_starts_the_router_with_no_worker(tmp_path: Path) -> None:
    proc = launch(tmp_path, "# nobody in yet\n", "--port", "30080")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["--port", "30080"]


def test_no_rotation_is_a_one_line_error(tmp_path: Path) -> None:
    proc = launch(tmp_path, None, "--port", "30080")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "is not readable" in proc.stderr and "re-run the deploy" in proc.stderr


@pytest.mark.parametrize("text", [f"{A}", f"{A}\n"])
def test_the_last_line_without_a_newline_counts(tmp_path: Path, text: str) -> None:
    proc = launch(tmp_path, text)
    assert proc.stdout.splitlines() == ["--worker-urls", A]


def test_the_launcher_and_the_module_agree_on_what_a_url_is(tmp_path: Path) -> None:
    lines = [A, C, "http://[::1]:8000", "ftp://h:1", "http://h", "http://h:port", "http://a/b:1"]
    proc = launch(tmp_path, "\n".join(lines) + "\n")
    by_launcher = [line for line in proc.stdout.splitlines() if line != "--worker-urls"]
    path = tmp_path / "module" / "workers"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert rotation(path)["rotation"] == by_launcher == [A, C, "http://[::1]:8000"]
