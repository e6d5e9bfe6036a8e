"""Unit tests of the deploy records' reader and writer (ansible/plugins/modules/specserve_state.py)
and of what an interrupted play says (ansible/plugins/callback/specserve_interrupt.py); the plays
that use them run in test_failure_state.py and test_failure_matrix.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from .test_plugins import _load

state = _load("modules/specserve_state.py")
interrupt = _load("callback/specserve_interrupt.py")

VERIFIED = ["container_id", "started_at", "restart_count", "spec_hash"]


@pytest.mark.parametrize(("content", "error"), [
    (None, "missing"),
    (b"", "empty (0 bytes): a write that did not finish"),
    (b"\n  \n", "empty (4 bytes)"),
    (b'{"container_id": "abc", "started', "not JSON"),
    (b"[1, 2]", "not a JSON object (a list)"),
    (b'{"container_id": "abc"}', "missing started_at, restart_count, spec_hash"),
    (b"\xff\xfe", "not UTF-8 text"),
])
def test_an_unusable_record_is_named_never_raised(tmp_path: Path, content: bytes | None,
                                                  error: str) -> None:
    path = tmp_path / "verified.json"
    if content is not None:
        path.write_bytes(content)
    found = state.read_record(str(path), "json", VERIFIED)
    assert found["valid"] is False and found["exists"] is (content is not None)
    assert error in found["error"]


def test_a_good_record_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "verified.json"
    record = {"container_id": "abc", "started_at": "T0", "restart_count": 0, "spec_hash": "h"}
    assert state.write_record(str(path), json.dumps(record), 0o600) is True
    assert state.write_record(str(path), json.dumps(record), 0o600) is False  # unchanged
    found = state.read_record(str(path), "json", VERIFIED)
    assert found["valid"] and found["data"] == record and found["error"] == ""
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert state.read_record(str(path), "text", [])["text"] == json.dumps(record)


def test_a_write_that_fails_leaves_the_previous_record_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "spec.json"
    path.write_text('{"image": "old"}')

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        state.write_record(str(path), '{"image": "new"}', 0o600)
    assert path.read_text() == '{"image": "old"}'
    assert os.listdir(tmp_path) == ["spec.json"]  # no temporary file left behind


def _task(name: str, action: str = "ansible.builtin.debug") -> SimpleNamespace:
    return SimpleNamespace(get_name=lambda: name, action=action)


def _callback() -> object:
    plugin = interrupt.CallbackModule.__new__(interrupt.CallbackModule)
    plugin.where, plugin.last_task, plugin.finished = {}, {}, False
    plugin.argv = ["/venv/bin/ansible-playbook", "playbooks/deploy.yml", "-i", "inv dir/hosts.yml"]
    return plugin


def test_an_interrupt_during_the_swap_says_the_node_may_have_no_server() -> None:
    plugin = _callback()
    plugin.v2_runner_on_start("node1", _task("Restart | why"))
    plugin.v2_runner_on_start("node1", _task("Swap | stop the old server", "specserve_swap"))
    plugin.v2_runner_on_start("node2", _task("Server | drift"))
    said = "\n".join(plugin.lines())
    assert "node1: interrupted while the old server was being stopped" in said
    assert "NO server running" in said and "node2" not in said
    assert ("run the same play again: ansible-playbook playbooks/deploy.yml -i "
            "'inv dir/hosts.yml'") in said


def test_after_the_swap_the_server_is_running_unverified_and_a_finished_play_says_nothing() -> None:
    plugin = _callback()
    swap = _task("Swap | stop the old server, start the new one", "specserve_swap")
    plugin.v2_runner_on_start("node1", swap)
    plugin._step("node1", swap, done=True)
    plugin.v2_runner_on_start("node1", _task("Verify | the gate"))
    assert "running UNVERIFIED" in "\n".join(plugin.lines())
    plugin.v2_runner_on_start("node1", _task("Rollback | what failed"))
    assert "during the rollback" in "\n".join(plugin.lines())
    ended = _task("Restart | the sequence ended (the outcome is in the play's result)")
    plugin._step("node1", ended, done=True)
    assert plugin.lines() == []  # the sequence ended: nothing left half done
    plugin.v2_runner_on_start("node1", _task("Restart | why"))  # a second restart (tune.yml)
    plugin.v2_runner_on_start("node1", swap)
    assert "NO server running" in "\n".join(plugin.lines())
    plugin.finished = True
    assert plugin.lines() == []
