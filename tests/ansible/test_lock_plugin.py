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


ME = "machine-a/boot-1"


def _holder(**changes: object) -> dict:
    me = os.getpid()
    return {"token": "t", "controller": "ctl", "controller_id": ME, "pid": me,
            "pid_start": lock._proc_start(me), "since_epoch": time.time(), **changes}


def _young(age_s: float = 5.0) -> dict:
    return {"age_s": age_s, "host_rebooted": False}


def test_live_holder_is_not_stale() -> None:
    assert lock.stale_reason(_holder(), "ctl", _young(), 3600, ME) == ""


def test_gone_holder_on_this_controller_is_stale() -> None:
    reason = lock.stale_reason(_holder(pid=2**22 + 12345), "ctl", _young(), 3600, ME)
    assert "is gone on ctl" in reason


def test_reused_pid_is_stale() -> None:
    assert lock.stale_reason(_holder(pid_start="1"), "ctl", _young(), 3600, ME)


def test_other_controller_only_by_the_nodes_clock() -> None:
    other = _holder(controller="elsewhere", controller_id="machine-b/boot-9", pid=2**22 + 12345)
    assert lock.stale_reason(other, "ctl", _young(), 3600, ME) == ""
    assert "by the node's clock" in lock.stale_reason(other, "ctl", _young(4000), 3600, ME)


def test_a_controller_clock_hours_behind_does_not_make_a_live_lock_stale() -> None:
    # The case: a holder whose controller stamped since_epoch 25 h in the past. Its
    # lease was renewed 5 s ago by the node's clock: it is held.
    behind = _holder(controller="elsewhere", controller_id="machine-b/boot-9",
                     since_epoch=time.time() - 25 * 3600, pid=2**22 + 12345)
    assert lock.stale_reason(behind, "ctl", _young(), 86400, ME) == ""


def test_the_same_hostname_on_another_machine_is_not_this_controller() -> None:
    # Two controllers both called `ctl` (containers): the other's PID means nothing here.
    twin = _holder(controller="ctl", controller_id="machine-b/boot-9", pid=2**22 + 12345)
    assert lock.stale_reason(twin, "ctl", _young(), 3600, ME) == ""


def test_a_rebooted_controller_or_node_is_stale() -> None:
    rebooted = _holder(controller_id="machine-a/boot-0", pid=os.getpid())
    assert "rebooted" in lock.stale_reason(rebooted, "ctl", _young(), 3600, ME)
    assert "node has rebooted" in lock.stale_reason(
        _holder(), "ctl", {"age_s": None, "host_rebooted": True}, 3600, ME)


def test_an_unreadable_lock_is_judged_by_its_files_age() -> None:
    unreadable = {"token": "", "unreadable": True, "since": 0}
    assert lock.stale_reason(unreadable, "ctl", _young(2), 3600, ME) == ""
    assert "unreadable" in lock.stale_reason(unreadable, "ctl", _young(4000), 3600, ME)


def test_the_host_stamps_and_measures_the_lease(tmp_path: Path) -> None:
    path = str(tmp_path / "deploy.lock")
    assert lock_file._create(path, {"token": "a"})
    held = lock_file._read(path)
    assert held is not None and held["host_boot_id"] == lock_file.boot_id()
    seen = lock_file.age(held)
    assert seen["host_rebooted"] is False and 0 <= seen["age_s"] < 60
    assert lock_file.age({**held, "host_monotonic": held["host_monotonic"] - 5000})["age_s"] > 4999
    assert lock_file.age({**held, "host_boot_id": "another-boot"})["host_rebooted"] is True


def test_lock_file_is_exclusive(tmp_path: Path) -> None:
    path = str(tmp_path / "deploy.lock")
    assert lock_file._create(path, {"token": "a"})
    assert not lock_file._create(path, {"token": "b"})
    assert lock_file._read(path)["token"] == "a"
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
