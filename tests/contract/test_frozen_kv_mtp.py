"""A Gemma-4 assistant drafter under EAGLE or NEXTN: SGLang runs FROZEN_KV_MTP instead
(`_resolve_speculative_algorithm_alias`, 0.5.21 and 0.5.23, with only an info log), an algorithm
the profile does not take, so `check` refuses it; under EAGLE3 SGLang refuses to start, and
`check` quotes it. Each profile is rendered by the product and resolved by SGLang's code.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue
from specserve.profile.model import profile_from_document
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import resolve_argvs
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
GEMMA4 = str(FIXTURES / "gemma4-assistant")
ALGORITHMS = ("EAGLE", "NEXTN", "eagle", "EAGLE3", "STANDALONE")


def _doc(algorithm: str) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc.pop("baseline", None)
    doc["drafter"] = {"algorithm": algorithm, "path": GEMMA4, "num_steps": 3, "eagle_topk": 1,
                      "num_draft_tokens": 4}  # fmt: skip
    return doc


@cache
def _resolved(version: str) -> dict[str, dict[str, Any]]:
    argvs = [cpu_argv(_render_document(_doc(a), version, "gemma4")) for a in ALGORITHMS]
    return dict(zip(ALGORITHMS, resolve_argvs(version, argvs), strict=True))


def _algorithm_errors(algorithm: str, version: str) -> list[Issue]:
    profile = profile_from_document(_doc(algorithm), ROOT / "profiles" / "gemma4.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [i for i in issues if i.severity.value == "error" and i.field == "drafter.algorithm"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "eagle"])
def test_eagle_or_nextn_with_a_gemma4_assistant_runs_frozen_kv_mtp_and_is_refused(
    version: str, algorithm: str
) -> None:
    result = _resolved(version)[algorithm]
    assert result["ok"], result
    assert result["resolved"]["speculative_algorithm"] == "FROZEN_KV_MTP", result["resolved"]
    [err] = _algorithm_errors(algorithm, version)
    assert f"runs it as FROZEN_KV_MTP, not {algorithm.upper()}" in err.problem
    assert f"promoting --speculative-algorithm {algorithm.upper()} to FROZEN_KV_MTP" in (
        err.problem
    )


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_eagle3_with_a_gemma4_assistant_is_refused_in_sglangs_words(version: str) -> None:
    result = _resolved(version)["EAGLE3"]
    assert not result["ok"] and result["stage"] == "resolve", result
    said = result["error"].removeprefix("ValueError: ")
    [err] = _algorithm_errors("EAGLE3", version)
    assert f'"{said}"' in err.problem, (said, err.problem)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_standalone_with_a_gemma4_assistant_is_not_promoted_and_is_refused(version: str) -> None:
    """SGLang promotes only EAGLE / NEXTN: STANDALONE stays, loading the assistant as a plain
    draft model, which check refuses naming FROZEN_KV_MTP."""
    result = _resolved(version)["STANDALONE"]
    assert result["ok"] and result["resolved"]["speculative_algorithm"] == "STANDALONE", result
    [err] = _algorithm_errors("STANDALONE", version)
    assert "runs only as FROZEN_KV_MTP (given EAGLE or NEXTN), not as STANDALONE" in err.problem
