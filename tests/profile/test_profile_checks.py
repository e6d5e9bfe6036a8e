"""Every failure the field notes list, and every bad input of issue 3, is refused with field
+ fix."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES, SHIPPED, check_json, kimi_doc, write_doc

Doc = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _drop(path: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


# The default profile's drafter, by the directory name its path ends in (its fixture's name).
DRAFTER = Path(kimi_doc()["drafter"]["path"]).name
DRAFTER_CLASS = json.loads((FIXTURES / DRAFTER / "config.json").read_text())["architectures"][0]


def _drafter_config(**changes: Any) -> dict[str, Any]:
    cfg = json.loads((FIXTURES / DRAFTER / "config.json").read_text())
    cfg.update(changes)
    return cfg


# (id, profile mutation, drafter config override or None, field, problem part, fix part)
CASES: list[tuple[str, Callable[[Doc], None], dict[str, Any] | None, str, str, str]] = [
    (
        "seeds-EAGLE-with-EAGLE3-drafter",
        _set("drafter.algorithm", "EAGLE"),
        None,
        "drafter.algorithm",
        f"declares {DRAFTER_CLASS}",
        "set drafter.algorithm: EAGLE3",
    ),
    (
        "NEXTN-with-EAGLE3-drafter",
        _set("drafter.algorithm", "NEXTN"),
        None,
        "drafter.algorithm",
        "accept length stays at 1.00",
        "set drafter.algorithm: EAGLE3",
    ),
    (
        "EAGLE3-with-EAGLE2-drafter",
        _set("drafter.algorithm", "EAGLE3"),
        _drafter_config(architectures=["LlamaForCausalLMEagle"]),
        "drafter.algorithm",
        "EAGLE / EAGLE-2 drafter",
        "set drafter.algorithm: EAGLE",
    ),
    (
        "aux-layer-outside-target",
        _set("drafter.algorithm", "EAGLE3"),
        _drafter_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 60]}),
        "drafter.path",
        "[60] are outside the target's 61 layers",
        "drafter trained for this",
    ),
    (
        "drafter-hidden-size-mismatch",
        _set("drafter.algorithm", "EAGLE3"),
        _drafter_config(hidden_size=4096, target_hidden_size=4096),
        "drafter.path",
        "expects target hidden size 4096 but the target's is 7168",
        "drafter trained for this",
    ),
    (
        "draft-vocab-too-large",
        _set("drafter.algorithm", "EAGLE3"),
        _drafter_config(draft_vocab_size=200000),
        "drafter.path",
        "larger than the target's vocab_size 163840",
        "drafter trained for this",
    ),
    (
        "partial-speculative-params",
        _drop("drafter.eagle_topk"),
        None,
        "drafter.eagle_topk",
        "fails at start with TypeError: '>' not supported between instances of 'NoneType'",
        "together",
    ),
    (
        "topk1-wrong-draft-tokens",
        _set("drafter.num_draft_tokens", 16),
        None,
        "drafter.num_draft_tokens",
        "num_steps + 1 = 4",
        "num_draft_tokens: 4",
    ),
    (
        "algorithm-none-with-params",
        _set("drafter.algorithm", "none"),
        None,
        "drafter.algorithm",
        "algorithm is none",
        "remove the drafter block",
    ),
    (
        "EAGLE3-without-drafter-path",
        _drop("drafter.path"),
        None,
        "drafter.path",
        "needs a draft model",
        "set drafter.path",
    ),
    (
        "tp-not-gpu-count",
        _set("parallelism.tp", 4),
        None,
        "parallelism.tp",
        "tp x dp = 4 GPUs but gpu.count asks for 8",
        "equal gpu.count",
    ),
    (
        "dp-attention-dp-not-divisor",
        lambda d: d["parallelism"].update(dp=3, enable_dp_attention=True),
        None,
        "parallelism.dp",
        "must divide tp",
        "divisors of tp",
    ),
    (
        "disable-cuda-graph-field",
        _set("server.disable_cuda_graph", True),
        None,
        "server.disable_cuda_graph",
        "56.7 tok/s",
        "allow_disable_cuda_graph: true",
    ),
    (
        "disable-cuda-graph-extra-arg",
        _set("server.extra_args", ["--disable-cuda-graph"]),
        None,
        "server.extra_args[0]",
        "owned by the profile field server.disable_cuda_graph",
        "allow_disable_cuda_graph: true",
    ),
    (
        "graph-backend-disabled",
        _set("server.extra_args", ["--cuda-graph-backend-decode", "disabled"]),
        None,
        "server.extra_args[0]",
        "decode CUDA graphs would be disabled (--cuda-graph-backend-decode disabled)",
        "remove --cuda-graph-backend-decode disabled from extra_args",
    ),
    (
        "extra-arg-owned-speculative",
        _set("server.extra_args", ["--speculative-algorithm=EAGLE"]),
        None,
        "server.extra_args[0]",
        "--speculative-algorithm is owned by the profile field drafter.algorithm",
        "set drafter.algorithm instead",
    ),
    (
        "extra-arg-owned-tp-alias",
        _set("server.extra_args", ["--tensor-parallel-size", "8"]),
        None,
        "server.extra_args[0]",
        "--tensor-parallel-size is owned",
        "set parallelism.tp instead",
    ),
    (
        "extra-arg-api-key",
        _set("server.extra_args", ["--api_key", "sk-1"]),
        None,
        "server.extra_args[0]",
        "--api_key is owned by the profile field server.api_key",
        "set server.api_key instead",
    ),
    (
        "api-key-literal",
        _set("server.api_key", "sk-live-123"),
        None,
        "server.api_key",
        "literal",
        "{file: /run/secrets/api-key}",
    ),
    (
        "unknown-key",
        _set("server.tensor_parallel", 8),
        None,
        "server",
        "unknown key ('tensor_parallel' was unexpected)",
        "use one of",
    ),
    (
        "bad-bucket-label",
        _set("baseline.gen_throughput_tok_s", {"3": 90.0}),
        None,
        "baseline.gen_throughput_tok_s",
        "'3' is not one of",
        "1, 2, 4",
    ),
    (
        "mem-fraction-out-of-range",
        _set("server.mem_fraction_static", 1.5),
        None,
        "server.mem_fraction_static",
        "1.5",
        "within",
    ),
    (
        "LL128-on-pcie",
        _set("nccl.overrides", {"NCCL_PROTO": "LL,LL128"}),
        None,
        "nccl.overrides.NCCL_PROTO",
        "forces LL128 on a pcie topology",
        "gpu.topology: nvlink",
    ),
    (
        "NTHREADS-not-multiple-of-64",
        _set("nccl.overrides", {"NCCL_NTHREADS": "100"}),
        None,
        "nccl.overrides.NCCL_NTHREADS",
        "not accepted by NCCL",
        "64, 128, 256, 512",
    ),
    (
        "NCCL-var-under-env",
        _set("env.NCCL_PROTO", "LL"),
        None,
        "env.NCCL_PROTO",
        "bypasses NCCL validation",
        "nccl.overrides.NCCL_PROTO",
    ),
    (
        "unknown-preset",
        _set("nccl.preset", "fast"),
        None,
        "nccl.preset",
        "unknown NCCL preset 'fast'",
        "pcie-8gpu-seeds",
    ),
    (
        "nvlink-preset-on-pcie",
        _set("nccl.preset", "nvlink"),
        None,
        "nccl.preset",
        "meant for nvlink but gpu.topology is pcie",
        "preset for pcie",
    ),
]


def _weights_root(tmp: Path, drafter_cfg: dict[str, Any] | None) -> Path:
    if drafter_cfg is None:
        return FIXTURES
    root = tmp / "models"
    shutil.copytree(FIXTURES / "Kimi-K2.5", root / "Kimi-K2.5")
    (root / DRAFTER).mkdir(parents=True)
    (root / DRAFTER / "config.json").write_text(json.dumps(drafter_cfg))
    return root


@pytest.mark.parametrize(
    ("mutate", "drafter_cfg", "field", "problem", "fix"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_bad_profile_is_refused_with_field_problem_and_fix(
    tmp_path, mutate, drafter_cfg, field, problem, fix
):
    doc = kimi_doc()
    mutate(doc)
    root = _weights_root(tmp_path, drafter_cfg)
    code, report = check_json(
        write_doc(tmp_path, doc), "--weights-root", str(root), "--configs-only"
    )
    assert code == 1, report
    assert not report["ok"]
    matching = [e for e in report["errors"] if e["field"] == field]
    assert matching, f"no error on {field}: {report['errors']}"
    assert any(problem in e["problem"] and fix in e["fix"] for e in matching), matching


@pytest.mark.parametrize("profile", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_profiles_pass_against_fixtures(profile):
    code, report = check_json(
        profile, "--weights-root", str(FIXTURES), "--configs-only", "--require-models"
    )
    assert code == 0, report
    assert report["errors"] == []
    # The shipped baselines are not product measurements (the field notes' figure, a copy of it):
    # they record no settings, which `check` says in the one warning (test_profile_baseline_*).
    numbers = (yaml.safe_load(profile.read_text()).get("baseline") or {}).get(
        "gen_throughput_tok_s"
    )
    # A profile that accepts eager decode above its CUDA graphs says why, and `check` repeats it
    # (test_graph_coverage.py).
    accepted = [w for w in report["warnings"] if "allow_uncaptured_decode" in w["problem"]]
    assert bool(accepted) == bool(yaml.safe_load(profile.read_text())["server"].get(
        "allow_uncaptured_decode"))  # fmt: skip
    others = [w["field"] for w in report["warnings"] if w not in accepted]
    assert others == (["baseline"] if numbers else [])


def test_specforge_drafter_with_explicit_aux_layers_passes(tmp_path):
    doc = kimi_doc()
    doc["drafter"]["path"] = "/models/specforge-kimi-k25-eagle3"
    code, report = check_json(
        write_doc(tmp_path, doc), "--weights-root", str(FIXTURES), "--configs-only"
    )
    assert code == 0, report


def test_warnings_are_separate_and_do_not_fail(tmp_path):
    doc = kimi_doc()
    # --enable-symm-mem makes SGLang set NCCL_CUMEM_ENABLE=1 over the deployment's 0
    # (tests/contract/test_nccl_overwrites.py).
    doc["server"]["extra_args"] = ["--enable-symm-mem"]
    doc["nccl"]["overrides"] = {"NCCL_CUMEM_ENABLE": "0"}
    code, report = check_json(
        write_doc(tmp_path, doc), "--weights-root", str(FIXTURES), "--configs-only",
        "--no-baseline-check",
    )
    assert code == 0
    assert report["errors"] == []
    [w] = report["warnings"]
    assert w["field"] == "nccl.overrides.NCCL_CUMEM_ENABLE"
    assert "SGLang sets NCCL_CUMEM_ENABLE=1 at startup because of --enable-symm-mem" in w["problem"]


def test_an_nccl_value_sglang_keeps_is_no_warning(tmp_path):
    doc = kimi_doc()
    doc["nccl"]["overrides"] = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    code, report = check_json(
        write_doc(tmp_path, doc), "--weights-root", str(FIXTURES), "--configs-only",
        "--no-baseline-check",
    )
    assert code == 0, report
    assert report["warnings"] == [] and report["errors"] == []


def test_missing_model_dir_is_warning_unless_required(tmp_path):
    path = write_doc(tmp_path, kimi_doc())
    code, report = check_json(path, "--configs-only", "--no-baseline-check")
    assert code == 0
    assert {w["field"] for w in report["warnings"]} == {"target.path", "drafter.path"}
    code, report = check_json(path, "--configs-only", "--require-models")
    assert code == 1
    assert {e["field"] for e in report["errors"]} == {"target.path", "drafter.path"}


def test_kimi_text_config_is_unwrapped(tmp_path):
    # Without text_config unwrapping the target would have no layer count and the aux-layer
    # check would silently pass; with it, id 59 (59 + 1 = 60 < 61) passes and 60 fails.
    root = _weights_root(
        tmp_path, _drafter_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 59]})
    )
    code, _ = check_json(
        write_doc(tmp_path, kimi_doc()), "--weights-root", str(root), "--configs-only"
    )
    assert code == 0
