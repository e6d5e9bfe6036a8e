"""A tree the profile sets only part of: `check` says what SGLang's resolution does with it.

Each partial tree of the Llama profile (EAGLE-3) is rendered and resolved with SGLang's real
`resolve_once()` on every verified version; `check`'s refusal must name what happened: the bare
assertion when the steps are unset, the TypeError when only the top-k is, the draft tokens SGLang
sets for a chain (steps + 1) and leaves unset (None) for a tree.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.model import profile_from_document
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.resolution_sweep import LLAMA, sglang_argv
from tests.contract.sglang_venv import resolve_argvs

CASES: dict[str, dict[str, Any]] = {
    "no steps": {"num_steps": None},
    "no top-k": {"eagle_topk": None},
    "chain without draft tokens": {"eagle_topk": 1, "num_draft_tokens": None},
    "tree without draft tokens": {"num_draft_tokens": None},
}


def _doc(change: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(yaml.safe_load(LLAMA.read_text(encoding="utf-8")))
    for key, value in change.items():
        if value is None:
            doc["drafter"].pop(key)
        else:
            doc["drafter"][key] = value
    return doc


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_names_what_sglang_does_with_a_partial_tree(version: str) -> None:
    profiles = {name: profile_from_document(_doc(c), LLAMA) for name, c in CASES.items()}
    results = dict(
        zip(CASES, resolve_argvs(version, [sglang_argv(p, version) for p in profiles.values()]),
            strict=True)
    )  # fmt: skip
    said = {}
    for name, profile in profiles.items():
        issues = run_checks(profile, CheckOptions(sglang_version=version, configs_only=True))
        [partial] = [i for i in issues if " set but " in i.problem]
        said[name] = partial.problem
    steps = profiles["chain without draft tokens"].speculative.num_steps  # type: ignore[union-attr]

    got = results["no steps"]
    assert not got["ok"] and got["error"].strip() == "AssertionError:", got
    assert "AssertionError with no message" in said["no steps"]

    got = results["no top-k"]
    assert not got["ok"] and got["error"].startswith("TypeError: '>' not supported"), got
    assert got["error"] in said["no top-k"]

    got = results["chain without draft tokens"]
    assert got["ok"] and got["resolved"]["speculative_num_draft_tokens"] == steps + 1, got
    assert f"num_steps + 1 = {steps + 1}" in said["chain without draft tokens"]

    got = results["tree without draft tokens"]
    assert got["ok"] and got["resolved"]["speculative_num_draft_tokens"] is None, got
    assert got["resolved"]["speculative_eagle_topk"] == 8
    assert "leaves num_draft_tokens unset (None" in said["tree without draft tokens"]
