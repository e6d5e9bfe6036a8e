"""FROZEN_KV_MTP on the stand-in (issue 29 item 2): resolved as SGLang's code resolves it, served
with the EAGLE-family decode line SGLang prints for it.

SGLang runs a Gemma-4 assistant drafter as FROZEN_KV_MTP: given directly, or promoted from EAGLE /
NEXTN (`_resolve_speculative_algorithm_alias`, refused under EAGLE3), with the tree exactly as
given (`_handle_frozen_kv_mtp` picks none and leaves top-k 1 chains alone) and the running cap of
48. Each argv below is resolved by SGLang's real code and by the stand-in on every verified
version. `report_decode_stats` tells only DSPARK and no speculation apart, so the stand-in's
EAGLE-family line (held to SGLang's formatter by tests/standin/test_log_corpus.py) is the line.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from specserve.standin.args import ResolutionError, parse_args
from specserve.standin.behaviour import SpecShape, accept_length
from specserve.upstream import VERIFIED_VERSIONS
from specserve_exporter.parser import StatsLine, parse_line
from tests.contract.sglang_venv import resolve_argvs
from tests.standin.helpers import gauge, generate, standin_resolution

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "fixtures" / "models"
TARGET = str(MODELS / "Llama-3.1-8B-Instruct")
GEMMA4 = str(MODELS / "gemma4-assistant")
EAGLE3_HEAD = str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B")
BASE = ["--model-path", TARGET, "--device", "cpu"]


def _run(algorithm: str, *tree: str, drafter: str = GEMMA4, extra: tuple[str, ...] = ()) -> list[
        str]:  # fmt: skip
    return [*BASE, "--speculative-algorithm", algorithm, "--speculative-draft-model-path",
            drafter, *tree, *extra]  # fmt: skip


def _tree(steps: int, topk: int, draft: int) -> tuple[str, ...]:
    return ("--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
            "--speculative-num-draft-tokens", str(draft))  # fmt: skip


# name -> argv; every one resolved by SGLang and by the stand-in on every verified version.
CASES: dict[str, list[str]] = {
    "frozen_kv_mtp, chain of 3": _run("FROZEN_KV_MTP", *_tree(3, 1, 4)),
    "frozen_kv_mtp, top-k 1, draft tokens kept at 6": _run("FROZEN_KV_MTP", *_tree(3, 1, 6)),
    "frozen_kv_mtp, tree of top-k 4": _run("FROZEN_KV_MTP", *_tree(2, 4, 8)),
    "frozen_kv_mtp, lower case, 32 running": _run(
        "frozen_kv_mtp", *_tree(3, 1, 4), extra=("--max-running-requests", "32")),
    "frozen_kv_mtp, mixed chunk": _run(
        "FROZEN_KV_MTP", *_tree(3, 1, 4), extra=("--enable-mixed-chunk",)),
    "eagle with a gemma-4 assistant": _run("EAGLE", *_tree(3, 1, 4)),
    "nextn with a gemma-4 assistant": _run("NEXTN", *_tree(2, 1, 3)),
    "eagle3 with a gemma-4 assistant": _run("EAGLE3", *_tree(3, 1, 4)),
    "eagle with an eagle-3 head stays eagle": _run("EAGLE", *_tree(3, 1, 4), drafter=EAGLE3_HEAD),
}  # fmt: skip


@cache
def _sglang(version: str) -> dict[str, dict[str, Any]]:
    return dict(zip(CASES, resolve_argvs(version, list(CASES.values())), strict=True))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_standin_resolves_frozen_kv_mtp_as_sglang(version: str, case: str) -> None:
    real, ours = _sglang(version)[case], standin_resolution(CASES[case], version)
    assert ours["ok"] == real["ok"], (real, ours)
    if not real["ok"]:
        assert real["error"].split(": ", 1)[1] == " ".join(ours["error"].split()), (real, ours)
        return
    resolved = real["resolved"]
    assert ours["algorithm"] == resolved["speculative_algorithm"]
    assert ours["tree"] == (resolved["speculative_num_steps"], resolved["speculative_eagle_topk"],
                            resolved["speculative_num_draft_tokens"])  # fmt: skip
    assert ours["max_running_requests"] == resolved["max_running_requests"]
    theirs = [w for w in real["warnings"] if "Frozen-KV" in w or "Max running" in w]
    assert [w for w in ours["warnings"] if "Frozen-KV" in w or "Max running" in w] == theirs


def test_the_cases_hold_what_they_say() -> None:
    """By hand: the promotions happen, the refusal is there, a kept draft count differs from
    what an EAGLE chain would get, and the mixed-chunk warning occurs."""
    real = _sglang(VERIFIED_VERSIONS[-1])
    assert real["eagle with a gemma-4 assistant"]["resolved"]["speculative_algorithm"] == (
        "FROZEN_KV_MTP")
    assert real["nextn with a gemma-4 assistant"]["resolved"]["speculative_algorithm"] == (
        "FROZEN_KV_MTP")
    assert real["eagle with an eagle-3 head stays eagle"]["resolved"]["speculative_algorithm"] == (
        "EAGLE")
    assert not real["eagle3 with a gemma-4 assistant"]["ok"]
    kept = real["frozen_kv_mtp, top-k 1, draft tokens kept at 6"]["resolved"]
    assert kept["speculative_num_draft_tokens"] == 6
    assert any("Frozen-KV" in w for w in real["frozen_kv_mtp, mixed chunk"]["warnings"])


def test_an_unset_tree_is_refused_saying_what_to_give() -> None:
    with pytest.raises(ResolutionError, match="--speculative-num-steps"):
        parse_args(_run("FROZEN_KV_MTP"), VERIFIED_VERSIONS[-1])


def test_a_frozen_kv_mtp_standin_serves_and_logs_its_lines(start_standin: Any) -> None:
    server = start_standin(
        "--model-path", TARGET, "--speculative-algorithm", "FROZEN_KV_MTP",
        "--speculative-draft-model-path", GEMMA4, *_tree(3, 1, 4),
        "--decode-log-interval", "5", "--enable-metrics",
    )  # fmt: skip
    generate(server.url)
    lines = [line for line in server.lines() if "Decode batch" in line]
    assert lines
    parsed = [parse_line(line.encode()) for line in lines]
    assert all(isinstance(p, StatsLine) and p.unknown_fields == 0 for p in parsed), lines
    # The chain of 3 at the default acceptance: the window mean is its accept length.
    expected = accept_length(SpecShape(3, 1, 4), 0.6)
    mean = sum(p.values["accept_length"] for p in parsed if isinstance(p, StatsLine)) / len(
        parsed)  # fmt: skip
    assert abs(mean - expected) < 0.15, (mean, expected)
    assert gauge(server.url, "sglang:spec_num_draft_tokens") == 4
    assert gauge(server.url, "sglang:spec_num_steps") == 3
