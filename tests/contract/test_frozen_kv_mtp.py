"""A Gemma-4 assistant drafter under EAGLE or NEXTN: SGLang runs FROZEN_KV_MTP instead
(`_resolve_speculative_algorithm_alias`, 0.5.21 and 0.5.23, with only an info log), so `check`
refuses it and points at `algorithm: FROZEN_KV_MTP`, which the profile takes with that drafter
and its whole tree (`_handle_frozen_kv_mtp` picks none); under EAGLE3 SGLang refuses to start,
and `check` quotes it. Each profile is rendered by the product and resolved by SGLang's code.
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


def _resolve_docs(version: str, docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each document rendered by the product and resolved by SGLang `version`, by name."""
    argvs = [cpu_argv(_render_document(doc, version, "gemma4")) for doc in docs.values()]
    return dict(zip(docs, resolve_argvs(version, argvs), strict=True))


def _errors(doc: dict[str, Any], version: str) -> list[Issue]:
    profile = profile_from_document(doc, ROOT / "profiles" / "gemma4.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [i for i in issues if i.severity.value == "error"]


@cache
def _resolved(version: str) -> dict[str, dict[str, Any]]:
    return _resolve_docs(version, {a: _doc(a) for a in ALGORITHMS})


def _algorithm_errors(algorithm: str, version: str) -> list[Issue]:
    return [i for i in _errors(_doc(algorithm), version) if i.field == "drafter.algorithm"]


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


# FROZEN_KV_MTP as the profile's own choice: (name, drafter path, tree given).
FROZEN_CASES: dict[str, tuple[str, bool]] = {
    "gemma4 with its tree": (GEMMA4, True),
    "gemma4 without a tree": (GEMMA4, False),
    "an EAGLE-3 drafter": (str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B"), True),
}


def _frozen_doc(case: str) -> dict[str, Any]:
    path, tree = FROZEN_CASES[case]
    doc = _doc("FROZEN_KV_MTP")
    doc["drafter"]["path"] = path
    if not tree:
        for name in ("num_steps", "eagle_topk", "num_draft_tokens"):
            del doc["drafter"][name]
    return doc


@cache
def _frozen_resolved(version: str) -> dict[str, dict[str, Any]]:
    return _resolve_docs(version, {c: _frozen_doc(c) for c in FROZEN_CASES})


def _frozen_errors(case: str, version: str) -> list[Issue]:
    return _errors(_frozen_doc(case), version)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_frozen_kv_mtp_with_a_gemma4_assistant_and_its_tree_runs_as_the_profile_says(
    version: str,
) -> None:
    result = _frozen_resolved(version)["gemma4 with its tree"]
    assert result["ok"], result
    resolved = result["resolved"]
    assert resolved["speculative_algorithm"] == "FROZEN_KV_MTP"
    assert (resolved["speculative_num_steps"], resolved["speculative_eagle_topk"],
            resolved["speculative_num_draft_tokens"]) == (3, 1, 4)  # fmt: skip
    assert _frozen_errors("gemma4 with its tree", version) == []


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_frozen_kv_mtp_without_a_tree_is_refused_as_sglang_leaves_it_unset(version: str) -> None:
    result = _frozen_resolved(version)["gemma4 without a tree"]
    assert result["ok"], result
    resolved = result["resolved"]
    assert resolved["speculative_algorithm"] == "FROZEN_KV_MTP"
    assert (resolved["speculative_num_steps"], resolved["speculative_eagle_topk"],
            resolved["speculative_num_draft_tokens"]) == (None, None, None)  # fmt: skip
    [err] = _frozen_errors("gemma4 without a tree", version)
    assert err.field == "drafter.num_steps" and "leaves" in err.problem, err


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_frozen_kv_mtp_with_another_drafter_starts_in_sglang_and_is_refused(version: str) -> None:
    """SGLang does not look at the drafter's class for FROZEN_KV_MTP (only EAGLE / NEXTN are
    promoted by it): resolution passes, check refuses naming the Gemma-4 assistant classes."""
    result = _frozen_resolved(version)["an EAGLE-3 drafter"]
    assert result["ok"] and result["resolved"]["speculative_algorithm"] == "FROZEN_KV_MTP", result
    errors = [e for e in _frozen_errors("an EAGLE-3 drafter", version)
              if e.field == "drafter.algorithm"]  # fmt: skip
    [err] = errors
    assert "Gemma4AssistantForCausalLM" in err.problem and "LlamaForCausalLMEagle3" in err.problem
