"""What the native recording rules compute is what SGLang's own code means, in every verified
version: read from the venv's sources, so an upstream change of definition fails here.

- accept length: SGLang's per-request `spec_accept_length` is completion_tokens /
  spec_verify_ct; the request's tokens go to generation_tokens_total, a one to
  num_requests_total and its verify passes to spec_verify_calls_total when it finishes;
  completion_tokens counts the token the prefill appends (and one per re-prefill after a
  retraction, which every TP rank counts in num_retracted_requests_total), no verify pass, so
  the verify passes' tokens are generated tokens less requests less retractions
  (instance:sglang_spec_accept_length:ratio_rate);
- a verify pass is counted once per request in the batch (req.spec_verify_ct += 1);
- graph state: every decode pass steps cuda_graph_passes_total with mode decode_cuda_graph or
  decode_none (instance:sglang_cuda_graph_passes_decode:ratio_rate);
- the SLO alerts' default thresholds sit on SGLang's default bucket bounds, where
  histogram_quantile is exact (the stand-in's buckets are upstream's:
  tests/standin/test_native_metrics_parity.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specserve.monitoring.expansion import recording_expr
from specserve.monitoring.metrics import (
    SGLANG_CUDA_GRAPH_PASSES,
    SGLANG_GENERATION_TOKENS,
    SGLANG_REQUESTS,
    SGLANG_RETRACTED_REQUESTS,
    SGLANG_SPEC_DRAFT_TOKENS,
    SGLANG_SPEC_VERIFY_CALLS,
)
from specserve.monitoring.rules import (
    ALERTS_BY_NAME,
    NATIVE_ACCEPT_LENGTH,
    NATIVE_GRAPH_RATIO,
    RECORDING_RULES_BY_FAMILY,
)
from specserve.profile.classlabel import RULES_CLASS_LABEL
from specserve.standin.metrics import ITL_BUCKETS, TTFT_BUCKETS
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import venv_python, venv_root


def _source(version: str, relative: str) -> str:
    venv_python(version)  # fails, naming the setup command, when the venv is missing
    pattern = f"lib/python3*/site-packages/sglang/srt/{relative}"
    found = sorted((venv_root() / version).glob(pattern))
    assert found, f"SGLang {version} has no {relative}"
    return Path(found[0]).read_text(encoding="utf-8")


def _function(source: str, name: str) -> str:
    """The text of `def name(...)` up to the next def at the same or a lower indent."""
    match = re.search(rf"^( *)def {name}\(.*?(?=^\1?def |\Z)", source, re.M | re.S)
    assert match, f"no def {name}"
    return match.group(0)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_accept_length_is_generated_tokens_over_verify_calls(version: str) -> None:
    tokenizer = _source(version, "managers/tokenizer_manager.py")
    assert re.search(
        r'meta_info\["spec_accept_length"\]\s*=\s*\(\s*'
        r"recv_obj\.completion_tokens\[i\]\s*/\s*recv_obj\.spec_verify_ct\[i\]",
        tokenizer,
    ), f"SGLang {version}: spec_accept_length is no longer completion_tokens / spec_verify_ct"
    collector = _source(version, "observability/metrics_collector.py")
    finished = _function(collector, "observe_one_finished_request")
    assert re.search(r"self\.generation_tokens_total\.labels\(\*\*stream_labels\)\.inc\("
                     r"generation_tokens\)", finished), finished  # fmt: skip
    assert re.search(r"if spec_verify_ct > 0:\s*self\.spec_verify_calls_total\.labels\("
                     r"\*\*labels\)\.inc\(spec_verify_ct\)", finished), finished  # fmt: skip
    for name in (SGLANG_GENERATION_TOKENS, SGLANG_SPEC_VERIFY_CALLS):
        assert f'name="{name}"' in collector, name
    # ... and the tokenizer passes the request's own completion tokens and verify count.
    assert re.search(r"observe_one_finished_request\(\s*labels,\s*recv_obj\.prompt_tokens\[i\],"
                     r"\s*completion_tokens,", tokenizer)  # fmt: skip
    assert "spec_verify_ct=spec_verify_ct" in tokenizer
    scheduler = _source(version, "managers/scheduler_components/batch_result_processor.py")
    assert scheduler.count("req.spec_verify_ct += 1") == 1, "one verify count per request pass"


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_completion_tokens_count_the_prefill_token_once_per_request(version: str) -> None:
    """What the native accept length subtracts (issue 26): one prefill token per finished
    request and per retraction, counted by counters that step with them."""
    processor = _source(version, "managers/scheduler_components/batch_result_processor.py")
    # The prefill's sampled token is the output's first; the verify count is the decode path's.
    prefill = _function(processor, "process_batch_result_prefill")
    assert "req.output_ids.append(next_token_id)" in prefill, prefill[:2000]
    assert "spec_verify_ct" not in prefill
    streamer = _source(version, "managers/scheduler_components/output_streamer.py")
    assert "else len(output_ids_)" in streamer, "completion_tokens is no longer len(output_ids)"
    collector = _source(version, "observability/metrics_collector.py")
    finished = _function(collector, "observe_one_finished_request")
    assert "self.num_requests_total.labels(**stream_labels).inc(1)" in finished, finished
    assert f'name="{SGLANG_REQUESTS}"' in collector
    # A retracted request keeps its output and verify count, and is prefilled again: one more
    # token (only an input_embeds request drops its output, a case the rule does not correct:
    # docs/alerts.md). Each TP rank's scheduler (enable_metrics, not only the stats-logging
    # rank) counts the retraction under its own tp_rank.
    schedule_batch = _source(version, "managers/schedule_batch.py")
    retract = _function(schedule_batch, "reset_for_retract")
    assert "spec_verify_ct" not in retract, retract
    resets = re.findall(r"self\.output_ids = .*", retract)
    assert resets == ['self.output_ids = array("q")'], retract
    assert re.search(r"if self\.input_embeds is not None:\s*self\.output_ids = array", retract)
    assert "req.is_retracted = False" in schedule_batch
    scheduler = _source(version, "managers/scheduler.py")
    assert "if self.metrics_reporter.enable_metrics and len(retracted_reqs) > 0:" in scheduler
    retracted = _function(collector, "increment_retracted_reqs")
    assert "self.num_retracted_reqs_total.labels(**self.labels).inc(num_retracted_reqs)" in (
        retracted
    ), retracted
    assert f'name="{SGLANG_RETRACTED_REQUESTS}"' in collector
    assert f'name="{SGLANG_SPEC_DRAFT_TOKENS}"' in collector


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_graph_passes_count_each_decode_pass_by_mode(version: str) -> None:
    collector = _source(version, "observability/metrics_collector.py")
    assert f'name="{SGLANG_CUDA_GRAPH_PASSES}"' in collector
    decode = _function(collector, "increment_decode_cuda_graph_pass")
    assert 'mode = "decode_cuda_graph" if value else "decode_none"' in decode, decode
    assert "cuda_graph_passes_total.labels(**self.labels, mode=mode).inc(1)" in decode
    processor = _source(version, "managers/scheduler_components/batch_result_processor.py")
    assert "increment_decode_cuda_graph_pass(" in processor


def test_the_rules_use_those_counters_and_modes() -> None:
    accept = recording_expr(RECORDING_RULES_BY_FAMILY[NATIVE_ACCEPT_LENGTH], "5m")
    assert accept.index(SGLANG_GENERATION_TOKENS) < accept.index("/") < accept.index(
        SGLANG_SPEC_VERIFY_CALLS
    ), accept
    numerator = accept[: accept.index("/")]
    # The request-class label summed away too: the server-wide figure with labelled traffic.
    assert (f"- sum without (is_streaming, priority, {RULES_CLASS_LABEL}) "
            f"(rate({SGLANG_REQUESTS}[5m]))") in numerator
    assert f"max without (tp_rank, pp_rank, moe_ep_rank, priority) (rate({SGLANG_RETRACTED_REQUESTS}[5m]))" in numerator, numerator  # noqa: E501
    graph = recording_expr(RECORDING_RULES_BY_FAMILY[NATIVE_GRAPH_RATIO], "5m")
    assert 'mode=~"decode_cuda_graph|decode_none"' in graph and "prefill" not in graph, graph


def test_slo_defaults_sit_on_sglangs_bucket_bounds() -> None:
    ttft = ALERTS_BY_NAME["SpecServeTimeToFirstTokenHigh"].threshold("max_seconds").default
    itl = ALERTS_BY_NAME["SpecServeInterTokenLatencyHigh"].threshold("max_seconds").default
    assert ttft in TTFT_BUCKETS and itl in ITL_BUCKETS, (ttft, itl)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_slo_thresholds_are_sglangs_default_bucket_bounds(version: str) -> None:
    """The SLO objectives may only count at a bound of SGLang's own default buckets (the
    TokenizerMetricsCollector's lists): the bounds the catalogue and the stand-in hold are
    exactly those, and each default threshold is one of them."""
    import ast

    from specserve.monitoring import slo

    source = _source(version, "observability/metrics_collector.py")
    bounds: dict[str, tuple[float, ...]] = {}
    for name in ("bucket_time_to_first_token", "bucket_inter_token_latency"):
        match = re.search(rf"^\s*{name} = (\[.*?\])", source, re.M | re.S)
        assert match, f"SGLang {version}: no default {name}"
        bounds[name] = tuple(float(v) for v in ast.literal_eval(match.group(1)))
    assert bounds["bucket_time_to_first_token"] == slo.TTFT_BUCKETS
    assert bounds["bucket_inter_token_latency"] == slo.ITL_BUCKETS
    assert tuple(map(float, TTFT_BUCKETS)) == slo.TTFT_BUCKETS  # the stand-in's
    assert tuple(map(float, ITL_BUCKETS)) == slo.ITL_BUCKETS
    for objective in slo.OBJECTIVES:
        if objective.histogram is not None:
            assert objective.threshold_seconds in objective.buckets, objective.name
