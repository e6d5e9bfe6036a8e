"""The product path: specserve-launch reads the stand-in profile, runs the stand-in, tees its
output to the size-rotated log file the exporter follows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
import yaml

from tests.standin.helpers import DECODE_RE, FAST_ENV, free_port

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "standin-cpu.yaml"


def _profile(tmp_path: Path, port: int, log: Path) -> Path:
    doc = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    for section in ("target", "drafter"):
        # The copy lives elsewhere: make the fixture paths absolute.
        doc[section]["path"] = str((PROFILE.parent / doc[section]["path"]).resolve())
    doc["server"]["port"] = port
    doc["logging"] = {"file": str(log), "decode_log_interval": 10}
    doc["env"] = dict(FAST_ENV)
    path = tmp_path / "standin.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_launcher_execs_standin_and_tees_a_log_file(tmp_path: Path) -> None:
    # The console scripts sit next to the interpreter running the tests (the project venv).
    bindir = Path(sys.executable).parent
    assert (bindir / "specserve-launch").exists() and (bindir / "specserve-standin").exists()
    port, log = free_port(), tmp_path / "logs" / "sglang.log"
    profile = _profile(tmp_path, port, log)
    out = tmp_path / "stdout.txt"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [str(bindir / "specserve-launch"), str(profile)], stdout=sink,
            stderr=subprocess.STDOUT, env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        body = {
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 80, "ignore_eos": True,
        }  # fmt: skip
        assert requests.post(url + "/v1/chat/completions", json=body, timeout=30).ok
        deadline = time.monotonic() + 10
        decode: list[str] = []
        while time.monotonic() < deadline and not decode:
            text = log.read_text(encoding="utf-8") if log.exists() else ""
            decode = [line for line in text.splitlines() if DECODE_RE.match(line)]
            time.sleep(0.05)
        assert decode, f"no decode line in {log}"
        assert "accept len:" in decode[0]
        # The launcher forwards SIGTERM to the stand-in and exits with its status.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    printed = out.read_text(encoding="utf-8")
    assert "specserve-launch: profile standin-cpu, running:" in printed
    assert "specserve-standin" in printed and "--speculative-algorithm EAGLE3" in printed
