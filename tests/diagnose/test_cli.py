"""`specserve diagnose` says why it cannot read its evidence, and exits 2, never 0."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

SPECSERVE = Path(sys.executable).parent / "specserve"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SPECSERVE), "diagnose", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_prometheus_unreachable_is_exit_2_naming_the_url_and_the_fix() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    done = _run("--prometheus", url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot reach Prometheus at {url}" in done.stderr
    assert "--prometheus" in done.stderr and done.stdout == ""


def test_a_wrong_overrides_file_is_exit_2_naming_the_alert(tmp_path: Path) -> None:
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("alerts: {SpecDecodeBelowBaselin: {for: 5m}}\n", encoding="utf-8")
    done = _run("--prometheus", f"http://127.0.0.1:{_closed_port()}", "--overrides",
                str(overrides))  # fmt: skip
    assert done.returncode == 2
    assert "SpecDecodeBelowBaselin" in done.stderr and "SpecDecodeBelowBaseline" in done.stderr
