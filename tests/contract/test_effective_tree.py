"""The draft-token count the profile facts give is the one SGLang's resolution runs, for every
verified version and every way the count is decided (specserve/profile/tree.py): a tree the
profile sets, a top-k 1 chain, a tree left to SGLang per target architecture (Kimi-K2.5's
wrapper, Llama's own tree), STANDALONE's fixed one, NGRAM's default and its given
count, adaptive's start. Each profile is rendered by the product and resolved by SGLang's code
(`--device cpu`, config-only fixtures) in one subprocess per version.

And the other side: a tree left to SGLang without `target.architecture` has no count, and
`check` refuses it naming the architecture config.json declares.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.facts import facts
from specserve.profile.model import profile_from_document
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import resolve_argvs
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
TREE = ("num_steps", "eagle_topk", "num_draft_tokens")


def _architecture(model: str) -> str:
    import json

    config = json.loads((FIXTURES / model / "config.json").read_text(encoding="utf-8"))
    return str(config["architectures"][0])


def _doc(profile: str, target: str, drafter: str | None, **drafter_fields: Any) -> dict[str, Any]:
    """A shipped profile on the config-only fixtures, its drafter block edited (None: removed)."""
    doc = copy.deepcopy(yaml.safe_load((ROOT / "profiles" / profile).read_text(encoding="utf-8")))
    doc["target"]["path"] = str(FIXTURES / target)
    doc["drafter"]["path"] = str(FIXTURES / drafter) if drafter else None
    if drafter is None:
        del doc["drafter"]["path"]
    doc.pop("baseline", None)
    for key, value in drafter_fields.items():
        if value is None:
            doc["drafter"].pop(key, None)
        else:
            doc["drafter"][key] = value
    return doc


def _unset_tree() -> dict[str, None]:
    return dict.fromkeys(TREE)


KIMI = ("kimi-k2.5-int4-eagle3-8gpu.yaml", "Kimi-K2.5", "kimi-k2.5-eagle3")
LLAMA = ("llama-3.1-8b-eagle3-1gpu.yaml", "Llama-3.1-8B-Instruct", "EAGLE3-LLaMA3.1-Instruct-8B")


def _cases() -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {
        "kimi as shipped": _doc(*KIMI),
        "llama as shipped": _doc(*LLAMA),
        "llama chain: top-k 1, draft tokens not steps + 1": _doc(
            *LLAMA, num_steps=4, eagle_topk=1, num_draft_tokens=9
        ),
        "standalone, tree unset": _doc(
            LLAMA[0], LLAMA[1], LLAMA[1], algorithm="STANDALONE", **_unset_tree()
        ),
        "ngram, tree unset": _doc(LLAMA[0], LLAMA[1], None, algorithm="NGRAM", **_unset_tree()),
        "ngram, 8 draft tokens": _doc(
            LLAMA[0], LLAMA[1], None, algorithm="NGRAM", num_steps=None, eagle_topk=None,
            num_draft_tokens=8,
        ),
        "adaptive, tree unset": _doc(*KIMI, adaptive=True, **_unset_tree()),
        "adaptive, 1 step": _doc(*KIMI, adaptive=True, num_steps=1, eagle_topk=None,
                                 num_draft_tokens=None),
    }  # fmt: skip
    for name, (profile, target, drafter) in {
        "kimi": KIMI,
        "llama": LLAMA,
    }.items():
        doc = _doc(profile, target, drafter, **_unset_tree())
        doc["target"]["architecture"] = _architecture(target)
        cases[f"{name}, tree left to SGLang"] = doc
    return cases


@cache
def _resolved(version: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    cases = _cases()
    argvs = [cpu_argv(_render_document(doc, version, "tree")) for doc in cases.values()]
    results = resolve_argvs(version, argvs)
    return {name: (cases[name], r) for name, r in zip(cases, results, strict=True)}


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(_cases()))
def test_the_draft_token_fact_is_what_sglang_runs(version: str, case: str) -> None:
    doc, result = _resolved(version)[case]
    assert result["ok"], f"{case}: SGLang {version} refuses: {result['error']}"
    profile = profile_from_document(doc, ROOT / "profiles" / "tree.yaml")
    sglang = result["resolved"]["speculative_num_draft_tokens"]
    assert isinstance(sglang, int) and sglang >= 2, result["resolved"]
    assert facts(profile).draft_tokens == sglang, (
        f"{case}: the facts say {facts(profile).draft_tokens}, SGLang {version} runs {sglang}"
    )
    errors = [
        i.render()
        for i in run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
        if i.severity.value == "error"
    ]
    # The chain is the one case `check` refuses (the profile says 9, SGLang runs 5): the fact
    # is what runs all the same.
    refused = ["drafter.num_draft_tokens"] if case.startswith("llama chain") else []
    assert [e.split(":")[1].strip() for e in errors] == refused, errors


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_tree_left_to_sglang_without_the_architecture_is_refused(version: str) -> None:
    doc = _doc(*KIMI, **_unset_tree())
    profile = profile_from_document(doc, ROOT / "profiles" / "tree.yaml")
    assert facts(profile).draft_tokens is None
    found = [i for i in run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
             if i.field == "target.architecture"]  # fmt: skip
    assert len(found) == 1 and found[0].severity.value == "error", found
    # SGLang's own count for this argv is the one the message promises.
    _, result = _resolved(version)["kimi, tree left to SGLang"]
    draft = result["resolved"]["speculative_num_draft_tokens"]
    assert f"set target.architecture: {_architecture(KIMI[1])}" in found[0].fix
    assert f"num_draft_tokens: {draft})" in found[0].fix


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_wrong_architecture_is_refused_where_config_json_is_readable(
    version: str, tmp_path: Path
) -> None:
    doc = _doc(*LLAMA, **_unset_tree())
    doc["target"]["architecture"] = "DeepseekV3ForCausalLM"  # SGLang would pick 3/1/4, not 5/4/8
    profile = profile_from_document(doc, tmp_path / "p.yaml")
    found = [i.render() for i in run_checks(profile, CheckOptions(configs_only=True,
                                                                  sglang_version=version))
             if i.field == "target.architecture"]  # fmt: skip
    assert found == [
        "error: target.architecture: DeepseekV3ForCausalLM but the target's config.json says "
        "LlamaForCausalLM. Fix: set target.architecture: LlamaForCausalLM"
    ]
