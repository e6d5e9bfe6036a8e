"""The draft-class facts `check` uses for EAGLE / NEXTN / STANDALONE drafters
(tests/profile/test_draft_classes.py), held to SGLang's own code on every verified version:

- `draft_rewrites` (extracted by AST from `ModelConfig._config_draft_model`) is exactly what that
  method does when called, for every class the registry serves, under EAGLE and DSPARK;
- an architecture the registry does not serve resolves to TransformersForCausalLM
  (`_ModelRegistry.resolve_model_cls`), the fallback the unserved-class error names.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.sglang_venv import run_snippet

# Calls the real method on a stand-in `self` whose configs are transformers' PretrainedConfig
# (attributes as a checkpoint's config.json gives them). READ: what some branches read besides
# architectures (LongcatFlash, Inkling, InternS2Mobius).
REWRITES = r"""
import json, logging, sys, types
logging.disable(logging.CRITICAL)
from transformers import PretrainedConfig
from sglang.srt.configs.model_config import ModelConfig

READ = {"num_nextn_predict_layers": 1, "mtp_local_layer_ids": None, "mtp_local_extent": None,
        "mtp_num_experts": 1, "mtp_num_experts_per_tok": 1}


def loaded(arch, algorithm, config=None):
    config = config or PretrainedConfig(architectures=[arch], **READ)
    model = types.SimpleNamespace(
        is_draft_model=True, hf_config=config, hf_text_config=config,
        speculative_algorithm=algorithm, is_draft_quantization_explicit=False,
        quantization=None, sliding_window_size=None)
    try:
        ModelConfig._config_draft_model(model)
    except Exception as exc:
        return "error: " + type(exc).__name__ + ": " + str(exc)[:200]
    return model.hf_config.architectures[0]


request = json.load(sys.stdin)
out = {"by_architecture": {a: {alg: loaded(a, alg) for alg in ("EAGLE", "DSPARK")}
                           for a in request["served"]}}
# A DeepseekV4 checkpoint that bundles a DSpark head (a dspark_* key in its config).
bundled = PretrainedConfig(architectures=["DeepseekV4ForCausalLM"], dspark_markov_rank=64, **READ)
out["deepseek_v4_bundled"] = loaded(None, "DSPARK", bundled)
from sglang.srt.configs.dots3 import Dots3Config
dots3 = Dots3Config()
dots3.architectures = ["Dots3NoteForCausalLM"]
out["by_model_type"] = {Dots3Config.model_type: loaded(None, "EAGLE", dots3)}
from sglang.srt.models.registry import _ModelRegistry
registry = _ModelRegistry(models={a: a for a in request["served"]})
out["unserved"] = registry.resolve_model_cls([request["unserved"]])[1]
print(json.dumps(out))
"""
UNSERVED = "MadeUpForCausalLM"


@cache
def _real(version: str) -> dict[str, Any]:
    served = sorted(sglang_contract(version).served_architectures)
    result: dict[str, Any] = run_snippet(version, REWRITES,
                                         {"served": served, "unserved": UNSERVED})
    return result


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_rewrite_table_is_what_config_draft_model_does(version: str) -> None:
    c = sglang_contract(version)
    table = c.raw["draft_rewrites"]["by_architecture"]
    real = _real(version)["by_architecture"]
    rewritten: dict[str, set[str]] = {}
    errors = {}
    for arch, by_algorithm in real.items():
        for algorithm, loaded in by_algorithm.items():
            if loaded.startswith("error: "):
                errors[(arch, algorithm)] = loaded
            elif loaded != arch:
                rewritten.setdefault(arch, set()).add(loaded)
    # A config refusal, not a class rewrite: MiniMax's DSpark head without its dense FFN keys.
    assert set(errors) <= {("DSparkMiniMaxDraftModel", "DSPARK")}, errors
    # The DSpark class of DeepseekV4 needs the dspark keys: the bundled case below.
    rewritten.setdefault("DeepseekV4ForCausalLM", set()).add(_real(version)["deepseek_v4_bundled"])
    assert {k: sorted(v) for k, v in rewritten.items()} == table
    # Every class a rewrite loads is one the registry serves, of a draft family.
    for targets in table.values():
        for target in targets:
            assert target in c.served_architectures and c.drafter_kind(target), target


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_rewrite_by_model_type_is_what_config_draft_model_does(version: str) -> None:
    c = sglang_contract(version)
    table = c.raw["draft_rewrites"]["by_model_type"]
    assert {k: [v] for k, v in _real(version)["by_model_type"].items()} == table
    assert c.draft_classes("AnythingForCausalLM", "dots3_note") == tuple(table["dots3_note"])


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_unserved_class_falls_back_to_the_transformers_backend(version: str) -> None:
    assert UNSERVED not in sglang_contract(version).served_architectures
    assert _real(version)["unserved"] == "TransformersForCausalLM"
