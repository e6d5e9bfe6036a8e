"""`check` compares the largest decode batch SGLang captures as a CUDA graph with the running-
request cap (issue 31 item 1). The sizes themselves are held to SGLang's own resolution in
tests/contract/test_graph_sizes.py; these are the check's verdicts and words."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import PROFILES, SHIPPED, check_json, write_doc

from specserve.profile.checks.graphcover import OVERRIDE, check_graph_coverage
from specserve.profile.issues import Severity
from specserve.profile.model import profile_from_document
from specserve.profile.sglang import sglang_contract
from specserve.upstream import VERIFIED_VERSIONS

LLAMA = PROFILES / "llama-3.1-8b-eagle3-1gpu.yaml"
NAME = OVERRIDE.rpartition(".")[2]


def _doc(**server: Any) -> dict[str, Any]:
    """The single-GPU profile (40 GiB, TP 1, EAGLE-3) without its override, `server` applied."""
    doc = copy.deepcopy(yaml.safe_load(LLAMA.read_text()))
    doc["server"].pop(NAME, None)
    doc["server"].update(server)
    return doc


def _issues(doc: dict[str, Any], version: str):
    return check_graph_coverage(profile_from_document(doc), sglang_contract(version))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_issues_48_running_with_graphs_to_8_is_refused_naming_both_and_the_fix(
    tmp_path, version
):
    code, report = check_json(
        write_doc(tmp_path, _doc(max_running_requests=48, cuda_graph_max_bs=8)),
        "--configs-only", "--sglang-version", version,
    )  # fmt: skip
    assert code == 1
    [issue] = [i for i in report["errors"] if "CUDA graph" in i["problem"]]
    assert issue["severity"] == "error" and issue["field"] == "server.cuda_graph_max_bs"
    assert "server.max_running_requests 48" in issue["problem"]
    assert "server.cuda_graph_max_bs: 8" in issue["problem"]
    assert "batches of 9-48 requests run eagerly" in issue["problem"]
    assert issue["fix"].startswith(
        "raise server.cuda_graph_max_bs to 48 or lower server.max_running_requests to 8"
    )
    assert OVERRIDE in issue["fix"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize(
    "server",
    [
        {"max_running_requests": 48, "cuda_graph_max_bs": 48},
        {"max_running_requests": 8, "cuda_graph_max_bs": 8},
        {"max_running_requests": 20, "cuda_graph_max_bs": None},  # 40 GiB, TP 1: SGLang's 32
        {"max_running_requests": 48, "cuda_graph_max_bs": 300},  # 300 is no generated size
    ],
    ids=str,
)
def test_a_covered_cap_gets_no_issue(version, server):
    assert _issues(_doc(**server), version) == []


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglangs_default_on_the_profiles_gpu_decides_and_a_larger_gpu_cannot_rescue_it(version):
    # SGLang's default below TP 4 is 32 from 35 to 60 GiB: the 40 GiB floor leaves 33-48 eager.
    [issue] = _issues(_doc(max_running_requests=48, cuda_graph_max_bs=None), version)
    assert issue.severity is Severity.ERROR and issue.field == "server.max_running_requests"
    assert "on a GPU of 40 GiB, 32 (SGLang's default" in issue.problem
    at_80 = _doc(max_running_requests=48, cuda_graph_max_bs=None)
    at_80["gpu"]["min_memory_gib"] = 80
    assert _issues(at_80, version) == []  # 256 from 60 GiB up


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_override_turns_the_refusal_into_a_warning_that_quotes_it(version):
    doc = _doc(max_running_requests=48, cuda_graph_max_bs=8, **{NAME: "measured: no gain"})
    [issue] = _issues(doc, version)
    assert issue.severity is Severity.WARNING
    assert "'measured: no gain'" in issue.problem


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_unknown_cap_says_what_sglang_does(version):
    doc = _doc(max_running_requests=None, cuda_graph_max_bs=16)
    doc["drafter"] = None
    [issue] = _issues(doc, version)
    assert issue.severity is Severity.WARNING and issue.field == "server.max_running_requests"
    assert "sizes the running requests from the KV cache" in issue.problem
    assert "decode batches above 16" in issue.problem
    assert issue.fix.startswith("set server.max_running_requests to at most 16")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglangs_own_cap_under_speculation_is_compared_when_the_profile_sets_none(version):
    [issue] = _issues(_doc(max_running_requests=None, cuda_graph_max_bs=8), version)
    assert "SGLang's cap of 48 running requests under speculation" in issue.problem


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_batch_size_list_in_extra_args_is_fixed_by_adding_the_cap(version):
    doc = _doc(max_running_requests=48, cuda_graph_max_bs=None,
               extra_args=["--cuda-graph-bs-decode", "1", "2", "4", "40"])  # fmt: skip
    [issue] = _issues(doc, version)
    assert issue.field == "server.extra_args[0]" and "40 (--cuda-graph-bs-decode 1 2 4 40)" in (
        issue.problem)
    assert issue.fix.startswith("add 48 to --cuda-graph-bs-decode")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_attention_dp_compares_each_ranks_share_of_the_cap(version):
    doc = _doc(max_running_requests=256, cuda_graph_max_bs=32)
    doc["parallelism"] = {"tp": 8, "dp": 8, "enable_dp_attention": True}
    doc["gpu"]["count"] = 8
    assert _issues(doc, version) == []  # 256 // 8 = 32 per rank
    doc["server"]["cuda_graph_max_bs"] = 16
    [issue] = _issues(doc, version)
    assert "(32 per attention-DP rank)" in issue.problem
    assert issue.fix.startswith("raise server.cuda_graph_max_bs to 32 or lower "
                                "server.max_running_requests to 128")  # fmt: skip


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_unstated_gpu_memory_warns_for_the_bands_sglangs_default_leaves_uncovered(version):
    doc = _doc(max_running_requests=48, cuda_graph_max_bs=None)
    doc["gpu"]["min_memory_gib"] = 0
    [issue] = _issues(doc, version)
    assert issue.severity is Severity.WARNING and issue.field == "gpu.min_memory_gib"
    assert "uncovered on GPUs of under 20 GiB, 35 GiB" in issue.problem


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_profile_is_covered_or_says_why(version, path):
    doc = yaml.safe_load(path.read_text())
    issues = _issues(doc, version)
    assert all(i.severity is Severity.WARNING for i in issues), [i.render() for i in issues]
    assert not issues or (doc["server"].get(NAME) and all(NAME in i.problem for i in issues))
