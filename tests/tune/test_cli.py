"""`specserve tune` as playbooks/tune.yml calls it: plan, start, mark and report, each printing
JSON; a refusal exits 1 with the reason on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.profile.helpers import run_cli

from .helpers import STANDIN, level

GRID = {"num_steps": [1], "eagle_topk": [1], "num_draft_tokens": [2, 4]}


def _json(*args: str) -> object:
    code, out, err = run_cli("tune", *args)
    assert code == 0, err
    return json.loads(out)


def test_a_run_through_the_command(tmp_path: Path) -> None:
    points = _json("plan", str(STANDIN), "--grid", json.dumps(GRID), "--adaptive",
                   "--methods", json.dumps([{"algorithm": "NGRAM"}]))
    assert isinstance(points, list)
    assert [(p["id"], p["valid"]) for p in points] == [
        ("no-spec", True), ("s1-k1-d2", True), ("s1-k1-d4", False), ("adaptive", True),
        ("ngram", True)]
    run_dir = tmp_path / "run"
    settings = {"profile": str(STANDIN), "bench_concurrency": [1], "concurrency": 1}
    started = _json("start", str(run_dir), "--points", json.dumps(points),
                    "--settings", json.dumps(settings))
    assert started == {"pending": ["no-spec", "s1-k1-d2", "adaptive", "ngram"], "ok": [],
                       "failed": [], "invalid": ["s1-k1-d4"]}
    for ident, tok_s in (("no-spec", 90.0), ("s1-k1-d2", 127.0)):
        out = run_dir / "points" / ident
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(
            {"server": {"standin": True}, "levels": [level(1, tok_s, tok_s)]}))
        _json("mark", str(run_dir), ident, "ok")
    marked = _json("mark", str(run_dir), "adaptive", "failed", "--reason", "did not start")
    assert marked == {"pending": ["ngram"], "ok": ["no-spec", "s1-k1-d2"],
                      "failed": ["adaptive"], "invalid": ["s1-k1-d4"]}
    found = _json("report", str(run_dir), "--concurrency", "1", "--baseline", '{"1": 90}',
                  "--current", "s1-k1-d2", "--host", "node-1", "--mix", "{}")
    assert isinstance(found, dict)
    # What finish.yml reads from the report's output.
    assert found["best"]["id"] == "s1-k1-d2"
    assert found["verdict"] == ("Speculation pays at concurrency 1: s1-k1-d2 at 127.0 tok/s "
                                "against 90.0 tok/s without speculation (1.41x).")
    assert json.loads((run_dir / "report.json").read_text())["best"]["id"] == "s1-k1-d2"
    assert "# Tuning report: node-1" in (run_dir / "report.md").read_text()
    assert (run_dir / "plot.png").exists()


def test_a_refusal_exits_1_with_the_reason_on_stderr(tmp_path: Path) -> None:
    # The console script the role runs (specserve_cli), as a process: the exit status and the
    # stream Ansible shows when the task fails.
    script = Path(sys.executable).parent / "specserve"
    points = json.dumps([{"id": "no-spec", "speculative": False, "valid": True}])
    settings = json.dumps({"bench_concurrency": [1, 8], "traffic_mix": {"1": 0.5, "4": 0.5}})
    done = subprocess.run([str(script), "tune", "start", str(tmp_path), "--points", points,
                           "--settings", settings],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("specserve tune: error: tune_traffic_mix names concurrency 4, "
                                  "which is not benched (tune_bench_concurrency is [1, 8])")
    assert not (tmp_path / "state.json").exists()
    code, _, err = run_cli("tune", "plan", str(STANDIN), "--grid", '{"topk": [1]}')
    assert code == 1 and "tune_grid: unknown key(s) ['topk']" in err
    code, _, err = run_cli("tune", "plan", str(tmp_path / "missing.yaml"), "--grid", "{}")
    assert code == 1 and "missing.yaml" in err


def test_a_missing_extra_is_named_with_the_fix() -> None:
    # ruamel.yaml (the deploy extra) hidden, as on a machine without it: the plan says which
    # extra to install instead of a traceback.
    probe = ("import sys; sys.modules['ruamel'] = None; from specserve.cli import main; "
             f"sys.exit(main(['tune', 'plan', {str(STANDIN)!r}, '--grid', '{{}}']))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("specserve tune: ruamel.yaml is not installed. Fix: install the deploy "
                           "extra, pip install 'specserve[deploy]' (scripts/setup/python.sh "
                           "installs it)\n")
