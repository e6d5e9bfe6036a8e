"""specserve-launch refuses, before it execs, what the kernel would refuse with E2BIG: one
line naming the argument (or the whole) and the limit, for the dry run's parser and for the
server alike. Before, a 200 KB argument ended the dry run in a Python traceback, and an argv
over this machine's ARG_MAX got "cannot exec ...: Argument list too long" naming nothing.

Each launch is a real process; the stack soft limit (a quarter of it bounds argv plus the
environment) is set with prlimit, so the figures do not depend on the machine's own limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH = str(Path(sys.executable).with_name("specserve-launch"))
PAGE = os.sysconf("SC_PAGESIZE")
MIB = 1024 * 1024


def _standin(tmp: Path, extra_args: list[str]) -> Path:
    """The CPU stand-in's profile (its parser is the dry run's) with `extra_args`."""
    doc: dict[str, Any] = yaml.safe_load((REPO / "profiles" / "standin-cpu.yaml").read_text())
    models = REPO / "tests" / "fixtures" / "models"
    doc["target"]["path"] = str(models / "Llama-3.1-8B-Instruct")
    doc["drafter"]["path"] = str(models / "EAGLE3-LLaMA3.1-Instruct-8B")
    doc["logging"]["file"] = None
    doc["server"]["extra_args"] = extra_args
    path = tmp / "standin.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 30))
    return path


def _fake_server(tmp: Path, extra_args: list[str]) -> tuple[Path, Path]:
    """A profile whose server only records that it started: (profile, the record's path)."""
    marker = tmp / "started"
    script = tmp / "server.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('started')\n")
    doc = {
        "version": 1,
        "name": "fake",
        "target": {"path": str(tmp / "no-model")},
        "parallelism": {"tp": 1},
        "gpu": {"count": 0},
        "server": {"launch_command": [sys.executable, str(script)], "extra_args": extra_args},
    }
    path = tmp / "fake.yaml"
    path.write_text(yaml.safe_dump(doc, width=1 << 30))
    return path, marker


def _launch(*args: str, stack: int, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        ["prlimit", f"--stack={stack}:", "--", LAUNCH, *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _the_line(output: str, needle: str) -> str:
    assert "Traceback" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if needle in line]
    assert len(lines) == 1, output[-3000:]
    assert "Fix:" in lines[0] and len(lines[0]) < 600, lines[0]
    return lines[0]


def test_the_dry_run_refuses_a_200_kb_argument_in_one_line(tmp_path: Path) -> None:
    path = _standin(tmp_path, ["--chat-template", "x" * 200_000])
    code, output = _launch("--dry-run", str(path), stack=8 * MIB)
    assert code == 1, output[-2000:]
    line = _the_line(output, "MAX_ARG_STRLEN")
    assert line.startswith("error: server.extra_args[1] (the value of --chat-template): is ")
    assert "over the kernel's 131,071-byte limit for one argument" in line


def test_an_argv_over_this_machines_arg_max_is_refused_before_exec(tmp_path: Path) -> None:
    # 300 KB of argv passes `check` (2 MiB under the usual 8 MiB stack) but not a 1 MiB stack.
    stack = MIB
    limit = max(stack // 4, 32 * PAGE)
    extra = [w for i in range(3) for w in ("--chat-template", f"{i}".ljust(100_000, "t"))]
    runs = {
        "dry run": ("--dry-run", str(_standin(tmp_path, extra))),
        "start": (str(_fake_server(tmp_path, extra)[0]),),
    }
    marker = tmp_path / "started"
    for name, args in runs.items():
        code, output = _launch(*args, stack=stack)
        assert code == 1, (name, output[-2000:])
        line = _the_line(output, "over the kernel's")
        assert line.startswith("specserve-launch: (command): argv and environment are "), line
        assert f"over the kernel's {limit:,}-byte limit (this machine's, from its 1,024 KiB" in line
        assert "the largest is server.extra_args[" in line and "(100,000 bytes)" in line
        assert line.endswith("; nothing was started"), line
    assert not marker.exists(), "the server was started"
    # The same start under the usual stack limit fits, and runs.
    code, output = _launch(*runs["start"], stack=8 * MIB)
    assert code == 0 and marker.read_text() == "started", output[-2000:]


def test_an_inherited_environment_that_leaves_no_room_is_named(tmp_path: Path) -> None:
    # 1.6 MB of the container's environment plus 500 KB of argv: over 2 MiB together, though
    # each fits alone (the launcher itself started, and `check` passed the profile).
    env = {f"BULK_{i}": "e" * 100_000 for i in range(16)}
    extra = [w for i in range(5) for w in ("--chat-template", f"{i}".ljust(100_000, "t"))]
    code, output = _launch("--dry-run", str(_standin(tmp_path, extra)), stack=8 * MIB, env=env)
    assert code == 1, output[-2000:]
    line = _the_line(output, "over the kernel's")
    assert "over the kernel's 2,097,152-byte limit" in line
    assert "variables)" in line and "nothing was started" in line
