"""A bench result's acceptance per class and per draft position, read by diagnose."""

from __future__ import annotations

from typing import Any

from specserve.diagnose.bench import USEFUL_SURVIVAL, bench_findings


def _section(p50: float, n: int = 8) -> dict[str, Any]:
    return {"accept_length": {"n": n, "p10": p50, "p50": p50, "p90": p50, "mean": p50}}


def _result(by_kind: dict[str, float], survival: list[float]) -> dict[str, Any]:
    overall = sorted(by_kind.values())[len(by_kind) // 2]
    acceptance = {**_section(overall), "verify_passes": 400, "histogram": [],
                  "position_survival": survival,
                  "by_kind": {kind: _section(p50) for kind, p50 in by_kind.items()}}
    return {"levels": [{"concurrency": 8, "acceptance": acceptance},
                       {"concurrency": 1, "acceptance": None}]}


def test_a_class_below_the_floor_hidden_by_the_mean_is_named() -> None:
    found = list(bench_findings(_result({"chat": 2.6, "code": 2.4, "multilingual": 1.2},
                                        [0.9, 0.6, 0.3]), floor=1.5))  # fmt: skip
    assert [f.field for f in found] == ["bench: concurrency 8, class multilingual"]
    assert "median accept length 1.20 (8 requests), below the floor 1.5" in found[0].problem
    assert "level's median is 2.40" in found[0].problem


def test_draft_positions_past_the_useful_one_are_named_with_the_shorter_draft() -> None:
    found = list(bench_findings(_result({"chat": 2.0}, [0.8, 0.3, 0.05, 0.01]), floor=1.5))
    [finding] = found
    assert finding.field == "bench: concurrency 8, draft positions 3-4"
    assert "kept in 5%, 1% of 400 verify passes" in finding.problem
    assert "draft at most 2 token(s)" in finding.fix and "num_draft_tokens 3" in finding.fix


def test_nothing_to_say_when_every_class_and_position_pays() -> None:
    survival = [1.0, USEFUL_SURVIVAL, USEFUL_SURVIVAL]
    assert list(bench_findings(_result({"chat": 2.0, "code": 3.0}, survival), 1.5)) == []
