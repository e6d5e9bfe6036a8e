"""The Ansible router's command line, read by the pinned smg's own parser (issue 28 item 1).

The router role renders `router_args` (ansible/roles/router/vars/main.yml) from its settings;
the pinned wheel's own launcher (scripts/setup/router.sh; tests.e2e.router.launched_args: parse,
validate, build the router) must read every flag back as the setting means it. A flag the
binary dropped or renamed fails here, not in a fleet's first deploy. The overload and warm-up
defaults are the binary's own: a pin that moves them fails a test, so the role's comment stays
true.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.router import launched_args

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "router"
ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"

# Every setting that reaches the command line, and the RouterArgs field that must hold it.
FIELDS = {
    "router_listen_host": "host",
    "router_port": "port",
    "router_metrics_port": "prometheus_port",
    "router_policy": "policy",
    "router_health_check_interval_s": "health_check_interval_secs",
    "router_health_failure_threshold": "health_failure_threshold",
    "router_retry_max_retries": "retry_max_retries",
    "router_overload_protection": "worker_overload_protection",
    "router_overload_waiting_requests": "worker_overload_waiting_requests",
    "router_overload_token_usage": "worker_overload_token_usage",
    "router_overload_shed": "worker_overload_shed",
    "router_warmup_s": "worker_warmup_secs",
    "router_warmup_share": "worker_warmup_share",
}

PLAY = """\
- hosts: localhost
  gather_facts: false
  vars_files: [{defaults}, {vars}]
  tasks:
    - ansible.builtin.debug:
        msg: "ROUTER_ARGS={{{{ router_args | to_json }}}}"
"""

def _rendered(tmp_path: Path, settings: dict[str, Any]) -> list[str]:
    play = tmp_path / "render.yml"
    play.write_text(PLAY.format(defaults=ROLE / "defaults" / "main.yml",
                                vars=ROLE / "vars" / "main.yml"))  # fmt: skip
    extra = tmp_path / "settings.json"
    extra.write_text(json.dumps(settings))
    done = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play), "-e", f"@{extra}"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        env={**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
             "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # The debug callback prints the message as a JSON string value.
    line = next(x for x in done.stdout.splitlines() if '"msg": "ROUTER_ARGS=' in x)
    return list(json.loads(json.loads(line.split('"msg": ', 1)[1])[len("ROUTER_ARGS="):]))


DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
CHANGED = {
    "router_listen_host": "127.0.0.2", "router_port": 31080, "router_metrics_port": 29100,
    "router_policy": "least_load", "router_health_check_interval_s": 7,
    "router_health_failure_threshold": 2, "router_retry_max_retries": 1,
    "router_overload_protection": True, "router_overload_waiting_requests": 3,
    "router_overload_token_usage": 0.65, "router_overload_shed": True,
    "router_warmup_s": 30, "router_warmup_share": 0.5,
}  # fmt: skip


@pytest.mark.parametrize("settings", [{}, CHANGED], ids=["defaults", "every-setting-changed"])
def test_the_real_parser_reads_every_setting_back(tmp_path: Path, settings: dict[str, Any]) -> None:
    parsed = launched_args(_rendered(tmp_path, settings))
    wanted = {**{k: DEFAULTS[k] for k in FIELDS}, **settings}
    assert {FIELDS[k]: parsed[FIELDS[k]] for k in FIELDS} == {
        FIELDS[k]: v for k, v in wanted.items()}  # fmt: skip


def test_overload_protection_off_reaches_the_router(tmp_path: Path) -> None:
    parsed = launched_args(_rendered(tmp_path, {"router_overload_protection": False}))
    assert parsed["worker_overload_protection"] is False
    assert not parsed["worker_overload_shed"]


def test_the_overload_defaults_are_the_binarys_own(tmp_path: Path) -> None:
    bare = launched_args(["--worker-urls", "http://127.0.0.1:1"])
    tuned = [k for k in FIELDS if k.startswith(("router_overload", "router_warmup"))]
    assert {k: DEFAULTS[k] for k in tuned} == {k: bare[FIELDS[k]] for k in tuned}
    # What the role leaves off the command line at these values is what the binary assumes.
    overload, warmup = ROLE_VARS["router_smg_overload_defaults"], ROLE_VARS[
        "router_smg_warmup_defaults"]
    assert (overload["waiting_requests"], overload["token_usage"]) == (
        bare["worker_overload_waiting_requests"], bare["worker_overload_token_usage"])
    assert (warmup["seconds"], warmup["share"]) == (
        bare["worker_warmup_secs"], bare["worker_warmup_share"])


def test_at_the_defaults_the_command_line_has_no_flag_of_smg_1(tmp_path: Path) -> None:
    # So the same command starts sglang-router 0.3.2, which has neither: the upgrade path.
    argv = _rendered(tmp_path, {})
    assert not [arg for arg in argv if "overload" in arg or "warmup" in arg], argv
