"""UNO as a profile choice, against SGLang's own resolution (`_handle_uno`, 0.5.21 and 0.5.23).

Each profile is rendered by the product and resolved by SGLang's real code (as `--device cuda`:
UNO refuses any other device first, and resolution needs no GPU for it). What `check` accepts
resolves to the tree and running-request cap the product's facts give; what `check` refuses,
SGLang refuses in the words the check quotes, or changes with only the log warning the check
quotes. The LoRA path is not read at resolution (the worker loads it), so a config-only
fixture stands in (tests/fixtures/models/uno-lora).
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue
from specserve.profile.model import profile_from_document
from specserve.profile.sglang import speculative_running_cap
from specserve.profile.tree import effective_tree
from specserve.standin.args import ResolutionError
from specserve.standin.args import parse_args as standin_parse_args
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import resolve_argvs
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
LORA = str(FIXTURES / "uno-lora")  # adapter_config.json only: resolution does not read it
TARGET = str(FIXTURES / "Llama-3.1-8B-Instruct")
EAGLE3 = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")
FA3 = ["--attention-backend", "fa3"]


def _doc(
    *extra: str,
    path: str | None = None,
    lora: str | None = LORA,
    tp: int = 1,
    gpus: int = 1,
    max_running: int | None = None,
    **drafter: Any,
) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = TARGET
    doc.pop("baseline", None)
    doc.pop("tuning", None)
    doc["server"].pop("max_running_requests", None)
    if max_running is not None:
        doc["server"]["max_running_requests"] = max_running
    doc["server"]["extra_args"] = list(extra)
    doc["parallelism"] = {"tp": tp}
    doc["gpu"]["count"] = gpus
    block: dict[str, Any] = {"algorithm": "UNO", "num_draft_tokens": 4, **drafter}
    if path:
        block["path"] = path
    if lora:
        block["uno_lora_path"] = lora
    doc["drafter"] = {k: v for k, v in block.items() if v is not None}
    return doc


# name -> the profile; each resolves on every verified version and `check` finds no error.
ACCEPTED: dict[str, dict[str, Any]] = {
    "linear, Q 4": _doc(*FA3),
    "linear, Q 6, steps and top-k 1": _doc(*FA3, num_draft_tokens=6, num_steps=1, eagle_topk=1),
    "tree, F 4, K 2, Q 6": _doc(*FA3, num_steps=3, eagle_topk=2, num_draft_tokens=6),
    "split fa3 backends": _doc("--prefill-attention-backend", "fa3",
                               "--decode-attention-backend", "fa3"),
    "32 running": _doc(*FA3, max_running=32),
}  # fmt: skip

# name -> (the profile, the field check refuses, SGLang's words: the refusal or warning).
REFUSED: dict[str, tuple[dict[str, Any], str, str]] = {
    "a drafter path": (
        _doc(*FA3, path=TARGET), "drafter.path",
        "UNO reuses the target model and does not accept --speculative-draft-model-path"),
    "no lora": (_doc(*FA3, lora=None), "drafter.uno_lora_path", "UNO requires --uno-lora-path"),
    "no Q": (
        _doc(*FA3, num_draft_tokens=None), "drafter.num_draft_tokens",
        "UNO requires --speculative-num-draft-tokens to be a positive integer"),
    "linear, steps 3": (
        _doc(*FA3, num_steps=3), "drafter.num_steps",
        "UNO uses speculative_num_steps=1; overriding 3."),
    "tree without steps": (
        _doc(*FA3, eagle_topk=2), "drafter.num_steps",
        "UNO tree mode requires --speculative-num-steps"),
    "tree, Q below F": (
        _doc(*FA3, num_steps=3, eagle_topk=2, num_draft_tokens=3), "drafter.num_draft_tokens",
        "UNO tree mode requires Q >= F; got Q=3, F=4."),
    "tree, Q above 128": (
        _doc(*FA3, num_steps=7, eagle_topk=2, num_draft_tokens=129), "drafter.num_draft_tokens",
        "UNO tree mode currently supports at most Q=128 verify nodes, got Q=129."),
    "tree, Q*K above 2048": (
        _doc(*FA3, num_steps=7, eagle_topk=20, num_draft_tokens=110),
        "drafter.num_draft_tokens",
        "UNO tree mode currently supports Q*K <= 2048; got Q*K=110*20=2200."),
    "tree, Q above the capacity": (
        _doc(*FA3, num_steps=1, eagle_topk=2, num_draft_tokens=4), "drafter.num_draft_tokens",
        "UNO tree mode cannot build the requested Q from F and K: Q=4 exceeds capacity=3 for "
        "F=2, K=2."),
    "tree, Q beyond the parent list": (
        _doc(*FA3, num_steps=2, eagle_topk=4, num_draft_tokens=7), "drafter.num_draft_tokens",
        "UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: Q-1=6 "
        "exceeds K*(F-2)+1=5 for F=3, K=4."),
    "tp 2": (_doc(*FA3, tp=2, gpus=2), "parallelism.tp", "UNO requires TP=PP=1."),
    "multi-lora serving": (
        _doc(*FA3, "--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "all"),
        "server.extra_args",
        "UNO does not support public Multi-LoRA serving."),
    "rejection sampling": (
        _doc(*FA3, "--speculative-use-rejection-sampling"), "server.extra_args",
        "UNO manages its own stochastic verification and does not use "
        "--speculative-use-rejection-sampling."),
    "mixed chunk": (
        _doc(*FA3, "--enable-mixed-chunk"), "server.extra_args",
        "Mixed chunked prefill is disabled for UNO speculative decoding."),
    "no fa3": (_doc(), "server.extra_args", "UNO requires FA3 for both prefill and decode"),
    "fa3 for prefill only": (
        _doc("--prefill-attention-backend", "fa3", "--decode-attention-backend", "triton"),
        "server.extra_args", "UNO requires FA3 for both prefill and decode"),
}  # fmt: skip


@cache
def _resolved(version: str) -> dict[str, dict[str, Any]]:
    docs = {**ACCEPTED, **{name: doc for name, (doc, _, _) in REFUSED.items()}}
    argvs = [cpu_argv(_render_document(doc, version, "uno")) for doc in docs.values()]
    return dict(zip(docs, resolve_argvs(version, argvs), strict=True))


def _errors(doc: dict[str, Any], version: str) -> list[Issue]:
    profile = profile_from_document(doc, ROOT / "profiles" / "uno.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [i for i in issues if i.severity.value == "error"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_an_accepted_uno_profile_resolves_to_what_it_says(version: str, case: str) -> None:
    doc, result = ACCEPTED[case], _resolved(version)[case]
    assert result["ok"], result
    assert _errors(doc, version) == []
    resolved = result["resolved"]
    assert resolved["speculative_algorithm"] == "UNO"
    assert resolved["speculative_draft_model_path"] is None
    profile = profile_from_document(doc, ROOT / "profiles" / "uno.yaml")
    contract = sglang_contract(version)
    tree = effective_tree(profile, contract)
    assert tree is not None
    assert (tree.steps, tree.topk, tree.draft_tokens) == (
        resolved["speculative_num_steps"], resolved["speculative_eagle_topk"],
        resolved["speculative_num_draft_tokens"])  # fmt: skip
    # No cap from _handle_uno: unset, SGLang sizes it from the KV pool, as without speculation.
    explicit = profile.server.max_running_requests
    want = explicit if explicit is not None else speculative_running_cap(contract, "UNO")
    assert resolved["max_running_requests"] == want
    assert not any("overriding" in w or "disabled for UNO" in w for w in result["warnings"])


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_uno_profile_is_what_sglang_refuses_or_changes(version: str, case: str) -> None:
    doc, field, said = REFUSED[case]
    result = _resolved(version)[case]
    errors = _errors(doc, version)
    # server.extra_args[i]: the word of the list that says it.
    assert [i.field.split("[")[0] for i in errors] == [field], [i.render() for i in errors]
    assert said in " ".join(errors[0].problem.split()), errors[0].problem
    if result["ok"]:  # a silent change: SGLang logs the words the check quotes
        assert any(said in w for w in result["warnings"]), (said, result["warnings"])
    else:
        assert said in result["error"], (said, result)


def test_the_cases_hold_what_they_say() -> None:
    """Both kinds occur: SGLang refusing to start and SGLang changing the profile with a log
    line; and UNO's running requests are not capped where every other algorithm's are."""
    version = VERIFIED_VERSIONS[-1]
    results = _resolved(version)
    assert not results["no fa3"]["ok"] and not results["tree, Q below F"]["ok"]
    assert results["linear, steps 3"]["ok"] and results["mixed chunk"]["ok"]
    assert results["linear, steps 3"]["resolved"]["speculative_num_steps"] == 1
    contract = sglang_contract(version)
    assert speculative_running_cap(contract, "UNO") is None
    assert speculative_running_cap(contract, "EAGLE3") == 48


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_stray_lora_is_refused(version: str) -> None:
    # Another algorithm ignores --uno-lora-path.
    stray = _doc(path=EAGLE3, algorithm="EAGLE3", num_steps=3, eagle_topk=1)
    assert "drafter.uno_lora_path" in [i.field for i in _errors(stray, version)]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", [*ACCEPTED, *REFUSED])
def test_the_standin_resolves_uno_as_sglang(version: str, case: str) -> None:
    doc = ACCEPTED[case] if case in ACCEPTED else REFUSED[case][0]
    real = _resolved(version)[case]
    try:
        ours = standin_parse_args(cpu_argv(_render_document(doc, version, "uno")), version)
    except ResolutionError as exc:
        assert not real["ok"], (real, exc)
        theirs = real["error"].split(": ", 1)[1]
        if "UNO requires FA3" in theirs:
            # Naming no backend, SGLang here resolves this CPU host's default (triton); the
            # stand-in has no GPU default and says what the argv named.
            assert str(exc).startswith(theirs.split(";")[0]), (theirs, exc)
        else:
            assert str(exc) == theirs, (theirs, exc)
        return
    assert real["ok"], (real, ours)
    resolved = real["resolved"]
    assert ours.spec is not None and ours.spec.algorithm == "UNO"
    assert (ours.spec.num_steps, ours.spec.eagle_topk, ours.spec.num_draft_tokens) == (
        resolved["speculative_num_steps"], resolved["speculative_eagle_topk"],
        resolved["speculative_num_draft_tokens"])  # fmt: skip
    assert ours.max_running_requests == resolved["max_running_requests"]
    theirs = [w for w in real["warnings"] if "UNO" in w]
    assert [w for w in ours.warnings if "UNO" in w] == theirs


def test_the_lora_directory_is_looked_for_where_check_runs(tmp_path: Path) -> None:
    version = VERIFIED_VERSIONS[-1]

    def issues(lora: str, require: bool) -> list[Issue]:
        profile = profile_from_document(_doc(*FA3, lora=lora), ROOT / "profiles" / "uno.yaml")
        options = CheckOptions(configs_only=True, require_models=require, sglang_version=version)
        return [i for i in run_checks(profile, options) if i.field == "drafter.uno_lora_path"]

    assert issues(LORA, require=True) == []
    # Not on this machine: a warning on a controller, an error on the node (--require-models).
    [away] = issues(str(tmp_path / "absent"), require=False)
    assert away.severity.value == "warning" and "is not on this machine" in away.problem
    [absent] = issues(str(tmp_path / "absent"), require=True)
    assert absent.severity.value == "error"
    # A directory without adapter_config.json: SGLang's LoRA loader would fail on it.
    [wrong] = issues(TARGET, require=True)
    assert wrong.severity.value == "error" and "has no adapter_config.json" in wrong.problem
