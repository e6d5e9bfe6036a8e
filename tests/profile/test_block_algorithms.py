"""DFLASH and DSPARK against SGLang's model registry (specserve/upstream/data, per verified
version), both ways: every class of another family given a block algorithm is an error naming
the algorithm that loads it; a class in no family is an error naming the classes the algorithm
takes; every class of its own family is accepted. And the schema: every SGLang built-in is a
profile choice (UNO included). (tests/contract/test_block_drafters.py resolves the accepted and
refused profiles with SGLang's own code.)
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.algorithms import (
    BLOCK_ALGORITHMS,
    FROZEN_KV_MTP_DRAFTERS,
    SPECULATIVE_ALGORITHMS,
)
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue
from specserve.profile.model import profile_from_document
from specserve.profile.schema import schema_issues
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from specserve.upstream.contract import BLOCK_DRAFTER_KINDS, DRAFTER_ALGORITHMS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
BLOCK_FIELD = {"DFLASH": ("dflash_block_size", 16), "DSPARK": ("dspark_block_size", 7)}
SOURCE = {"DFLASH": "llama-3.1-8b-dflash", "DSPARK": "llama-3.1-8b-dspark"}


def _doc(algorithm: str, drafter: Path, **fields: Any) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc.pop("baseline", None)
    field, size = BLOCK_FIELD[algorithm]
    doc["drafter"] = {"algorithm": algorithm, "path": str(drafter), field: size, **fields}
    return doc


def _drafter(tmp: Path, algorithm: str, architecture: str, **changes: Any) -> Path:
    """The algorithm's drafter fixture with another class (and keys) in its config.json."""
    config = json.loads((FIXTURES / SOURCE[algorithm] / "config.json").read_text())
    config.update(architectures=[architecture], **changes)
    path = tmp / f"{algorithm}-{architecture}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def _errors(doc: dict[str, Any], version: str, field: str) -> list[Issue]:
    profile = profile_from_document(doc, ROOT / "profiles" / "b.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [i for i in issues if i.severity.value == "error" and i.field == field]


def _families(version: str) -> dict[str, list[tuple[str, str]]]:
    """kind -> [(class, module)] for every drafter family of the version's registry."""
    c = sglang_contract(version)
    families = {
        "EAGLE3": c.eagle3_drafters,
        "EAGLE": c.eagle_drafters,
        "MTP": c.mtp_drafters,
        **c.block_drafters,
    }
    return {k: [(d.architecture, d.module) for d in v] for k, v in families.items()}


def test_every_family_s_algorithm_is_a_profile_choice() -> None:
    # The fix of a wrong-family error names DRAFTER_ALGORITHMS[kind][0]: it must be takeable.
    assert set(BLOCK_ALGORITHMS) == set(BLOCK_DRAFTER_KINDS)
    for takes in DRAFTER_ALGORITHMS.values():
        assert takes[0] in SPECULATIVE_ALGORITHMS, takes


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", BLOCK_ALGORITHMS)
def test_a_drafter_of_another_family_is_refused_naming_its_algorithm(
    tmp_path: Path, version: str, algorithm: str
) -> None:
    families = _families(version)
    others = [(k, a, m) for k, v in families.items() if k != algorithm for a, m in v]
    assert {k for k, _, _ in others} == {"EAGLE3", "EAGLE", "MTP", *BLOCK_ALGORITHMS} - {algorithm}
    for kind, architecture, module in others:
        doc = _doc(algorithm, _drafter(tmp_path, algorithm, architecture))
        [err] = _errors(doc, version, "drafter.algorithm")
        if architecture in FROZEN_KV_MTP_DRAFTERS:  # SGLang runs those as FROZEN_KV_MTP only
            assert f"runs only as FROZEN_KV_MTP (given EAGLE or NEXTN), not as {algorithm}" in (
                err.problem
            )
            continue
        loads = " / ".join(DRAFTER_ALGORITHMS[kind])
        assert err.problem == (
            f"the drafter's config.json declares {architecture}, a {kind} drafter of SGLang "
            f"{version} ({module}), which {loads} loads, but the algorithm is {algorithm}"
        ), err.render()
        assert err.fix == f"set drafter.algorithm: {DRAFTER_ALGORITHMS[kind][0]}"


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", BLOCK_ALGORITHMS)
def test_every_class_of_its_own_family_is_accepted(
    tmp_path: Path, version: str, algorithm: str
) -> None:
    own = _families(version)[algorithm]
    assert len(own) >= 4
    for architecture, _ in own:
        doc = _doc(algorithm, _drafter(tmp_path, algorithm, architecture))
        assert _errors(doc, version, "drafter.algorithm") == [], architecture


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", BLOCK_ALGORITHMS)
@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "NoSuchDraftModel"])
def test_a_class_in_no_family_is_refused_naming_the_algorithm_s_classes(
    tmp_path: Path, version: str, algorithm: str, architecture: str
) -> None:
    doc = _doc(algorithm, _drafter(tmp_path, algorithm, architecture))
    [err] = _errors(doc, version, "drafter.algorithm")
    known = sorted(a for a, _ in _families(version)[algorithm])
    assert f"none of the {algorithm} drafter classes SGLang {version} serves" in err.problem
    assert err.fix == f"point drafter.path at a {algorithm} drafter (one of {', '.join(known)})"


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_deepseek_v4_checkpoint_bundling_a_dspark_head_is_a_dspark_drafter(
    tmp_path: Path, version: str
) -> None:
    """model_config.py loads DeepseekV4ForCausalLM with dspark_* keys as
    DeepseekV4ForCausalLMDSpark under DSPARK (a registry class); without them it is no DSPARK
    drafter."""
    assert "DeepseekV4ForCausalLMDSpark" in {a for a, _ in _families(version)["DSPARK"]}
    bundled = _drafter(tmp_path / "b", "DSPARK", "DeepseekV4ForCausalLM", dspark_markov_rank=64)
    assert _errors(_doc("DSPARK", bundled), version, "drafter.algorithm") == []
    plain = _drafter(tmp_path / "p", "DSPARK", "DeepseekV4ForCausalLM")
    assert len(_errors(_doc("DSPARK", plain), version, "drafter.algorithm")) == 1


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_drafters_block_size_against_the_profile_s(tmp_path: Path, version: str) -> None:
    """A block size other than the drafter's: SGLang runs the profile's and logs it (a warning
    here); DSPARK's count alone against the drafter's gamma: SGLang refuses (an error)."""
    dflash = FIXTURES / SOURCE["DFLASH"]
    doc = _doc("DFLASH", dflash, dflash_block_size=10)
    profile = profile_from_document(doc, ROOT / "profiles" / "b.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    [warn] = [i for i in issues if i.field == "drafter.dflash_block_size"]
    assert warn.severity.value == "warning" and "block_size 16" in warn.problem
    assert warn.fix.startswith("set drafter.dflash_block_size: 16")
    dspark = FIXTURES / SOURCE["DSPARK"]
    doc = _doc("DSPARK", dspark, num_draft_tokens=9)
    del doc["drafter"]["dspark_block_size"]
    [err] = _errors(doc, version, "drafter.num_draft_tokens")
    assert "(= 8 for gamma=7)" in err.problem
    doc["drafter"]["num_draft_tokens"] = 8
    assert _errors(doc, version, "drafter.num_draft_tokens") == []


@pytest.mark.parametrize("value", ["UNO", "uno"])
def test_every_sglang_builtin_is_a_profile_choice(value: str) -> None:
    # UNO too, since checks/uno.py holds it to _handle_uno (tests/contract/test_uno.py).
    doc = _doc("DFLASH", FIXTURES / SOURCE["DFLASH"])
    doc["drafter"]["algorithm"] = value
    assert [i for i in schema_issues(doc) if i.field == "drafter.algorithm"] == []
    for version in VERIFIED_VERSIONS:
        builtins = set(sglang_contract(version).speculative_algorithms)
        assert builtins <= {*SPECULATIVE_ALGORITHMS, "NONE"}, builtins


def test_a_builtin_the_profile_does_not_take_is_refused_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the schema says of a built-in a new SGLang adds before its checks exist.
    from specserve.profile.algorithms import REFUSED_ALGORITHMS

    assert REFUSED_ALGORITHMS == {}
    monkeypatch.setitem(REFUSED_ALGORITHMS, "MEDUSA", "MEDUSA heads have no checks yet")
    doc = _doc("DFLASH", FIXTURES / SOURCE["DFLASH"])
    doc["drafter"]["algorithm"] = "medusa"
    [err] = [i for i in schema_issues(doc) if i.field == "drafter.algorithm"]
    assert "'medusa' is an SGLang algorithm this profile does not take" in err.problem
    assert "MEDUSA heads have no checks yet" in err.problem
