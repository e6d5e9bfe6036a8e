"""The rendered PrometheusRule passes promtool's checks and the rules' own unit tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helm.conftest import REPO, Rendered
from tests.monitoring.promtool_cases import promtool_test_files


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is required (apt-get install prometheus)")
    return path


def rules_file(render: Rendered, tmp_path: Path) -> Path:
    spec = render.one("PrometheusRule")["spec"]
    path = tmp_path / f"{render.name}.rules.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # 300: `promtool test rules` over every scenario evaluates the SLO group at each step too.
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("name", ["kimi-default", "replicas-router"])
def test_promtool_check_rules(
    rendered: dict[str, Rendered], promtool: str, tmp_path: Path, name: str
) -> None:
    result = run(
        promtool, "check", "rules", str(rules_file(rendered[name], tmp_path)), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Every rule of the generated rule files (alerts and recordings alike) is in the chart's copy.
    generated = sum(
        len(group["rules"])
        for path in sorted((REPO / "monitoring" / "prometheus").glob("*rules.yml"))
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    )
    assert generated > 10
    assert f"SUCCESS: {generated} rules found" in result.stdout


def test_rule_unit_tests_pass_on_the_rendered_rules(
    rendered: dict[str, Rendered], promtool: str, tmp_path: Path
) -> None:
    rules = rules_file(rendered["kimi-default"], tmp_path)
    tests = []
    scenarios = promtool_test_files()  # the rules' own scenarios (tests/monitoring)
    for name, doc in sorted(scenarios.items()):
        if not doc["rule_files"]:
            continue  # pure PromQL tests (Grafana's queries), no rule file involved
        assert doc["rule_files"] == ["../specserve-rules.yml"], name
        doc = {**doc, "rule_files": [rules.name]}
        (tmp_path / name).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        tests.append(name)
    assert len(tests) == len([d for d in scenarios.values() if d["rule_files"]]) > 0
    result = run(promtool, "test", "rules", *tests, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("SUCCESS") == len(tests)
