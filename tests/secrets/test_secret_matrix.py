"""Every secret x every output, end to end with the real components that run here.

Three secrets are planted, unique to this run: the API key, a Hugging Face token and a Grafana
admin password. Each output is collected once (module-scoped fixtures: one local chain, one
deploy / baseline / tune per playbook, one Helm render and one Helm test run) and then grepped,
per secret, for the value and its quoted and escaped spellings. A cell passes only when there
is no hit AND the output is the real thing (it holds `evidence`, so an empty or failed output
cannot pass) AND, where the secret has a way into that output, the marker stands where the
secret would have been (so the redaction was exercised, not bypassed).

Where each secret is planted:
- API key: the profile's key file (launcher, SGLang stand-in, bench, Helm test), Ansible's
  `specserve_api_key` (a profile reading it from `$SPECSERVE_API_KEY`: it is in the server
  container's environment; verify; bench in baseline / tune).
- HF token: `HF_TOKEN` in the launcher's environment (redacted by the tee as an injected
  secret), Ansible's `weights_hf_token`, used for real by a weights stage from a Hub stand-in
  that refuses any other token; the chart's HF token Secret reference.
- Grafana password: `GF_SECURITY_ADMIN_PASSWORD` in the launcher's environment, Ansible's
  `monitoring_grafana_admin_password` (the monitoring role runs in the deploy).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml

from specserve.secrets import MARKER
from tests.ansible.conftest import REQUIRED_IMAGES, Deployment, _cleanup
from tests.ansible.harness import FIXTURES, ROOT, Run, free_port, playbook, write_profile
from tests.ansible.hf_standin import serve as hub_standin
from tests.ansible.test_plugins import _model
from tests.e2e.stack import missing_binaries, running_stack
from tests.helm.conftest import CHART, _install_tools, template
from tests.verify.conftest import serving

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BIN = Path(sys.executable).parent
_RUN = uuid.uuid4().hex[:10]
SECRETS = {
    "api_key": f"sk-matrix-{_RUN}-key",
    "hf_token": f"hf_matrix{_RUN}token",
    "grafana_password": f"grafana-matrix-{_RUN}-pw",
}
# What ansible-playbook prints instead of a no_log task's result or arguments.
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified"
KEY_IN_ARGV = f"--api-key {MARKER}"


def spellings(value: str) -> list[str]:
    """The value as a grep for a leak looks for it: raw, quoted, Python repr, JSON, shell."""
    return [value, f"'{value}'", f'"{value}"', repr(value), json.dumps(value),
            json.dumps(value, ensure_ascii=False), shlex.quote(value),
            json.dumps(json.dumps(value))[1:-1]]  # fmt: skip


@dataclass
class Output:
    text: str
    evidence: str  # proves the output is real (non-empty, from the component that ran)
    markers: dict[str, str] = field(default_factory=dict)  # secret -> where it would have been


def _read(paths: list[Path]) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", errors="backslashreplace") for p in paths)


# -- the local chain: launcher + tee, exporter, Prometheus, bench ---------------------------


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Output]]:
    assert not missing_binaries(), "run scripts/setup/system-packages.sh"
    work = tmp_path_factory.mktemp("secrets-chain")
    key_file = work / "api-key"
    key_file.write_text(SECRETS["api_key"] + "\n")
    env = {
        "HF_TOKEN": SECRETS["hf_token"],
        "GF_SECURITY_ADMIN_PASSWORD": SECRETS["grafana_password"],
    }
    # A small file limit and many generations: the start-up lines (server_args, with the key)
    # end up in a rotated generation, which is checked like the current file.
    logging_extra = {"max_bytes": 4096, "backup_count": 200}
    with running_stack(work, {"acceptance": 0.6}, key_file, env, logging_extra) as stack:
        exporter = next(s for s in stack.services.started if s.name == "exporter")
        address = exporter.proc.args[exporter.proc.args.index("--listen-address") + 1]
        metrics_url = f"http://{address}/metrics"
        out = work / "bench"
        bench = subprocess.run(
            [str(BIN / "specserve"), "bench", "--url", stack.standin_url,
             "--api-key-file", str(key_file), "--exporter-url", metrics_url,
             "--concurrency", "1,2", "--max-tokens", "48", "--requests-per-level", "4",
             "--out-dir", str(out)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
        time.sleep(3)  # a few scrapes of the traffic the bench made
        # The server got the real key (zero hits below are the redaction's doing, not a
        # stand-in that never saw the key): its /server_info answers it to a key holder.
        auth = {"Authorization": f"Bearer {SECRETS['api_key']}"}
        info = requests.get(stack.standin_url + "/server_info", headers=auth, timeout=10).json()
        assert info["api_key"] == SECRETS["api_key"], "the planted key did not reach the server"
        metrics = requests.get(metrics_url, timeout=10).text
        prom = stack.prometheus.url
        series = requests.get(prom + "/api/v1/series", params={"match[]": '{__name__=~".+"}'},
                              timeout=10).text  # fmt: skip
        labels = requests.get(prom + "/api/v1/labels", timeout=10).json()["data"]
        values = [requests.get(f"{prom}/api/v1/label/{name}/values", timeout=10).text
                  for name in labels]  # fmt: skip
        log_dir = work / "logs"
        generations = sorted(log_dir.glob("sglang.log.*"))
        assert len(generations) >= 2, "the log did not rotate: the test would not check it"
        outputs = {
            "launcher stdout/stderr": Output(
                _read([work / "standin.out"]),
                "Decode batch",
                {"api_key": f"'api_key': '{MARKER}'"},
            ),
            "log file (current)": Output(_read([log_dir / "sglang.log"]), "[20"),
            "log file (rotated generations)": Output(
                _read(generations), "server_args=", {"api_key": f"'api_key': '{MARKER}'"}
            ),
            "exporter /metrics": Output(metrics, "specserve_log_lines_parsed_total"),
            "Prometheus series": Output(series, "specserve_decode_accept_length"),
            "Prometheus labels and values": Output(
                json.dumps(labels) + "\n".join(values), "__name__"
            ),
            "bench stdout/stderr": Output(bench.stdout + bench.stderr, "specserve bench"),
            "bench results.json": Output(
                (out / "results.json").read_text(), "launch_command", {"api_key": KEY_IN_ARGV}
            ),
            "bench results.md": Output((out / "results.md").read_text(), "| concurrency"),
            "bench plot.png": Output((out / "plot.png").read_bytes().decode("latin-1"), "PNG"),
        }
        yield outputs


# -- Ansible: one deploy, baseline and tune at -vvv, docker logs, the reports -----------------


def _images_present() -> None:
    def absent(image: str) -> bool:
        inspect = ["docker", "image", "inspect", image]
        return subprocess.run(inspect, capture_output=True, check=False).returncode != 0

    missing = [image for image in REQUIRED_IMAGES if absent(image)]
    assert not missing, f"images missing: {missing}; run scripts/setup/ansible.sh"


def _ansible(dep: Deployment, name: str, extra: Path, *args: str, timeout: int = 420) -> Run:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), f"playbooks/{name}.yml", "-i", str(dep.inventory),
         "--vault-password-file", str(FIXTURES / "vault-password.txt"),
         "-e", f"@{FIXTURES / 'vault.yml'}", "-e", f"@{extra}", "-vvv", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    run = Run(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)
    # The whole -vvv output, for the failure message and for a person reading it afterwards.
    (dep.workdir / f"{name}.out").write_text(run.output, encoding="utf-8")
    return run


def _failed(run: Run, name: str, dep: Deployment) -> str:
    fatal = [line for line in run.output.splitlines() if line.startswith(("fatal:", "failed:"))]
    return (
        f"{name} failed (full output {dep.workdir / (name + '.out')}):\n"
        + "\n".join(line[:3000] for line in fatal[:3])
        + "\n"
        + run.output[-3000:]
    )


@pytest.fixture(scope="module")
def ansible_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Output]]:
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        pytest.fail("the secrets matrix needs a running Docker engine (scripts/setup/docker.sh)")
    _images_present()
    workdir = tmp_path_factory.mktemp("secrets-ansible")
    (workdir / "profiles").mkdir()
    (workdir / "tests").symlink_to(ROOT / "tests")
    dep = Deployment(
        prefix=f"ssm{os.getpid()}", workdir=workdir, inventory=workdir / "inventory.yml",
        profile=workdir / "profiles" / "standin.yaml", server_port=free_port(),
        exporter_port=free_port(), prometheus_port=free_port(), alertmanager_port=free_port(),
        state_dir=workdir / "state",
    )  # fmt: skip
    # The key from a variable, the harder path: it is then in the server container's
    # environment, which every container-info or container-state result carries.
    changes = {"logging.decode_log_interval": 10, "server.api_key": {"env": "SPECSERVE_API_KEY"}}
    write_profile(dep.profile, dep.server_port, **changes)
    dep.write_inventory(dep.inventory, {"localhost": {}})
    runs = workdir / "runs"
    extra = workdir / "vars.yml"
    extra.write_text(yaml.safe_dump({
        "specserve_api_key": SECRETS["api_key"],
        "weights_hf_token": SECRETS["hf_token"],
        "monitoring_grafana_admin_password": SECRETS["grafana_password"],
        "server_env": {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.5",
                       "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.3",
                       "SPECSERVE_STANDIN_TIME_SCALE": "0.05"},
        "tune_runs_dir": str(runs),
        "tune_baseline_concurrency": [1],
        "tune_bench_max_tokens": 48,
        "tune_bench_requests_per_level": 4,
        "tune_concurrency": 1,
        "tune_grid": {"num_steps": [1], "eagle_topk": [1], "num_draft_tokens": [2]},
        # One point (no speculation) and the restore: the restarts, benches and reports whose
        # output is read here; the ranking between points is tests/ansible/test_tune.py's.
        "tune_max_points": 1,
        "verify_warmup_requests": 1,
        "verify_warmup_max_tokens": 120,
    }))  # fmt: skip
    try:
        deploy = _ansible(dep, "deploy", extra)
        assert deploy.rc == 0, _failed(deploy, "deploy", dep)
        baseline = _ansible(dep, "baseline", extra)
        assert baseline.rc == 0, _failed(baseline, "baseline", dep)
        tune = _ansible(dep, "tune", extra)
        assert tune.rc == 0, _failed(tune, "tune", dep)
        weights = _hf_weights_run(dep, workdir)
        logs = subprocess.run(["docker", "logs", dep.prefix], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        assert logs.returncode == 0, logs.stderr
        tune_files = sorted(p for p in runs.rglob("*") if p.is_file() and p.suffix != ".png")
        bench_json = sorted(runs.rglob("results.json"))
        assert bench_json and sorted(runs.rglob("report.md")), "no bench or tune report written"
        server_seen = "launch command: "
        yield {
            "ansible-playbook -vvv deploy.yml": Output(
                deploy.output,
                "PLAY RECAP",
                {"api_key": KEY_IN_ARGV, "grafana_password": "Grafana |"},
            ),
            "ansible-playbook -vvv deploy.yml (weights from the Hub)": Output(
                weights.output, "staging tiny from huggingface", {"hf_token": CENSORED}
            ),
            "ansible-playbook -vvv baseline.yml": Output(
                baseline.output, server_seen, {"api_key": KEY_IN_ARGV}
            ),
            "ansible-playbook -vvv tune.yml": Output(
                tune.output, server_seen, {"api_key": KEY_IN_ARGV}
            ),
            "docker logs (server container)": Output(
                logs.stdout + logs.stderr, "Decode batch", {"api_key": f"'api_key': '{MARKER}'"}
            ),
            "bench and tune reports (json, md)": Output(
                _read(tune_files), "launch_command", {"api_key": KEY_IN_ARGV}
            ),
            "bench and tune plots (png)": Output(_read(sorted(runs.rglob("*.png"))), "PNG"),
        }
    finally:
        _cleanup(dep.prefix)


def _hf_weights_run(dep: Deployment, workdir: Path) -> Run:
    """The deploy's weights stage from a Hub stand-in that accepts only the planted token."""
    repo = "specserve-test/tiny-eagle3"
    source = _model(workdir / "hub-repo", shards=1)
    venv = workdir / "hf-venv"
    (venv / "home").mkdir(parents=True)
    (venv / "home" / ".check_for_update_done").touch()  # no update check to PyPI from `hf`
    with hub_standin(repo, source, SECRETS["hf_token"]) as hub:
        extra = workdir / "weights.yml"
        extra.write_text(yaml.safe_dump({
            "weights_root": str(workdir / "models"), "weights_log_dir": str(workdir / "wlog"),
            "weights_progress_poll_s": 0.5, "weights_hf_endpoint": hub.url,
            "weights_hf_venv": str(venv), "weights_hf_token": SECRETS["hf_token"],
            "weights_models": [{"name": "tiny", "source": "huggingface", "src": repo,
                                "size_gib": 0.001}],
        }))  # fmt: skip
        run = playbook(dep.inventory, "--tags", "weights", "-vvv", "-e", f"@{extra}",
                       timeout=600)  # fmt: skip
    assert run.rc == 0, run.output[-6000:]  # the Hub stand-in refuses any other token
    return run


# -- Helm: the rendered chart and the Helm test's logs -----------------------------------------


@pytest.fixture(scope="module")
def helm_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Output]:
    tools = _install_tools()
    rendered = template(tools, "--values", str(CHART / "ci" / "download-job-values.yaml"),
                        "--set", "model.download.hfTokenSecret.name=hf-token-matrix")  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    work = tmp_path_factory.mktemp("secrets-helm")
    # The Helm test pod's command, `specserve verify` as the chart runs it.
    with serving(work, api_key=SECRETS["api_key"]) as served:
        run = served.verify("--api", "chat", "--each-address")
        # And a failing run: its message quotes what the server answered.
        failing = served.verify("--api", "chat", "--each-address", "--floor", "99")
    assert run.returncode == 0, run.stdout + run.stderr
    assert failing.returncode == 1, failing.stdout + failing.stderr
    return {
        # Where a value would be, the chart has a Secret reference: it never takes a value.
        "helm template": Output(
            rendered.stdout,
            "kind: Deployment",
            {"api_key": "secretName: specserve-api-key", "hf_token": "secretName: hf-token-matrix"},
        ),
        "helm test logs": Output(
            run.stdout + run.stderr + failing.stdout + failing.stderr,
            "gate passed",
            {"api_key": KEY_IN_ARGV},
        ),
    }


# -- the cells ----------------------------------------------------------------------------------

CHAIN = ("launcher stdout/stderr", "log file (current)", "log file (rotated generations)",
         "exporter /metrics", "Prometheus series", "Prometheus labels and values",
         "bench stdout/stderr", "bench results.json", "bench results.md",
         "bench plot.png")  # fmt: skip
ANSIBLE = ("ansible-playbook -vvv deploy.yml",
           "ansible-playbook -vvv deploy.yml (weights from the Hub)",
           "ansible-playbook -vvv baseline.yml", "ansible-playbook -vvv tune.yml",
           "docker logs (server container)", "bench and tune reports (json, md)",
           "bench and tune plots (png)")  # fmt: skip
HELM = ("helm template", "helm test logs")


def _check(cell: str, output: Output, secret: str) -> None:
    assert output.text.strip(), f"{cell}: empty output"
    assert output.evidence in output.text, f"{cell}: not the real output (no {output.evidence!r})"
    value = SECRETS[secret]
    for form in spellings(value):
        assert form not in output.text, f"{cell}: the {secret} leaked as {form!r}"
    marker = output.markers.get(secret)
    if marker is not None:
        assert marker in output.text, f"{cell}: no {marker!r} where the {secret} would have been"


@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("cell", CHAIN)
def test_local_chain(chain: dict[str, Output], cell: str, secret: str) -> None:
    _check(cell, chain[cell], secret)


# The first cell pays for the module's deploy, baseline and tune runs (several minutes).
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("cell", ANSIBLE)
def test_ansible_and_docker(ansible_runs: dict[str, Output], cell: str, secret: str) -> None:
    _check(cell, ansible_runs[cell], secret)


@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("cell", HELM)
def test_helm(helm_outputs: dict[str, Output], cell: str, secret: str) -> None:
    _check(cell, helm_outputs[cell], secret)


def test_no_exporter_label_or_info_metric_carries_argv(chain: dict[str, Output]) -> None:
    """The exporter's label names are a closed set (its own registry, no info metric), and no
    label value looks like argv."""
    from prometheus_client.parser import text_string_to_metric_families

    allowed = {"kind", "reason", "dp", "tp", "pp", "pool", "graph", "concurrency", "source", "le",
               "quantile"}  # fmt: skip
    names: set[str] = set()
    for family in text_string_to_metric_families(chain["exporter /metrics"].text):
        assert family.type != "info" and not family.name.endswith("_info"), family.name
        for sample in family.samples:
            names |= set(sample.labels)
            for value in sample.labels.values():
                assert not value.startswith("--") and " --" not in value, (sample.name, value)
    assert names, "no labelled series at all"
    assert names <= allowed, names - allowed
