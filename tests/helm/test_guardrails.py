"""Bad values fail `helm template` with a message naming the field, the problem and the fix:
first the values schema (values.schema.json), then the chart's own checks (_helpers.tpl)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm.conftest import CHART, template

SCHEMA_CASES = [
    (["--set", "replicaCount=0"], "at '/replicaCount': minimum: got 0, want 1"),
    (
        ["--set", "model.storage=s3"],
        "at '/model/storage': value must be one of 'existingClaim', 'hostPath', 'download'",
    ),
    (["--set", "image.tag=latest"], "at '/image/tag'"),
    (["--set", "server.shm.sizeLimit=lots"], "at '/server/shm/sizeLimit'"),
    (["--set", "replicas=3"], "additional properties 'replicas' not allowed"),
    (["--set", "server.strategy.type=Rolling"], "at '/server/strategy/type'"),
    (["--set", "serviceMonitor.interval=15"], "at '/serviceMonitor/interval'"),
    (
        ["--set", "prometheusRule.alerts.SpecDecodeBelowBaseline.for=soon"],
        "at '/prometheusRule/alerts/SpecDecodeBelowBaseline/for'",
    ),
    (["--set", "router.policy=fastest"], "at '/router/policy'"),
    # bucket is one of smg's --prefill-policy choices (PD mode), not of --policy.
    (["--set", "router.policy=bucket"], "at '/router/policy'"),
    # smg refuses these at start too (tests/helm/test_router_real.py runs it with each).
    (
        ["--set", "router.overloadProtection.waitingRequests=0"],
        "at '/router/overloadProtection/waitingRequests'",
    ),
    (
        ["--set-json", "router.overloadProtection.tokenUsage=1.5"],
        "at '/router/overloadProtection/tokenUsage'",
    ),
    (
        ["--set", "router.podDisruptionBudget.maxUnavailable=0"],
        "at '/router/podDisruptionBudget/maxUnavailable'",
    ),
    # A budget of 0 would block every node drain.
    (["--set", "podDisruptionBudget.maxUnavailable=0"], "at '/podDisruptionBudget/maxUnavailable'"),
    (["--set", "router.healthCheck.endpoint=health"], "at '/router/healthCheck/endpoint'"),
    # The profile is checked by the same JSON Schema as `specserve check`.
    (["--set", "profile.version=1,profile.name=x"], "at '/profile': missing properties"),
]


@pytest.mark.parametrize(("args", "message"), SCHEMA_CASES, ids=[c[1][:40] for c in SCHEMA_CASES])
def test_values_schema_rejects(tools: Path, args: list[str], message: str) -> None:
    result = template(tools, *args)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr, result.stderr


def _profile_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_profile_literal_api_key_is_refused_by_the_schema(tools: Path, tmp_path: Path) -> None:
    kimi = (CHART / "files" / "profiles" / "default.yaml").read_text()
    doc = kimi.replace("api_key: {file: /run/secrets/specserve/api-key}", "api_key: sk-secret")
    values = "profile:\n" + "".join("  " + line for line in doc.splitlines(keepends=True))
    result = template(tools, "--values", str(_profile_file(tmp_path, values)))
    assert result.returncode != 0
    assert "at '/profile/server/api_key'" in result.stderr


GUARDRAILS = [
    (
        ["--set", "profileOverrides.parallelism.tp=4"],
        "profile.parallelism.tp: tp x dp = 4 GPUs but gpu.count asks for 8. "
        "Fix: make tp x dp equal gpu.count (e.g. tp: 8)",
    ),
    (
        ["--set", "profileOverrides.parallelism.dp=2"],
        "tp x dp = 16 GPUs but gpu.count asks for 8",
    ),
    (
        ["--set", "server.resources.limits.nvidia\\.com/gpu=4"],
        "server.resources.limits sets nvidia.com/gpu: the GPU count comes from profile.gpu.count",
    ),
    (
        ["--set", "apiKey.existingSecret="],
        "apiKey.existingSecret is empty. Fix: kubectl create secret",
    ),
    (
        ["--set", "model.mountPath=/weights"],
        "profile.target.path is /models/Kimi-K2.5, outside model.mountPath /weights",
    ),
    (
        [
            "--set",
            "model.storage=download",
            "--set",
            "model.download.repos[0].repo=moonshotai/Kimi-K2.5",
            "--set",
            "model.download.repos[0].dir=kimi",
        ],
        "profile.target.path is /models/Kimi-K2.5 but model.download.repos downloads only "
        "into /models/kimi",
    ),
    (
        ["--set", "model.storage=download", "--set", "replicaCount=2"],
        "replicaCount 2 reads the downloaded weights from several nodes, but "
        'model.download.pvc.accessModes is ["ReadWriteOnce"]',
    ),
    (
        ["--set", "server.strategy.type=RollingUpdate"],
        "server.strategy.rollingUpdate.maxSurge is 1: a surge pod needs a whole free GPU node",
    ),
    (["--set", "podMonitor.enabled=true"], "would scrape every pod twice"),
    (
        ["--set", "server.strategy.type=RollingUpdate", "--set",
         "server.strategy.rollingUpdate.maxSurge=0", "--set",
         "server.strategy.rollingUpdate.maxUnavailable=0"],
        "server.strategy.rollingUpdate.maxUnavailable is 0 with maxSurge 0: no pod could ever be "
        "replaced",
    ),
    # The router alerts read the job the monitors give the router's series.
    (
        ["--set", "router.enabled=true", "--set", "serviceMonitor.routerJob=gateway"],
        "prometheusRule.alerts.SpecServeWorkerOutOfRotation.thresholds.job is specserve-router "
        "but the router is scraped as job gateway (serviceMonitor.routerJob)",
    ),
    # The router's health check of each worker obeys the same 20 s rule as the probes.
    (
        ["--set", "router.enabled=true", "--set", "router.healthCheck.timeoutSeconds=5"],
        "router.healthCheck: /health_generate runs a one-token generation in SGLang and answers "
        "503 only after 20 s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is 5",
    ),
    # SGLang answers /health(_generate) with 503 only after 20 s: a 10 s probe fails a busy server.
    (
        ["--set", "server.probes.liveness.path=/health"],
        "server.probes.liveness: /health runs a one-token generation in SGLang and answers 503 "
        "only after 20 s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is 10",
    ),
    (
        ["--set", "server.probes.readiness.timeoutSeconds=20"],
        "server.probes.readiness: /health_generate runs a one-token generation in SGLang and "
        "answers 503 only after 20 s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is 20",
    ),
    (
        ["--set-string", "profileOverrides.env.SGLANG_HEALTH_CHECK_TIMEOUT=40"],
        "server.probes.startup: /health_generate runs a one-token generation in SGLang and "
        "answers 503 only after 40 s",
    ),
    (["--set", "model.existingClaim.claimName="], "model.existingClaim.claimName is empty"),
    (
        [
            "--set",
            "router.enabled=true",
            "--set",
            "router.overloadProtection.enabled=false",
            "--set",
            "router.overloadProtection.shed=true",
        ],
        "router.overloadProtection.shed is true but router.overloadProtection.enabled is false",
    ),
]


@pytest.mark.parametrize(("args", "message"), GUARDRAILS, ids=[c[1][:40] for c in GUARDRAILS])
def test_chart_guardrails(tools: Path, args: list[str], message: str) -> None:
    result = template(tools, *args)
    assert result.returncode != 0, result.stdout[:300]
    assert message in result.stderr, result.stderr


def test_exporter_needs_the_log_file(tools: Path, tmp_path: Path) -> None:
    small = (CHART / "ci" / "small-model-values.yaml").read_text()
    values = small.replace("file: /var/log/specserve/sglang/sglang.log", "file: null")
    result = template(tools, "--values", str(_profile_file(tmp_path, values)))
    assert result.returncode != 0
    assert "profile.logging.file is null. Fix: set profile.logging.file" in result.stderr
    ok = template(
        tools, "--values", str(_profile_file(tmp_path, values)), "--set", "exporter.enabled=false"
    )
    assert ok.returncode == 0, ok.stderr


def test_cheap_health_is_accepted_for_liveness_when_the_profile_turns_generation_off(
    tools: Path,
) -> None:
    """With SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION false, SGLang's /health answers at once."""
    cheap = "profileOverrides.env.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false"
    result = template(tools, "--set", "server.probes.liveness.path=/health", "--set-string", cheap)
    assert result.returncode == 0, result.stderr


def test_rolling_update_without_surge_is_accepted(tools: Path) -> None:
    result = template(tools, "--set", "server.strategy.type=RollingUpdate",
                      "--set", "server.strategy.rollingUpdate.maxSurge=0")  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_a_router_health_check_on_ready_may_be_short(tools: Path) -> None:
    """/ready generates nothing and answers at once: the 20 s rule does not apply."""
    result = template(tools, "--set", "router.enabled=true", "--set",
                      "router.healthCheck.endpoint=/ready", "--set",
                      "router.healthCheck.timeoutSeconds=5")  # fmt: skip
    assert result.returncode == 0, result.stderr
