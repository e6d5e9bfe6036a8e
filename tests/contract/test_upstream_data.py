"""Drift: the committed SGLang contract data equals a fresh extraction from SGLang's real code.

For every verified version, scripts/sglang/extract_contract.py runs in that version's venv and
its output must equal specserve/upstream/data/sglang-<version>.json byte for byte. This is also
the test that fails when a tested SGLang version serves an EAGLE-3 drafter class the committed
data (and therefore `specserve check`) does not know.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.sglang_venv import ROOT, run_python

DATA = ROOT / "specserve" / "upstream" / "data"
EXTRACT = str(ROOT / "scripts" / "sglang" / "extract_contract.py")


@cache
def fresh(version: str) -> dict[str, Any]:
    extracted: dict[str, Any] = run_python(version, [EXTRACT], None)
    return extracted


def committed(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"sglang-{version}.json").read_text())
    return data


def architectures(doc: dict[str, Any], kind: str) -> set[str]:
    return {d["architecture"] for d in doc["models"][kind]}


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_venv_runs_the_version_it_is_named_for(version: str) -> None:
    assert fresh(version)["sglang_version"] == version


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglang_serves_no_drafter_class_the_committed_data_does_not_know(version: str) -> None:
    now, then = fresh(version), committed(version)
    for kind in ("eagle3_drafters", "eagle_drafters", "mtp_drafters", "dflash_drafters",
                 "dspark_drafters"):
        unknown = architectures(now, kind) - architectures(then, kind)
        assert not unknown, (
            f"SGLang {version} serves {kind.replace('_', ' ')} the committed data does not know: "
            f"{sorted(unknown)}; `specserve check` would not recognise them. "
            f"Run scripts/sglang/regenerate {version} and commit the result"
        )


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_committed_data_equals_a_fresh_extraction(version: str) -> None:
    now, then = fresh(version), committed(version)
    differing = sorted(key for key in now.keys() | then.keys() if now.get(key) != then.get(key))
    assert not differing, (
        f"specserve/upstream/data/sglang-{version}.json differs from SGLang {version}'s code in "
        f"{differing}; run scripts/sglang/regenerate {version} and commit the result"
    )
    # Byte for byte too: the extraction is deterministic, so the file is its exact output.
    text = json.dumps(now, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert (DATA / f"sglang-{version}.json").read_text(encoding="utf-8") == text


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_registry_has_the_drafters_the_product_deploys(version: str) -> None:
    c = sglang_contract(version)
    # The field notes' drafter and the MLA drafter of SGLang's current Kimi-K2.5 recipe.
    assert {
        "LlamaForCausalLMEagle3",
        "Eagle3DeepseekV2ForCausalLM",
    } <= c.eagle3_drafter_architectures
    modules = {d.architecture: d.module for d in c.eagle3_drafters}
    assert modules["Eagle3DeepseekV2ForCausalLM"] == "sglang/srt/models/kimi_k25_eagle3.py"
    assert modules["LlamaForCausalLMEagle3"] == "sglang/srt/models/llama_eagle3.py"
    assert {"LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle", "MistralForCausalLMEagle"} <= (
        c.eagle_drafter_architectures
    )
    assert "DeepseekV3ForCausalLMNextN" in c.mtp_drafter_architectures
    # A target is never listed as a drafter, although targets capture aux states on demand.
    for target in ("LlamaForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"):
        assert target in c.served_architectures
        assert c.drafter_kind(target) is None


def test_data_files_are_only_for_verified_versions() -> None:
    files = {p.name for p in Path(DATA).glob("sglang-*.json")}
    assert files == {f"sglang-{v}.json" for v in VERIFIED_VERSIONS}, (
        "remove data of versions no longer in versions.yaml sglang.verified"
    )
