"""Unit tests of the deploy lock's staleness rules and the stability window's comparison (the
plays that use them run in test_failure_matrix.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .test_plugins import _load

lock = _load("action/specserve_lock.py")
lock_file = _load("modules/specserve_lock.py")
stability = _load("modules/specserve_stability.py")


def test_playbook_pid_is_the_outermost_ansible_playbook(monkeypatch: pytest.MonkeyPatch) -> None:
    # Forked workers carry the playbook's command line and exit after every task: a lock naming
    # a worker would look stale to the next play at once.
    tree = {300: ("python ansible-playbook deploy.yml", 200),
            200: ("python ansible-playbook deploy.yml", 100),
            100: ("python ansible-playbook deploy.yml", 50), 50: ("bash", 1)}
    monkeypatch.setattr(lock.os, "getpid", lambda: 300)
    monkeypatch.setattr(lock, "_cmdline", lambda pid: tree.get(pid, ("", 0))[0])
    monkeypatch.setattr(lock, "_parent", lambda pid: tree.get(pid, ("", 0))[1])
    assert lock.playbook_pid() == 100


def _holder(**changes: object) -> dict:
    me = os.getpid()
    return {"token": "t", "controller": "ctl", "pid": me, "pid_start": lock._proc_start(me),
            "since_epoch": time.time(), **changes}


def test_live_holder_is_not_stale() -> None:
    assert lock.stale_reason(_holder(), "ctl", time.time(), 3600) == ""


def test_gone_holder_on_this_controller_is_stale() -> None:
    reason = lock.stale_reason(_holder(pid=2**22 + 12345), "ctl", time.time(), 3600)
    assert "is gone on ctl" in reason


def test_reused_pid_is_stale() -> None:
    assert lock.stale_reason(_holder(pid_start="1"), "ctl", time.time(), 3600)


def test_other_controller_only_by_age() -> None:
    other = _holder(controller="elsewhere", pid=2**22 + 12345)
    assert lock.stale_reason(other, "ctl", time.time(), 3600) == ""
    assert "stale age" in lock.stale_reason(other, "ctl", time.time() + 4000, 3600)


def test_lock_file_is_exclusive(tmp_path: Path) -> None:
    path = str(tmp_path / "deploy.lock")
    assert lock_file._create(path, {"token": "a"})
    assert not lock_file._create(path, {"token": "b"})
    assert lock_file._read(path) == {"token": "a"}
    (tmp_path / "bad.lock").write_text("{half")
    assert lock_file._read(str(tmp_path / "bad.lock"))["unreadable"]


def test_stability_sees_a_restart() -> None:
    expected = {"container": "s", "expect_id": "abc", "expect_started_at": "T0",
                "expect_restart_count": 0}
    same = {"id": "abc", "started_at": "T0", "restart_count": 0, "status": "running",
            "exit_code": 0}
    assert stability.changed(same, expected) == ""
    restarted = {**same, "started_at": "T1", "restart_count": 1}
    assert stability.changed(restarted, expected) == "RestartCount 0 -> 1, StartedAt T0 -> T1"
    assert "gone" in stability.changed(None, expected)
    assert "exited (exit code 1)" in stability.changed(
        {**same, "status": "exited", "exit_code": 1}, expected)
