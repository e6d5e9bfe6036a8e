"""drafter.adaptive / drafter.adaptive_config: SGLang's run-time step adaptation in the profile."""

from __future__ import annotations

import json

import pytest
from helpers import FIXTURES, check_json, kimi_doc, write_doc

from specserve.profile.loader import load_profile
from specserve.profile.render import render


def _argv(tmp_path, **drafter):
    doc = kimi_doc()
    doc["drafter"].update(drafter)
    return list(render(load_profile(write_doc(tmp_path, doc))).argv)


def test_adaptive_renders_the_switch_and_its_config_path(tmp_path):
    (tmp_path / "adaptive.json").write_text('{"1": {"candidate_steps": [1, 3]}}')
    argv = _argv(tmp_path, adaptive=True, adaptive_config="./adaptive.json")
    assert "--speculative-adaptive" in argv
    at = argv.index("--speculative-adaptive-config")
    # Relative to the profile's directory, like the model paths.
    assert argv[at + 1] == str(tmp_path / "adaptive.json")


def test_adaptive_off_renders_neither_flag(tmp_path):
    argv = _argv(tmp_path)
    assert not [a for a in argv if a.startswith("--speculative-adaptive")]


def test_adaptive_renders_nothing_without_speculation(tmp_path):
    argv = _argv(tmp_path, algorithm="none", adaptive=True)
    assert not [a for a in argv if a.startswith("--speculative")]


def test_the_model_carries_the_fields(tmp_path):
    doc = kimi_doc()
    doc["drafter"]["adaptive"] = True
    drafter = load_profile(write_doc(tmp_path, doc)).speculative
    assert drafter is not None and drafter.adaptive is True and drafter.adaptive_config is None


# --- specserve check --------------------------------------------------------------------------


def _check(tmp_path, version="0.5.21", **drafter):
    doc = kimi_doc()
    doc["drafter"].update(drafter)
    doc["drafter"] = {k: v for k, v in doc["drafter"].items() if v is not None}
    _, report = check_json(
        write_doc(tmp_path, doc),
        "--weights-root",
        str(FIXTURES),
        "--configs-only",
        "--sglang-version",
        version,
    )
    return [i for i in report["errors"] + report["warnings"] if i["field"].startswith("drafter")]


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_the_kimi_tree_with_adaptive_passes(tmp_path, version):
    # steps 3 is one of SGLang's default candidates (0, 1, 3, 5, 7); top-k 1, draft 4 = 3 + 1.
    assert _check(tmp_path, version, adaptive=True) == []


def test_top_k_above_one_is_refused_in_sglangs_words(tmp_path):
    issues = _check(tmp_path, adaptive=True, num_steps=3, eagle_topk=4, num_draft_tokens=16)
    assert [i["field"] for i in issues] == ["drafter.adaptive"]
    assert "speculative_eagle_topk=4 (only topk=1 is supported)" in issues[0]["problem"]
    assert "eagle_topk: 1" in issues[0]["fix"]


def test_an_algorithm_without_adaptive_is_refused(tmp_path):
    doc = kimi_doc()
    doc["drafter"].update(algorithm="STANDALONE", adaptive=True)
    _, report = check_json(write_doc(tmp_path, doc), "--configs-only")
    problems = [i["problem"] for i in report["errors"] if i["field"] == "drafter.adaptive"]
    assert problems and "STANDALONE (only EAGLE/EAGLE3 are supported)" in problems[0]


@pytest.mark.parametrize(
    ("version", "words"),
    [("0.5.21", "enable_dp_attention=True is not supported"),
     ("0.5.23", "attention DP is not supported")],
)  # fmt: skip
def test_dp_attention_turns_adaptive_off_worded_per_version(tmp_path, version, words):
    doc = kimi_doc()
    doc["drafter"]["adaptive"] = True
    doc["parallelism"].update(dp=8, enable_dp_attention=True)
    _, report = check_json(write_doc(tmp_path, doc), "--configs-only", "--sglang-version", version)
    problems = [i["problem"] for i in report["errors"] if i["field"] == "drafter.adaptive"]
    assert problems and words in problems[0], report


def test_two_batch_overlap_in_extra_args_turns_adaptive_off(tmp_path):
    doc = kimi_doc()
    doc["drafter"]["adaptive"] = True
    doc.setdefault("server", {})["extra_args"] = ["--enable-two-batch-overlap"]
    _, report = check_json(write_doc(tmp_path, doc), "--configs-only")
    fixes = [i["fix"] for i in report["errors"] if i["field"] == "drafter.adaptive"]
    assert fixes and "server.extra_args" in fixes[0]


def test_steps_outside_the_candidates_are_refused(tmp_path):
    issues = _check(tmp_path, adaptive=True, num_steps=2, eagle_topk=1, num_draft_tokens=3)
    assert [i["field"] for i in issues] == ["drafter.num_steps"]
    assert "not in the adaptive config candidate_steps [0, 1, 3, 5, 7]" in issues[0]["problem"]


def test_steps_alone_are_enough_with_adaptive(tmp_path):
    # SGLang's adaptive resolution sets top-k 1 and draft tokens steps + 1 itself.
    partial = {"num_steps": 5, "eagle_topk": None, "num_draft_tokens": None}
    assert _check(tmp_path, adaptive=True, **partial) == []
    issues = _check(tmp_path, **partial)
    assert issues and issues[0]["severity"] == "error"  # without adaptive: a partial tree


def test_draft_tokens_other_than_steps_plus_one_are_refused(tmp_path):
    issues = _check(tmp_path, adaptive=True, num_steps=5, eagle_topk=None, num_draft_tokens=8)
    assert [i["field"] for i in issues] == ["drafter.num_draft_tokens"]
    assert "steps + 1 = 6" in issues[0]["problem"]


def test_a_config_file_decides_the_candidates(tmp_path):
    (tmp_path / "adaptive.json").write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    cfg = "./adaptive.json"
    assert _check(tmp_path, adaptive=True, adaptive_config=cfg, num_steps=2, num_draft_tokens=3,
                  eagle_topk=1) == []  # fmt: skip
    issues = _check(tmp_path, adaptive=True, adaptive_config=cfg)  # steps 3: not a candidate
    assert "candidate_steps [2, 4]" in issues[0]["problem"]


def test_a_bad_config_file_is_an_error_and_a_missing_one_a_warning(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"1": {"candidate_steps": [-1]}}))
    bad = _check(tmp_path, adaptive=True, adaptive_config="./bad.json")
    assert bad[0]["severity"] == "error" and "non-negative ints" in bad[0]["problem"]
    missing = _check(tmp_path, adaptive=True, adaptive_config="/nowhere/adaptive.json")
    assert missing[0]["severity"] == "warning" and "/nowhere/adaptive.json" in missing[0]["problem"]


def test_a_config_without_adaptive_is_refused(tmp_path):
    issues = _check(tmp_path, adaptive_config="/x.json")
    assert [i["field"] for i in issues] == ["drafter.adaptive_config"]
    assert "SGLang ignores the file" in issues[0]["problem"]
