"""The candidates (specserve.tune.plan): no speculation first, the grid, adaptive and the other
methods, one running-request cap for all, each judged by the `specserve check` rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.facts import facts
from specserve.profile.loader import load_profile
from specserve.tune.edit import profile_edit
from specserve.tune.errors import TuneError
from specserve.tune.plan import tune_points

from .helpers import STANDIN, save_profile


def test_grid_points_judged_by_the_check_rules() -> None:
    points = tune_points(
        {"num_steps": [1, 3], "eagle_topk": [1, 2], "num_draft_tokens": ["steps+1", 4]},
        str(STANDIN), [{"num_steps": 1, "eagle_topk": 2, "num_draft_tokens": 1}],
    )
    by_id = {p["id"]: p for p in points}
    # No speculation is a candidate, first; steps+1 and 4 coincide for steps 3: listed once.
    assert list(by_id) == ["no-spec", "s1-k1-d2", "s1-k1-d4", "s1-k2-d2", "s1-k2-d4", "s3-k1-d4",
                           "s3-k2-d4", "s1-k2-d1"]
    assert by_id["no-spec"]["speculative"] is False and by_id["no-spec"]["valid"]
    assert "num_steps" not in by_id["no-spec"]
    # One explicit running-request cap for every candidate, no speculation included.
    assert {p["max_running_requests"] for p in points} == {48}
    assert not by_id["s1-k1-d4"]["valid"]
    assert "eagle_topk 1 the draft is a chain of num_steps + 1 = 2" in by_id["s1-k1-d4"]["reason"]
    assert all(p["valid"] for i, p in by_id.items() if i != "s1-k1-d4")


def test_an_nccl_preset_is_part_of_the_point_and_its_id() -> None:
    points = tune_points({"num_steps": [1], "eagle_topk": [1], "nccl_preset": ["default"]},
                         str(STANDIN))
    assert [p["id"] for p in points] == ["no-spec", "s1-k1-d2-default"]
    assert points[1]["nccl_preset"] == "default" and "nccl_preset" not in points[0]


def test_grid_errors_name_the_field() -> None:
    with pytest.raises(TuneError, match="unknown key"):
        tune_points({"num_steps": [1], "eagle_topk": [1], "topk": [2]}, str(STANDIN))
    with pytest.raises(TuneError, match=r"tune_grid\.eagle_topk must be a non-empty"):
        tune_points({"num_steps": [1]}, str(STANDIN))
    with pytest.raises(TuneError, match=r"tune_points entry .* lacks \['num_draft_tokens'\]"):
        tune_points({"num_steps": [1], "eagle_topk": [1]}, str(STANDIN),
                    [{"num_steps": 1, "eagle_topk": 1}])
    bad = tune_points({"num_steps": [0], "eagle_topk": [1]}, str(STANDIN))
    assert bad[0]["id"] == "no-spec" and bad[0]["valid"]
    assert not bad[1]["valid"] and "drafter.num_steps" in bad[1]["reason"]
    typed = tune_points({"num_steps": ["two"], "eagle_topk": [1], "num_draft_tokens": [3]},
                        str(STANDIN))
    assert not typed[1]["valid"] and typed[1]["reason"] == "num_steps 'two' is not an integer"


PINNED = "  max_running_requests: 48\n"


def test_every_candidate_runs_with_the_same_running_request_cap(tmp_path: Path) -> None:
    # Unset in the profile: SGLang's cap under EAGLE-family speculation (48, read from its
    # speculative_hook.py into the upstream contract), pinned for every candidate, so no
    # speculation does not run uncapped beside capped speculative points.
    assert PINNED in STANDIN.read_text()
    unset = save_profile(tmp_path, STANDIN.read_text().replace(PINNED, ""))
    points = {p["id"]: p for p in tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(unset), adaptive=True)}
    assert {p["max_running_requests"] for p in points.values()} == {48}
    for ident in ("no-spec", "s1-k1-d2", "adaptive"):
        doc = yaml.safe_load(profile_edit(unset.read_text(), points[ident]))
        assert doc["server"]["max_running_requests"] == 48, ident
        assert ("drafter" in doc) == (ident != "no-spec"), ident
    # The profile's own value wins over SGLang's default cap.
    pinned = save_profile(tmp_path, STANDIN.read_text().replace(PINNED,
                                                                "  max_running_requests: 12\n"))
    points = {p["id"]: p for p in tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(pinned))}
    assert {p["max_running_requests"] for p in points.values()} == {12}
    doc = yaml.safe_load(profile_edit(pinned.read_text(), points["no-spec"]))
    assert doc["server"]["max_running_requests"] == 12


def test_the_adaptive_candidate_is_the_profiles_chain_with_adaptation(tmp_path: Path) -> None:
    points = tune_points({"num_steps": [1], "eagle_topk": [1]}, str(STANDIN), adaptive=True)
    assert [p["id"] for p in points] == ["no-spec", "s1-k1-d2", "adaptive"]
    adaptive = points[-1]
    drafter = load_profile(STANDIN).drafter
    assert drafter is not None
    steps = drafter.num_steps
    assert (adaptive["num_steps"], adaptive["eagle_topk"], adaptive["num_draft_tokens"]) == (
        steps, 1, steps + 1)
    assert adaptive["valid"], adaptive["reason"]
    profile = load_profile(save_profile(tmp_path, profile_edit(STANDIN.read_text(), adaptive)))
    assert profile.document_value("drafter.adaptive") is True
    assert "adaptive" not in [p["id"] for p in tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(STANDIN))]


def test_the_adaptive_candidate_needs_the_profiles_step_count(tmp_path: Path) -> None:
    doc = yaml.safe_load(STANDIN.read_text())
    del doc["drafter"]["num_steps"]
    path = save_profile(tmp_path, yaml.safe_dump(doc, sort_keys=False))
    adaptive = tune_points({"num_steps": [1], "eagle_topk": [1]}, str(path), adaptive=True)[-1]
    assert adaptive["id"] == "adaptive" and not adaptive["valid"]
    assert "drafter.num_steps is not set in the profile" in adaptive["reason"]


def test_tuning_points_of_a_profile_without_drafter_are_refused(tmp_path: Path) -> None:
    plain = save_profile(tmp_path, profile_edit(STANDIN.read_text(), "off"))
    with pytest.raises(TuneError, match="no drafter to tune"):
        tune_points({"num_steps": [1], "eagle_topk": [1]}, str(plain))


def test_other_methods_are_candidates_judged_by_the_check_rules(tmp_path: Path) -> None:
    points = tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(STANDIN),
        methods=[{"algorithm": "NGRAM"}, {"algorithm": "ngram", "num_draft_tokens": 8},
                 {"algorithm": "DSPARK"}],
    )  # fmt: skip
    by_id = {p["id"]: p for p in points}
    assert list(by_id) == ["no-spec", "s1-k1-d2", "ngram", "ngram-2", "dspark"]
    cap = by_id["no-spec"]["max_running_requests"]
    assert {p["max_running_requests"] for p in points} == {cap}  # one cap for every method
    assert by_id["ngram"]["valid"] and by_id["ngram-2"]["valid"], by_id["ngram"]["reason"]
    # DSPARK without its drafter is what `specserve check` refuses: reported, never run.
    assert not by_id["dspark"]["valid"] and "drafter.path" in by_id["dspark"]["reason"]

    # The method's drafter block replaces the profile's whole: nothing of the EAGLE3 tree stays.
    text = profile_edit(STANDIN.read_text(), by_id["ngram-2"])
    profile = load_profile(save_profile(tmp_path, text))
    assert profile.drafter is not None and profile.drafter.algorithm == "NGRAM"
    assert profile.drafter.path is None and profile.drafter.num_steps is None
    assert facts(profile).draft_tokens == 8
    assert yaml.safe_load(text)["server"]["max_running_requests"] == cap
    assert "# CPU only" in text  # the user's comments survive


@pytest.mark.parametrize(
    ("methods", "error"),
    [
        ([{"path": "x"}], "is not a drafter block"),
        (["NGRAM"], "is not a drafter block"),
        ([{"algorithm": "none"}], "no-speculation candidate"),
    ],
)
def test_a_method_that_is_no_drafter_block_is_refused(methods: list[Any], error: str) -> None:
    with pytest.raises(TuneError, match=error):
        tune_points({"num_steps": [1], "eagle_topk": [1]}, str(STANDIN), methods=methods)


def test_the_profile_names_its_own_methods_and_the_variable_replaces_them(
    tmp_path: Path,
) -> None:
    doc = yaml.safe_load(STANDIN.read_text())
    doc["tuning"] = {"methods": [{"algorithm": "NGRAM", "num_draft_tokens": 8}]}
    path = save_profile(tmp_path, yaml.safe_dump(doc, sort_keys=False))
    assert load_profile(path).document_value("tuning.methods") == [
        {"algorithm": "NGRAM", "num_draft_tokens": 8}]  # the schema takes it
    grid = {"num_steps": [1], "eagle_topk": [1]}
    named = {p["id"]: p for p in tune_points(grid, str(path))}
    assert list(named) == ["no-spec", "s1-k1-d2", "ngram"] and named["ngram"]["valid"]
    assert named["ngram"]["drafter"] == {"algorithm": "NGRAM", "num_draft_tokens": 8}
    replaced = tune_points(grid, str(path), methods=[{"algorithm": "NGRAM"}])
    assert replaced[-1]["drafter"] == {"algorithm": "NGRAM"}
    # A method block the drafter section would refuse is refused by the profile's schema.
    doc["tuning"] = {"methods": [{"algorithm": "NGRAM", "draft_tokens": 8}]}
    with pytest.raises(Exception, match="draft_tokens"):
        load_profile(save_profile(tmp_path, yaml.safe_dump(doc, sort_keys=False)))
