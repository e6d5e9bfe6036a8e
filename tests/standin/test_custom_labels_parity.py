"""The stand-in's native metrics with a custom label are SGLang's: started with
--tokenizer-metrics-allowed-custom-labels, SGLang's real TokenizerMetricsCollector declares the
label at "" (0.5.23's own tokenizer_metric_labels; 0.5.21's same statements) and each request's
labels are the collector's updated with the request's custom labels (collect_metrics). The same
events (requests of class code and chat, one without a class, an abort, which upstream leaves
unlabelled) drive it (tests/standin/native_metrics_real.py) and the stand-in's NativeMetrics; every
tokenizer series must be equal, name, labels and value. What reaches the labels from a header is
tests/contract/test_class_label.py's."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specserve.standin.metrics import NativeMetrics
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import run_python
from tests.standin.test_native_metrics_parity import HERE, MODEL, MODEL_PATH, Series

LABEL = "workload_class"
CODE, CHAT = {LABEL: "code"}, {LABEL: "chat"}
EVENTS: list[list[Any]] = [
    ["first_token", 0.5, True, CODE],
    ["first_token", 3.2, False, CHAT],
    ["first_token", 0.7, False],
    ["inter_token", 0.09, 3, CODE],
    ["inter_token", 0.5, 4, CHAT],
    ["inter_token", 0.012, 1],
    ["finished", 10, 20, 1.5, 8, True, CODE],
    ["finished", 100, 64, 12.0, 25, False, CHAT],
    ["finished", 7, 9, 0.3, 4, False],
    ["aborted"],
]


def _standin() -> Series:
    metrics = NativeMetrics(MODEL, (LABEL,))
    for event, *values in EVENTS:
        if event == "first_token":
            metrics.first_token(values[0], values[1], *values[2:])
        elif event == "inter_token":
            metrics.inter_token(values[0], values[1], *values[2:])
        elif event == "finished":
            prompt, completion, e2e, verify, stream, *custom = values
            metrics.finished(prompt, completion, e2e, spec_verify_ct=verify, stream=stream,
                             custom=custom[0] if custom else None)
        else:
            metrics.aborted()
    series: Series = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        if family.type == "gauge":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                series[(family.name, sample.name, frozenset(sample.labels.items()))] = sample.value
    return series


def _real(version: str) -> Series:
    request = {"model_path": MODEL_PATH, "model_name": MODEL, "events": EVENTS,
               "custom_labels": [LABEL]}
    rows = run_python(version, [str(HERE / "native_metrics_real.py")], request)
    return {(row["family"], row["name"], frozenset(row["labels"].items())): row["value"]
            for row in rows if row["type"] != "gauge"}


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_standins_labelled_series_equal_sglangs(version: str) -> None:
    ours = _standin()
    # Only the families the stand-in serves; SGLang has more (cached tokens, histograms of
    # prompt lengths) that these events also touch.
    families = {key[0] for key in ours}
    theirs = {key: value for key, value in _real(version).items() if key[0] in families}
    only_ours = sorted(str(k) for k in set(ours) - set(theirs))
    only_real = sorted(str(k) for k in set(theirs) - set(ours))
    assert not only_ours and not only_real, (only_ours[:5], only_real[:5])
    wrong = {str(k): (ours[k], theirs[k]) for k in ours if ours[k] != pytest.approx(theirs[k])}
    assert not wrong, wrong
    # The comparison covers what the per-class rules read, per class and unlabelled ("").
    classes = {dict(labels).get(LABEL) for (family, _, labels) in ours
               if family == "sglang:spec_verify_calls"}
    assert classes == {"code", "chat", ""}
    aborted = {dict(labels)[LABEL] for (family, _, labels) in ours
               if family == "sglang:num_aborted_requests"}
    assert aborted == {""}
