"""specserve.upstream: the committed SGLang contract data and its API (no SGLang venv needed)."""

from __future__ import annotations

import pytest

from specserve.upstream import (
    PINNED_VERSION,
    VERIFIED_VERSIONS,
    UnknownSGLangVersion,
    sglang_contract,
)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_contract_loads_with_the_facts_the_product_relies_on(version: str) -> None:
    c = sglang_contract(version)
    assert c.version == version
    assert sglang_contract(version) is c  # cached
    assert {
        "LlamaForCausalLMEagle3",
        "Eagle3DeepseekV2ForCausalLM",
    } <= c.eagle3_drafter_architectures
    assert "LlamaForCausalLMEagle" in c.eagle_drafter_architectures
    assert not c.eagle3_drafter_architectures & c.eagle_drafter_architectures
    assert c.drafter_kind("Eagle3DeepseekV2ForCausalLM") == "EAGLE3"
    assert c.drafter_kind("LlamaForCausalLM") is None
    assert {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"} <= c.speculative_algorithms
    assert c.eagle_max_running_requests_cap == 48
    assert c.default_tree("LlamaForCausalLM") == (5, 4, 8)
    assert c.default_tree("DeepseekV3ForCausalLM") == (3, 1, 4)
    assert c.health_generation_default is True
    assert {"/health", "/health_generate", "/ready", "/metrics", "/server_info"} <= c.endpoints
    assert c.auth_exempt("/health_generate") and c.auth_exempt("/metrics")
    assert not c.auth_exempt("/v1/chat/completions")
    assert "sglang:spec_accept_length" in c.metric_names
    assert "model_name" in c.metric_labels("sglang:spec_accept_length")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_option_lookup_is_exact_and_abbreviations_are_reported(version: str) -> None:
    c = sglang_contract(version)
    algo = c.option("--speculative-algorithm")
    assert algo is not None and algo.takes_value and algo.dest == "speculative_algorithm"
    assert c.option("--speculative-algorithm=EAGLE3") == algo
    # An alias resolves to the same option.
    assert c.option("--speculative-draft-model") == c.option("--speculative-draft-model-path")
    # SGLang's parser allows abbreviations; this one is ambiguous there, so no exact match here.
    assert c.allow_abbrev
    assert c.option("--cuda-graph-max-bs") is None
    assert c.abbreviation_matches("--cuda-graph-max-bs") == (
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-max-bs-prefill",
    )
    deprecated = c.option("--disable-cuda-graph")
    assert deprecated is not None and deprecated.deprecated


def test_version_differences_are_in_the_data() -> None:
    old, new = sglang_contract("0.5.21"), sglang_contract("0.5.23")
    assert "tc_piecewise" in old.cuda_graph_backend_decode_choices
    assert "tc_piecewise" not in new.cuda_graph_backend_decode_choices
    assert old.option("--cuda-graph-tc-compiler") is not None
    assert new.option("--cuda-graph-tc-compiler") is None
    dp_attention = new.option("--enable-dp-attention")
    assert dp_attention is not None and dp_attention.deprecated


def test_unknown_version_names_the_verified_ones_and_the_fix() -> None:
    with pytest.raises(UnknownSGLangVersion) as info:
        sglang_contract("0.4.0")
    message = str(info.value)
    assert "0.4.0" in message and PINNED_VERSION in message
    assert "scripts/sglang/regenerate" in message and "versions.yaml" in message
    assert isinstance(info.value, KeyError)


def test_the_data_ships_in_the_wheel() -> None:
    # setuptools packs data/*.json because data/ is a package and pyproject's package-data
    # matches *.json in every package (a wheel built here lists specserve/upstream/data/*.json).
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert (root / "specserve" / "upstream" / "data" / "__init__.py").is_file()
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert "*.json" in pyproject["tool"]["setuptools"]["package-data"]["*"]
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "specserve.*" in include
