"""The stand-in's native metrics are SGLang's: the same events (a first token, inter-token
intervals, finished requests with and without verify passes, streaming or not, an abort, decode
passes with and without a CUDA graph) drive SGLang's real TokenizerMetricsCollector and
SchedulerMetricsCollector in each verified version's venv (tests/standin/native_metrics_real.py)
and the stand-in's NativeMetrics; every series of every family the stand-in serves must be equal,
name, type, labels and value. A rename, a new label or a changed update rule upstream fails here.

Then a running stand-in with --enable-metrics and speculation serves requests: its native accept
length (generated tokens / verify calls, the recording rule's formula) agrees with the `accept
len` of its decode lines within SpecServeAcceptLengthMismatch's default tolerance, as a healthy
server's must.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specserve.monitoring.metrics import (
    SGLANG_CUDA_GRAPH_PASSES,
    SGLANG_GENERATION_TOKENS,
    SGLANG_INTER_TOKEN_LATENCY,
    SGLANG_SPEC_VERIFY_CALLS,
    SGLANG_TIME_TO_FIRST_TOKEN,
)
from specserve.monitoring.rules import ALERTS_BY_NAME
from specserve.standin.metrics import NativeMetrics
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import run_python
from tests.standin.helpers import make_drafter

HERE = Path(__file__).resolve().parent
ACCEPT_LEN = re.compile(r"accept len: ([0-9.]+)")
MODEL_PATH = "tests/fixtures/models/Llama-3.1-8B-Instruct"  # resolution reads its config.json
MODEL = "demo"
EVENTS: list[list[Any]] = [
    ["first_token", 0.5, True],
    ["first_token", 3.2, False],
    ["inter_token", 0.09, 3],  # one verify pass brought 3 tokens: 3 x 30 ms
    ["inter_token", 0.012, 1],
    ["inter_token", 0.5, 4],
    ["decode_pass", True],
    ["decode_pass", True],
    ["decode_pass", False],
    ["finished", 10, 20, 1.5, 8, True],
    ["finished", 7, 1, 0.3, 0, False],  # one token from prefill: no verify call counted
    ["finished", 100, 64, 12.0, 25, False],
    ["aborted"],
]
# The families the rules read: they must be among those compared.
RULE_FAMILIES = {
    SGLANG_GENERATION_TOKENS.removesuffix("_total"),
    SGLANG_SPEC_VERIFY_CALLS.removesuffix("_total"),
    SGLANG_CUDA_GRAPH_PASSES.removesuffix("_total"),
    SGLANG_TIME_TO_FIRST_TOKEN,
    SGLANG_INTER_TOKEN_LATENCY,
}

# (family, series name, labels) -> value
Series = dict[tuple[str, str, frozenset[tuple[str, str]]], float]


def _standin() -> tuple[Series, dict[str, str]]:
    metrics = NativeMetrics(MODEL)
    for event, *values in EVENTS:
        if event == "first_token":
            metrics.first_token(values[0], values[1])
        elif event == "inter_token":
            metrics.inter_token(values[0], values[1])
        elif event == "finished":
            prompt, completion, e2e, verify, stream = values
            metrics.finished(prompt, completion, e2e, spec_verify_ct=verify, stream=stream)
        elif event == "aborted":
            metrics.aborted()
        else:
            metrics.decode_pass(values[0])
    series: Series = {}
    types: dict[str, str] = {}
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            types[family.name] = family.type
            series[(family.name, sample.name, frozenset(sample.labels.items()))] = sample.value
    return series, types


def _real(version: str) -> tuple[Series, dict[str, str]]:
    request = {"model_path": MODEL_PATH, "model_name": MODEL, "events": EVENTS}
    rows = run_python(version, [str(HERE / "native_metrics_real.py")], request)
    series: Series = {}
    types: dict[str, str] = {}
    for row in rows:
        types[row["family"]] = row["type"]
        series[(row["family"], row["name"], frozenset(row["labels"].items()))] = row["value"]
    return series, types


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_standins_native_series_equal_sglangs(version: str) -> None:
    ours, our_types = _standin()
    theirs, their_types = _real(version)
    # Families the stand-in serves that these events touch (gauges are set by stats lines).
    touched = {name for name, kind in our_types.items() if kind != "gauge"}
    assert touched >= RULE_FAMILIES, sorted(RULE_FAMILIES - touched)
    missing = sorted(touched - set(their_types))
    assert not missing, f"SGLang {version} has no such metric: {missing}"
    assert {f: our_types[f] for f in touched} == {f: their_types[f] for f in touched}

    def of(series: Series) -> Series:
        return {key: value for key, value in series.items() if key[0] in touched}

    mine, real = of(ours), of(theirs)
    only_ours = sorted(str(k) for k in set(mine) - set(real))
    only_real = sorted(str(k) for k in set(real) - set(mine))
    assert not only_ours and not only_real, (only_ours[:5], only_real[:5])
    wrong = {str(k): (mine[k], real[k]) for k in mine if mine[k] != pytest.approx(real[k])}
    assert not wrong, wrong


def test_the_comparison_sees_a_wrong_label() -> None:
    """The check itself: a stand-in that forgot is_streaming would differ from SGLang."""
    ours, _ = _standin()
    renamed = {
        (family, name, frozenset((k, v) for k, v in labels if k != "is_streaming")): value
        for (family, name, labels), value in ours.items()
    }
    assert renamed != ours


def _accept_lengths(text: str) -> tuple[float, float]:
    tokens = verify = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == SGLANG_GENERATION_TOKENS:
                tokens += sample.value
            elif sample.name == SGLANG_SPEC_VERIFY_CALLS:
                verify += sample.value
    return tokens, verify


def test_a_speculating_standin_counts_tokens_and_verify_calls(
    start_standin: Any, tmp_path: Path
) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    server = start_standin(
        "--enable-metrics", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(drafter),
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--decode-log-interval", "5",
    )  # fmt: skip
    completions = 0
    for i in range(4):
        reply = requests.post(
            server.url + "/generate",
            json={"text": f"prompt {i}", "sampling_params": {"max_new_tokens": 40},
                  "stream": i % 2 == 1},
            timeout=60,
        )  # fmt: skip
        assert reply.status_code == 200, reply.text
        completions += 1
    text = requests.get(server.url + "/metrics", timeout=10).text
    tokens, verify = _accept_lengths(text)
    assert completions == 4 and tokens >= 4 and verify > 0, text[-2000:]
    native = tokens / verify
    logged = [float(m[1]) for m in map(ACCEPT_LEN.search, server.lines()) if m]
    assert logged, "no decode line with an accept len"
    log_mean = sum(logged) / len(logged)
    tolerance = ALERTS_BY_NAME["SpecServeAcceptLengthMismatch"].threshold("tolerance").default
    assert isinstance(tolerance, float)
    assert 1.0 < native <= 4.0 + 1.0, (tokens, verify)
    assert abs(native - log_mean) / native < tolerance, (native, log_mean, logged)
    assert 'is_streaming="true"' in text and 'is_streaming="false"' in text
