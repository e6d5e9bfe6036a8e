"""The decode CUDA-graph batch sizes `check` derives are the ones SGLang's own resolution gives.

scripts/sglang/graph_sizes.py runs SGLang's `prepare_server_args` + `resolve_once` of each
verified version with `--device cuda`, the GPU memory it reads replaced by each case's (this
host has no GPU), and returns `cuda_graph_config.decode.bs`. Compared with
`specserve.profile.graphsizes` read from the same argv (`checks/graphcover.graph_inputs`):
- a grid of GPU memory (every band of SGLang's table and none read), TP below and at 4,
  speculation off and on, `--max-running-requests` unset, below, at and above the defaults;
- the graph settings a profile can write: `--cuda-graph-max-bs-decode`, `--cuda-graph-bs-decode`,
  `--cuda-graph-config` decode objects (over the flags), `--disable-cuda-graph-padding`;
- the verdict on rendered profiles (the shipped ones and the issue's `max_running_requests: 48`
  with `cuda_graph_max_bs: 8`): `check` reports the graph coverage exactly where SGLang's largest
  captured batch is below the running-request cap SGLang resolves.
"""

from __future__ import annotations

import copy
import itertools
import json
from functools import cache
from typing import Any

import pytest
import yaml

from specserve.profile.argview import parse_view
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.graphcover import OVERRIDE, graph_inputs
from specserve.profile.graphsizes import MIB_PER_GIB, decode_graph_batch_sizes
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import ROOT, _profiles, _render_document
from tests.contract.sglang_venv import run_script
from tests.contract.test_resolved_argv import cpu_argv

FIXTURES = ROOT / "tests" / "fixtures" / "models"
BASE = ["--model-path", str(FIXTURES / "Llama-3.1-8B-Instruct"), "--device", "cuda"]
EAGLE3 = [
    "--speculative-algorithm", "EAGLE3",
    "--speculative-draft-model-path", str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B"),
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4",
]  # fmt: skip
# None: SGLang reads no memory; else one point inside each band of memory_hook.py's table.
MEMORY_GIB: tuple[float | None, ...] = (None, 16, 24, 40, 80, 141, 192)
CAPS: tuple[int | None, ...] = (None, 20, 48, 600)
GRAPH_SETTINGS: dict[str, list[str]] = {
    "max-bs flag": ["--cuda-graph-max-bs-decode", "8"],
    "max-bs flag, not on a generated size": ["--cuda-graph-max-bs-decode", "300"],
    "bs flag": ["--cuda-graph-bs-decode", "1", "2", "4", "40"],
    "config max_bs over the flag": [
        "--cuda-graph-max-bs-decode", "8", "--cuda-graph-config", '{"decode": {"max_bs": 24}}'],
    "config bs": ["--cuda-graph-config", '{"decode": {"bs": [1, 3, 96]}}'],
    "no padding": ["--disable-cuda-graph-padding", "--cuda-graph-max-bs-decode", "12"],
}  # fmt: skip


def _mib(gib: float | None) -> float | None:
    return None if gib is None else gib * MIB_PER_GIB


def _grid() -> list[tuple[list[str], float | None]]:
    cases: list[tuple[list[str], float | None]] = []
    for gib, tp, spec, cap in itertools.product(MEMORY_GIB, (1, 4), (False, True), CAPS):
        argv = [*BASE, "--tp-size", str(tp), *(EAGLE3 if spec else [])]
        argv += [] if cap is None else ["--max-running-requests", str(cap)]
        cases.append((argv, _mib(gib)))
    for words, spec, cap in itertools.product(GRAPH_SETTINGS.values(), (False, True), CAPS[:3]):
        argv = [*BASE, *(EAGLE3 if spec else []), *words]
        argv += [] if cap is None else ["--max-running-requests", str(cap)]
        cases.append((argv, _mib(40)))
    return cases


@cache
def _sglang(version: str, cases: str) -> tuple[dict[str, Any], ...]:
    """SGLang's resolution of the JSON-encoded cases, one subprocess per batch."""
    answers = run_script(version, "graph_sizes.py", json.loads(cases))
    return tuple(answers)


def sglang_sizes(version: str, cases: list[tuple[list[str], float | None]]) -> list[dict]:
    payload = [{"argv": argv, "gpu_memory_mib": mib} for argv, mib in cases]
    answers = list(_sglang(version, json.dumps(payload)))
    assert len(answers) == len(cases), "graph_sizes.py answered every case"
    return answers


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_batch_sizes_are_sglangs_over_the_grid(version):
    contract = sglang_contract(version)
    cases = _grid()
    differing = []
    for (argv, mib), answer in zip(cases, sglang_sizes(version, cases), strict=True):
        assert answer["ok"], f"SGLang {version} refused {argv[4:]}: {answer.get('error')}"
        ours = decode_graph_batch_sizes(graph_inputs(parse_view(argv, contract), version, mib))
        if list(ours) != answer["bs"]:
            differing.append(f"{argv[4:]} at {mib} MiB: ours {ours}, SGLang's {answer['bs']}")
    assert not differing, f"{len(differing)} of {len(cases)} differ:\n" + "\n".join(differing[:8])


def _llama(**server: Any) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc.pop("baseline", None)
    doc["server"].pop(OVERRIDE.split(".")[1], None)
    doc["server"].update(server)
    return doc


def _documents() -> dict[str, dict[str, Any]]:
    docs = {p.name: yaml.safe_load(p.read_text(encoding="utf-8")) for p in _profiles()}
    docs = {name: doc for name, doc in docs.items() if doc["gpu"]["count"] > 0}
    docs["the issue's 48 with graphs to 8"] = _llama(max_running_requests=48, cuda_graph_max_bs=8)
    docs["48 with graphs to 48"] = _llama(max_running_requests=48, cuda_graph_max_bs=48)
    docs["48, SGLang's default on 40 GiB"] = _llama(max_running_requests=48,
                                                   cuda_graph_max_bs=None)  # fmt: skip
    docs["SGLang's cap, default on 80 GiB"] = {
        **_llama(max_running_requests=None, cuda_graph_max_bs=None), "gpu": {
            "count": 1, "min_memory_gib": 80}}  # fmt: skip
    return docs


def _graph_issues(doc: dict[str, Any], version: str) -> list[str]:
    from specserve.profile.model import profile_from_document

    profile = profile_from_document(doc)
    issues = run_checks(profile, CheckOptions(sglang_version=version, configs_only=True,
                                              require_models=False))  # fmt: skip
    return [i.render() for i in issues if "captures as a CUDA graph" in i.problem]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_reports_exactly_where_sglangs_largest_graph_is_below_its_cap(version):
    docs = _documents()
    cases = []
    for name, doc in docs.items():
        argv = cpu_argv(_render_document(doc, version, name))
        argv[argv.index("--device") + 1] = "cuda"
        cases.append((argv, doc["gpu"]["min_memory_gib"] * MIB_PER_GIB))
    wrong = []
    for (name, doc), answer in zip(docs.items(), sglang_sizes(version, cases), strict=True):
        assert answer["ok"], f"SGLang {version} refused {name}: {answer.get('error')}"
        uncovered = max(answer["bs"]) < answer["max_running_requests"]
        reported = _graph_issues(doc, version)
        if uncovered != bool(reported):
            wrong.append(f"{name}: SGLang captures to {max(answer['bs'])} with "
                         f"{answer['max_running_requests']} running; check says {reported}")
    assert not wrong, "\n".join(wrong)
    issue = _graph_issues(docs["the issue's 48 with graphs to 8"], version)
    assert issue and issue[0].startswith("error: server.cuda_graph_max_bs")
    assert "raise server.cuda_graph_max_bs to 48 or lower server.max_running_requests to 8" in (
        issue[0])
