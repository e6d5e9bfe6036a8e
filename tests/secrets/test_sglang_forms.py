"""The forms SGLang itself gives the key, produced by SGLang's own code (both verified versions),
through the launcher's tee and bench's redaction: no spelling of the key survives.

engine.py logs `server_args={server_args.resolved_dict()}` (a dict repr); /server_info answers
`{**resolved_dict(), "launch_command": server_args.launch_command, ...}` as JSON, where
launch_command is prepare_server_args' `" ".join(argv)`.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from specserve.bench.server import redact
from specserve.launch.logtee import copy_stream
from specserve.secrets import MARKER, secret_forms

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("0.5.21", "0.5.23")
KEY = "sk-oracle-'3f\"9\\a1"  # quotes and a backslash: repr and JSON spell it differently
ADMIN = "adm-oracle-55aa77"

SCRIPT = r"""
import json, sys
from sglang.srt.server_args import prepare_server_args
key, admin = sys.argv[1], sys.argv[2]
args = prepare_server_args(["--model-path", "/m", "--api-key", key, "--admin-api-key", admin])
resolved = args.resolved_dict()
# Exactly engine.py's log statement and http_server.py's /server_info body (JSON-safe part).
print(json.dumps({"log": f"server_args={resolved}",
                  "info": json.loads(json.dumps({**resolved, "launch_command": args.launch_command},
                                                default=str))}))
"""


def _sglang(version: str) -> dict[str, object]:
    python = ROOT / ".sglang" / version / "bin" / "python"
    if not python.exists():
        pytest.fail(f"SGLang {version} venv missing at {python}: run bash scripts/setup/sglang.sh")
    done = subprocess.run([str(python), "-c", SCRIPT, KEY, ADMIN], capture_output=True,
                          text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


@pytest.fixture(scope="module", params=VERSIONS)
def upstream(request: pytest.FixtureRequest) -> dict[str, object]:
    return _sglang(request.param)


def test_sglang_really_spells_the_key_these_ways(upstream: dict[str, object]) -> None:
    """Guards the premise: if SGLang stopped logging the key this test says so."""
    log = str(upstream["log"])
    assert f"'api_key': {KEY!r}" in log
    info = upstream["info"]
    assert isinstance(info, dict)
    assert info["api_key"] == KEY and f"--api-key {KEY}" in info["launch_command"]


def test_tee_removes_the_key_from_sglangs_log_line(
    upstream: dict[str, object], tmp_path: Path
) -> None:
    text = f"[2026-12-01 08:00:00] {upstream['log']}\n"
    body = json.dumps(upstream["info"])  # what a client's log of /server_info would hold
    data = (text + body + "\n").encode()
    sink, log = io.BytesIO(), tmp_path / "sglang.log"
    copy_stream(io.BytesIO(data), sink, log, 10_000_000, 2, (KEY, ADMIN))
    for out in (sink.getvalue().decode(), log.read_text()):
        for secret in (KEY, ADMIN):
            for form in (*secret_forms(secret), repr(secret), json.dumps(secret)):
                assert form not in out, form
        assert f"'api_key': '{MARKER}'" in out and f"'admin_api_key': '{MARKER}'" in out
        assert f"--api-key {MARKER} --admin-api-key {MARKER}" in out


def test_bench_finds_the_key_in_server_info_by_itself(upstream: dict[str, object]) -> None:
    info = upstream["info"]
    assert isinstance(info, dict)
    clean = json.dumps(redact(info))  # no secrets passed: found by field and in launch_command
    for secret in (KEY, ADMIN):
        for form in (*secret_forms(secret), json.dumps(secret)):
            assert form not in clean
    assert f"--api-key {MARKER} --admin-api-key {MARKER}" in clean


# The watermark keys as SGLang itself spells them. 0.5.21 has no --watermark-config: its parser
# refuses the flag and prints the value, keys in clear. 0.5.23 parses it and redacts the keys
# wherever it prints them (watermarking/core.py): the logged arguments, launch_command.
WATERMARK = json.dumps({"key": "0x5e6f7a8b9c0d1e2f", "key_b": "0xa1b2c3d4e5f60718"})
WATERMARK_KEYS = ("0x5e6f7a8b9c0d1e2f", "0xa1b2c3d4e5f60718")
WATERMARK_SCRIPT = r"""
import contextlib, io, json, sys
from sglang.srt.server_args import prepare_server_args
argv = ["--model-path", "/m", "--watermark-config", sys.argv[1], "--enable-watermark"]
err = io.StringIO()
try:
    with contextlib.redirect_stderr(err):
        args = prepare_server_args(argv)
except SystemExit:
    print(json.dumps({"parser_error": err.getvalue()}))
    raise SystemExit(0)
# engine.py's _server_args_for_logging, verbatim (engine.py itself imports uvloop, not here).
from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
print(json.dumps({"log": f"server_args={redact_watermark_secrets(args.resolved_dict())}",
                  "launch_command": args.launch_command}))
"""


@pytest.fixture(scope="module", params=VERSIONS)
def watermark_upstream(request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    python = ROOT / ".sglang" / request.param / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"SGLang {request.param} venv missing at {python}: run bash scripts/setup/sglang.sh"
        )
    done = subprocess.run([str(python), "-c", WATERMARK_SCRIPT, WATERMARK], capture_output=True,
                          text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return request.param, json.loads(done.stdout.strip().splitlines()[-1])


def test_the_tee_removes_the_watermark_keys_from_what_sglang_prints(
    watermark_upstream: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    from specserve.launch.launcher import injected_secrets

    version, doc = watermark_upstream
    text = "\n".join(doc.values()) + "\n"
    if version == "0.5.21":  # the premise: a parser that prints the keys in clear
        assert "unrecognized arguments: --watermark-config" in text and WATERMARK_KEYS[0] in text
    else:  # SGLang's own redaction, the premise of the gRPC check accepting the watermark
        assert "--watermark-config <redacted>" in text and "'watermark_key': '<redacted>'" in text
    secrets = tuple(injected_secrets(["--watermark-config", WATERMARK], {}).values())
    assert secrets == WATERMARK_KEYS
    sink, log = io.BytesIO(), tmp_path / "sglang.log"
    copy_stream(io.BytesIO(text.encode()), sink, log, 10_000_000, 2, secrets)
    for out in (sink.getvalue().decode(), log.read_text()):
        for secret in WATERMARK_KEYS:
            for form in secret_forms(secret):
                assert form not in out, (version, form)
        assert out.count(MARKER) >= (2 if version == "0.5.21" else 1)
