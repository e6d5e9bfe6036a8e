"""The stand-in's native metrics are SGLang's: the same events (a first token, inter-token
intervals, finished requests with and without verify passes, streaming or not, an abort, decode
passes with and without a CUDA graph) drive SGLang's real TokenizerMetricsCollector and
SchedulerMetricsCollector in each verified version's venv (tests/standin/native_metrics_real.py)
and the stand-in's NativeMetrics; every series of every family the stand-in serves must be equal,
name, type, labels and value. A rename, a new label or a changed update rule upstream fails here.

The scheduler gauges the same way, busy and idle: a decode stats window published through the
real SchedulerMetricsCollector.log_stats, then SGLang's own idle publish
(SchedulerMetricsReporter._maybe_log_idle_metrics, which Scheduler.on_idle calls once the
scheduler has nothing to run): the stand-in's gauges must equal SGLang's after each, so
`sglang:num_running_reqs` drops to 0 when the server goes idle, as SpecServeNoDecodeLines
relies on, and the held ones (accept length, steps) keep their values. Then a DSPARK window in
cap-accept mode: `sglang:spec_cap_length` and `sglang:spec_block_accept_length` as SGLang sets
them.

Then a running stand-in with --enable-metrics and speculation serves requests: its native accept
length (generated tokens less one prefill token per request, over verify calls: the recording
rule's formula) agrees with the `accept len` of its decode lines within
SpecServeAcceptLengthMismatch's default tolerance, as a healthy server's must; with every draft
rejected it reads exactly 1.00 for 2-, 8- and 200-token replies, as the decode lines do; and
once its last request is answered its running gauge reads 0, like /v1/loads.
"""

from __future__ import annotations

import re
import threading
import time
from functools import cache
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
    SGLANG_REQUESTS,
    SGLANG_RUNNING_REQUESTS,
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
# resolution reads its config.json; absolute: the fork server runs outside the checkout
MODEL_PATH = str(HERE.parent / "fixtures" / "models" / "Llama-3.1-8B-Instruct")
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


@cache
def _real_run(version: str) -> dict[str, tuple[Series, dict[str, str]]]:
    """One run of SGLang's collectors per version (its imports cost seconds): EVENTS, then the
    scheduler's BUSY window (snapshot "busy") and its idle publish (the final state, "end")."""
    events = [*EVENTS, *BUSY, ["snapshot", "busy"], ["idle"], ["snapshot", "idle"], *BLOCK]
    request = {"model_path": MODEL_PATH, "model_name": MODEL, "events": events}
    rows = run_python(version, [str(HERE / "native_metrics_real.py")], request)
    out: dict[str, tuple[Series, dict[str, str]]] = {}
    for row in rows:
        series, types = out.setdefault(row.get("snapshot", "end"), ({}, {}))
        types[row["family"]] = row["type"]
        series[(row["family"], row["name"], frozenset(row["labels"].items()))] = row["value"]
    return out


def _real(version: str, snapshot: str = "end") -> tuple[Series, dict[str, str]]:
    return _real_run(version)[snapshot]


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


MAX_TOTAL = 500_000
# A decode window: 3 running, 123456 tokens in use (usage 0.2469, exported rounded: 0.25), 2
# queued, 140.5 tok/s, accept length 2.18 / rate 0.39 at 3 steps / 4 draft tokens.
BUSY: list[list[Any]] = [
    ["constants", MAX_TOTAL],
    ["window", 3, 123456, 2, 140.5, 2.18, 0.39, 3, 4],
]
IDLE: list[list[Any]] = [*BUSY, ["idle"]]
# Then a DSPARK window under SGLANG_RAGGED_VERIFY_MODE=cap-accept: one step of 8 draft tokens,
# accept len 2.95 under a cap of 3, 4.61 uncapped.
BLOCK: list[list[Any]] = [["window", 2, 2345, 0, 150.0, 2.95, 0.28, 1, 8, 3.0, 4.61]]


def _standin_gauges(events: list[list[Any]]) -> tuple[Series, dict[str, str]]:
    metrics = NativeMetrics(MODEL)
    for event, *values in events:
        if event == "constants":
            metrics.constants(values[0])
        elif event == "window":
            running, used, queued, tput, accept_len, accept_rate, steps, drafts, *block = values
            cap_len, block_len = block or (0.0, 0.0)
            metrics.scheduler_window(
                running=running, used_tokens=used, token_usage=used / MAX_TOTAL, queued=queued,
                gen_throughput=tput, accept_length=accept_len, accept_rate=accept_rate,
                num_steps=steps, num_draft_tokens=drafts, cap_length=cap_len,
                block_accept_length=block_len,
            )  # fmt: skip
        else:
            metrics.idle()
    series: Series = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        if family.type == "gauge":
            types[family.name] = family.type
            for sample in family.samples:
                series[(family.name, sample.name, frozenset(sample.labels.items()))] = sample.value
    return series, types


def _gauge(series: Series, name: str) -> float:
    (value,) = [v for (family, _, _), v in series.items() if family == name]
    return value


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_scheduler_gauges_equal_sglangs_busy_then_idle(version: str) -> None:
    seen: dict[str, Series] = {}
    phases = (("busy", BUSY, "busy"), ("idle", IDLE, "idle"), ("block", [*IDLE, *BLOCK], "end"))
    for phase, events, snapshot in phases:
        ours, our_types = _standin_gauges(events)
        theirs, their_types = _real(version, snapshot)
        missing = sorted(set(our_types) - set(their_types))
        assert not missing, f"SGLang {version} has no such gauge: {missing}"
        real = {key: value for key, value in theirs.items() if key[0] in our_types}
        assert set(ours) == set(real), (phase, sorted(map(str, set(ours) ^ set(real)))[:5])
        wrong = {str(k): (ours[k], real[k]) for k in ours if ours[k] != pytest.approx(real[k])}
        assert not wrong, (phase, wrong)
        seen[phase] = ours
    # What SpecServeNoDecodeLines relies on: idle, SGLang itself reports no running request;
    # the stats it does not touch keep the last window's values.
    assert _gauge(seen["busy"], SGLANG_RUNNING_REQUESTS) == 3
    assert _gauge(seen["idle"], SGLANG_RUNNING_REQUESTS) == 0
    assert _gauge(seen["busy"], "sglang:token_usage") == 0.25
    for held, value in (("sglang:spec_accept_length", 2.18), ("sglang:spec_num_steps", 3)):
        assert _gauge(seen["idle"], held) == value
    # The block drafter's gauges: 0 for EAGLE, DSPARK's cap and uncapped length once it runs.
    assert _gauge(seen["busy"], "sglang:spec_cap_length") == 0
    assert _gauge(seen["block"], "sglang:spec_cap_length") == 3.0
    assert _gauge(seen["block"], "sglang:spec_block_accept_length") == 4.61


def _counts(text: str) -> dict[str, float]:
    """Generated tokens, finished requests and verify calls on a /metrics page, each summed."""
    wanted = (SGLANG_GENERATION_TOKENS, SGLANG_REQUESTS, SGLANG_SPEC_VERIFY_CALLS)
    counts = dict.fromkeys(wanted, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in counts:
                counts[sample.name] += sample.value
    return counts


def _native(counts: dict[str, float]) -> float:
    """The recording rule's native accept length: generated tokens less each request's prefill
    token, over verify calls (instance:sglang_spec_accept_length:ratio_rate; no retraction in
    the stand-in)."""
    verify = counts[SGLANG_SPEC_VERIFY_CALLS]
    return (counts[SGLANG_GENERATION_TOKENS] - counts[SGLANG_REQUESTS]) / verify


def _speculating(start_standin: Any, tmp_path: Path, env: dict[str, str] | None = None) -> Any:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    return start_standin(
        "--enable-metrics", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(drafter),
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--decode-log-interval", "5",
        env=env,
    )  # fmt: skip


def _generate(server: Any, i: int, max_new_tokens: int, ignore_eos: bool = False) -> None:
    reply = requests.post(
        server.url + "/generate",
        json={"text": f"prompt {i}", "stream": i % 2 == 1,
              "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": ignore_eos}},
        timeout=60,
    )  # fmt: skip
    assert reply.status_code == 200, reply.text


def _served(server: Any, before: dict[str, float]) -> dict[str, float]:
    """The counts since `before` (the server's own warm-up request is counted, as upstream's)."""
    now = _counts(requests.get(server.url + "/metrics", timeout=10).text)
    return {name: now[name] - before[name] for name in now}


def test_a_speculating_standin_counts_tokens_and_verify_calls(
    start_standin: Any, tmp_path: Path
) -> None:
    server = _speculating(start_standin, tmp_path)
    for i in range(4):
        _generate(server, i, 40)
    text = requests.get(server.url + "/metrics", timeout=10).text
    counts = _counts(text)
    # The four requests and the warm-up one.
    assert counts[SGLANG_REQUESTS] == 5 and counts[SGLANG_SPEC_VERIFY_CALLS] > 0, text[-2000:]
    native = _native(counts)
    # The most the log may read: each request's last pass may have accepted up to 3 (draft
    # tokens - 1) drafts past the reply's end, which only the decode lines count.
    most = native + counts[SGLANG_REQUESTS] * 3 / counts[SGLANG_SPEC_VERIFY_CALLS]
    logged = [float(m[1]) for m in map(ACCEPT_LEN.search, server.lines()) if m]
    assert logged, "no decode line with an accept len"
    log_mean = sum(logged) / len(logged)
    tolerance = ALERTS_BY_NAME["SpecServeAcceptLengthMismatch"].threshold("tolerance").default
    assert isinstance(tolerance, float)
    assert 1.0 < native <= 4.0, counts
    # SpecServeAcceptLengthMismatch's value, as a healthy server's must stay under it.
    outside = max(native - log_mean, log_mean - most, 0.0) / native
    assert outside < tolerance, (native, most, log_mean, logged)
    assert 'is_streaming="true"' in text and 'is_streaming="false"' in text


@pytest.mark.parametrize("reply_tokens", [2, 8, 200])
def test_every_draft_rejected_reads_one_at_any_reply_length(
    start_standin: Any, tmp_path: Path, reply_tokens: int
) -> None:
    """The adversarial case of issue 26: every draft rejected. SGLang's completion_tokens /
    spec_verify_ct counts each reply's prefill token (8 / 7 = 1.14 for 8-token replies); the
    recording rule's native value, like the decode lines, reads exactly 1.00."""
    behaviour = tmp_path / "behaviour.yaml"
    behaviour.write_text("acceptance: 0.0\n", encoding="utf-8")
    server = _speculating(
        start_standin, tmp_path, env={"SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)}
    )
    replies = 3
    before = _counts(requests.get(server.url + "/metrics", timeout=10).text)
    for i in range(replies):
        _generate(server, i, reply_tokens, ignore_eos=True)
    counts = _served(server, before)
    # One token from each prefill, one from each verify pass: upstream's counting.
    assert counts == {
        SGLANG_GENERATION_TOKENS: replies * reply_tokens,
        SGLANG_REQUESTS: replies,
        SGLANG_SPEC_VERIFY_CALLS: replies * (reply_tokens - 1),
    }, counts
    assert _native(counts) == 1.0
    logged = {m[1] for m in map(ACCEPT_LEN.search, server.lines()) if m}
    assert logged <= {"1.00"}, logged


def _running_gauge(url: str) -> float | None:
    text = requests.get(url + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == SGLANG_RUNNING_REQUESTS:
                return float(sample.value)
    return None


def test_a_standin_gone_idle_reports_no_running_request(start_standin: Any) -> None:
    """The demo's false alert: after the last request /v1/loads said 0 while the gauge held the
    last decode line's 1. Now, as SGLang's idle publish does, the gauge is 1 while the request
    runs and 0 once it is answered, at once (not at the 30 s refresh)."""
    server = start_standin("--enable-metrics", "--decode-log-interval", "5")
    done = threading.Event()

    def long_generation() -> None:
        requests.post(server.url + "/generate", timeout=60,
                      json={"text": "x", "sampling_params": {"max_new_tokens": 1500,
                                                             "ignore_eos": True}})  # fmt: skip
        done.set()

    thread = threading.Thread(target=long_generation)
    thread.start()
    busy = 0.0
    while not done.is_set() and busy != 1:
        busy = _running_gauge(server.url) or 0.0
        time.sleep(0.02)
    thread.join(60)
    assert busy == 1, "the gauge never showed the running request"
    answered = time.monotonic()
    while (_running_gauge(server.url) != 0) and time.monotonic() < answered + 5:
        time.sleep(0.02)
    assert _running_gauge(server.url) == 0
    assert time.monotonic() - answered < 5
    loads = requests.get(server.url + "/v1/loads", timeout=5).json()["loads"]
    assert [load["num_running_reqs"] for load in loads] == [0]


def _decode_passes(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == SGLANG_CUDA_GRAPH_PASSES
    )


def test_health_checks_on_an_idle_standin_take_no_decode_pass(start_standin: Any) -> None:
    """A health check's one-token probe ends at its prefill: SGLang filters the finished
    request out of the prefill batch before that joins the running batch, so an idle server
    probed by a router or a kubelet prints no decode line and counts no decode pass (the
    e2e idle phase saw the stand-in print one every 10 probes)."""
    server = start_standin("--enable-metrics", "--decode-log-interval", "1")
    before_lines, before_passes = len(server.decode_matches()), _decode_passes(server.url)
    prefills = sum("Prefill batch" in line for line in server.lines())
    for _ in range(3):
        assert requests.get(server.url + "/health", timeout=10).status_code == 200
    assert sum("Prefill batch" in line for line in server.lines()) == prefills + 3
    assert len(server.decode_matches()) == before_lines
    assert _decode_passes(server.url) == before_passes
    assert _running_gauge(server.url) == 0
