"""`specserve-launch --dry-run` ends with the server's own parser (issue 16 item 3).

Run here with each verified SGLang's real `prepare_server_args`: the SGLang venv's bin first on
PATH makes it the `python3` the launch command names, as the image's python3 is SGLang's. The
stand-in's parser, built from the same option table, must refuse what SGLang refuses with the
same argparse message (only the program name differs): it is what the Ansible failure matrix
runs in place of the image's SGLang.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import venv_python

ROOT = Path(__file__).resolve().parents[2]
KIMI = ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"
# What `specserve check` lets through (the option table knows the flag, not its value's type):
# only the image's own parser can refuse these.
VALUE_ERRORS = [
    ["--chunked-prefill-size", "abc"],
    ["--random-seed", "1.5"],
    ["--schedule-conservativeness", "x"],
    ["--stream-interval", "often"],
]


def dry_run(profile: dict, tmp_path: Path, version: str) -> subprocess.CompletedProcess:
    # Where the stand-in profile's relative model paths (../tests/fixtures/...) still resolve.
    path = tmp_path / "profiles" / "profile.yaml"
    path.parent.mkdir(exist_ok=True)
    if not (tmp_path / "tests").exists():
        (tmp_path / "tests").symlink_to(ROOT / "tests")
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECSERVE_"))}
    env["PATH"] = f"{venv_python(version).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPECSERVE_SGLANG_VERSION"] = version
    env["SPECSERVE_STANDIN_SGLANG_VERSION"] = version
    return subprocess.run(
        [sys.executable, "-m", "specserve.launch.launcher", "--dry-run", str(path)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip


def with_extra(base: Path, extra: list[str]) -> dict:
    doc = yaml.safe_load(base.read_text())
    doc["server"]["extra_args"] = list(extra)
    return doc


def error_line(stderr: str, prog: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(lines) == 1, stderr
    return lines[0].removeprefix(f"{prog}: ")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglangs_parser_accepts_the_shipped_profile(version: str, tmp_path: Path) -> None:
    proc = dry_run(yaml.safe_load(KIMI.read_text()), tmp_path, version)
    assert proc.returncode == 0, proc.stderr
    assert f"SGLang {version}'s own parser accepts the command" in proc.stderr


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("extra", VALUE_ERRORS, ids=lambda e: e[0])
def test_sglangs_parser_refuses_what_check_lets_through(
    version: str, extra: list[str], tmp_path: Path
) -> None:
    proc = dry_run(with_extra(KIMI, extra), tmp_path, version)
    assert proc.returncode == 1, proc.stderr
    assert f"SGLang {version}'s own parser refuses the command (exit 2)" in proc.stderr
    sglang = error_line(proc.stderr, "sglang serve")
    assert extra[0] in sglang
    assert "usage:" not in proc.stderr  # the 500-option usage is cut to its error line
    assert "nothing was started" in proc.stderr
    # The stand-in's parser says the same.
    standin = dry_run(with_extra(STANDIN, extra), tmp_path, version)
    assert standin.returncode == 1, standin.stderr
    assert error_line(standin.stderr, "specserve-standin") == sglang
