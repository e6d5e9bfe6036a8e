"""The tuning helpers: profile edits, the grid judged by `specserve check`, state and ranking."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from specserve.profile import load_profile
from specserve.profile.facts import facts

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"
SCRIPT = ROOT / "ansible" / "roles" / "tune" / "files" / "tune_run.py"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tune = _load(ROOT / "ansible" / "plugins" / "filter" / "specserve_tune.py")
run = _load(SCRIPT)


def _save(tmp_path: Path, text: str) -> Path:
    # Beside the shipped profile's directory layout, so its relative model paths resolve.
    (tmp_path / "profiles").mkdir(exist_ok=True)
    if not (tmp_path / "tests").exists():
        (tmp_path / "tests").symlink_to(ROOT / "tests")
    path = tmp_path / "profiles" / "edited.yaml"
    path.write_text(text)
    return path


def test_speculation_off_removes_the_drafter_and_keeps_comments(tmp_path: Path) -> None:
    text = tune.profile_edit(STANDIN.read_text(), "off")
    profile = load_profile(_save(tmp_path, text))
    assert profile.speculative is None and facts(profile).draft_tokens is None
    assert "# CPU only" in text and "tests stay on loopback" in text
    assert profile.logging.file == "/var/log/specserve/sglang/sglang.log"


def test_point_and_baseline_edits_load_as_a_valid_profile(tmp_path: Path) -> None:
    text = tune.profile_edit(
        STANDIN.read_text(),
        {"num_steps": 2, "eagle_topk": 4, "num_draft_tokens": 8, "nccl_preset": "default",
         "id": "ignored"},
        baseline={"baseline": {"gen_throughput_tok_s": {"1": 90.04, "8": 533.26},
                               "source": "specserve bench ..."}},
    )
    profile = load_profile(_save(tmp_path, text))
    assert profile.drafter is not None
    assert (profile.drafter.num_steps, profile.drafter.eagle_topk,
            profile.drafter.num_draft_tokens) == (2, 4, 8)
    assert profile.baseline == {"1": 90.0, "8": 533.3}
    assert yaml.safe_load(text)["baseline"]["source"] == "specserve bench ..."


def test_a_measured_baseline_drops_the_shipped_blocks_comment(tmp_path: Path) -> None:
    # The shipped stand-in profile says "No recorded settings (a copy, not a measurement)" above
    # its copied figure; once baseline.yml records a measurement, that comment would lie.
    shipped = STANDIN.read_text()
    assert "No recorded settings" in shipped
    measured = {"gen_throughput_tok_s": {"1": 95.04}, "source": "specserve bench run",
                "image": "specserve/standin:0.1.0", "max_running_requests": 48}
    text = tune.profile_edit(shipped, baseline=measured)
    assert "No recorded settings" not in text and "a copy, not a measurement" not in text
    assert text.count("# Measured by `specserve bench` (playbooks/baseline.yml)") == 1
    assert "# CPU only" in text and "tests stay on loopback" in text  # the other comments stay
    again = tune.profile_edit(text, baseline={**measured, "gen_throughput_tok_s": {"1": 96.0}})
    assert again.count("# Measured by") == 1
    profile = load_profile(_save(tmp_path, again))
    assert profile.baseline == {"1": 96.0}
    # A block without the settings it was measured with gets no "Measured by" comment.
    bare = tune.profile_edit(shipped, baseline={"gen_throughput_tok_s": {"1": 1.0}, "source": "x"})
    assert "Measured by" not in bare and "No recorded settings" not in bare
    # Dropped with the block (no speculation applied): none of its comments stay behind.
    dropped = tune.profile_edit(text, {"speculative": False}, drop_baseline=True)
    assert "baseline" not in yaml.safe_load(dropped) and "Measured by" not in dropped


def test_tuning_a_profile_without_drafter_is_refused() -> None:
    text = tune.profile_edit(STANDIN.read_text(), "off")
    with pytest.raises(tune.AnsibleFilterError, match="no drafter to tune"):
        tune.profile_edit(text, {"num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2})


def test_grid_points_judged_by_the_check_rules() -> None:
    points = tune.tune_points(
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


def test_grid_errors_name_the_field() -> None:
    with pytest.raises(tune.AnsibleFilterError, match="unknown key"):
        tune.tune_points({"num_steps": [1], "eagle_topk": [1], "topk": [2]}, str(STANDIN))
    with pytest.raises(tune.AnsibleFilterError, match=r"tune_grid\.eagle_topk must be a non-empty"):
        tune.tune_points({"num_steps": [1]}, str(STANDIN))
    bad = tune.tune_points({"num_steps": [0], "eagle_topk": [1]}, str(STANDIN))
    assert bad[0]["id"] == "no-spec" and bad[0]["valid"]
    assert not bad[1]["valid"] and "drafter.num_steps" in bad[1]["reason"]


def _level(concurrency: int, server: float | None, agg: float,
           ttft_p99: float = 0.2, itl_p99: float = 0.01) -> dict[str, Any]:
    exporter = None if server is None else {
        "accept_length": 1.8, "gen_throughput_tok_s": {str(concurrency): server}}
    return {"concurrency": concurrency, "agg_tok_s": agg, "exporter": exporter,
            "ttft_s": {"p50": ttft_p99 / 2, "p90": ttft_p99 * 0.9, "p99": ttft_p99},
            "itl_s": {"p50": itl_p99 / 2, "p90": itl_p99 * 0.9, "p99": itl_p99}}


def _result(concurrency: int, server: float | None, agg: float) -> dict[str, Any]:
    return {"server": {"standin": True}, "levels": [_level(concurrency, server, agg)]}


def _points() -> list[dict[str, Any]]:
    return [
        {"id": "no-spec", "speculative": False, "max_running_requests": 48, "valid": True},
        {"id": "s1-k1-d2", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2, "valid": True,
         "max_running_requests": 48},
        {"id": "s3-k1-d4", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4, "valid": True,
         "max_running_requests": 48},
        {"id": "s1-k1-d4", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 4,
         "valid": False, "reason": "chain", "max_running_requests": 48},
        {"id": "s1-k2-d1", "num_steps": 1, "eagle_topk": 2, "num_draft_tokens": 1, "valid": True,
         "max_running_requests": 48},
    ]


def test_state_resumes_and_refuses_other_settings(tmp_path: Path) -> None:
    first = run.init(tmp_path, _points(), {"grid": 1})
    assert first["pending"] == ["no-spec", "s1-k1-d2", "s3-k1-d4", "s1-k2-d1"]
    assert first["invalid"] == ["s1-k1-d4"]
    run.mark(tmp_path, "no-spec", "ok")
    run.mark(tmp_path, "s1-k1-d2", "ok")
    again = run.init(tmp_path, _points(), {"grid": 1})
    assert again["pending"] == ["s3-k1-d4", "s1-k2-d1"]
    assert again["ok"] == ["no-spec", "s1-k1-d2"]
    with pytest.raises(run.TuneError, match="other settings"):
        run.init(tmp_path, _points(), {"grid": 2})


def _sweep(tmp_path: Path, figures: dict[str, dict[int, float]],
           settings: dict[str, Any] | None = None) -> None:
    """A run whose measured candidates have these server tok/s per concurrency."""
    levels = sorted({c for per in figures.values() for c in per})
    run.init(tmp_path, _points(), {"profile": "p.yaml", "bench_concurrency": levels,
                                   **(settings or {})})
    for ident, per in figures.items():
        out = tmp_path / "points" / ident
        out.mkdir(parents=True)
        result = {"server": {"standin": True},
                  "levels": [_level(c, v, v * 1.4, ttft_p99=0.1 * c, itl_p99=0.001 * c)
                             for c, v in per.items()]}
        (out / "results.json").write_text(json.dumps(result))
        run.mark(tmp_path, ident, "ok")


def test_ranking_by_measured_throughput_no_speculation_included(tmp_path: Path) -> None:
    run.init(tmp_path, _points(), {"profile": "p.yaml", "bench_concurrency": [8]})
    for ident, server, agg in (("no-spec", 533.0, 700.0), ("s1-k1-d2", 620.0, 900.0),
                               ("s3-k1-d4", 545.0, 1200.0)):
        out = tmp_path / "points" / ident
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(_result(8, server, agg)))
        run.mark(tmp_path, ident, "ok")
    run.mark(tmp_path, "s1-k2-d1", "failed", "Deploy FAILED: did not become healthy: crashed")
    report = run.report(tmp_path, 8, {"1": 90.0, "8": 500.0}, "s3-k1-d4", "node-1")
    # Ranked by the server-side number (the baseline's quantity), not the client's, with no
    # speculation among the candidates; speedups against no speculation of this sweep, not the
    # profile's recorded baseline.
    assert [r["id"] for r in report["ranked"]] == ["s1-k1-d2", "s3-k1-d4", "no-spec"]
    assert report["ranked"][0]["speedup"] == pytest.approx(620.0 / 533.0, rel=1e-3)
    assert report["ranked"][2]["speedup"] == 1.0 and report["no_spec_tok_s"] == 533.0
    assert report["best"]["id"] == "s1-k1-d2" and report["best"]["speculative"]
    assert report["verdict"] == ("Speculation pays at concurrency 8: s1-k1-d2 at 620.0 tok/s "
                                 "against 533.0 tok/s without speculation (1.16x).")
    # The latency the client measured, beside throughput.
    assert report["best"]["ttft_p99_s"] == 0.2 and report["best"]["itl_p99_s"] == 0.01
    assert [r["id"] for r in report["failed"]] == ["s1-k2-d1"]
    assert [r["id"] for r in report["invalid"]] == ["s1-k1-d4"]
    md = (tmp_path / "report.md").read_text()
    assert ("| 1 | `s1-k1-d2` | 1 | 1 | 2 | 48 | 620.0 | 1.16x | 1.80 | 200.0 | 10.00 "
            "| 900.0 |") in md
    assert "| 3 | `no-spec` (no speculation) | - | - | - | 48 | 533.0 | 1.00x |" in md
    assert "`s3-k1-d4` (current)" in md and "p99 TTFT ms | p99 ITL ms" in md
    assert "recorded baseline is 500.0 tok/s" in md
    assert "stand-in" in md and "did not become healthy: crashed" in md
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_no_speculation_fastest_is_said_in_one_sentence_with_both_figures(tmp_path: Path) -> None:
    _sweep(tmp_path, {"no-spec": {1: 90.0}, "s1-k1-d2": {1: 80.1}, "s3-k1-d4": {1: 82.3}})
    report = run.report(tmp_path, 1, {}, "s3-k1-d4", "node-1")
    assert report["best"]["id"] == "no-spec" and not report["best"]["speculative"]
    assert report["best"]["max_running_requests"] == 48
    sentence = ("No speculation is fastest at concurrency 1: 90.0 tok/s against 82.3 tok/s for "
                "the best speculative point s3-k1-d4, so speculation does not pay here.")
    assert report["verdict"] == sentence
    assert f"**{sentence}**" in (tmp_path / "report.md").read_text()
    assert report["crossover"]["concurrency"] == 1
    assert "speculation pays at no benched concurrency" in report["crossover"]["text"]


def test_traffic_mix_weighs_each_configuration_and_can_change_the_winner(tmp_path: Path) -> None:
    figures = {"no-spec": {1: 90.0, 8: 533.0, 32: 1129.0},
               "s1-k1-d2": {1: 127.0, 8: 620.0, 32: 1058.0},
               "s3-k1-d4": {1: 141.0, 8: 545.0, 32: 787.0}}
    _sweep(tmp_path, figures)
    at_one = run.report(tmp_path, 1, {}, "", "node-1")
    assert at_one["best"]["id"] == "s3-k1-d4"
    mix = {"1": 0.5, "8": 0.3, "32": 0.2}
    report = run.report(tmp_path, 1, {}, "", "node-1", mix)
    weighted = {ident: sum(w * per[int(c)] for c, w in mix.items())
                for ident, per in figures.items()}
    assert {r["id"]: r["tok_s"] for r in report["ranked"]} == pytest.approx(weighted)
    assert report["best"]["id"] == max(weighted, key=weighted.__getitem__) == "s1-k1-d2"
    assert report["where"] == "over the traffic mix 1: 0.5, 8: 0.3, 32: 0.2"
    # Over a mix the latency shown is the worst of its levels.
    assert report["best"]["ttft_p99_s"] == pytest.approx(3.2)
    # Per concurrency: who wins, and where speculation stops paying.
    winners = {row["concurrency"]: row["winner"] for row in report["per_concurrency"]}
    assert winners == {1: "s3-k1-d4", 8: "s1-k1-d2", 32: "no-spec"}
    assert [row["speculation_pays"] for row in report["per_concurrency"]] == [True, True, False]
    assert report["crossover"]["concurrency"] == 32
    md = (tmp_path / "report.md").read_text()
    assert "| 32 | `no-spec` | 1129.0 | 1129.0 | `s1-k1-d2` | 1058.0 | no |" in md
    assert ("Crossover (where speculation stops paying): 32: speculation pays up to "
            "concurrency 8 and stops paying from 32.") in md


@pytest.mark.parametrize(("pays", "expected", "text"), [
    ([True, True, True], None, "speculation pays at every benched concurrency (1, 8, 32)"),
    ([False, False, False], 1, "speculation pays at no benched concurrency"),
    ([True, False, False], 8, "pays up to concurrency 1 and stops paying from 8"),
    # Not monotonic: the crossover is where it stops paying for good.
    ([False, True, False], 32, "pays up to concurrency 8 and stops paying from 32"),
    ([True, False, True], None, "pays at the highest benched concurrency (32)"),
])
def test_crossover(pays: list[bool], expected: int | None, text: str) -> None:
    table = [{"concurrency": c, "speculation_pays": p}
             for c, p in zip((1, 8, 32), pays, strict=True)]
    found = run.crossover(table)
    assert found["concurrency"] == expected and text in found["text"]


@pytest.mark.parametrize(("mix", "error"), [
    ({"1": 0.5, "4": 0.5}, "concurrency 4, which is not benched (tune_bench_concurrency is [1, 8]);"
                           " add 4 to tune_bench_concurrency"),
    ({"1": 0.5, "8": 0.3}, "weights sum to 0.8, not 1 (within 0.01)"),
    ({"1": 1.2, "8": -0.2},
     "weight for concurrency 8 is -0.2: every weight must be a number above 0"),
    ({"1": 0.5, "8": "half"}, "weight for concurrency 8 is 'half'"),
    ({"one": 1.0}, "key 'one' is not a concurrency"),
    ([1, 8], "must map concurrency to weight"),
])
def test_traffic_mix_is_validated_before_the_sweep(tmp_path: Path, mix: Any, error: str) -> None:
    with pytest.raises(run.TuneError) as refused:
        run.init(tmp_path, _points(), {"bench_concurrency": [1, 8], "traffic_mix": mix})
    assert error in str(refused.value)
    assert not (tmp_path / "state.json").exists()  # refused before anything was recorded
    # Through the command line the playbook calls: exit 1 and the message on stderr.
    proc = subprocess.run([sys.executable, str(SCRIPT), "init", str(tmp_path), "--points",
                           json.dumps(_points()), "--settings",
                           json.dumps({"bench_concurrency": [1, 8], "traffic_mix": mix})],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and error in proc.stderr


def test_a_mix_within_the_tolerance_is_accepted() -> None:
    assert run.parse_mix({"1": 0.5, "8": 0.3, "32": 0.2}, [1, 8, 32]) == {1: 0.5, 8: 0.3, 32: 0.2}
    assert run.parse_mix({1: 0.333, 8: 0.333, 32: 0.333}, [1, 8, 32])  # 0.999
    assert run.parse_mix({}, [1]) == {}


def test_the_ranking_concurrency_must_be_benched(tmp_path: Path) -> None:
    with pytest.raises(run.TuneError, match="tune_concurrency 4 is not benched"):
        run.init(tmp_path, _points(), {"bench_concurrency": [1, 8], "concurrency": 4})


PINNED = "  max_running_requests: 48\n"


def test_every_candidate_runs_with_the_same_running_request_cap(tmp_path: Path) -> None:
    # Unset in the profile: SGLang's cap under EAGLE-family speculation (48, read from its
    # speculative_hook.py into the upstream contract), pinned for every candidate, so no
    # speculation does not run uncapped beside capped speculative points.
    assert PINNED in STANDIN.read_text()
    unset = _save(tmp_path, STANDIN.read_text().replace(PINNED, ""))
    points = {p["id"]: p for p in tune.tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(unset), adaptive=True)}
    assert {p["max_running_requests"] for p in points.values()} == {48}
    for ident in ("no-spec", "s1-k1-d2", "adaptive"):
        doc = yaml.safe_load(tune.profile_edit(unset.read_text(), points[ident]))
        assert doc["server"]["max_running_requests"] == 48, ident
        assert ("drafter" in doc) == (ident != "no-spec"), ident
    # The profile's own value wins over SGLang's default cap.
    pinned = _save(tmp_path, STANDIN.read_text().replace(PINNED, "  max_running_requests: 12\n"))
    points = {p["id"]: p for p in tune.tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(pinned))}
    assert {p["max_running_requests"] for p in points.values()} == {12}
    doc = yaml.safe_load(tune.profile_edit(pinned.read_text(), points["no-spec"]))
    assert doc["server"]["max_running_requests"] == 12


def test_the_adaptive_candidate_is_the_profiles_chain_with_adaptation(tmp_path: Path) -> None:
    points = tune.tune_points({"num_steps": [1], "eagle_topk": [1]}, str(STANDIN), adaptive=True)
    assert [p["id"] for p in points] == ["no-spec", "s1-k1-d2", "adaptive"]
    adaptive = points[-1]
    steps = load_profile(STANDIN).drafter.num_steps
    assert (adaptive["num_steps"], adaptive["eagle_topk"], adaptive["num_draft_tokens"]) == (
        steps, 1, steps + 1)
    assert adaptive["valid"], adaptive["reason"]
    profile = load_profile(_save(tmp_path, tune.profile_edit(STANDIN.read_text(), adaptive)))
    assert profile.document_value("drafter.adaptive") is True
    assert "adaptive" not in [p["id"] for p in tune.tune_points(
        {"num_steps": [1], "eagle_topk": [1]}, str(STANDIN))]


def test_applying_no_speculation_drops_the_drafter_and_the_baseline(tmp_path: Path) -> None:
    with_baseline = tune.profile_edit(
        STANDIN.read_text(), baseline={"gen_throughput_tok_s": {"1": 90.0}, "source": "bench"})
    point = {"id": "no-spec", "speculative": False, "max_running_requests": 48}
    text = tune.profile_edit(with_baseline, point, drop_baseline=True)
    profile = load_profile(_save(tmp_path, text))
    assert profile.speculative is None and profile.baseline == {}
    assert yaml.safe_load(text)["server"]["max_running_requests"] == 48
    assert "# CPU only" in text  # the user's comments survive
    # A sweep point keeps the baseline (drop_baseline is false by default).
    assert "baseline" in yaml.safe_load(tune.profile_edit(with_baseline, point))


def test_tuning_points_of_a_profile_without_drafter_are_refused(tmp_path: Path) -> None:
    plain = _save(tmp_path, tune.profile_edit(STANDIN.read_text(), "off"))
    with pytest.raises(tune.AnsibleFilterError, match="no drafter to tune"):
        tune.tune_points({"num_steps": [1], "eagle_topk": [1]}, str(plain))


def test_other_methods_are_candidates_judged_by_the_check_rules(tmp_path: Path) -> None:
    points = tune.tune_points(
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
    text = tune.profile_edit(STANDIN.read_text(), by_id["ngram-2"])
    profile = load_profile(_save(tmp_path, text))
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
    with pytest.raises(tune.AnsibleFilterError, match=error):
        tune.tune_points({"num_steps": [1], "eagle_topk": [1]}, str(STANDIN), methods=methods)


def test_a_method_is_ranked_and_reported_by_its_algorithm(tmp_path: Path) -> None:
    points = [*_points()[:2],
              {"id": "ngram", "drafter": {"algorithm": "NGRAM"}, "valid": True,
               "max_running_requests": 48}]  # fmt: skip
    run.init(tmp_path, points, {"profile": "p.yaml", "bench_concurrency": [8]})
    for ident, server in (("no-spec", 533.0), ("s1-k1-d2", 560.0), ("ngram", 610.0)):
        out = tmp_path / "points" / ident
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(_result(8, server, 700.0)))
        run.mark(tmp_path, ident, "ok")
    report = run.report(tmp_path, 8, {"8": 500.0}, "s1-k1-d2", "node-1")
    assert [r["id"] for r in report["ranked"]] == ["ngram", "s1-k1-d2", "no-spec"]
    best = report["best"]
    # What finish.yml writes into the profile: the method's drafter block.
    assert best["speculative"] and best["drafter"] == {"algorithm": "NGRAM"}
    md = (tmp_path / "report.md").read_text()
    assert "| 1 | `ngram` (NGRAM) | - | - | - | 48 | 610.0 | 1.14x |" in md


def test_the_profile_names_its_own_methods_and_the_variable_replaces_them(
    tmp_path: Path,
) -> None:
    doc = yaml.safe_load(STANDIN.read_text())
    doc["tuning"] = {"methods": [{"algorithm": "NGRAM", "num_draft_tokens": 8}]}
    path = _save(tmp_path, yaml.safe_dump(doc, sort_keys=False))
    assert load_profile(path).document_value("tuning.methods") == [
        {"algorithm": "NGRAM", "num_draft_tokens": 8}]  # the schema takes it
    grid = {"num_steps": [1], "eagle_topk": [1]}
    named = {p["id"]: p for p in tune.tune_points(grid, str(path))}
    assert list(named) == ["no-spec", "s1-k1-d2", "ngram"] and named["ngram"]["valid"]
    assert named["ngram"]["drafter"] == {"algorithm": "NGRAM", "num_draft_tokens": 8}
    replaced = tune.tune_points(grid, str(path), methods=[{"algorithm": "NGRAM"}])
    assert replaced[-1]["drafter"] == {"algorithm": "NGRAM"}
    # A method block the drafter section would refuse is refused by the profile's schema.
    doc["tuning"] = {"methods": [{"algorithm": "NGRAM", "draft_tokens": 8}]}
    with pytest.raises(Exception, match="draft_tokens"):
        load_profile(_save(tmp_path, yaml.safe_dump(doc, sort_keys=False)))
