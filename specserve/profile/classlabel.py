"""The request-class label: SGLang's custom labels on its tokenizer metrics, as one profile field.

SGLang (0.5.21 and 0.5.23 alike) reads a JSON object from one HTTP header of each OpenAI-route
request (`--tokenizer-metrics-custom-labels-header`, default `x-custom-labels`), keeps the keys
named by `--tokenizer-metrics-allowed-custom-labels` (serving_base.py extract_custom_labels) and
sets them on the request's tokenizer metrics: `generation_tokens_total`, `num_requests_total`,
`spec_verify_calls_total`, the latency histograms (tokenizer_manager.py collect_metrics). Every
such metric then carries the label, "" for a request without it (the collector's labels start
with "" for each allowed name). `server.request_class_label` names the one label specserve sets:
the profile renders both flags, `specserve bench --class-label` sends each prompt's class in
the header, the stand-in honours them, and the rules read the label per class.

What a name must be: a Prometheus label name, not one Prometheus reserves, and none SGLang
already puts on those metrics (its `labels.update(custom_labels)` would overwrite model_name,
and prometheus_client refuses `le`/`quantile` on histograms).
"""

from __future__ import annotations

import json
import re

# SGLang's default header (arg_groups/fields/observability.py, both verified versions); the
# profile renders it explicitly so the bench and the stand-in read the same name SGLang does.
CLASS_LABEL_HEADER = "x-custom-labels"
ALLOWED_LABELS_FLAG = "--tokenizer-metrics-allowed-custom-labels"
HEADER_FLAG = "--tokenizer-metrics-custom-labels-header"
# The label the shipped rules record the accept length per class by (specserve/monitoring/rules.py);
# check warns when the profile names another, whose classes no rule would read.
RULES_CLASS_LABEL = "workload_class"
# Prometheus' data model: [a-zA-Z_][a-zA-Z0-9_]*, names starting with __ are reserved.
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels SGLang's tokenizer metrics already carry (metrics_collector.py tokenizer_metric_labels,
# observe_one_finished_request's is_streaming and cache_source), prometheus_client's reserved
# histogram/summary labels, and the target labels Prometheus attaches to every series.
TAKEN_LABELS = frozenset(
    {"model_name", "engine_type", "priority", "is_streaming", "cache_source", "le", "quantile",
     "job", "instance"}
)


def label_name_problem(name: str) -> str | None:
    """Why `name` cannot be the class label, or None."""
    if not LABEL_NAME.fullmatch(name):
        return f"{name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
    if name.startswith("__"):
        return f"{name!r} starts with __, which Prometheus reserves for its own labels"
    if name in TAKEN_LABELS:
        return f"{name!r} is a label SGLang's tokenizer metrics or Prometheus already set"
    return None


def header_value(label: str, request_class: str) -> str:
    """The header's JSON object for one request: {label: class}."""
    return json.dumps({label: request_class}, separators=(",", ":"))
