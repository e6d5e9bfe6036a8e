"""The filter baseline.yml and tune.yml write profiles with (specserve_profile_edit): the edit
of specserve.tune.edit (tests/tune/test_edit.py), its refusals turned into filter errors so the
play fails with the message."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from specserve.tune.edit import profile_edit

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"


def _plugin() -> ModuleType:
    path = ROOT / "ansible" / "plugins" / "filter" / "specserve_tune.py"
    spec = importlib.util.spec_from_file_location("specserve_tune_filter", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_filter_is_the_packages_edit() -> None:
    edit = _plugin().FilterModule().filters()["specserve_profile_edit"]
    text = STANDIN.read_text()
    point = {"num_steps": 2, "eagle_topk": 4, "num_draft_tokens": 8, "max_running_requests": 48}
    assert edit(text, point) == profile_edit(text, point)
    assert "drafter" not in yaml.safe_load(edit(text, "off"))
    measured = {"gen_throughput_tok_s": {"1": 90.04}, "source": "bench"}
    assert yaml.safe_load(edit(text, baseline=measured))["baseline"]["gen_throughput_tok_s"] == {
        "1": 90.0}


def test_a_refused_edit_is_a_filter_error_with_the_message() -> None:
    edit = _plugin().FilterModule().filters()["specserve_profile_edit"]
    plain = edit(STANDIN.read_text(), "off")
    with pytest.raises(AnsibleFilterError, match="no drafter to tune"):
        edit(plain, {"num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2})
