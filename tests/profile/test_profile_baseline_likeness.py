"""Like for like (issue 18 item 2): a speculative profile is judged only against a baseline
measured under its own settings; `specserve check` names each setting that differs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.baseline import check_baseline
from specserve.profile.issues import Severity
from specserve.profile.likeness import (
    SETTINGS,
    compare,
    effective_max_running_requests,
    profile_settings,
    recorded_settings,
)
from specserve.profile.model import profile_from_document
from specserve.profile.schema import profile_schema
from specserve.upstream import PINNED_VERSION
from tests.profile.helpers import check_json, kimi_doc, write_doc

IMAGE = "specserve/sglang:0.1.0-sglang0.5.21-cu130"


def _measured(doc: dict[str, Any]) -> dict[str, Any]:
    """The settings a baseline of `doc` records when measured right (what baseline.yml writes)."""
    return profile_settings(profile_from_document(doc), IMAGE, PINNED_VERSION)


def _recorded_doc(**changes: Any) -> dict[str, Any]:
    """The Kimi profile with a baseline recorded under its own settings, then `changes` to the
    recorded values."""
    doc = kimi_doc()
    doc["baseline"].update(_measured(doc))
    doc["baseline"].update(changes)
    return doc


def _issues(doc: dict[str, Any], image: str | None = IMAGE) -> list[Any]:
    return check_baseline(profile_from_document(doc), image, PINNED_VERSION)


def test_the_recorded_block_validates_and_names_every_setting() -> None:
    doc = _recorded_doc()
    jsonschema.validate(doc, profile_schema())
    assert list(recorded_settings(doc)) == list(SETTINGS)
    assert _issues(doc) == []


# Each setting the issue names, recorded with another value than the profile's; what the
# message must say about it.
DIFFERENT = {
    "image": ("specserve/sglang:0.1.0-sglang0.5.23-cu130", "baseline.image = "),
    "sglang_version": ("0.5.23", "baseline.sglang_version = '0.5.23' but the SGLang version"),
    "target": ("/models/Other", "baseline.target = '/models/Other' but target.path = "),
    "tp": (4, "baseline.tp = 4 but parallelism.tp = 8"),
    "dp": (2, "baseline.dp = 2 but parallelism.dp = 1"),
    "ep": (8, "baseline.ep = 8 but parallelism.ep = 1"),
    "max_running_requests": (
        None,
        "baseline.max_running_requests = null but server.max_running_requests (effective) = 48",
    ),
    "context_length": (8192, "baseline.context_length = 8192 but target.context_length = null"),
    "disable_cuda_graph": (
        True,
        "baseline.disable_cuda_graph = True but server.disable_cuda_graph = False",
    ),
    "cuda_graph_max_bs": (
        16,
        "baseline.cuda_graph_max_bs = 16 but server.cuda_graph_max_bs = null",
    ),
    "nccl_preset": ("default", "baseline.nccl_preset = 'default' but nccl.preset = "),
}


def test_every_setting_the_issue_names_is_compared() -> None:
    assert set(DIFFERENT) == set(SETTINGS)


@pytest.mark.parametrize("setting", list(DIFFERENT))
def test_a_differing_setting_is_an_error_naming_it_and_the_fix(setting: str) -> None:
    value, said = DIFFERENT[setting]
    issues = _issues(_recorded_doc(**{setting: value}))
    assert [i.severity for i in issues] == [Severity.ERROR], issues
    (issue,) = issues
    assert issue.field == "baseline"
    assert said in issue.problem, issue.problem
    # Only the setting that differs is named.
    others = [k for k in SETTINGS if k != setting and f"baseline.{k} =" in issue.problem]
    assert others == [], issue.problem
    assert "playbooks/baseline.yml" in issue.fix


def test_several_differences_are_named_together() -> None:
    issues = _issues(_recorded_doc(tp=4, max_running_requests=64, image="other:1"))
    (issue,) = issues
    for said in ("baseline.tp = 4", "baseline.max_running_requests = 64", "baseline.image = "):
        assert said in issue.problem


def test_unset_cap_is_sglangs_48_under_speculation_and_none_without() -> None:
    doc = kimi_doc()
    del doc["server"]["max_running_requests"]
    profile = profile_from_document(doc)
    assert effective_max_running_requests(profile) == 48
    # A baseline measured with the cap pinned to 48 matches the profile that leaves it unset.
    doc["baseline"].update(_measured(doc))
    assert doc["baseline"]["max_running_requests"] == 48
    assert _issues(doc) == []
    off = copy.deepcopy(doc)
    off["drafter"] = None
    assert effective_max_running_requests(profile_from_document(off)) is None


def test_the_sglang_version_compares_the_release_not_the_local_label() -> None:
    # The stand-in reports `0.5.21+specserve-standin`; the release is what check targets.
    doc = _recorded_doc(sglang_version=f"{PINNED_VERSION}+specserve-standin")
    assert _issues(doc) == []
    assert _issues(_recorded_doc(sglang_version="0.5.23+specserve-standin"))


def test_image_is_compared_only_when_the_deploy_names_it() -> None:
    doc = _recorded_doc(image="somewhere/else:1")
    assert _issues(doc, image=None) == []
    assert _issues(doc, image=IMAGE)


def test_a_baseline_without_recorded_settings_is_a_warning() -> None:
    doc = kimi_doc()  # the field notes' baseline: numbers, no settings
    (issue,) = _issues(doc)
    assert issue.severity is Severity.WARNING
    assert "records none of the settings it was measured with" in issue.problem
    assert "playbooks/baseline.yml" in issue.fix


def test_a_partly_recorded_baseline_warns_naming_what_is_missing() -> None:
    doc = _recorded_doc()
    del doc["baseline"]["context_length"], doc["baseline"]["nccl_preset"]
    (issue,) = _issues(doc)
    assert issue.severity is Severity.WARNING
    assert "does not record baseline.context_length, baseline.nccl_preset" in issue.problem


def test_nothing_to_compare_without_speculation_or_without_numbers() -> None:
    off = _recorded_doc(tp=4)
    off["drafter"] = None
    assert not compare(profile_from_document(off)).applies
    empty = _recorded_doc(tp=4)
    empty["baseline"]["gen_throughput_tok_s"] = {}
    assert not compare(profile_from_document(empty)).applies


def test_only_check_compares_not_the_launcher_or_tuning_points() -> None:
    profile = profile_from_document(_recorded_doc(tp=4))
    quiet = run_checks(profile, CheckOptions(configs_only=True))
    assert not [i for i in quiet if i.field == "baseline"]
    loud = run_checks(profile, CheckOptions(configs_only=True, compare_baseline=True))
    assert [i.severity for i in loud if i.field == "baseline"] == [Severity.ERROR]


def test_the_check_cli_refuses_and_names_the_settings(tmp_path: Path) -> None:
    path = write_doc(tmp_path, _recorded_doc(max_running_requests=None, tp=4))
    code, report = check_json(path, "--configs-only", "--image", IMAGE)
    assert code == 1
    (issue,) = [i for i in report["errors"] if i["field"] == "baseline"]
    assert "baseline.max_running_requests = null" in issue["problem"]
    assert "baseline.tp = 4 but parallelism.tp = 8" in issue["problem"]
    assert "re-run playbooks/baseline.yml" in issue["fix"]
    # --no-baseline-check (baseline.yml, which re-measures it) does not compare.
    code, report = check_json(path, "--configs-only", "--no-baseline-check")
    assert not [i for i in report["errors"] if i["field"] == "baseline"]
    assert code == 0, report


def test_the_check_cli_passes_a_like_for_like_baseline(tmp_path: Path) -> None:
    path = write_doc(tmp_path, _recorded_doc())
    code, report = check_json(path, "--configs-only", "--image", IMAGE)
    assert code == 0, report
    assert not [i for i in report["errors"] + report["warnings"] if i["field"] == "baseline"]
    # The same profile deployed with another image is refused.
    code, report = check_json(path, "--configs-only", "--image", "specserve/sglang:other")
    assert code == 1
    assert "baseline.image = " in report["errors"][0]["problem"]
