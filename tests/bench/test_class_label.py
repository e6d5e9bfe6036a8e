"""`specserve bench --class-label` labels its own traffic: each request carries its prompt's
class in SGLang's custom-labels header, and a stand-in started with the flags the profile's
server.request_class_label renders counts it per class on its native metrics, as SGLang does
(the header's handling held to SGLang's own in tests/contract/test_class_label.py). The
server's tokens and verify calls per class are then exactly the sums of the bench's requests of
that class: the per-class accept length a fleet's rules record is the bench's own."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from specserve.bench.promptset import load_prompts
from specserve.bench.results import load_result
from specserve.bench.settings import BUILTIN_CLASSES, BUILTIN_PROMPTS
from specserve.monitoring.metrics import (
    SGLANG_GENERATION_TOKENS,
    SGLANG_REQUESTS,
    SGLANG_SPEC_VERIFY_CALLS,
)
from specserve.monitoring.rules import CLASS_ACCEPT_LENGTH, RECORDING_WINDOW
from specserve.profile.classlabel import ALLOWED_LABELS_FLAG, CLASS_LABEL_HEADER, HEADER_FLAG
from tests.bench.conftest import DRAFTER, RECIPE_FLAGS

LABEL = "workload_class"
KINDS = ("chat", "code", "math")
RULES = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus" / "specserve-rules.yml"
COUNTERS = (SGLANG_GENERATION_TOKENS, SGLANG_REQUESTS, SGLANG_SPEC_VERIFY_CALLS)


def _samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = requests.get(url + "/metrics", timeout=10).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in COUNTERS
    }


def _per_class(url: str) -> dict[str, dict[str, float]]:
    text = requests.get(url + "/metrics", timeout=10).text
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (SGLANG_GENERATION_TOKENS, SGLANG_REQUESTS,
                               SGLANG_SPEC_VERIFY_CALLS):
                assert LABEL in sample.labels, sample
                out[sample.labels[LABEL]][sample.name] += sample.value
    return out


@pytest.fixture(scope="module")
def labelled(processes):
    return processes.standin(
        "labelled", *RECIPE_FLAGS, "--speculative-draft-model-path", str(DRAFTER),
        "--enable-metrics", ALLOWED_LABELS_FLAG, LABEL, HEADER_FLAG, CLASS_LABEL_HEADER,
        exporter=False,
    )  # fmt: skip


def test_a_labelled_run_is_counted_per_class_by_the_server(labelled, bench) -> None:
    run = bench(
        "--url", labelled.url, "--concurrency", "1,2", "--requests-per-level", "6",
        "--max-tokens", "32", "--kinds", ",".join(KINDS), "--warmup-requests", "0",
        "--class-label", LABEL,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = load_result(run.out_dir / "results.json")
    assert result["settings"]["class_label"] == LABEL
    rows = [row for level in result["levels"] for row in level["per_request"]]
    assert len(rows) == 12
    served = _per_class(labelled.url)
    # "": what came without the header (the server's own warm-up /generate, the bench's probe).
    assert set(served) - {""} == set(KINDS), dict(served)
    for kind in KINDS:
        mine = [row for row in rows if row["kind"] == kind]
        assert served[kind][SGLANG_REQUESTS] == len(mine)
        assert served[kind][SGLANG_GENERATION_TOKENS] == sum(r["output_tokens"] for r in mine)
        assert served[kind][SGLANG_SPEC_VERIFY_CALLS] == sum(r["verify_ct"] for r in mine)


def test_an_unlabelled_run_counts_under_the_empty_value(labelled, bench) -> None:
    before = _per_class(labelled.url)[""][SGLANG_REQUESTS]
    run = bench("--url", labelled.url, "--concurrency", "1", "--requests-per-level", "2",
                "--max-tokens", "16", "--kinds", "chat", "--warmup-requests", "0",
                out="unlabelled")
    assert run.returncode == 0, run.stderr
    assert load_result(run.out_dir / "results.json")["settings"]["class_label"] is None
    assert _per_class(labelled.url)[""][SGLANG_REQUESTS] == before + 2


def test_a_label_prometheus_rejects_is_a_usage_error(labelled, bench) -> None:
    run = bench("--url", labelled.url, "--class-label", "model_name", out="refused")
    assert run.returncode != 0 and "--class-label" in run.stderr and "model_name" in run.stderr


def test_the_classes_the_rules_keep_are_the_shipped_prompt_sets() -> None:
    # specserve/monitoring/rules.py keeps these values of the class label by name, every other
    # one as "other": a class added to the prompt set must be added there too.
    prompts, _ = load_prompts(BUILTIN_PROMPTS)
    assert {prompt.kind for prompt in prompts} == set(BUILTIN_CLASSES)


def test_the_rules_per_class_record_is_the_bench_runs_own(labelled, bench, tmp_path) -> None:
    """The recording rule, evaluated by promtool on what the stand-in exposed over one labelled
    bench run (each counter's increase over a minute), equals per class the bench's own
    figure: its requests' tokens less their prefill token over their verify passes."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is required (apt-get install prometheus)"
    before = _samples(labelled.url)
    run = bench(
        "--url", labelled.url, "--concurrency", "2", "--requests-per-level", "9",
        "--max-tokens", "40", "--kinds", "chat,code,multilingual", "--warmup-requests", "0",
        "--class-label", LABEL, out="record",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = load_result(run.out_dir / "results.json")["levels"][0]["per_request"]
    target = {"job": "sglang", "instance": "standin:30000"}
    after = _samples(labelled.url)
    series = []
    for (name, labels), value in after.items():
        increase = value - before.get((name, labels), 0.0)
        text = ", ".join(f'{k}="{v}"' for k, v in {**dict(labels), **target}.items())
        series.append({"series": f"{name}{{{text}}}", "values": f"0 {increase:g}"})
    # The stand-in serves its model path as the model name, as SGLang does without a name.
    model = {dict(labels)["model_name"] for _, labels in after}.pop()
    expected = []
    for kind in ("chat", "code", "multilingual"):
        mine = [row for row in rows if row["kind"] == kind]
        value = sum(r["output_tokens"] - 1 for r in mine) / sum(r["verify_ct"] for r in mine)
        labels = {**target, "engine_type": "unified", "model_name": model, LABEL: kind}
        text = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        expected.append({"labels": f"{{{text}}}", "value": round(value, 3)})
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{
                "expr": f"round({CLASS_ACCEPT_LENGTH}{RECORDING_WINDOW}, 0.001)",
                "eval_time": "1m",
                "exp_samples": expected,
            }],
        }],
    }
    (tmp_path / "record.yml").write_text(json.dumps(test))
    done = subprocess.run([promtool, "test", "rules", "record.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
