"""EAGLE, NEXTN and STANDALONE with a drafter of no draft family (issue 29 item 1, the "unknown
architecture" direction): what SGLang loads is decided by its model registry and by
`ModelConfig._config_draft_model`'s rewrites (specserve/upstream/data, per verified version;
tests/contract/test_draft_rewrites.py holds that data to SGLang's own code).

- a class SGLang does not serve: the registry falls back to TransformersForCausalLM, an error
  naming the classes the algorithm takes;
- a plain model SGLang serves as a target, given EAGLE / NEXTN: the EAGLE worker drafts with it
  from token ids alone, an error that points at STANDALONE; STANDALONE takes it;
- a target SGLang rewrites to its own MTP layers (DeepseekV3ForCausalLM -> ...NextN): accepted
  under EAGLE / NEXTN, refused under EAGLE3 and STANDALONE as a drafter of the MTP family.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue
from specserve.profile.model import profile_from_document
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
LLAMA = FIXTURES / "Llama-3.1-8B-Instruct"
UNSERVED = "MadeUpForCausalLM"


def _drafter(tmp: Path, architecture: str, **changes: Any) -> Path:
    """The Llama target's config.json (a shape that fits the target) with another class."""
    config = json.loads((LLAMA / "config.json").read_text())
    config.update(architectures=[architecture], **changes)
    path = tmp / architecture
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def _issues(algorithm: str, drafter: Path, version: str) -> list[Issue]:
    doc = yaml.safe_load((ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["target"]["path"] = str(LLAMA)
    doc.pop("baseline", None)
    doc["drafter"] = {"algorithm": algorithm, "path": str(drafter), "num_steps": 3,
                      "eagle_topk": 1, "num_draft_tokens": 4}  # fmt: skip
    profile = profile_from_document(doc, ROOT / "profiles" / "d.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [i for i in issues if i.severity.value == "error"
            and i.field in ("drafter.algorithm", "drafter.path")]  # fmt: skip


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN"])
def test_an_unserved_class_is_named_with_the_classes_the_algorithm_takes(
    tmp_path: Path, version: str, algorithm: str
) -> None:
    c = sglang_contract(version)
    assert UNSERVED not in c.served_architectures
    [err] = _issues(algorithm, _drafter(tmp_path, UNSERVED), version)
    assert err.field == "drafter.path"
    assert f"declares {UNSERVED}, no class SGLang {version} serves" in err.problem
    assert "falls back to TransformersForCausalLM" in err.problem
    # Every class the algorithm takes, of each family, by name.
    for name in (*c.eagle_drafter_architectures, *c.mtp_drafter_architectures,
                 *c.draft_class_sources()):  # fmt: skip
        assert name in err.problem, name
    assert "STANDALONE" in err.fix


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_standalone_takes_a_served_draft_lm_and_refuses_an_unserved_one(
    tmp_path: Path, version: str
) -> None:
    assert _issues("STANDALONE", LLAMA, version) == []
    [err] = _issues("STANDALONE", _drafter(tmp_path, UNSERVED), version)
    assert err.field == "drafter.path" and "TransformersForCausalLM" in err.problem
    assert "LlamaForCausalLM" in err.fix


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN"])
def test_a_plain_served_model_under_eagle_or_nextn_points_at_standalone(
    version: str, algorithm: str
) -> None:
    [err] = _issues(algorithm, LLAMA, version)
    assert err.field == "drafter.algorithm"
    assert f"LlamaForCausalLM, a model SGLang {version} serves as a target" in err.problem
    assert "without the target's hidden states" in err.problem
    assert err.fix.startswith("set drafter.algorithm: STANDALONE")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_target_sglang_loads_as_its_mtp_layers(tmp_path: Path, version: str) -> None:
    c = sglang_contract(version)
    assert c.draft_classes("DeepseekV3ForCausalLM", None) == ("DeepseekV3ForCausalLMNextN",)
    deepseek = _drafter(tmp_path, "DeepseekV3ForCausalLM")
    for algorithm in ("EAGLE", "NEXTN"):
        assert _issues(algorithm, deepseek, version) == [], algorithm
    for algorithm in ("EAGLE3", "STANDALONE"):
        [err] = _issues(algorithm, deepseek, version)
        assert "a MTP drafter" in err.problem and "EAGLE / NEXTN loads" in err.problem, err


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_rewrite_by_model_type_counts_before_the_class(tmp_path: Path, version: str) -> None:
    """Dots3: SGLang rewrites by the text config's class (model_type dots3_note), whatever
    architectures[0] says."""
    c = sglang_contract(version)
    if "dots3_note" not in c.raw["draft_rewrites"]["by_model_type"]:
        pytest.fail(f"SGLang {version}: no Dots3 rewrite; pick another model_type rewrite here")
    drafter = _drafter(tmp_path, "Dots3NoteForCausalLM", model_type="dots3_note")
    assert _issues("NEXTN", drafter, version) == []
    plain = _drafter(tmp_path / "plain", "Dots3NoteForCausalLM")
    assert [i.field for i in _issues("NEXTN", plain, version)] != []
