"""The chart's dashboard follows the PrometheusRule's values.

configmap-grafana.yaml prints `specserve.dashboard` (templates/_dashboard.tpl, generated from
specserve/monitoring/dashboard_helm.py). For each set of values, the real `helm template` renders
the ConfigMap, and its JSON must equal `dashboard_json` for the equivalent overrides, which is
what `specserve rules dashboard --overrides` writes and the Ansible monitoring role provisions. A
panel that ignored a value would print its default: the all-values-changed case changes every
window and threshold, and asserts the dashboard reads each one it should.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.dashboard import ACCEPT_LENGTH_ALERTS, build_dashboard, iter_panels
from specserve.monitoring.overrides import resolve_settings
from tests.helm.conftest import CHART, NAMESPACE, RELEASE, helm, merged
from tests.helm.test_grafana_alerts import CASES, every_value_changed, overrides

CONFIGMAP = f"{RELEASE}-dashboard"


def render(tools: Path, tmp_path: Path, values: dict[str, Any], chart: Path = CHART) -> Any:
    """The dashboard of the chart's dashboard ConfigMap for `values`, parsed."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = helm(tools, "template", RELEASE, str(chart), "--namespace", NAMESPACE,
                  "--values", str(path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    (configmap,) = [d for d in yaml.safe_load_all(result.stdout)
                    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == CONFIGMAP]
    return json.loads(configmap["data"]["specserve.json"])


def expected(values: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
    """`dashboard_json` for the values' alert settings; `extra` adds what a profile implies."""
    alerts, _, _ = overrides(values)
    for name, change in (extra or {}).items():
        alerts[name] = merged(alerts.get(name, {}), change)
    return build_dashboard(resolve_settings(alerts))


def _panel_differences(got: Any, want: Any) -> list[str]:
    mine, theirs = list(iter_panels(got)), list(iter_panels(want))
    titles = [w.get("title", "?") for g, w in zip(mine, theirs, strict=False) if g != w]
    return titles + (["panel count"] if len(mine) != len(theirs) else [])


DASHBOARD_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    **{case: CASES[case] for case in ("defaults", "threshold-and-for", "four-gpus",
                                      "four-gpus-explicit-2")},
    # The stand-in's 0 GPUs: the alert is left out; the panel keeps the rule's line, as the
    # Ansible role keeps it where it deploys no DCGM exporter.
    "cpu-standin": (CASES["cpu-standin"][0], {}),
    # The accept-length panel draws one mean per distinct window: equal windows, one pair.
    "equal-accept-length-windows": ({"prometheusRule": {"alerts": {
        name: {"window": "7m"} for name in ACCEPT_LENGTH_ALERTS}}}, {}),
    "every-value-changed": (every_value_changed(), {}),
}


@pytest.mark.parametrize("case", list(DASHBOARD_CASES))
def test_the_configmap_equals_the_dashboard_for_the_same_settings(
    tools: Path, tmp_path: Path, case: str
) -> None:
    values, implied = DASHBOARD_CASES[case]
    got = render(tools, tmp_path, values)
    want = expected(values, implied)
    assert _panel_differences(got, want) == []
    assert got == want


def _texts(model: Any) -> str:
    return json.dumps(model)


def test_the_cases_change_what_they_claim() -> None:
    """Not vacuous: each case's dashboard differs from the defaults where it says."""
    default = _texts(expected({}))
    changed = {case: expected(*DASHBOARD_CASES[case]) for case in DASHBOARD_CASES}
    assert _texts(changed["threshold-and-for"]) != default
    assert "[10m]" in _texts(changed["threshold-and-for"]) and "[10m]" not in default
    gpus = {case: next(p for p in iter_panels(changed[case]) if p.get("title") ==
                       "GPUs seen per node")["fieldConfig"]["defaults"]["thresholds"]["steps"]
            for case in ("defaults", "four-gpus", "four-gpus-explicit-2", "cpu-standin")}
    assert [gpus[c][-1]["value"] for c in gpus] == [8, 4, 2, 8]

    def means(model: Any) -> int:
        panel = next(p for p in iter_panels(model) if p.get("title") == "Accept length")
        return sum(" mean (" in t["legendFormat"] for t in panel["targets"])

    assert means(changed["defaults"]) == 2 and means(changed["equal-accept-length-windows"]) == 1
    # The all-values case reaches the dashboard at the windows of the six alerts it draws
    # (the GPU panels' [5m] are their alerts' fixed windows, no value).
    every = _texts(changed["every-value-changed"])
    alerts = DASHBOARD_CASES["every-value-changed"][0]["prometheusRule"]["alerts"]
    assert {name for name, settings in alerts.items()
            if "window" in settings and f"[{settings['window']}]" in every} == {
        *ACCEPT_LENGTH_ALERTS, "SpecDecodeBelowBaseline", "SpecServeLogLinesRejected",
        "SpecServeFleetReplicaSlow", "SpecServeFleetNeedsReplicas"}


def test_a_panel_that_ignores_its_value_is_caught(tools: Path, tmp_path: Path) -> None:
    """A chart whose template reads one threshold from the defaults instead of the values:
    the comparison names exactly the panel that reads it."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    template = chart / "templates" / "_dashboard.tpl"
    text = template.read_text(encoding="utf-8")
    reads = ".Values.prometheusRule.alerts.SpecDecodeBelowBaseline.thresholds.tolerance"
    assert text.count(reads) == 1
    template.write_text(text.replace(reads, "1.0"), encoding="utf-8")
    values, _ = DASHBOARD_CASES["threshold-and-for"]
    got = render(tools, tmp_path, values, chart)
    assert _panel_differences(got, expected(values)) == ["Speedup over baseline"]
