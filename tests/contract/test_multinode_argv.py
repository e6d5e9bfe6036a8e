"""Every rank of a multi-node profile renders an argv SGLang's real code takes, for both versions.

For each multi-node profile (tests/fixtures/profiles/multinode-*.yaml and the shipped ones that
span nodes) and each of its ranks:
SGLang's `prepare_server_args` parses the rendered argv to the profile's nnodes, the rank the
deploy passed and the rendezvous address; the flags are exact, non-deprecated SGLang flags; and
SGLang's own `check_server_args` (what its launcher runs before starting) accepts it. Then
`specserve check`'s multi-node rules are held to that same `check_server_args` over a matrix of
layouts: the profile check refuses exactly the layouts SGLang refuses.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import errors
from specserve.profile.loader import load_profile
from specserve.profile.model import Profile, profile_from_document
from specserve.profile.nodes import Placement
from specserve.profile.render import render_argv
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import DUMMY_API_KEY, LEADER, ROOT
from tests.contract.sglang_venv import parse_argvs, run_script, run_snippet
from tests.contract.test_resolved_argv import cpu_argv

# The fixtures and every shipped profile that spans nodes (profiles/kimi-k3-dspark-2x8gpu.yaml).
PROFILES = sorted((ROOT / "tests" / "fixtures" / "profiles").glob("multinode-*.yaml")) + [
    p for p in sorted((ROOT / "profiles").glob("*.yaml")) if load_profile(p).nodes.count > 1
]
SHIPPED_K3 = ROOT / "profiles" / "kimi-k3-dspark-2x8gpu.yaml"
FIELDS = ["nnodes", "node_rank", "dist_init_addr", "tp_size"]
KIMI = ROOT / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"

# SGLang's resolution and launcher validation of each argv of the batch: "ok" or its exception.
CHECK_SERVER_ARGS = r"""
import contextlib, io, json, sys
from sglang.srt.server_args import prepare_server_args
out = []
for argv in json.load(sys.stdin):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            server_args = prepare_server_args(argv)
            server_args.resolve_once()
            server_args.check_server_args()
        out.append("ok")
    except BaseException as exc:
        out.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


def _flags(profile: Profile, version: str, placement: Placement) -> list[str]:
    argv = render_argv(profile, version, placement)
    flags = argv[len(profile.server.launch_command) :]
    if "--api-key" in flags:
        flags[flags.index("--api-key") + 1] = DUMMY_API_KEY
    return flags


def _placement(profile: Profile, rank: int) -> Placement:
    return Placement(rank, None if profile.nodes.rendezvous_host else LEADER)


CASES = [
    (path, rank, version)
    for path in PROFILES
    for rank in range(load_profile(path).nodes.count)
    for version in VERIFIED_VERSIONS
]
IDS = [f"{p.stem}:rank{r}@{v}" for p, r, v in CASES]


@cache
def _parsed(version: str) -> dict[tuple[str, int], dict[str, Any]]:
    keys, argvs = [], []
    for path, rank, v in CASES:
        if v == version:
            profile = load_profile(path)
            keys.append((path.name, rank))
            argvs.append(_flags(profile, version, _placement(profile, rank)))
    return dict(zip(keys, parse_argvs(version, argvs, fields=FIELDS), strict=True))


@cache
def _checked(version: str, argvs: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    return tuple(run_snippet(version, CHECK_SERVER_ARGS, [list(a) for a in argvs]))


def test_there_are_multinode_profiles_with_several_ranks() -> None:
    assert len(PROFILES) >= 3 and SHIPPED_K3 in PROFILES
    assert all(load_profile(p).nodes.count > 1 for p in PROFILES)
    assert len(CASES) >= 2 * 2 * len(VERIFIED_VERSIONS)


@pytest.mark.parametrize(("path", "rank", "version"), CASES, ids=IDS)
def test_sglang_parses_every_rank(path: Path, rank: int, version: str) -> None:
    profile = load_profile(path)
    result = _parsed(version)[(path.name, rank)]
    assert result["ok"], f"{path.name} rank {rank}: SGLang {version} refuses: {result}"
    host = profile.nodes.rendezvous_host or LEADER
    assert result["fields"] == {
        "nnodes": profile.nodes.count,
        "node_rank": rank,
        "dist_init_addr": f"{host}:{profile.nodes.rendezvous_port}",
        "tp_size": profile.parallelism.tp,
    }


@pytest.mark.parametrize(("path", "rank", "version"), CASES, ids=IDS)
def test_every_rank_uses_exact_non_deprecated_flags(path: Path, rank: int, version: str) -> None:
    profile = load_profile(path)
    contract = sglang_contract(version)
    bad = [
        t
        for t in _flags(profile, version, _placement(profile, rank))
        if t.startswith("--") and (contract.option(t) is None or contract.option(t).deprecated)
    ]
    assert not bad, f"{path.name} rank {rank} @ {version}: {bad}"


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglang_launch_validation_accepts_every_rank(version: str) -> None:
    argvs = []
    for path, rank, v in CASES:
        if v == version:
            profile = load_profile(path)
            argvs.append(tuple(cpu_argv(_flags(profile, version, _placement(profile, rank)))))
    assert set(_checked(version, tuple(argvs))) == {"ok"}, _checked(version, tuple(argvs))


# (tp, dp, enable_dp_attention, nodes): layouts around SGLang's two multi-node asserts.
LAYOUTS = [
    (16, 1, False, 2),
    (16, 1, False, 4),
    (12, 1, False, 4),
    (12, 1, False, 8),  # tp does not divide over the nodes
    (3, 1, False, 2),
    (16, 2, False, 2),  # dp replicas across nodes
    (16, 2, True, 2),  # DP attention across nodes is fine
    (8, 4, True, 2),
]


def _layout_profile(tp: int, dp: int, attention: bool, nodes: int) -> Profile:
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(KIMI.read_text(encoding="utf-8")))
    doc["parallelism"] = {"tp": tp, "dp": dp, "enable_dp_attention": attention}
    doc["nodes"]["count"] = nodes
    needed = tp if attention else tp * dp
    # Give the nodes the GPUs the layout takes where they divide, so the GPU sum never decides.
    doc["gpu"]["count"] = max(1, needed // nodes)
    return profile_from_document(doc, KIMI)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_refuses_exactly_what_sglang_refuses(version: str) -> None:
    profiles = [_layout_profile(*layout) for layout in LAYOUTS]
    argvs = tuple(tuple(cpu_argv(_flags(p, version, Placement(0, LEADER)))) for p in profiles)
    verdicts = _checked(version, argvs)
    disagreements = []
    for layout, profile, verdict in zip(LAYOUTS, profiles, verdicts, strict=True):
        ours = {
            i.field
            for i in errors(
                run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
            )
            if i.field in ("parallelism.tp", "parallelism.dp")
        }
        if bool(ours) != (verdict != "ok"):
            disagreements.append(f"{layout}: check {sorted(ours) or 'accepts'}, SGLang {verdict}")
    assert not disagreements, "\n".join(disagreements)
    # Both kinds of refusal occur, so the agreement is not all "ok".
    assert sum(v != "ok" for v in verdicts) >= 3, verdicts


# SGLang's Kimi-K3 cookbook, DSPARK overlay of its H200 two-node low-latency cell: the words every
# rank of the shipped profile must carry (the draft path is the node's copy of the drafter).
K3_RECIPE = [
    ["--speculative-algorithm", "DSPARK"],
    ["--speculative-dspark-block-size", "7"],
    ["--enable-linear-replayssm-spec"],
    ["--tp-size", "16"],
    ["--ep-size", "16"],
    ["--moe-runner-backend", "marlin"],
    ["--decode-attention-backend", "flashmla"],
    ["--enable-symm-mem"],
    ["--tool-call-parser", "kimi_k3"],
    ["--reasoning-parser", "kimi_k3"],
    ["--trust-remote-code"],
]
K3_FIELDS = ["speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
             "speculative_num_draft_tokens", "speculative_dspark_block_size", "tp_size", "ep_size",
             "nnodes", "node_rank", "enable_linear_replayssm_spec"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_kimi_k3_ranks_resolve_to_the_recipe(version: str) -> None:
    profile = load_profile(SHIPPED_K3)
    ranks = range(profile.nodes.count)
    flags = [_flags(profile, version, _placement(profile, r)) for r in ranks]
    for rank, words in zip(ranks, flags, strict=True):
        missing = [w for w in K3_RECIPE if not any(
            words[i : i + len(w)] == w for i in range(len(words)))]  # fmt: skip
        assert not missing, f"rank {rank} lacks the cookbook's {missing}"
    request = {"argvs": [cpu_argv(f) for f in flags], "fields": K3_FIELDS}
    results = run_script(version, "resolve_argv.py", request)
    for rank, result in zip(ranks, results, strict=True):
        assert result["ok"], result
        assert result["resolved"] == {
            "speculative_algorithm": "DSPARK",
            # _handle_dspark: one step of top-k 1 verifying gamma + 1 tokens.
            "speculative_num_steps": 1,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 8,
            "speculative_dspark_block_size": 7,
            "tp_size": 16,
            "ep_size": 16,
            "nnodes": 2,
            "node_rank": rank,
            "enable_linear_replayssm_spec": True,
        }, result
