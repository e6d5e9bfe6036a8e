"""checkov over every rendered manifest of the CI matrix: no failed check. Chart-wide exceptions
live in charts/specserve/.checkov.yaml and are justified in the chart README; per-object ones are
checkov.io/skipN annotations carrying their reason."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helm.conftest import CHART, Rendered


def _checkov(tools: Path, directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(tools / "checkov"), "-d", str(directory),
         "--config-file", str(CHART / ".checkov.yaml"),
         "--output", "json", "--quiet", "--compact"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.stdout.strip(), result.stderr[-2000:]
    report = json.loads(result.stdout)
    reports: list[dict[str, Any]] = report if isinstance(report, list) else [report]
    return reports


def test_checkov_is_clean(tools: Path, rendered: dict[str, Rendered], tmp_path: Path) -> None:
    for name, render in rendered.items():
        (tmp_path / f"{name}.yaml").write_text(render.text, encoding="utf-8")
    (report,) = [r for r in _checkov(tools, tmp_path) if r.get("check_type") == "kubernetes"]
    summary = report["summary"]
    assert summary["parsing_errors"] == 0
    assert summary["resource_count"] > 90
    assert summary["passed"] > 1500
    failed = [
        f"{f['check_id']} {f['check_name']}: {f['resource']}"
        for f in report["results"]["failed_checks"]
    ]
    assert not failed, "\n".join(failed)


def test_checkov_catches_a_regression(
    tools: Path, rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    # The scan is live: a privileged exporter sidecar must be reported.
    docs = copy.deepcopy(rendered["kimi-default"].docs)
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    for container in deploy["spec"]["template"]["spec"]["containers"]:
        if container["name"] == "exporter":
            container["securityContext"] = {"privileged": True}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    (report,) = [r for r in _checkov(tools, tmp_path) if r.get("check_type") == "kubernetes"]
    ids = {f["check_id"] for f in report["results"]["failed_checks"]}
    assert "CKV_K8S_16" in ids  # privileged containers


def test_every_exception_is_justified() -> None:
    config = yaml.safe_load((CHART / ".checkov.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    section = readme.split("## Policy exceptions", 1)[1].split("\n## ", 1)[0]
    for check in config["skip-check"]:
        assert re.search(rf"\| `{check}` \|[^|]+\|\s*\S", section), (
            f"{check} not justified in README"
        )
    annotated = set()
    for template in (CHART / "templates").rglob("*.yaml"):
        annotated |= set(re.findall(r"checkov\.io/skip\d+: (CKV\w+)=\S", template.read_text()))
    for check in annotated:
        assert f"`{check}`" in section, f"{check} (annotation) not listed in README"


def _image_user() -> int:
    dockerfile = (CHART.parent.parent / "docker" / "sglang" / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER (\d+):\d+$", dockerfile, flags=re.M)
    return int(user)


def test_sglang_pods_run_as_the_images_own_user(rendered: dict[str, Rendered]) -> None:
    # The SGLang image runs as an unprivileged user; the pods must not ask for root, and fsGroup
    # must let that user read the API-key Secret (0440) and write the log and weights volumes.
    uid = _image_user()
    seen = 0
    for render in rendered.values():
        for kind in ("Deployment", "Job"):
            for obj in render.objects(kind):
                component = obj["metadata"]["labels"].get("app.kubernetes.io/component")
                if component not in ("server", "download"):
                    continue
                pod = obj["spec"]["template"]["spec"]
                ctx = pod["securityContext"]
                got = (ctx["runAsUser"], ctx["fsGroup"], ctx["runAsNonRoot"])
                assert got == (uid, uid, True), (
                    f"{render.name}: {obj['metadata']['name']} pod security context {ctx}"
                )
                seen += 1
    assert seen >= len(rendered)
