"""Weight completeness: every shard named by the index present, non-empty, sizes adding up."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import check_json, kimi_doc, write_doc

# The default profile's drafter directory and its class (its fixture's).
DRAFTER = Path(kimi_doc()["drafter"]["path"]).name
DRAFTER_CLASS = "Eagle3DeepseekV2ForCausalLM"
SHARDS = [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
]


def _model(root: Path, name: str, sizes: dict[str, int], total: int, arch: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    cfg = json.loads(
        (Path(__file__).parents[1] / "fixtures/models" / name / "config.json").read_text()
    )
    assert cfg["architectures"] == [arch]
    (d / "config.json").write_text(json.dumps(cfg))
    weight_map = {f"t{i}": shard for i, shard in enumerate(SHARDS)}
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    for shard, size in sizes.items():
        (d / shard).write_bytes(b"\0" * size)


def _check(tmp: Path, target_sizes: dict[str, int], total: int = 3000) -> dict:
    root = tmp / "models"
    _model(root, "Kimi-K2.5", target_sizes, total, "KimiK25ForConditionalGeneration")
    _model(root, DRAFTER, dict.fromkeys(SHARDS, 1000), 3000, DRAFTER_CLASS)
    code, report = check_json(write_doc(tmp, kimi_doc()), "--weights-root", str(root))
    report["code"] = code
    return report


def test_complete_weights_pass(tmp_path):
    report = _check(tmp_path, dict.fromkeys(SHARDS, 1000))
    assert report["code"] == 0, report


def test_missing_shard_is_named(tmp_path):
    report = _check(tmp_path, {SHARDS[0]: 1000, SHARDS[2]: 1000})
    assert report["code"] == 1
    [err] = report["errors"]
    assert err["field"] == "target.path"
    assert "1 of 3 shards" in err["problem"] and SHARDS[1] in err["problem"]
    assert "--configs-only" in err["fix"]


def test_empty_shard_is_refused(tmp_path):
    report = _check(tmp_path, {SHARDS[0]: 1000, SHARDS[1]: 0, SHARDS[2]: 1000})
    assert any(
        "empty shards" in e["problem"] and SHARDS[1] in e["problem"] for e in report["errors"]
    )


def test_truncated_shard_fails_total_size(tmp_path):
    report = _check(tmp_path, {SHARDS[0]: 1000, SHARDS[1]: 400, SHARDS[2]: 1000})
    assert report["code"] == 1
    assert any(
        "truncated" in e["problem"] and "2400 bytes" in e["problem"] for e in report["errors"]
    )


def test_configs_only_skips_shards(tmp_path):
    root = tmp_path / "models"
    _model(root, "Kimi-K2.5", {}, 3000, "KimiK25ForConditionalGeneration")
    _model(root, DRAFTER, {}, 3000, DRAFTER_CLASS)
    path = write_doc(tmp_path, kimi_doc())
    code, _ = check_json(path, "--weights-root", str(root), "--configs-only")
    assert code == 0
    code, report = check_json(path, "--weights-root", str(root))
    assert code == 1 and {e["field"] for e in report["errors"]} == {"target.path", "drafter.path"}
