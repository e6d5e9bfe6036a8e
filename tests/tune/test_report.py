"""The ranking (specserve.tune.rank) and its report (specserve.tune.report, markdown, plot): by
the server's measured throughput, no speculation a candidate, at one concurrency or over a
traffic mix, with the per-concurrency winners and the crossover."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve.tune.rank import crossover
from specserve.tune.report import report
from specserve.tune.state import mark, start

from .helpers import bench_result, candidates, level, sweep


def test_ranking_by_measured_throughput_no_speculation_included(tmp_path: Path) -> None:
    start(tmp_path, candidates(), {"profile": "p.yaml", "bench_concurrency": [8]})
    for ident, server, agg in (("no-spec", 533.0, 700.0), ("s1-k1-d2", 620.0, 900.0),
                               ("s3-k1-d4", 545.0, 1200.0)):
        bench_result(tmp_path, ident, [level(8, server, agg)])
    mark(tmp_path, "s1-k2-d1", "failed", "Deploy FAILED: did not become healthy: crashed")
    found = report(tmp_path, 8, {"1": 90.0, "8": 500.0}, "s3-k1-d4", "node-1")
    # Ranked by the server-side number (the baseline's quantity), not the client's, with no
    # speculation among the candidates; speedups against no speculation of this sweep, not the
    # profile's recorded baseline.
    assert [r["id"] for r in found["ranked"]] == ["s1-k1-d2", "s3-k1-d4", "no-spec"]
    assert found["ranked"][0]["speedup"] == pytest.approx(620.0 / 533.0, rel=1e-3)
    assert found["ranked"][2]["speedup"] == 1.0 and found["no_spec_tok_s"] == 533.0
    assert found["best"]["id"] == "s1-k1-d2" and found["best"]["speculative"]
    assert found["verdict"] == ("Speculation pays at concurrency 8: s1-k1-d2 at 620.0 tok/s "
                                "against 533.0 tok/s without speculation (1.16x).")
    # The latency the client measured, beside throughput.
    assert found["best"]["ttft_p99_s"] == 0.2 and found["best"]["itl_p99_s"] == 0.01
    assert [r["id"] for r in found["failed"]] == ["s1-k2-d1"]
    assert [r["id"] for r in found["invalid"]] == ["s1-k1-d4"]
    md = (tmp_path / "report.md").read_text()
    assert ("| 1 | `s1-k1-d2` | 1 | 1 | 2 | 48 | 620.0 | 1.16x | 1.80 | 200.0 | 10.00 "
            "| 900.0 |") in md
    assert "| 3 | `no-spec` (no speculation) | - | - | - | 48 | 533.0 | 1.00x |" in md
    assert "`s3-k1-d4` (current)" in md and "p99 TTFT ms | p99 ITL ms" in md
    assert "recorded baseline is 500.0 tok/s" in md
    assert "stand-in" in md and "did not become healthy: crashed" in md
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_a_candidate_without_a_server_figure_is_listed_not_ranked(tmp_path: Path) -> None:
    start(tmp_path, candidates(), {"profile": "p.yaml", "bench_concurrency": [8]})
    bench_result(tmp_path, "no-spec", [level(8, 533.0, 700.0)])
    bench_result(tmp_path, "s1-k1-d2", [level(8, None, 900.0)])  # the exporter saw nothing
    found = report(tmp_path, 8, {}, "", "node-1")
    assert [r["id"] for r in found["ranked"]] == ["no-spec"]
    assert [r["id"] for r in found["unmeasured"]] == ["s1-k1-d2"]
    assert found["unmeasured"][0]["note"] == "the exporter saw no decode line in this bucket"
    assert found["pending"] == ["s3-k1-d4", "s1-k2-d1"]
    md = (tmp_path / "report.md").read_text()
    assert "## Measured without a server number" in md
    assert "Not run yet: s3-k1-d4, s1-k2-d1 (re-run to resume)." in md
    assert found["verdict"] == ("No speculation is the only configuration measured at "
                                "concurrency 8 (533.0 tok/s): no speculative point was measured.")


def test_no_speculation_fastest_is_said_in_one_sentence_with_both_figures(tmp_path: Path) -> None:
    sweep(tmp_path, {"no-spec": {1: 90.0}, "s1-k1-d2": {1: 80.1}, "s3-k1-d4": {1: 82.3}})
    found = report(tmp_path, 1, {}, "s3-k1-d4", "node-1")
    assert found["best"]["id"] == "no-spec" and not found["best"]["speculative"]
    assert found["best"]["max_running_requests"] == 48
    sentence = ("No speculation is fastest at concurrency 1: 90.0 tok/s against 82.3 tok/s for "
                "the best speculative point s3-k1-d4, so speculation does not pay here.")
    assert found["verdict"] == sentence
    assert f"**{sentence}**" in (tmp_path / "report.md").read_text()
    assert found["crossover"]["concurrency"] == 1
    assert "speculation pays at no benched concurrency" in found["crossover"]["text"]


def test_traffic_mix_weighs_each_configuration_and_can_change_the_winner(tmp_path: Path) -> None:
    figures = {"no-spec": {1: 90.0, 8: 533.0, 32: 1129.0},
               "s1-k1-d2": {1: 127.0, 8: 620.0, 32: 1058.0},
               "s3-k1-d4": {1: 141.0, 8: 545.0, 32: 787.0}}
    sweep(tmp_path, figures)
    at_one = report(tmp_path, 1, {}, "", "node-1")
    assert at_one["best"]["id"] == "s3-k1-d4"
    mix = {"1": 0.5, "8": 0.3, "32": 0.2}
    found = report(tmp_path, 1, {}, "", "node-1", mix)
    weighted = {ident: sum(w * per[int(c)] for c, w in mix.items())
                for ident, per in figures.items()}
    assert {r["id"]: r["tok_s"] for r in found["ranked"]} == pytest.approx(weighted)
    assert found["best"]["id"] == max(weighted, key=weighted.__getitem__) == "s1-k1-d2"
    assert found["where"] == "over the traffic mix 1: 0.5, 8: 0.3, 32: 0.2"
    # Over a mix the latency shown is the worst of its levels.
    assert found["best"]["ttft_p99_s"] == pytest.approx(3.2)
    # Per concurrency: who wins, and where speculation stops paying.
    winners = {row["concurrency"]: row["winner"] for row in found["per_concurrency"]}
    assert winners == {1: "s3-k1-d4", 8: "s1-k1-d2", 32: "no-spec"}
    assert [row["speculation_pays"] for row in found["per_concurrency"]] == [True, True, False]
    assert found["crossover"]["concurrency"] == 32
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
    found = crossover(table)
    assert found["concurrency"] == expected and text in found["text"]


def test_a_method_is_ranked_and_reported_by_its_algorithm(tmp_path: Path) -> None:
    points = [*candidates()[:2],
              {"id": "ngram", "drafter": {"algorithm": "NGRAM"}, "valid": True,
               "max_running_requests": 48}]  # fmt: skip
    start(tmp_path, points, {"profile": "p.yaml", "bench_concurrency": [8]})
    for ident, server in (("no-spec", 533.0), ("s1-k1-d2", 560.0), ("ngram", 610.0)):
        bench_result(tmp_path, ident, [level(8, server, 700.0)])
    found = report(tmp_path, 8, {"8": 500.0}, "s1-k1-d2", "node-1")
    assert [r["id"] for r in found["ranked"]] == ["ngram", "s1-k1-d2", "no-spec"]
    best = found["best"]
    # What finish.yml writes into the profile: the method's drafter block.
    assert best["speculative"] and best["drafter"] == {"algorithm": "NGRAM"}
    md = (tmp_path / "report.md").read_text()
    assert "| 1 | `ngram` (NGRAM) | - | - | - | 48 | 610.0 | 1.14x |" in md


def _with_degenerate(lv: dict, count: int, judged: int) -> dict:
    """A bench level with specserve bench's degenerate-output section."""
    return {**lv, "degenerate": {"measure": "seq-rep-4", "threshold": 0.5, "judged": judged,
                                 "count": count, "share": count / judged,
                                 "prompt_ids": [f"chat-{i:02d}" for i in range(count)]}}


def test_a_point_whose_outputs_degenerated_is_refused_not_ranked(tmp_path: Path) -> None:
    """The looping point is fastest (its drafter accepts the loop), but more than a tenth of
    its requests looped: it is refused with the count, and the honest winner is ranked first.
    One looping request in twenty (5%) is a model's, not the configuration's: ranked."""
    start(tmp_path, candidates(), {"profile": "p.yaml", "bench_concurrency": [1, 8]})
    bench_result(tmp_path, "no-spec", [_with_degenerate(level(c, v, v), 0, 16)
                                       for c, v in ((1, 90.0), (8, 533.0))])
    bench_result(tmp_path, "s1-k1-d2", [_with_degenerate(level(1, 150.0, 150.0), 1, 10),
                                        _with_degenerate(level(8, 620.0, 620.0), 0, 10)])
    bench_result(tmp_path, "s3-k1-d4", [_with_degenerate(level(1, 260.0, 260.0), 4, 16),
                                        _with_degenerate(level(8, 990.0, 990.0), 7, 16)])
    found = report(tmp_path, 8, {"8": 500.0}, "", "node-1")
    assert [r["id"] for r in found["ranked"]] == ["s1-k1-d2", "no-spec"]
    assert found["best"]["id"] == "s1-k1-d2"
    [refused] = found["refused"]
    assert refused["id"] == "s3-k1-d4"
    assert refused["reason"].startswith(
        "outputs degenerated: 11 of 32 requests looped (seq-rep-4 > 0.5; 4 at concurrency 1, "
        "7 at concurrency 8), more than 10%")
    md = (tmp_path / "report.md").read_text()
    assert "## Refused (degenerate outputs: measured, not ranked)" in md
    assert "| `s3-k1-d4` | outputs degenerated: 11 of 32 requests looped" in md


def test_results_without_the_degenerate_section_still_rank(tmp_path: Path) -> None:
    sweep(tmp_path, {"no-spec": {8: 533.0}, "s1-k1-d2": {8: 620.0}})
    found = report(tmp_path, 8, {}, "", "node-1")
    assert [r["id"] for r in found["ranked"]] == ["s1-k1-d2", "no-spec"]
    assert found["refused"] == []
