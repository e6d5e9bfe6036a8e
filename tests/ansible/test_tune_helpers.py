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
    assert profile.speculative is None and profile.speculative_draft_tokens is None
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
    # steps+1 and 4 coincide for steps 3: listed once.
    assert list(by_id) == ["s1-k1-d2", "s1-k1-d4", "s1-k2-d2", "s1-k2-d4", "s3-k1-d4",
                           "s3-k2-d4", "s1-k2-d1"]
    assert not by_id["s1-k1-d4"]["valid"]
    assert "eagle_topk 1 the draft is a chain of num_steps + 1 = 2" in by_id["s1-k1-d4"]["reason"]
    assert all(p["valid"] for i, p in by_id.items() if i != "s1-k1-d4")


def test_grid_errors_name_the_field() -> None:
    with pytest.raises(tune.AnsibleFilterError, match="unknown key"):
        tune.tune_points({"num_steps": [1], "eagle_topk": [1], "topk": [2]}, str(STANDIN))
    with pytest.raises(tune.AnsibleFilterError, match=r"tune_grid\.eagle_topk must be a non-empty"):
        tune.tune_points({"num_steps": [1]}, str(STANDIN))
    bad = tune.tune_points({"num_steps": [0], "eagle_topk": [1]}, str(STANDIN))
    assert not bad[0]["valid"] and "drafter.num_steps" in bad[0]["reason"]


def _result(concurrency: int, server: float | None, agg: float) -> dict[str, Any]:
    exporter = None if server is None else {
        "accept_length": 1.8, "gen_throughput_tok_s": {str(concurrency): server}}
    return {"server": {"standin": True},
            "levels": [{"concurrency": concurrency, "agg_tok_s": agg, "exporter": exporter}]}


def _points() -> list[dict[str, Any]]:
    return [
        {"id": "s1-k1-d2", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2, "valid": True},
        {"id": "s3-k1-d4", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4, "valid": True},
        {"id": "s1-k1-d4", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 4,
         "valid": False, "reason": "chain"},
        {"id": "s1-k2-d1", "num_steps": 1, "eagle_topk": 2, "num_draft_tokens": 1, "valid": True},
    ]


def test_state_resumes_and_refuses_other_settings(tmp_path: Path) -> None:
    first = run.init(tmp_path, _points(), {"grid": 1})
    assert first["pending"] == ["s1-k1-d2", "s3-k1-d4", "s1-k2-d1"]
    assert first["invalid"] == ["s1-k1-d4"]
    run.mark(tmp_path, "s1-k1-d2", "ok")
    again = run.init(tmp_path, _points(), {"grid": 1})
    assert again["pending"] == ["s3-k1-d4", "s1-k2-d1"] and again["ok"] == ["s1-k1-d2"]
    with pytest.raises(run.TuneError, match="other settings"):
        run.init(tmp_path, _points(), {"grid": 2})


def test_ranking_by_server_throughput_over_the_baseline(tmp_path: Path) -> None:
    run.init(tmp_path, _points(), {"profile": "p.yaml"})
    for ident, server, agg in (("s1-k1-d2", 620.0, 900.0), ("s3-k1-d4", 545.0, 1200.0)):
        out = tmp_path / "points" / ident
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(_result(8, server, agg)))
        run.mark(tmp_path, ident, "ok")
    run.mark(tmp_path, "s1-k2-d1", "failed", "Deploy FAILED: did not become healthy: crashed")
    report = run.report(tmp_path, 8, {"1": 90.0, "8": 533.3}, "s3-k1-d4", "node-1")
    # Ranked by the server-side number (the baseline's quantity), not the client's.
    assert [r["id"] for r in report["ranked"]] == ["s1-k1-d2", "s3-k1-d4"]
    assert report["ranked"][0]["speedup"] == pytest.approx(620.0 / 533.3, rel=1e-3)
    assert report["best"]["id"] == "s1-k1-d2"
    assert [r["id"] for r in report["failed"]] == ["s1-k2-d1"]
    assert [r["id"] for r in report["invalid"]] == ["s1-k1-d4"]
    md = (tmp_path / "report.md").read_text()
    assert "| 1 | `s1-k1-d2` |" in md and "`s3-k1-d4` (current)" in md
    assert "stand-in" in md and "did not become healthy: crashed" in md
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_report_needs_a_baseline_at_the_concurrency(tmp_path: Path) -> None:
    run.init(tmp_path, _points(), {})
    proc = subprocess.run([sys.executable, str(SCRIPT), "report", str(tmp_path),
                           "--concurrency", "4", "--baseline", '{"1": 90}'],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "no value for bucket 4" in proc.stderr and "playbooks/baseline.yml" in proc.stderr
