"""The tune role's `specserve bench` passes the profile's server.request_class_label as
--class-label, so the baseline's and every grid point's runs label their own traffic; a
profile without one adds nothing. The task's own argv and vars templates, rendered by Ansible's
templar with the role's variables (the full tune run: tests/ansible/test_tune.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

TASKS = Path(__file__).resolve().parents[2] / "ansible" / "roles" / "tune" / "tasks" / "bench.yml"
BASE = {
    "specserve_cli": "specserve", "tune_server_url": "http://node:8000",
    "tune_exporter_url": "http://node:9433/metrics", "tune_bench_levels": [1, 2],
    "tune_bench_max_tokens": 64, "tune_bench_out": "/tmp/out", "tune_bench_requests_per_level": 0,
    "specserve_api_key": "",
}  # fmt: skip


def _argv(profile_text: str) -> list[str]:
    task = next(t for t in yaml.safe_load(TASKS.read_text())[0]["block"]
                if "specserve_follow" in t)
    variables: dict[str, Any] = {**BASE, "tune_profile_text": profile_text}
    for name, template in task["vars"].items():
        variables[name] = Templar(loader=DataLoader(), variables=variables).template(
            trust_as_template(template))
    templar = Templar(loader=DataLoader(), variables=variables)
    return list(templar.template(trust_as_template(task["specserve_follow"]["argv"])))


def test_the_profiles_class_label_is_passed() -> None:
    argv = _argv("name: p\nserver:\n  port: 8000\n  request_class_label: workload_class\n")
    assert argv[argv.index("--class-label") + 1] == "workload_class"
    assert argv[:2] == ["specserve", "bench"]


@pytest.mark.parametrize("text", ["name: p\n", "name: p\nserver:\n",
                                  "name: p\nserver:\n  request_class_label: null\n"])
def test_no_label_no_flag(text: str) -> None:
    argv = _argv(text)
    assert "--class-label" not in argv and "--overwrite" in argv
