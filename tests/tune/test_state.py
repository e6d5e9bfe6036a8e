"""A run's state.json (specserve.tune.state) and its settings (specserve.tune.settings): a re-run
resumes with the unfinished candidates, other settings and an unrankable mix are refused before
anything is recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specserve.tune.errors import TuneError
from specserve.tune.settings import parse_mix
from specserve.tune.state import mark, start

from .helpers import candidates


def test_state_resumes_and_refuses_other_settings(tmp_path: Path) -> None:
    first = start(tmp_path, candidates(), {"grid": 1})
    assert first["pending"] == ["no-spec", "s1-k1-d2", "s3-k1-d4", "s1-k2-d1"]
    assert first["invalid"] == ["s1-k1-d4"]
    mark(tmp_path, "no-spec", "ok")
    after = mark(tmp_path, "s1-k1-d2", "failed", "crashed")
    assert after["failed"] == ["s1-k1-d2"]
    again = start(tmp_path, candidates(), {"grid": 1})
    assert again["pending"] == ["s3-k1-d4", "s1-k2-d1"]
    assert again["ok"] == ["no-spec"] and again["failed"] == ["s1-k1-d2"]
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["resumed_at"]) == 1
    assert state["points"]["s1-k1-d2"]["reason"] == "crashed"
    with pytest.raises(TuneError, match="other settings"):
        start(tmp_path, candidates(), {"grid": 2})


def test_marking_needs_a_started_run_and_a_known_point(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match=r"state\.json does not exist"):
        mark(tmp_path, "no-spec", "ok")
    start(tmp_path, candidates(), {})
    with pytest.raises(TuneError, match="no point 's9-k1-d10'"):
        mark(tmp_path, "s9-k1-d10", "ok")
    (tmp_path / "state.json").write_text("{")
    with pytest.raises(TuneError, match="is not valid JSON"):
        mark(tmp_path, "no-spec", "ok")


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
    with pytest.raises(TuneError) as refused:
        start(tmp_path, candidates(), {"bench_concurrency": [1, 8], "traffic_mix": mix})
    assert error in str(refused.value)
    assert not (tmp_path / "state.json").exists()  # refused before anything was recorded


def test_a_mix_within_the_tolerance_is_accepted() -> None:
    assert parse_mix({"1": 0.5, "8": 0.3, "32": 0.2}, [1, 8, 32]) == {1: 0.5, 8: 0.3, 32: 0.2}
    assert parse_mix({1: 0.333, 8: 0.333, 32: 0.333}, [1, 8, 32])  # 0.999
    assert parse_mix({}, [1]) == {}


def test_the_ranking_concurrency_must_be_benched(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="tune_concurrency 4 is not benched"):
        start(tmp_path, candidates(), {"bench_concurrency": [1, 8], "concurrency": 4})
