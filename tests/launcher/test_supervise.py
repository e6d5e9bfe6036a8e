"""specserve-launch supervises the server: SGLang's own end (kill_process_tree of all its
descendants) cannot reach the tee, signals are forwarded, exit statuses pass through, and the
output pipe is always read."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import yaml

from specserve.upstream import PINNED_VERSION
from tests.contract.sglang_venv import venv_python

KEY = "sk-supervise-0123456789"


def _profile(tmp: Path, code: str, python: str = sys.executable, log: Path | None = None,
             key: bool = False) -> Path:  # fmt: skip
    script = tmp / "server.py"
    script.write_text(textwrap.dedent(code))
    doc: dict[str, object] = {
        "version": 1,
        "name": "fake",
        "target": {"path": str(tmp / "no-model")},
        "parallelism": {"tp": 1},
        "gpu": {"count": 0},
        "server": {"launch_command": [python, str(script)]},
    }
    if key:
        doc["server"]["api_key"] = {"env": "FAKE_KEY"}  # type: ignore[index]
    if log is not None:
        doc["logging"] = {"file": str(log), "max_bytes": 10_000_000, "backup_count": 1}
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump(doc))
    return profile


ENV = {**os.environ, "FAKE_KEY": KEY, "PYTHONUNBUFFERED": "1"}


def _launch(tmp: Path, code: str, python: str = sys.executable, log: Path | None = None,
            key: bool = False) -> subprocess.Popen[bytes]:  # fmt: skip
    profile = _profile(tmp, code, python, log, key)
    return subprocess.Popen([sys.executable, "-m", "specserve.launch.launcher", str(profile)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): look at its state.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_sglangs_last_words_survive_its_kill_process_tree(tmp_path: Path) -> None:
    # launch_server's shape, with SGLang's own kill_process_tree (psutil children(recursive=
    # True), SIGKILL each): a child, then the failure, the finally, the traceback at exit.
    python = str(venv_python(PINNED_VERSION))
    log = tmp_path / "logs" / "sglang.log"
    proc = _launch(tmp_path, f"""
        import os, subprocess, sys
        from sglang.srt.utils import kill_process_tree
        child = subprocess.Popen(["sleep", "60"])
        open({str(tmp_path / "child")!r}, "w").write(str(child.pid))
        print("fake: serving, key {KEY}", flush=True)
        try:
            raise RuntimeError("fake: the reason it stopped")
        finally:
            kill_process_tree(os.getpid(), include_parent=False)
        """, python=python, log=log, key=True)  # fmt: skip
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err.decode()
    last = b"RuntimeError: fake: the reason it stopped"
    assert out.rstrip().endswith(last), out.decode()[-2000:]
    text = log.read_text()
    assert text.rstrip().endswith(last.decode()) and "fake: serving, key <redacted>" in text
    assert KEY not in text and KEY.encode() not in out + err
    assert not _alive(int((tmp_path / "child").read_text()))  # the tree kill did run


def test_killpg_of_the_servers_group_spares_the_launcher(tmp_path: Path) -> None:
    # SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION: the scheduler SIGKILLs its whole process group.
    log = tmp_path / "sglang.log"
    proc = _launch(tmp_path, """
        import os, signal
        print("fake: before killpg", flush=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)
        """, log=log)  # fmt: skip
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL, err.decode()
    assert out == b"fake: before killpg\n" and log.read_text() == "fake: before killpg\n"


def test_signals_are_forwarded_and_the_exit_code_passes_through(tmp_path: Path) -> None:
    proc = _launch(tmp_path, """
        import signal, sys, time
        got = []
        for sig in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGTERM):
            signal.signal(sig, lambda n, f: got.append(signal.Signals(n).name))
        print("fake: ready", flush=True)
        while "SIGTERM" not in got:
            time.sleep(0.01)
        print("fake: got " + " ".join(got), flush=True)
        sys.exit(3)
        """, key=True)  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"fake: ready\n"
    for sig in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        proc.send_signal(sig)
        time.sleep(0.3)  # one at a time: the order is part of what is checked
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out == b"fake: got SIGHUP SIGQUIT SIGUSR1 SIGTERM\n"
    assert proc.returncode == 3


def test_output_is_read_when_the_log_file_cannot_be_written(tmp_path: Path) -> None:
    # 2 MB, far past a pipe's 64 KiB buffer: a tee that stopped reading would block the server.
    (tmp_path / "logs").write_text("a file where the log directory should be\n")
    proc = _launch(tmp_path, """
        import sys
        line = b"x" * 99 + b"\\n"
        for _ in range(20_000):
            sys.stdout.buffer.write(line)
        print("fake: done", flush=True)
        """, log=tmp_path / "logs" / "sglang.log")  # fmt: skip
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert len(out) == 20_000 * 100 + len(b"fake: done\n") and out.endswith(b"fake: done\n")
    assert b"unavailable" in err and err.count(b"unavailable") == 1


def test_a_left_behind_process_holding_the_pipe_does_not_hold_the_launcher(
    tmp_path: Path,
) -> None:
    proc = _launch(tmp_path, """
        import subprocess, sys
        subprocess.Popen(["sleep", "30"])  # inherits stdout: the pipe stays open
        print("fake: exiting", flush=True)
        sys.exit(4)
        """, key=True)  # fmt: skip
    start = time.monotonic()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 4 and out == b"fake: exiting\n"
    assert time.monotonic() - start < 15  # DRAIN_S after the exit, not the sleep's 30 s


def test_the_file_comes_back_while_the_server_is_quiet(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.write_text("a file where the log directory should be\n")
    go = tmp_path / "go"
    proc = _launch(tmp_path, f"""
        import os, time
        print("fake: before", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        print("fake: after", flush=True)
        """, log=logs / "sglang.log")  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"fake: before\n"
        logs.unlink()
        deadline = time.monotonic() + 10
        # The tee creates the file, then writes its notice: wait for a whole line, not the name.
        while not ((logs / "sglang.log").exists()
                   and (logs / "sglang.log").read_text().endswith("\n")):  # fmt: skip
            assert time.monotonic() < deadline, "the tee did not retry the file while quiet"
            time.sleep(0.05)
        text = (logs / "sglang.log").read_text()
        assert text.startswith("specserve-launch: log file unavailable from ")
        assert ", 13 bytes not written (" in text  # b"fake: before\n"
        go.write_text("")
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert out == b"fake: after\n" and proc.returncode == 0
    assert (logs / "sglang.log").read_text().endswith("bytes not written (EEXIST: File exists)\n"
                                                      "fake: after\n")  # fmt: skip


def test_as_pid_1_it_reaps_the_orphans_it_inherits(tmp_path: Path) -> None:
    # The container case without Docker: a new PID namespace makes the launcher PID 1, so the
    # server's orphans are reparented to it and only it can reap them.
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    assert probe.returncode == 0, (
        f"needs `unshare --pid --fork --mount-proc` (root, util-linux): {probe.stderr.strip()}"
    )
    code = """
        import os, time
        print(f"fake: ppid {os.getppid()}", flush=True)
        for _ in range(3):  # a child that forks a grandchild and exits: an orphan for PID 1
            if os.fork() == 0:
                if os.fork() == 0:
                    time.sleep(0.2)
                    os._exit(0)
                os._exit(0)
            os.wait()
        time.sleep(1.5)  # the orphans have exited; PID 1 has had POLL_S to reap them
        zombies = [p for p in os.listdir("/proc") if p.isdigit()
                   and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"]
        print(f"fake: zombies {len(zombies)}", flush=True)
        """
    profile = _profile(tmp_path, code, key=True)
    proc = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc",
         sys.executable, "-m", "specserve.launch.launcher", str(profile)],
        capture_output=True, timeout=60, env=ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"fake: ppid 1\nfake: zombies 0\n", proc.stdout


def _namespace_init(outer: int) -> int:
    """The PID (in this namespace) of `unshare --fork`'s child, PID 1 of the new namespace."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{outer}/task/{outer}/children")
        found = children.read_text().split() if children.exists() else []
        if found:
            return int(found[0])
        time.sleep(0.02)
    raise AssertionError(f"unshare ({outer}) started no child")


def test_as_pid_1_a_stop_before_the_server_started_ends_it_at_once(tmp_path: Path) -> None:
    # PID 1 gets no signal it has no handler for (pid_namespaces(7), from an ancestor namespace
    # too: docker stop's SIGTERM). The launcher is stopped while it validates: its stderr is a
    # full pipe, so it blocks at its first line ("profile ..., running:"), after its imports and
    # checks and before the server exists. Without the early handlers it stays blocked there
    # (in CI: docker stop waited its 120 s timeout).
    code = """
        print("fake: started", flush=True)
        import time; time.sleep(60)
        """
    profile = _profile(tmp_path, code)
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x" * (1 << 16))  # a pipe holds 64 KiB: full, the next write blocks
    os.set_blocking(write_fd, True)
    launcher = str(Path(sys.executable).parent / "specserve-launch")
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", launcher, str(profile)],
        stdout=subprocess.PIPE, stderr=write_fd, env=ENV,
    )  # fmt: skip
    os.close(write_fd)
    try:
        init = _namespace_init(proc.pid)
        stat = Path(f"/proc/{init}/wchan")
        deadline = time.monotonic() + 20
        # "pipe_write", or "anon_pipe_write" on newer kernels
        while time.monotonic() < deadline and not stat.read_text().endswith("pipe_write"):
            time.sleep(0.05)
        assert stat.read_text().endswith("pipe_write"), stat.read_text()
        os.kill(init, signal.SIGTERM)
        out, _ = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        leftover = os.read(read_fd, 1 << 17)
        os.close(read_fd)
    assert out == b"", out  # the server never started
    # unshare passes on its child's status: killed by nothing, exit 128 + SIGTERM.
    assert proc.returncode == 128 + signal.SIGTERM, proc.returncode
    assert b"profile fake" not in leftover.replace(b"x", b"")
