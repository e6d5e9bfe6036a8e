"""specserve-launch with secrets: the server gets the real key, its output only the marker (with
or without a log file), and a secret the tee could not redact is refused before exec."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from specserve.secrets import MARKER

KEY = "sk-launch-5e6f7a8b9c"
# Prints what SGLang prints (its arguments, key included) and records its real argv.
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, sys
    argv = sys.argv[1:]
    key = argv[argv.index("--api-key") + 1]
    print(f"server_args={{'api_key': {key!r}, 'x': 1}}", flush=True)
    print(json.dumps({"launch_command": " ".join(argv)}), file=sys.stderr, flush=True)
    print("hf " + os.environ.get("HF_TOKEN", "-"), flush=True)
    with open(os.environ["FAKE_ARGV_FILE"], "w") as fh:
        fh.write(" ".join(argv))
    """
)


def _profile(
    tmp: Path, key_file: Path, log: Path | None = None, extra: list[str] | None = None
) -> Path:
    script = tmp / "fake_sglang.py"
    script.write_text(FAKE_SERVER)
    doc: dict[str, object] = {
        "version": 1, "name": "fake", "target": {"path": str(tmp / "no-model")},
        "parallelism": {"tp": 1}, "gpu": {"count": 0},
        "server": {"launch_command": [sys.executable, str(script)],
                   "api_key": {"file": str(key_file)}, "extra_args": extra or []},
    }  # fmt: skip
    if log is not None:
        doc["logging"] = {"file": str(log)}
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _launch(profile: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specserve.launch.launcher", str(profile)],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "FAKE_ARGV_FILE": str(tmp / "argv"), **env},
    )  # fmt: skip


@pytest.mark.parametrize("with_log_file", [True, False])
def test_server_gets_the_key_output_gets_the_marker(tmp_path: Path, with_log_file: bool) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text(KEY + "\n")
    log = tmp_path / "logs" / "sglang.log" if with_log_file else None
    hf = "hf_launchTokenValue12345"
    done = _launch(_profile(tmp_path, key_file, log), tmp_path, HF_TOKEN=hf)
    assert done.returncode == 0, done.stderr
    assert f"--api-key {KEY}" in (tmp_path / "argv").read_text()  # the real key, in argv
    outputs = [done.stdout + done.stderr] + ([log.read_text()] if log else [])
    for text in outputs:
        assert KEY not in text and hf not in text
        assert f"server_args={{'api_key': '{MARKER}', 'x': 1}}" in text
        assert f"--api-key {MARKER}" in text and f"hf {MARKER}" in text


@pytest.mark.parametrize(
    ("key", "env", "extra", "field", "problem"),
    [
        ("short12", {}, [], "server.api_key", "is 7 characters long"),
        ("first-line-ok\nsecond-line", {}, [], "server.api_key", "contains a line break"),
        (KEY, {"HF_TOKEN": "hf_x"}, [], "environment variable HF_TOKEN", "is 4 characters"),
        (KEY, {}, ["--admin-api-key", "adm"], "server.extra_args --admin-api-key", "is 3"),
    ],
)  # fmt: skip
def test_unredactable_secret_is_refused_before_exec(
    tmp_path: Path, key: str, env: dict[str, str], extra: list[str], field: str, problem: str
) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text(key + "\n")
    done = _launch(_profile(tmp_path, key_file, extra=extra), tmp_path, **env)
    assert done.returncode == 1
    assert not (tmp_path / "argv").exists()  # never exec'd
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"specserve-launch: {field}: ") and problem in message, message
    assert "Fix: " in message and "at least 8 characters" in message
    assert key.splitlines()[0] not in done.stdout + done.stderr
