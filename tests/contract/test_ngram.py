"""NGRAM as a profile choice, against SGLang's own resolution (`_handle_ngram`, 0.5.21 and
0.5.23): it takes no drafter path; its cache knobs (drafter.ngram_*) render to flags SGLang
parses into the fields its n-gram worker reads; the top-k it runs is the max BFS breadth, so a
profile's eagle_topk is replaced silently (check refuses it); the knobs given to another
algorithm change nothing SGLang runs (check refuses them); a drafter path is read for its
config.json only.
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
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import run_script
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
EAGLE3 = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")
KNOBS = {
    "ngram_min_bfs_breadth": 2,
    "ngram_max_bfs_breadth": 4,
    "ngram_match_type": "PROB",
    "ngram_max_trie_depth": 12,
    "ngram_capacity": 500000,
}
# What resolve_argv.py returns besides its DEFAULT_FIELDS (the algorithm, path, tree and cap).
NGRAM_FIELDS = [f"speculative_{k}" for k in KNOBS]


def _doc(algorithm: str, path: str | None = None, **drafter: Any) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc.pop("baseline", None)
    block = {"algorithm": algorithm, **({"path": path} if path else {}), **drafter}
    doc["drafter"] = block
    return doc


CHAIN = {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
CASES: dict[str, dict[str, Any]] = {
    "ngram": _doc("NGRAM"),
    "ngram, knobs": _doc("NGRAM", **KNOBS),
    "ngram, knobs, 16 draft tokens": _doc("NGRAM", num_draft_tokens=16, **KNOBS),
    "ngram, eagle_topk 4": _doc("NGRAM", eagle_topk=4),
    "ngram, eagle_topk 4 = max breadth 4": _doc("NGRAM", eagle_topk=4, ngram_max_bfs_breadth=4),
    "ngram, a drafter path": _doc("NGRAM", EAGLE3),
    "eagle3 chain": _doc("EAGLE3", EAGLE3, **CHAIN),
    "eagle3 chain, ngram knobs": _doc("EAGLE3", EAGLE3, **CHAIN, **KNOBS),
}


@cache
def _resolved(version: str) -> dict[str, dict[str, Any]]:
    argvs = [cpu_argv(_render_document(doc, version, "ngram")) for doc in CASES.values()]
    results = run_script(version, "resolve_argv.py", {"argvs": argvs, "extra_fields": NGRAM_FIELDS})
    assert len(results) == len(CASES)
    return dict(zip(CASES, results, strict=True))


def _issues(doc: dict[str, Any], version: str) -> list[Issue]:
    profile = profile_from_document(doc, ROOT / "profiles" / "ngram.yaml")
    return run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))


def _errors(doc: dict[str, Any], version: str) -> list[str]:
    return [i.field for i in _issues(doc, version) if i.severity.value == "error"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize(
    "case", ["ngram", "ngram, knobs", "ngram, knobs, 16 draft tokens",
             "ngram, eagle_topk 4 = max breadth 4"],
)  # fmt: skip
def test_an_accepted_ngram_profile_resolves_to_what_it_says(version: str, case: str) -> None:
    doc, result = CASES[case], _resolved(version)[case]
    assert result["ok"], result
    resolved = result["resolved"]
    assert resolved["speculative_algorithm"] == "NGRAM"
    assert resolved["speculative_draft_model_path"] is None
    drafter = doc["drafter"]
    for knob, value in KNOBS.items():
        if knob in drafter:  # the flag reached the field SGLang's n-gram worker reads
            assert resolved[f"speculative_{knob}"] == value, (knob, resolved)
    breadth = drafter.get("ngram_max_bfs_breadth", 10)
    assert resolved["speculative_eagle_topk"] == breadth
    profile = profile_from_document(doc, ROOT / "profiles" / "ngram.yaml")
    draft = facts(profile).draft_tokens
    assert draft == resolved["speculative_num_draft_tokens"]
    assert resolved["speculative_num_steps"] == draft // breadth  # type: ignore[operator]
    assert _errors(doc, version) == []


def test_the_knob_defaults_are_sglangs() -> None:
    """Unset knobs leave SGLang's defaults (fields/spec.py), the ones the docs name."""
    for version in VERIFIED_VERSIONS:
        resolved = _resolved(version)["ngram"]["resolved"]
        assert {k: resolved[f"speculative_{k}"] for k in KNOBS} == {
            "ngram_min_bfs_breadth": 1,
            "ngram_max_bfs_breadth": 10,
            "ngram_match_type": "BFS",
            "ngram_max_trie_depth": 18,
            "ngram_capacity": 10_000_000,
        }


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_ngram_eagle_topk_is_replaced_silently_and_refused(version: str) -> None:
    result = _resolved(version)["ngram, eagle_topk 4"]
    assert result["ok"], result
    assert result["resolved"]["speculative_eagle_topk"] == 10  # not the profile's 4
    assert not any("topk" in w for w in result["warnings"]), result["warnings"]
    [issue] = [i for i in _issues(CASES["ngram, eagle_topk 4"], version)
               if i.field == "drafter.eagle_topk"]  # fmt: skip
    assert issue.severity.value == "error"
    assert "--speculative-ngram-max-bfs-breadth (10) without a word" in issue.problem


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_ngram_knobs_given_another_algorithm_change_nothing_and_are_refused(
    version: str,
) -> None:
    plain, knobs = (
        _resolved(version)["eagle3 chain"],
        _resolved(version)["eagle3 chain, ngram knobs"],
    )
    assert plain["ok"] and knobs["ok"], (plain, knobs)
    eagle = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    assert (
        [knobs["resolved"][f] for f in eagle] == [plain["resolved"][f] for f in eagle] == [3, 1, 4]
    )
    assert sorted(_errors(CASES["eagle3 chain, ngram knobs"], version)) == sorted(
        f"drafter.{k}" for k in KNOBS
    )
    assert _errors(CASES["eagle3 chain"], version) == []


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_ngram_drafter_path_is_accepted_by_sglang_and_refused_here(
    version: str, tmp_path: Path
) -> None:
    result = _resolved(version)["ngram, a drafter path"]
    assert result["ok"] and result["resolved"]["speculative_algorithm"] == "NGRAM", result
    # The path's error, and the EAGLE-3 drafter's own (that drafter wants EAGLE3).
    errors = _errors(CASES["ngram, a drafter path"], version)
    assert sorted(errors) == ["drafter.algorithm", "drafter.path"], errors
    # What SGLang does read: the directory's config.json, and it fails without one.
    empty = tmp_path / "no-config"
    empty.mkdir()
    argv = cpu_argv(_render_document(CASES["ngram"], version, "ngram"))
    argv += ["--speculative-draft-model-path", str(empty)]
    request = {"argvs": [argv], "extra_fields": NGRAM_FIELDS}
    [failed] = run_script(version, "resolve_argv.py", request)
    assert not failed["ok"] and failed["stage"] == "resolve", failed
    assert "config.json" in failed["error"] or str(empty) in failed["error"], failed
