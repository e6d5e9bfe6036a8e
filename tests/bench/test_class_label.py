"""`specserve bench --class-label` labels its own traffic: each request carries its prompt's
class in SGLang's custom-labels header, and a stand-in started with the flags the profile's
server.request_class_label renders counts it per class on its native metrics, as SGLang does
(the header's handling held to SGLang's own in tests/contract/test_class_label.py). The
server's tokens and verify calls per class are then exactly the sums of the bench's requests of
that class: the per-class accept length a fleet's rules record is the bench's own."""

from __future__ import annotations

from collections import defaultdict

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
from specserve.profile.classlabel import ALLOWED_LABELS_FLAG, CLASS_LABEL_HEADER, HEADER_FLAG
from tests.bench.conftest import DRAFTER, RECIPE_FLAGS

LABEL = "workload_class"
KINDS = ("chat", "code", "math")


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
