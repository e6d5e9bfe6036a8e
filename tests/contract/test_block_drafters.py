"""DFLASH and DSPARK, SGLang's block drafters, as profile choices: what `check` accepts resolves
with SGLang's real `prepare_server_args` + resolution on every verified version, to the
draft-token count the profile facts give; what `check` refuses, SGLang refuses in the words the
check quotes; what SGLang changes with only a log warning, `check` refuses quoting that warning.

Each profile is rendered by the product and resolved in one subprocess per version. The argv runs
with `--device cuda`: `_handle_dflash` / `_handle_dspark` refuse any other device before reading
anything else, and resolution needs no GPU for the fields compared here. The drafters are the
config-only fixtures tests/fixtures/models/llama-3.1-8b-dflash (block_size 16) and
llama-3.1-8b-dspark (gamma 7); the target is Llama-3.1-8B-Instruct's config.
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
from specserve.profile.issues import Issue
from specserve.profile.model import profile_from_document
from specserve.profile.sglang import speculative_running_cap
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import resolve_argvs
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
DFLASH = str(FIXTURES / "llama-3.1-8b-dflash")
DSPARK = str(FIXTURES / "llama-3.1-8b-dspark")
EAGLE3 = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")


def _doc(algorithm: str, path: str | None, **drafter: Any) -> dict[str, Any]:
    """The shipped Llama profile on the fixtures, with this drafter block (tree unset)."""
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc.pop("baseline", None)
    block = {"algorithm": algorithm, **({"path": path} if path else {}), **drafter}
    doc["drafter"] = {k: v for k, v in block.items() if v is not None}
    return doc


def _dp(doc: dict[str, Any], *extra: str) -> dict[str, Any]:
    """`doc` on 2 GPUs with DP attention over 2 ranks."""
    doc["parallelism"] = {"tp": 2, "dp": 2, "enable_dp_attention": True}
    doc["gpu"]["count"] = 2
    doc["server"]["extra_args"] = list(extra)
    return doc


def gpu_argv(argv: list[str]) -> list[str]:
    out = cpu_argv(argv)
    out[out.index("--device") + 1] = "cuda"
    return out


# name -> the profile; each resolves on every verified version, `check` finds no error.
ACCEPTED: dict[str, dict[str, Any]] = {
    "dflash, block 16": _doc("DFLASH", DFLASH, dflash_block_size=16),
    "dflash, block 10 (not the drafter's)": _doc("DFLASH", DFLASH, dflash_block_size=10),
    "dflash, draft tokens 12 only": _doc("DFLASH", DFLASH, num_draft_tokens=12),
    "dflash, block and draft tokens equal": _doc(
        "DFLASH", DFLASH, dflash_block_size=8, num_draft_tokens=8
    ),
    "dflash, steps and top-k 1": _doc("DFLASH", DFLASH, dflash_block_size=16, num_steps=1,
                                      eagle_topk=1),
    "dspark, gamma 7": _doc("DSPARK", DSPARK, dspark_block_size=7),
    "dspark, gamma 4 (not the drafter's)": _doc("DSPARK", DSPARK, dspark_block_size=4),
    "dspark, draft tokens 8 = the drafter's gamma + 1": _doc("DSPARK", DSPARK, num_draft_tokens=8),
    "dspark, gamma and draft tokens agree": _doc(
        "DSPARK", DSPARK, dspark_block_size=5, num_draft_tokens=6
    ),
    "dflash, lower case": _doc("dflash", DFLASH, dflash_block_size=16),
}  # fmt: skip

# name -> (profile, the field check refuses, the words SGLang's resolution fails with per
# version (one string: every version)).
REFUSED: dict[str, tuple[dict[str, Any], str, str | dict[str, str]]] = {
    "dflash, block and draft tokens differ": (
        _doc("DFLASH", DFLASH, dflash_block_size=16, num_draft_tokens=10),
        "drafter.num_draft_tokens",
        "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but "
        "they differ. For DFLASH they must match.",
    ),
    "dflash, no drafter": (
        _doc("DFLASH", None, dflash_block_size=16),
        "drafter.path",
        "DFLASH speculative decoding requires setting --speculative-draft-model-path.",
    ),
    "dspark, draft tokens not gamma + 1": (
        _doc("DSPARK", DSPARK, dspark_block_size=7, num_draft_tokens=5),
        "drafter.num_draft_tokens",
        "DSpark speculative_num_draft_tokens must equal gamma + 1 (= 8 for gamma=7), but got "
        "speculative_num_draft_tokens=5.",
    ),
    "dspark, draft tokens not the drafter's gamma + 1": (
        _doc("DSPARK", DSPARK, num_draft_tokens=5),
        "drafter.num_draft_tokens",
        "DSpark speculative_num_draft_tokens must equal gamma + 1 (= 8 for gamma=7), but got "
        "speculative_num_draft_tokens=5.",
    ),
    "dspark, no drafter": (
        _doc("DSPARK", None, dspark_block_size=7),
        "drafter.path",
        "DSpark dense speculative decoding requires setting --speculative-draft-model-path.",
    ),
    "dflash, dp attention": (
        _dp(_doc("DFLASH", DFLASH, dflash_block_size=16)),
        "parallelism.enable_dp_attention",
        {
            "0.5.21": "Currently DFLASH speculative decoding does not support dp attention on "
            "non-NPU devices.",
            "0.5.23": "DFLASH with dp attention requires --enable-dp-lm-head.",
        },
    ),
    "dspark, dp attention": (
        _dp(_doc("DSPARK", DSPARK, dspark_block_size=7)),
        "parallelism.enable_dp_attention",
        "DSpark with dp attention requires --enable-dp-lm-head.",
    ),
}

# name -> (profile, the field check refuses, the log warning SGLang resolves it with, the field
# SGLang changes and the value it runs).
CHANGED: dict[str, tuple[dict[str, Any], str, str, str, int]] = {
    f"{algorithm.lower()}, {field} {value}": (
        _doc(algorithm, path, **{block: size, field: value}),
        f"drafter.{field}",
        f"{name} only supports speculative_{field} == 1; overriding speculative_{field}={value} "
        "to 1.",
        f"speculative_{field}",
        1,
    )
    for algorithm, name, path, block, size in (
        ("DFLASH", "DFLASH", DFLASH, "dflash_block_size", 16),
        ("DSPARK", "DSpark", DSPARK, "dspark_block_size", 7),
    )
    for field, value in (("num_steps", 3), ("eagle_topk", 4))
}


def _all() -> dict[str, dict[str, Any]]:
    docs = dict(ACCEPTED)
    docs.update({name: case[0] for name, case in REFUSED.items()})
    docs.update({name: case[0] for name, case in CHANGED.items()})
    docs["dflash, block unset"] = _doc("DFLASH", DFLASH)
    docs["dspark, gamma unset"] = _doc("DSPARK", DSPARK)
    docs["eagle3 chain"] = _doc("EAGLE3", EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4)
    docs["eagle3 chain + dspark_block_size"] = _doc(
        "EAGLE3", EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4, dspark_block_size=7
    )
    docs["eagle3 chain + dflash_block_size"] = _doc(
        "EAGLE3", EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4, dflash_block_size=16
    )
    docs["dflash, dp attention, dp lm head"] = _dp(
        _doc("DFLASH", DFLASH, dflash_block_size=16), "--enable-dp-lm-head"
    )
    return docs


@cache
def _resolved(version: str) -> dict[str, dict[str, Any]]:
    docs = _all()
    argvs = [gpu_argv(_render_document(doc, version, "block")) for doc in docs.values()]
    return dict(zip(docs, resolve_argvs(version, argvs), strict=True))


def _issues(doc: dict[str, Any], version: str) -> list[Issue]:
    profile = profile_from_document(doc, ROOT / "profiles" / "block.yaml")
    return run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))


def _errors(doc: dict[str, Any], version: str) -> list[Issue]:
    return [i for i in _issues(doc, version) if i.severity.value == "error"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_an_accepted_block_drafter_profile_resolves_to_its_facts(version: str, case: str) -> None:
    doc = ACCEPTED[case]
    result = _resolved(version)[case]
    assert result["ok"], f"{case}: SGLang {version} refuses: {result['error']}"
    resolved = result["resolved"]
    profile = profile_from_document(doc, ROOT / "profiles" / "block.yaml")
    algorithm = profile.speculative.algorithm  # type: ignore[union-attr]
    assert resolved["speculative_algorithm"] == algorithm
    assert (resolved["speculative_num_steps"], resolved["speculative_eagle_topk"]) == (1, 1)
    assert facts(profile).draft_tokens == resolved["speculative_num_draft_tokens"], (case, resolved)
    cap = speculative_running_cap(sglang_contract(version), algorithm)
    assert cap == 48
    assert [i.render() for i in _errors(doc, version)] == []


def test_the_accepted_counts_are_the_block_rules() -> None:
    """The counts the cases above hold to SGLang's, worked out by hand: DFLASH's block size is
    the count, DSPARK's gamma + 1."""
    counts = {
        name: facts(profile_from_document(doc, ROOT / "profiles" / "b.yaml")).draft_tokens
        for name, doc in ACCEPTED.items()
    }
    assert counts == {
        "dflash, block 16": 16,
        "dflash, block 10 (not the drafter's)": 10,
        "dflash, draft tokens 12 only": 12,
        "dflash, block and draft tokens equal": 8,
        "dflash, steps and top-k 1": 16,
        "dspark, gamma 7": 8,
        "dspark, gamma 4 (not the drafter's)": 5,
        "dspark, draft tokens 8 = the drafter's gamma + 1": 8,
        "dspark, gamma and draft tokens agree": 6,
        "dflash, lower case": 16,
    }


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_block_drafter_profile_is_refused_by_sglang_in_the_checks_words(
    version: str, case: str
) -> None:
    doc, field, words = REFUSED[case]
    said = words if isinstance(words, str) else words[version]
    result = _resolved(version)[case]
    assert not result["ok"] and result["stage"] == "resolve", result
    assert said in result["error"], f"SGLang {version}: {result['error']}"
    errors = [i for i in _errors(doc, version) if i.field == field]
    assert len(errors) == 1, [i.render() for i in _issues(doc, version)]
    assert said in errors[0].problem, errors[0].render()


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(CHANGED))
def test_what_sglang_overrides_with_a_warning_is_an_error(version: str, case: str) -> None:
    doc, field, warned, dest, runs = CHANGED[case]
    result = _resolved(version)[case]
    assert result["ok"], result
    assert result["resolved"][dest] == runs, result["resolved"]
    assert any(warned in w for w in result["warnings"]), result["warnings"]
    errors = [i for i in _errors(doc, version) if i.field == field]
    assert len(errors) == 1 and warned in errors[0].problem, [i.render() for i in errors]
    # Without the overridden field the profile is accepted, and runs what SGLang ran.
    fixed = copy.deepcopy(doc)
    del fixed["drafter"][field.split(".")[1]]
    assert _errors(fixed, version) == []
    profile = profile_from_document(doc, ROOT / "profiles" / "block.yaml")
    assert facts(profile).draft_tokens == result["resolved"]["speculative_num_draft_tokens"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize(("case", "field", "read"), [
    ("dflash, block unset", "dflash_block_size", 16),
    ("dspark, gamma unset", "dspark_block_size", 7),
])  # fmt: skip
def test_a_block_left_to_the_drafters_config_is_refused_naming_it(
    version: str, case: str, field: str, read: int
) -> None:
    """SGLang reads the block from the drafter's config.json; the facts cannot, so `check` asks
    for it, naming the value SGLang resolves; with that value the count is SGLang's."""
    doc = _all()[case]
    profile = profile_from_document(doc, ROOT / "profiles" / "block.yaml")
    assert facts(profile).draft_tokens is None
    [err] = _errors(doc, version)
    assert err.field == f"drafter.{field}" and err.fix == f"set drafter.{field}: {read}"
    result = _resolved(version)[case]
    assert result["ok"], result
    fixed = copy.deepcopy(doc)
    fixed["drafter"][field] = read
    assert _errors(fixed, version) == []
    fixed_count = facts(profile_from_document(fixed, ROOT / "profiles" / "b.yaml")).draft_tokens
    assert fixed_count == result["resolved"]["speculative_num_draft_tokens"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("field", ["dspark_block_size", "dflash_block_size"])
def test_a_block_size_given_another_algorithm_is_ignored_by_sglang_and_refused(
    version: str, field: str
) -> None:
    resolved = _resolved(version)
    plain, stray = resolved["eagle3 chain"], resolved[f"eagle3 chain + {field}"]
    assert plain["ok"] and stray["ok"], (plain, stray)
    assert stray["resolved"] == plain["resolved"]  # nothing SGLang runs changes
    errors = [i for i in _errors(_all()[f"eagle3 chain + {field}"], version)]
    assert [i.field for i in errors] == [f"drafter.{field}"], [i.render() for i in errors]
    assert "ignores it silently" in errors[0].problem


def test_dflash_with_dp_attention_and_the_dp_lm_head_is_what_0_5_23_accepts() -> None:
    """0.5.23 takes DFLASH under DP attention with --enable-dp-lm-head, 0.5.21 never."""
    doc = _all()["dflash, dp attention, dp lm head"]
    newer, older = (
        _resolved("0.5.23")["dflash, dp attention, dp lm head"],
        _resolved("0.5.21")["dflash, dp attention, dp lm head"],
    )
    assert newer["ok"], newer
    assert not older["ok"] and "does not support dp attention" in older["error"], older
    dp_errors = {
        v: [i for i in _errors(doc, v) if i.field == "parallelism.enable_dp_attention"]
        for v in ("0.5.21", "0.5.23")
    }
    assert dp_errors["0.5.23"] == []
    assert len(dp_errors["0.5.21"]) == 1


def test_the_fixtures_hold_what_the_cases_assume() -> None:
    """The drafter fixtures' classes are their algorithm's in every verified version's
    registry, and their block sizes are those the cases above name."""
    import json

    for version in VERIFIED_VERSIONS:
        contract = sglang_contract(version)
        for path, kind in ((DFLASH, "DFLASH"), (DSPARK, "DSPARK")):
            config = json.loads(Path(path, "config.json").read_text(encoding="utf-8"))
            assert contract.drafter_kind(config["architectures"][0]) == kind
    assert json.loads(Path(DFLASH, "config.json").read_text())["block_size"] == 16
    assert json.loads(Path(DSPARK, "config.json").read_text())["dflash_config"]["block_size"] == 7
