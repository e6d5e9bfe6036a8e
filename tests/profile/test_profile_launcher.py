"""specserve-launch: validates, prints, runs the server as its child, forwards signals, tees."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stderr
from pathlib import Path

import yaml

from specserve.launch.logtee import copy_stream

FAKE_SERVER = textwrap.dedent(
    """
    import os, signal, sys, time
    marker = sys.argv[-1]
    def on_term(signum, frame):
        print("fake: got SIGTERM", flush=True)
        with open(marker, "w") as fh:
            fh.write("SIGTERM\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    print(f"fake: pid {os.getpid()} ppid {os.getppid()} pgid {os.getpgrp()}", flush=True)
    print("fake: argv " + " ".join(sys.argv[1:]), flush=True)
    with open(marker + ".argv", "w") as fh:
        fh.write(" ".join(sys.argv[1:]))
    print("fake: nccl " + os.environ.get("NCCL_PROTO", "-"), flush=True)
    time.sleep(20)
    """
)


def _profile(tmp: Path, **server_extra: object) -> Path:
    script = tmp / "fake_server.py"
    script.write_text(FAKE_SERVER)
    doc = {
        "version": 1,
        "name": "fake",
        "target": {"path": str(tmp / "no-model")},
        "parallelism": {"tp": 1},
        "gpu": {"count": 0},
        "server": {
            "launch_command": [sys.executable, str(script)],
            "extra_args": [str(tmp / "marker")],
            **server_extra,
        },
        "nccl": {"preset": "default", "overrides": {"NCCL_PROTO": "Simple"}},
    }
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _launch(profile: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specserve.launch.launcher", str(profile)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _read_until(proc: subprocess.Popen[str], prefix: str, limit_s: float = 15) -> list[str]:
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no {prefix!r} line; got {seen}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=10)


def _child_of_launcher(line: str, launcher: int) -> None:
    """The server is the launcher's child, in a process group of its own (not the launcher's,
    which SGLang's scheduler may SIGKILL with killpg)."""
    _, _, pid, _, ppid, _, pgid = line.split()
    assert int(ppid) == launcher and int(pid) != launcher and int(pgid) == int(pid), line


def test_runs_the_server_as_its_child_and_forwards_sigterm(tmp_path):
    proc = _launch(_profile(tmp_path, api_key={"env": "FAKE_KEY"}), {"FAKE_KEY": "k-123-4567"})
    try:
        lines = _read_until(proc, "fake: nccl")
        _child_of_launcher(lines[0], proc.pid)
        # The server gets the key (resolved at exec time); its output shows only the marker.
        assert "--api-key <redacted>" in lines[1]
        assert "--api-key k-123-4567" in (tmp_path / "marker.argv").read_text()
        assert lines[2] == "fake: nccl Simple"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        _stop(proc)
    assert proc.returncode == 0
    assert (tmp_path / "marker").read_text() == "SIGTERM\n"
    assert "fake: got SIGTERM" in out
    assert "k-123-4567" not in err + out  # the printed command shows only the reference
    assert '--api-key "$FAKE_KEY"' in err


def test_log_file_gets_output_and_the_shutdown_line(tmp_path):
    log = tmp_path / "logs" / "server.log"
    doc = yaml.safe_load(_profile(tmp_path).read_text())
    doc["logging"] = {"file": str(log), "max_bytes": 4096, "backup_count": 2}
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(doc))
    proc = _launch(tmp_path / "profile.yaml")
    try:
        lines = _read_until(proc, "fake: nccl")  # still reaches stdout through the tee
        _child_of_launcher(lines[0], proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
        assert proc.returncode == 0
    finally:
        _stop(proc)
    assert (tmp_path / "marker").exists()
    # The launcher exits after the tee has drained the pipe: the file is complete already.
    text = log.read_text()
    assert f"{lines[0]}\n" in text and "fake: got SIGTERM\n" in text


def test_tee_rotates_at_the_size_limit(tmp_path):
    log = tmp_path / "rot.log"
    lines = [f"[TP0] Decode batch, line {i:04d} " + "x" * 60 + "\n" for i in range(200)]
    data = "".join(lines).encode()
    sink = io.BytesIO()
    copy_stream(io.BytesIO(data), sink, log, max_bytes=2000, backup_count=3)
    assert sink.getvalue() == data  # stdout copy is exact
    files = [log, *(log.with_name(f"rot.log.{i}") for i in (1, 2, 3))]
    assert all(f.exists() for f in files)
    assert not log.with_name("rot.log.4").exists()  # backup_count honoured
    for f in files:
        assert f.stat().st_size <= 2000
        assert f.read_text().endswith("\n")  # rotation never splits a line
    # The newest lines are in the current file, in order, with nothing lost across the files.
    kept = "".join(f.read_text() for f in reversed(files))
    assert kept == "".join(lines[-len(kept.splitlines()) :])
    assert log.read_text().splitlines()[-1] == lines[-1].rstrip("\n")


def test_invalid_profile_is_refused_before_exec(tmp_path):
    path = _profile(tmp_path, disable_cuda_graph=True)
    proc = _launch(path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "fake: pid" not in out
    assert "server.disable_cuda_graph" in err


def test_missing_secret_is_refused(tmp_path):
    proc = _launch(_profile(tmp_path, api_key={"file": str(tmp_path / "nope")}))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "fake: pid" not in out
    assert "cannot read secret file" in err


def test_default_profile_path_from_env(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "specserve.launch.launcher", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SPECSERVE_PROFILE": str(_profile(tmp_path))},
    )
    assert proc.returncode == 0
    assert "fake_server.py" in proc.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "specserve.launch.launcher"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SPECSERVE_PROFILE": str(tmp_path / "none.yaml")},
    )
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_dry_run_of_an_unknown_launch_command_says_its_parser_runs_at_start(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "specserve.launch.launcher", "--dry-run", str(_profile(tmp_path))],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"no parse-only check for launch command {sys.executable!r}" in proc.stderr
    assert "python3 -m sglang.launch_server" in proc.stderr  # the known ones are named
    assert "fake: pid" not in proc.stdout + proc.stderr


def test_dry_run_reports_the_parsers_error_without_the_secrets_it_echoes(tmp_path, monkeypatch):
    # A parser that echoes its argv, as argparse does for unrecognised arguments: the secret
    # values in argv and the token in the environment never reach the output.
    from specserve.launch import server_parser
    from specserve.launch.launcher import main as launch_main

    (tmp_path / "echo_parser.py").write_text(
        "import sys\n"
        "def prepare_server_args(argv):\n"
        "    sys.stderr.write('usage: echo [-h] ...\\n')\n"
        "    sys.stderr.write('echo: error: refused ' + ' '.join(argv))\n"
        "    sys.stderr.write(' hf_token_value_123\\n')\n"
        "    sys.exit(2)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN", "hf_token_value_123")
    parsers = {("echo-server",): (sys.executable, "echo_parser")}
    monkeypatch.setattr(server_parser, "PARSERS", parsers)
    doc = yaml.safe_load(_profile(tmp_path).read_text())
    doc["server"].update(launch_command=["echo-server"],
                         extra_args=["--admin-api-key", "admin-secret-4242"])  # fmt: skip
    path = tmp_path / "echo.yaml"
    path.write_text(yaml.safe_dump(doc))
    err = io.StringIO()
    with redirect_stderr(err):
        code = launch_main(["--dry-run", str(path)])
    text = err.getvalue()
    assert code == 1, text
    assert "own parser refuses the command (exit 2)" in text
    assert "echo: error: refused" in text and "usage:" not in text
    assert "admin-secret-4242" not in text.split("refuses the command")[1]
    assert "hf_token_value_123" not in text
