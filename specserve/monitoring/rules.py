"""The catalogue of every specserve alert and recording rule: what each one is.

Each alert is a *value query* (PromQL measuring one quantity, already gated so it is empty while
the server is idle), a comparison, a threshold, a severity, its switches (`for`, rate window,
named thresholds) and its runbook. Nothing here renders: `expansion` turns the placeholders into
concrete PromQL, `prometheus` writes the rule file, `grafana_alerting`, `dashboard` and `helm`
render the same entries for their consumers. Nothing is written twice.

Placeholders in expressions and annotation templates:
- `[[name]]` is the alert's threshold `name` (number, regex, label list or metric name);
- `[[window]]` is the rate window (a Prometheus duration) of the alert, or of the recording rule
  being rendered;
- `[[rule:family]]` is a recording rule family at the alert's window: `family` + window is its
  name in Prometheus rule files (`...:mean` + `2m`), its expression (with that window) inlined
  where recording rules may not be loaded (Grafana alerts, dashboards).
`[[` never occurs in PromQL or in Prometheus/Grafana templates, so the markers cannot collide.

Windows: every alert built on a rate has its own `window` (overridable like `for`). Recording
rules exist once per (family, window) that an enabled alert needs, plus always at
RECORDING_WINDOW, so `...:mean5m` and friends can be relied on by other dashboards.

Metric names come from the exporter's own table (`specserve_exporter.names`) and, for metrics
other exporters serve, from `specserve.monitoring.metrics`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from specserve.bench.settings import BUILTIN_CLASSES
from specserve.monitoring.metrics import (
    DCGM_ECC_DBE_VOLATILE,
    DCGM_GPU_TEMP,
    DCGM_NVLINK_CRC_DATA_ERRORS,
    DCGM_NVLINK_CRC_FLIT_ERRORS,
    DCGM_NVLINK_RECOVERY_ERRORS,
    DCGM_NVLINK_REPLAY_ERRORS,
    DCGM_POWER_VIOLATION,
    DCGM_ROW_REMAP_FAILURE,
    DCGM_THERMAL_VIOLATION,
    DCGM_UNCORRECTABLE_REMAPPED_ROWS,
    DCGM_XID_ERRORS,
    ROUTER_RETIRED_LOOKBACK,
    ROUTER_WORKER_CIRCUIT,
    ROUTER_WORKER_HEALTH,
    SGLANG_CUDA_GRAPH_PASSES,
    SGLANG_GEN_THROUGHPUT,
    SGLANG_GENERATION_TOKENS,
    SGLANG_INTER_TOKEN_LATENCY,
    SGLANG_QUEUED_REQUESTS,
    SGLANG_REQUESTS,
    SGLANG_RETRACTED_REQUESTS,
    SGLANG_RUNNING_REQUESTS,
    SGLANG_SPEC_BLOCK_ACCEPT_LENGTH,
    SGLANG_SPEC_DRAFT_TOKENS,
    SGLANG_SPEC_VERIFY_CALLS,
    SGLANG_TIME_TO_FIRST_TOKEN,
    UP,
    router_worker_state,
)
from specserve.monitoring.slo import burn_expr
from specserve.profile.classlabel import RULES_CLASS_LABEL
from specserve_exporter.names import (
    BASELINE_GEN_THROUGHPUT,
    DECODE_ACCEPT_LENGTH,
    DECODE_GEN_THROUGHPUT,
    DECODE_GRAPH_ENABLED,
    DECODE_GRAPH_LINES,
    DECODE_LAST_BLOCK_ACCEPT_LENGTH,
    DECODE_LAST_LINE_TIMESTAMP,
    DECODE_QUEUED_REQUESTS,
    DECODE_TOKEN_USAGE,
    LOG_FILE_GAPS,
    LOG_LINES_PARSED,
    LOG_LINES_READ,
    LOG_LINES_REJECTED,
    PREFIX,
    SOURCE_UP,
    SPECULATIVE_DRAFT_TOKENS,
)

ThresholdKind = Literal["number", "regex", "labels", "metric"]
Severity = Literal["critical", "warning"]
Comparison = Literal["<", ">"]

SERVICE_LABEL = "specserve"
# The window every recording rule family is always recorded at (docs/alerts.md).
RECORDING_WINDOW = "5m"
# The placeholder name of the rate window; reserved, never a threshold name.
WINDOW = "window"
# The lead sets the real repository URL; Ansible and Helm pass their own with runbook_base_url.
DEFAULT_RUNBOOK_BASE_URL = "https://github.com/specserve/specserve/blob/main/docs/runbooks"


@dataclass(frozen=True)
class Threshold:
    """A named, overridable parameter of one alert."""

    name: str
    default: float | str
    kind: ThresholdKind
    help: str
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class RecordingRule:
    """A family of recording rules: `family` + window is the record name, e.g. `...:mean2m`."""

    family: str
    expr: str
    help: str

    def record(self, window: str) -> str:
        return f"{self.family}{window}"


@dataclass(frozen=True)
class Alert:
    name: str
    severity: Severity
    for_: str
    value_expr: str
    comparison: Comparison
    # The overridable threshold the value is compared with, or a fixed number for alerts on
    # 0/1 gauges and counters.
    compare_to: Threshold | float
    summary: str
    description: str
    meaning: str
    # Thresholds the value query itself reads (`[[name]]`), besides the compared one.
    query_thresholds: tuple[Threshold, ...] = field(default_factory=tuple)
    # Default rate window; None for alerts that read gauges or `up` directly (no rate).
    window: str | None = None
    # False for alerts kept only as explicit options (the fixed p99 latency thresholds, which
    # the SLO burn-rate alerts replace): off unless an override enables them.
    enabled_by_default: bool = True
    # True for alerts that read the SLO group's records by name (their windows are fixed and
    # their settings are the objectives'): Grafana-managed rules, which run without the rule
    # file, inline those records from the objectives instead (slo.inline_burn_expr,
    # docs/slo.md).
    needs_slo_records: bool = False

    @property
    def runbook_slug(self) -> str:
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", self.name).lower()

    @property
    def thresholds(self) -> tuple[Threshold, ...]:
        """Every overridable threshold, the compared one first."""
        if isinstance(self.compare_to, Threshold):
            return (self.compare_to, *self.query_thresholds)
        return self.query_thresholds

    @property
    def labels(self) -> dict[str, str]:
        return {"severity": self.severity, "service": SERVICE_LABEL}

    def runbook_url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}/{self.runbook_slug}.md"

    def threshold(self, name: str) -> Threshold:
        for item in self.thresholds:
            if item.name == name:
                return item
        raise KeyError(f"alert {self.name} has no threshold {name!r}")


# --- recording rules ------------------------------------------------------------------------
# Aggregations use `without (dp, tp, pp)` so every target label (job, instance, and on Kubernetes
# namespace/pod/service) survives and series of one target match one-to-one.

# Family names: the record name is the family followed by the window (`...:mean5m`).
ACCEPT_LENGTH_MEAN = f"instance:{DECODE_ACCEPT_LENGTH.name}:mean"
THROUGHPUT_MEAN = f"instance_concurrency:{DECODE_GEN_THROUGHPUT.name}:mean"
SPEEDUP_RATIO = f"instance_concurrency:{PREFIX}decode_gen_throughput_over_baseline:ratio"
DECODE_LINE_RATE = f"instance:{LOG_LINES_PARSED.name}_decode:rate"
REJECTED_RATIO = f"instance:{LOG_LINES_REJECTED.name}:ratio_rate"
GRAPH_OFF_RATIO = f"instance_concurrency:{DECODE_GRAPH_LINES.name}_off:ratio_rate"

# --- SGLang's native series (--enable-metrics) ------------------------------------------------
# Names and labels as upstream's observability/metrics_collector.py declares and sets them
# (tests/contract checks every name and label against 0.5.21 and 0.5.23). Aggregations drop the
# per-process labels (ranks, priority, is_streaming, mode) and keep the target's own labels and
# model_name/engine_type, which are one value per server.
_SGLANG_RANKS = "tp_rank, pp_rank, moe_ep_rank, dp_rank, priority"
NATIVE_ACCEPT_LENGTH = "instance:sglang_spec_accept_length:ratio_rate"
NATIVE_ACCEPT_LENGTH_MAX = "instance:sglang_spec_accept_length_max:ratio_rate"
NATIVE_VERIFY_PER_REQUEST = "instance:sglang_spec_verify_calls_per_request:ratio_rate"
# The accept-length floors read the native value only where the requests finished in the window
# averaged at least this many verify passes. Below it the last pass of each request weighs too
# much: its drafts past the reply's end are trimmed, so a reply that ends in its first pass
# counts one token for that pass whatever the drafter accepted (two-token replies read 1.00 at
# any acceptance). With at least 4 passes a request, a native value under 1.05 needs the
# drafter to accept under 1.07 tokens a pass on the passes before each reply's last (every
# pass adds at least one token to the reply). The decode lines, exact for every reply length,
# are read otherwise.
MIN_VERIFY_PER_REQUEST = 4
NATIVE_GRAPH_RATIO = "instance:sglang_cuda_graph_passes_decode:ratio_rate"
TTFT_P99 = "instance:sglang_time_to_first_token_seconds:p99_rate"
ITL_P99 = "instance:sglang_inter_token_latency_seconds:p99_rate"


def _native_graph_passes(modes: str) -> str:
    return (
        f"sum without ({_SGLANG_RANKS}, mode) "
        f'(rate({SGLANG_CUDA_GRAPH_PASSES}{{mode=~"{modes}"}}[[[window]]]))'
    )


def _p99(histogram: str, per_request: str) -> str:
    # `and count > 0`: a window without observations gives no series, not NaN.
    return (
        "histogram_quantile(0.99,\n"
        f"  sum without ({per_request}) (rate({histogram}_bucket[[[window]]]))\n"
        ")\n"
        "and\n"
        f"(sum without ({per_request}) (rate({histogram}_count[[[window]]])) > 0)"
    )

RECORDING_RULES: tuple[RecordingRule, ...] = (
    RecordingRule(
        family=ACCEPT_LENGTH_MEAN,
        # `> 0` on the denominator: no decode line in the window gives no series, not NaN.
        expr=(
            f"sum without (dp, tp, pp) (rate({DECODE_ACCEPT_LENGTH.sum}[[[window]]]))\n"
            "/\n"
            "(sum without (dp, tp, pp) "
            f"(rate({DECODE_ACCEPT_LENGTH.count}[[[window]]])) > 0)"
        ),
        help="Mean accept length of the decode windows logged in the rate window, over all "
        "printing ranks; absent while no speculative decode line was logged.",
    ),
    RecordingRule(
        family=THROUGHPUT_MEAN,
        # Each DP rank prints its own share of the decode rate: mean per rank, then sum the ranks.
        expr=(
            "sum without (dp) (\n"
            "  sum without (tp, pp) "
            f"(rate({DECODE_GEN_THROUGHPUT.sum}[[[window]]]))\n"
            "  /\n"
            "  (sum without (tp, pp) "
            f"(rate({DECODE_GEN_THROUGHPUT.count}[[[window]]])) > 0)\n"
            ")"
        ),
        help="Mean decode throughput (tokens/s, whole server: DP ranks summed) of the windows "
        "logged in the rate window, per concurrency bucket; absent while idle.",
    ),
    RecordingRule(
        family=SPEEDUP_RATIO,
        expr=(
            f"[[rule:{THROUGHPUT_MEAN}]]\n"
            "/ on (job, instance, concurrency)\n"
            "max by (job, instance, concurrency) "
            f"({BASELINE_GEN_THROUGHPUT.name} > 0)"
        ),
        help="Speculative decode throughput divided by the non-speculative baseline measured at "
        "the same concurrency bucket; only buckets that have a baseline and recent decode lines.",
    ),
    RecordingRule(
        family=DECODE_LINE_RATE,
        expr=(
            "sum without (kind, dp, tp, pp) "
            f'(rate({LOG_LINES_PARSED.total}{{kind="decode"}}[[[window]]]))'
        ),
        help="Decode stats lines parsed per second over the rate window: above zero means the "
        "server is decoding.",
    ),
    RecordingRule(
        family=REJECTED_RATIO,
        # `or R * 0`: when every stats line is rejected the parsed counter may not exist at all,
        # and that is exactly the case the ratio must show as 1.
        expr=(
            "sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]]))\n"
            "/\n"
            "(\n"
            "  sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]]))\n"
            "  + (\n"
            "    sum without (kind, dp, tp, pp) "
            f"(rate({LOG_LINES_PARSED.total}[[[window]]]))\n"
            "    or\n"
            "    sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]])) * 0\n"
            "  )\n"
            "  > 0\n"
            ")"
        ),
        help="Share of stats lines (decode and prefill) the exporter could not parse over the "
        "rate window; absent while no line was rejected.",
    ),
)


# The labels of SGLang's tokenizer counters that are per request, summed away for a server's
# figure: the request class too (server.request_class_label; the per-class records below keep it).
_PER_REQUEST = f"is_streaming, priority, {RULES_CLASS_LABEL}"
_PER_REQUEST_UNSTREAMED = f"priority, {RULES_CLASS_LABEL}"


def _per_server(counter: str, per_request: str = _PER_REQUEST) -> str:
    return f"sum without ({per_request}) (rate({counter}[[[window]]]))"


_REQUESTS = _per_server(SGLANG_REQUESTS)
_VERIFY_CALLS = _per_server(SGLANG_SPEC_VERIFY_CALLS, _PER_REQUEST_UNSTREAMED)
# Every TP rank (and PP stage) of a DP group retracts the same requests and counts them under
# its own tp_rank: one rank's count per DP group, the DP groups summed.
_RETRACTIONS = (
    "sum without (dp_rank) (\n"
    "  max without (tp_rank, pp_rank, moe_ep_rank, priority) "
    f"(rate({SGLANG_RETRACTED_REQUESTS}[[[window]]]))\n"
    ")"
)

RECORDING_RULES += (
    RecordingRule(
        family=NATIVE_ACCEPT_LENGTH,
        # The tokens the verify passes put into replies, per verify pass, of the requests
        # finished in the window. Upstream's per-request spec_accept_length (tokenizer_manager:
        # completion_tokens / spec_verify_ct) counts every completion token, and a request's
        # first token comes from its prefill (batch_result_processor's prefill path appends it;
        # req.spec_verify_ct counts decode verify passes only), as does one more token each
        # time a retracted request is prefilled again: 8-token replies with every draft
        # rejected read 8 / 7 = 1.14 there, above the 1.05 floor. Each finished request steps
        # num_requests_total once (observe_one_finished_request, beside its tokens), each
        # retraction num_retracted_requests_total once, so subtracting both leaves exactly the
        # verify passes' tokens. The decode lines' accept len counts the same (accepted tokens
        # / verify passes); only the drafts a request's last pass accepted past the reply's end
        # (max_tokens or a stop), which SGLang trims from the reply, are in the log's count and
        # not here: exact whenever drafts are rejected, at most draft tokens - 1 a request low
        # otherwise (NATIVE_ACCEPT_LENGTH_MAX).
        expr=(
            "(\n"
            f"  {_per_server(SGLANG_GENERATION_TOKENS)}\n"
            f"  - {_REQUESTS}\n"
            "  - (\n"
            f"    {_RETRACTIONS.replace(chr(10), chr(10) + '    ')}\n"
            "    or\n"
            f"    {_REQUESTS} * 0\n"
            "  )\n"
            ")\n"
            "/\n"
            f"({_VERIFY_CALLS} > 0)"
        ),
        help="Accept length from SGLang's own counters: the tokens the verify passes added to "
        "the replies of the requests finished in the window (generated tokens less each "
        "request's prefill token and each retraction's re-prefill token) over their verify "
        "calls, bonus token included as in the log's `accept len`; exact whenever drafts are "
        "rejected, otherwise short of the log by the drafts trimmed past each reply's end; "
        "absent without --enable-metrics, without speculation, or while no request finished.",
    ),
    RecordingRule(
        family=NATIVE_ACCEPT_LENGTH_MAX,
        # `or` the lower bound, and clamp_min: no draft-token gauge yet, or its 0 before
        # SGLang's first decode stats window, allows no trimmed drafts.
        expr=(
            "(\n"
            f"  [[rule:{NATIVE_ACCEPT_LENGTH}]]\n"
            f"  + {_REQUESTS}\n"
            f"  * clamp_min(max without ({_SGLANG_RANKS}) "
            f"(max_over_time({SGLANG_SPEC_DRAFT_TOKENS}[[[window]]])) - 1, 0)\n"
            f"  / {_VERIFY_CALLS}\n"
            ")\n"
            f"or\n[[rule:{NATIVE_ACCEPT_LENGTH}]]"
        ),
        help="The most the decode lines' accept length can be given SGLang's counters: the "
        "native accept length plus, for each finished request, the drafts its last verify "
        "pass may have accepted past the reply's end (at most draft tokens - 1), per verify "
        "call.",
    ),
    RecordingRule(
        family=NATIVE_VERIFY_PER_REQUEST,
        expr=f"{_VERIFY_CALLS}\n/\n({_REQUESTS} > 0)",
        help="Verify calls per request finished in the window: how many passes the native "
        "accept length averages over per reply; absent while no request finished.",
    ),
    RecordingRule(
        family=NATIVE_GRAPH_RATIO,
        # `or ... * 0`: with no graph pass at all the decode_cuda_graph series never exists, and
        # that is exactly the case the share must show as 0.
        expr=(
            "(\n"
            f"  {_native_graph_passes('decode_cuda_graph')}\n"
            "  or\n"
            f"  {_native_graph_passes('decode_none')} * 0\n"
            ")\n"
            "/\n"
            f"({_native_graph_passes('decode_cuda_graph|decode_none')} > 0)"
        ),
        help="Share of decode forward passes that ran a CUDA graph (SGLang's "
        "cuda_graph_passes_total, all TP ranks); 1 = every pass; absent while not decoding.",
    ),
    RecordingRule(
        family=GRAPH_OFF_RATIO,
        expr=(
            f"sum without (dp, tp, pp, le) (rate({DECODE_GRAPH_LINES.bucket}{{le=\"0.0\"}}"
            "[[[window]]]))\n"
            "/\n"
            f"(sum without (dp, tp, pp) (rate({DECODE_GRAPH_LINES.count}[[[window]]])) > 0)"
        ),
        help="Share of the decode lines that ran off the graphs (`cuda graph: False`), per "
        "graph kind and concurrency bucket of #running-req, all ranks; absent while the bucket "
        "logs no decode line.",
    ),
    RecordingRule(
        family=TTFT_P99,
        expr=_p99(SGLANG_TIME_TO_FIRST_TOKEN, _PER_REQUEST),
        help="p99 time to first token (s) of the requests in the window, streaming and not, "
        "from SGLang's histogram; absent while no first token was produced.",
    ),
    RecordingRule(
        family=ITL_P99,
        expr=_p99(SGLANG_INTER_TOKEN_LATENCY, _PER_REQUEST_UNSTREAMED),
        help="p99 inter-token latency (s) of the tokens in the window (upstream observes each "
        "output's interval divided by its new tokens), from SGLang's histogram; absent while "
        "no token was produced after a first.",
    ),
)

_WHILE_DECODING = f"and on (job, instance)\n([[rule:{DECODE_LINE_RATE}]] > 0)"

_MATCH_ON = Threshold(
    "match_on", "", "labels",
    "Labels shared by the exporter's and SGLang's series (comma-separated, e.g. "
    "'namespace, pod' for a sidecar); empty when one server reports to Prometheus.",
)


def _native_or_log(native: str, log: str) -> str:
    """Native when present, log-derived otherwise, never both.

    Where both exist the value is the native one (the worst server of the match_on group) under
    the log series' labels, so the alert keeps one identity whichever source speaks (no resolve
    and re-fire when native data pauses for a window) and the Alertmanager inhibitions, equal on
    the exporter's job and instance, still apply. A log series without native data stays as it
    is; native series are added only where no log series shares their match_on labels (the log
    is lost).
    """
    log = log.replace("\n", "\n  ")
    return (
        "(\n"
        f"  {log} * 0\n"
        "  + on ([[match_on]]) group_left ()\n"
        f"  min by ([[match_on]]) ({native.replace(chr(10), chr(10) + '  ')})\n"
        ")\n"
        f"or\n{log.replace(chr(10) + '  ', chr(10))}\n"
        f"or on ([[match_on]])\n{native}"
    )


# The native accept length where the window's replies took enough verify passes for it to
# speak for the drafter (MIN_VERIFY_PER_REQUEST), the decode lines' otherwise.
_NATIVE_ACCEPT_LENGTH_DECISIVE = (
    "(\n"
    f"  [[rule:{NATIVE_ACCEPT_LENGTH}]]\n"
    "  and\n"
    f"  ([[rule:{NATIVE_VERIFY_PER_REQUEST}]] >= {MIN_VERIFY_PER_REQUEST})\n"
    ")"
)
_ACCEPT_LENGTH_EITHER = _native_or_log(
    _NATIVE_ACCEPT_LENGTH_DECISIVE, f"[[rule:{ACCEPT_LENGTH_MEAN}]]"
)
# Adaptive speculation (--speculative-adaptive) may run 0 steps: one draft token per pass and an
# accept length of 1.00 by SGLang's choice, not a broken drafter. A window in which the server's
# draft-token count (the exporter follows its switch lines) fell below 2 says nothing about
# the drafter, so the accept-length floors skip it.
_ACCEPT_LENGTH_WHILE_DRAFTING = (
    "(\n  " + _ACCEPT_LENGTH_EITHER.replace("\n", "\n  ") + "\n)\n"
    "unless on ([[match_on]])\n"
    f"(min by ([[match_on]]) (min_over_time({SPECULATIVE_DRAFT_TOKENS.name}[[[window]]])) < 2)"
)

# A block drafter in cap-accept verify mode (DFLASH, DSPARK: SGLANG_RAGGED_VERIFY_MODE=cap-accept)
# commits only what the verify cap let through: SGLang's `accept len` (and its native counters)
# are the committed tokens, its `block accept len` what the drafter earned before the cap
# (dspark_verify.py: commit_lens + cap_trim_lens). A low accept length with a block accept
# length at or above the threshold is the cap's doing, not rejected drafts: the drafts-rejected
# alert leaves it to the throughput alerts. Other methods print no block accept length.
# Read from the exporter's gauge of the decode lines or SGLang's own, whichever speaks.
_CAPPED_NOT_REJECTED = (
    "unless on ([[match_on]])\n"
    "(\n"
    f"  max by ([[match_on]]) (avg_over_time({DECODE_LAST_BLOCK_ACCEPT_LENGTH.name}[[[window]]]))"
    " >= [[max_accept_length]]\n"
    "  or\n"
    f"  max by ([[match_on]]) (avg_over_time({SGLANG_SPEC_BLOCK_ACCEPT_LENGTH}[[[window]]]))"
    " >= [[max_accept_length]]\n"
    ")"
)

ALERTS: tuple[Alert, ...] = (
    Alert(
        name="SpecDecodeBelowBaseline",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=f"[[rule:{SPEEDUP_RATIO}]]",
        comparison="<",
        compare_to=Threshold(
            "tolerance", 1.0, "number",
            "Fraction of the baseline below which the alert fires (0.9 = fire under 90%).",
            minimum=0.0, maximum=10.0,
        ),
        summary="Speculative decoding is slower than the non-speculative baseline",
        description=(
            "On {{ $labels.instance }} at concurrency bucket {{ $labels.concurrency }}, "
            "speculative decode throughput ([[window]] window mean) is "
            "{{ $value | humanizePercentage }} of the baseline measured without speculation at "
            "the same bucket (alert below "
            "[[tolerance]] times the baseline). Speculation is costing throughput instead of "
            "adding it."
        ),
        meaning="Window-mean decode throughput is below the measured non-speculative baseline "
        "at the same concurrency bucket. Never fires while idle, nor for a bucket that has no "
        "baseline.",
    ),
    Alert(
        name="SpecDecodeDraftsRejected",
        severity="critical",
        for_="2m",
        window="2m",
        value_expr=f"{_ACCEPT_LENGTH_WHILE_DRAFTING}\n{_CAPPED_NOT_REJECTED}",
        comparison="<",
        compare_to=Threshold(
            "max_accept_length", 1.05, "number",
            "Mean accept length below which drafts count as rejected.",
            minimum=1.0, maximum=2.0,
        ),
        summary="The target rejects almost every drafted token (accept length near 1.0)",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }} (alert below [[max_accept_length]]; 1.000 means no '
            "draft token is accepted). This is the signature of --speculative-algorithm EAGLE "
            "with an EAGLE-3 drafter (it must be EAGLE3), or of a drafter that does not match "
            "the target."
        ),
        meaning="Accept length at or near 1.0 while decoding: every draft is rejected (EAGLE "
        "instead of EAGLE3, or a broken/mismatched drafter). Speculation only costs time. "
        "From SGLang's counters when it exports them, else from the decode lines. Silent for "
        "a window in which adaptive speculation ran 0 steps (draft tokens 1), and for a block "
        "drafter (DFLASH, DSPARK) whose block accept length, what it drafted right before the "
        "verify cap trimmed it, is at or above the threshold: the cap, not the drafter, kept "
        "the committed tokens low.",
        query_thresholds=(_MATCH_ON,),
    ),
    Alert(
        name="SpecDecodeAcceptLengthLow",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=_ACCEPT_LENGTH_WHILE_DRAFTING,
        comparison="<",
        compare_to=Threshold(
            "floor", 1.5, "number",
            "Mean accept length (bonus token included) below which speculation is assumed "
            "not to pay off.",
            minimum=1.0, maximum=64.0,
        ),
        summary="Speculative accept length is below the break-even floor",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }}, below the configured floor of [[floor]] tokens per '
            "verify pass; the drafter's overhead is likely no longer paid back."
        ),
        meaning="Accept length below a configurable floor (the break-even point of this "
        "deployment) while decoding; from SGLang's counters when it exports them, else from "
        "the decode lines. Silent for a window in which adaptive speculation ran 0 steps.",
        query_thresholds=(_MATCH_ON,),
    ),
    Alert(
        name="SpecDecodeGraphDisabled",
        severity="warning",
        for_="5m",
        window="5m",
        value_expr=_native_or_log(
            f"[[rule:{NATIVE_GRAPH_RATIO}]]",
            "(\n"
            f"  min without (dp, tp, pp, graph) ({DECODE_GRAPH_ENABLED.name})\n"
            f"  {_WHILE_DECODING.replace(chr(10), chr(10) + '  ')}\n"
            ")",
        ),
        comparison="<",
        compare_to=1.0,
        summary="Decoding runs without CUDA graphs",
        description=(
            "On {{ $labels.instance }} only {{ $value | humanizePercentage }} of the decode "
            "passes over [[window]] ran a CUDA graph (SGLang's cuda_graph_passes_total; without "
            "native metrics: the decode lines report cuda graph: False) while the server is "
            "decoding. Without CUDA graphs decode ran about 25% slower in the field notes (56.7 vs "
            "74.9 tok/s)."
        ),
        meaning="Decode passes ran without a CUDA graph while decoding: from SGLang's "
        "`cuda_graph_passes_total` when it exports it (share of graph passes below 1), else a "
        "printing rank's decode line says `cuda graph: False` (or cpu/npu/musa graph).",
        query_thresholds=(_MATCH_ON,),
    ),
    Alert(
        name="SpecDecodeGraphMisses",
        severity="warning",
        for_="10m",
        window="10m",
        # Only where another bucket of the server ran on the graphs (its share below 1): graphs
        # turned off altogether stay SpecDecodeGraphDisabled's.
        value_expr=(
            f"[[rule:{GRAPH_OFF_RATIO}]]\n"
            "and ignoring (concurrency)\n"
            f"(min without (concurrency) ([[rule:{GRAPH_OFF_RATIO}]]) < 1)"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_share", 0.1, "number",
            "Share of a concurrency bucket's decode lines off the graphs above which the alert "
            "fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="Large decode batches run off the CUDA graphs",
        description=(
            "On {{ $labels.instance }} {{ $value | humanizePercentage }} of the decode lines "
            "with up to {{ $labels.concurrency }} running requests (inf: above 256) ran off the "
            "{{ $labels.graph }} graphs over [[window]] (alert above [[max_share]]) while "
            "smaller batches ran on them: these batches are above the largest one SGLang "
            "captured, and decode eagerly (sglang#33900). Raise server.cuda_graph_max_bs to the "
            "running-request cap, or lower server.max_running_requests to the largest captured "
            "batch; specserve check names both."
        ),
        meaning="The share of decode lines saying `cuda graph: False` in one concurrency bucket "
        "of `#running-req` stays above the threshold while other decode lines of the server "
        "ran on the graphs: the running-request cap is above the largest captured decode "
        "batch, a load-dependent slowdown `specserve check` refuses in a profile.",
    ),
    Alert(
        name="SpecServeNoDecodeLines",
        severity="critical",
        for_="2m",
        value_expr=(
            "(time() - max without (dp, tp, pp) "
            f"({DECODE_LAST_LINE_TIMESTAMP.name}))\n"
            "and on ([[match_on]])\n"
            "(sum by ([[match_on]]) ([[running_metric]]) > 0)"
        ),
        comparison=">",
        compare_to=Threshold(
            "stale_after_seconds", 180.0, "number",
            "Seconds without a decode line before the alert condition holds.",
            minimum=1.0,
        ),
        summary="No decode line read while SGLang reports running requests",
        description=(
            "The exporter on {{ $labels.instance }} has read no decode line for "
            "{{ $value | humanizeDuration }} while [[running_metric]] reports running requests. "
            "Either the server is stuck or the exporter no longer sees its log."
        ),
        meaning="SGLang's own metrics say requests are running but no decode line was read "
        "for longer than the threshold: a stuck server or a log the exporter no longer sees. "
        "Needs SGLang's --enable-metrics (the log alone cannot tell idle from stuck).",
        query_thresholds=(
            Threshold(
                "running_metric", SGLANG_RUNNING_REQUESTS, "metric",
                "Metric that counts running requests independently of the log; SGLang "
                "publishes 0 as soon as its scheduler is idle, then every 30 s while idle.",
            ),
            Threshold(
                "match_on", "", "labels",
                "Labels shared by the exporter's and SGLang's series (comma-separated, e.g. "
                "'namespace, pod' for a sidecar); empty when one server reports to Prometheus.",
            ),
        ),
    ),
    Alert(
        name="SpecServeLogSourceDown",
        severity="warning",
        for_="2m",
        value_expr=f"min without (dp, tp, pp) ({SOURCE_UP.name})",
        comparison="<",
        compare_to=1.0,
        summary="The exporter cannot read the SGLang log",
        description=(
            "Log source {{ $labels.source }} of the exporter on {{ $labels.instance }} is "
            "down: no decode metrics are produced, so every other specserve alert is blind."
        ),
        meaning=f"`{SOURCE_UP.name}` is 0: the log file or container stream the exporter "
        "reads is missing or unreadable.",
    ),
    Alert(
        name="SpecServeExporterDown",
        severity="warning",
        for_="5m",
        value_expr=f'{UP}{{job=~"[[job]]"}} or on () vector(0)',
        comparison="<",
        compare_to=1.0,
        summary="The specserve exporter is not scraped",
        description=(
            "Prometheus target '{{ $labels.instance }}' of job [[job]] is down or absent "
            "(an empty target means no target of that job exists). Decode metrics and every "
            "other specserve alert are blind."
        ),
        meaning="The exporter's scrape target is down, or no target of the job exists.",
        query_thresholds=(
            Threshold(
                "job", "specserve-exporter", "regex",
                "Regular expression for the exporter's Prometheus job label.",
            ),
        ),
    ),
    Alert(
        name="SpecServeLogLinesRejected",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=f"[[rule:{REJECTED_RATIO}]]",
        comparison=">",
        compare_to=Threshold(
            "max_ratio", 0.01, "number",
            "Share of stats lines rejected above which the alert fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="The exporter rejects SGLang stats lines",
        description=(
            "{{ $value | humanizePercentage }} of the stats lines read on "
            "{{ $labels.instance }} over [[window]] could not be parsed (alert above "
            "[[max_ratio]]). The SGLang log format has probably changed."
        ),
        meaning="A rising share of decode/prefill stats lines fails to parse: a new SGLang "
        "log format, or a custom logging config.",
    ),
    Alert(
        name="SpecServeLogFileGap",
        severity="warning",
        for_="1m",
        # A fixed range, not a window: windows belong to the recording-rule families. 15m keeps
        # the alert up long enough after the one counter step to be seen and routed.
        value_expr=f"sum without (dp, tp, pp) (increase({LOG_FILE_GAPS.total}[15m]))",
        comparison=">",
        compare_to=0.0,
        summary="The SGLang log file missed output",
        description=(
            "specserve-launch on {{ $labels.instance }} could not write the SGLang log file "
            "for a while ({{ $value }} gaps over 15m: full disk, read-only, directory "
            "gone): the exporter never saw that output; `docker logs` has it."
        ),
        meaning="The launcher wrote a `log file unavailable from T1 to T2, N bytes not "
        "written` marker when the file came back: metrics from that span are missing.",
    ),
    Alert(
        name="SpecDecodeQueueBacklog",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=(
            f"sum without (dp) (max without (tp, pp) ({DECODE_QUEUED_REQUESTS.name}))\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_queued", 10.0, "number",
            "Queued requests above which the alert fires.",
            minimum=0.0,
        ),
        summary="Requests are queueing",
        description=(
            "{{ $value }} requests are waiting in the queue on {{ $labels.instance }} "
            "(alert above [[max_queued]]): the server is at its batch or KV-cache limit."
        ),
        meaning="Queued requests (`#queue-req`, summed over DP ranks) stay above the "
        "threshold while decoding.",
    ),
    Alert(
        name="SpecDecodeKVCacheNearFull",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=(
            f"max without (dp, tp, pp) ({DECODE_TOKEN_USAGE.name})\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_ratio", 0.95, "number",
            "Token usage ratio above which the alert fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="The KV cache is nearly full",
        description=(
            "KV cache token usage on {{ $labels.instance }} is "
            "{{ $value | humanizePercentage }} (alert above [[max_ratio]]); new requests "
            "queue and running ones may be retracted."
        ),
        meaning="KV-cache token usage of the fullest DP rank stays above the threshold while "
        "decoding.",
    ),
)

# --- native speculative metrics and latency SLOs (issue 18 items 3 and 5) ---------------------
# The two fixed p99 thresholds are opt-in only: the SLO burn-rate alerts below replace them.
# The log-derived mean per match_on group, or 0 where the exporter read no line at all in the
# window while SGLang reports native data (the log is lost); absent where lines were read but
# none was a decode line yet (a server just started, a few short requests: SGLang prints one
# decode line per --decode-log-interval passes), which leaves nothing to compare.
_LOG_OR_NOTHING_READ = (
    "(\n"
    f"  max by ([[match_on]]) ([[rule:{ACCEPT_LENGTH_MEAN}]])\n"
    "  or on ([[match_on]])\n"
    "  (\n"
    f"    max by ([[match_on]]) ([[rule:{NATIVE_ACCEPT_LENGTH}]]) * 0\n"
    "    unless on ([[match_on]])\n"
    f"    (sum by ([[match_on]]) (rate({LOG_LINES_READ.total}[[[window]]])) > 0)\n"
    "  )\n"
    ")"
).replace("\n", "\n    ")


def _log_outside(native: str, clamp: str) -> str:
    """`clamp(native - log, 0)` under the native series' labels."""
    return (
        f"  {clamp}(\n"
        f"    [[rule:{native}]]\n"
        "    - on ([[match_on]]) group_left ()\n"
        f"    {_LOG_OR_NOTHING_READ},\n"
        "    0\n"
        "  )"
    )


ALERTS += (
    Alert(
        name="SpecServeAcceptLengthMismatch",
        severity="warning",
        for_="10m",
        window="5m",
        # How far the log-derived mean lies outside the range SGLang's counters allow, relative
        # to the native value: below the native accept length, or above its most
        # (NATIVE_ACCEPT_LENGTH_MAX: every draft trimmed past a reply's end accepted, which
        # only the log counts). At most one of the two terms is nonzero. A band, not
        # |native - log|: 8-token replies at 3.00 a pass read 2.33 natively (the last pass's 3
        # tokens trimmed to 1), 22% from the log's exact 3.00. A lost log reads as 0: 100%.
        value_expr=(
            "(\n"
            f"{_log_outside(NATIVE_ACCEPT_LENGTH, 'clamp_min')}\n"
            f"  - {_log_outside(NATIVE_ACCEPT_LENGTH_MAX, 'clamp_max').lstrip()}\n"
            ")\n"
            f"/ [[rule:{NATIVE_ACCEPT_LENGTH}]]"
        ),
        comparison=">",
        compare_to=Threshold(
            "tolerance", 0.15, "number",
            "How far (0.15 = 15% of SGLang's native accept length) the exporter's log-derived "
            "accept length may lie outside the range SGLang's counters allow before the alert "
            "fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="SGLang's native accept length and the log-derived one disagree",
        description=(
            "On {{ $labels.instance }} the accept length from SGLang's own counters "
            "(verify-pass tokens / verify calls, [[window]]) and the one the exporter reads from "
            "the decode lines differ by {{ $value | humanizePercentage }} beyond what the drafts "
            "SGLang trims past a reply's end explain (alert above [[tolerance]]; 100% means "
            "the exporter read no log line at all while SGLang served). "
            "The exporter lost the log, or the log format changed: the log-derived alerts are "
            "blind or wrong."
        ),
        meaning="The log-derived mean lies outside the range SGLang's counters allow by more "
        "than the tolerance while requests finish: at least the native accept length "
        "(`generation_tokens_total` less one prefill token per `num_requests_total` and per "
        "`num_retracted_requests_total`, over `spec_verify_calls_total`), at most that plus "
        "`spec_num_draft_tokens` - 1 per request (the drafts trimmed past a reply's end). The "
        "exporter lost the log (no line read at all: 100%) or misreads a changed format. A "
        "window with lines but no decode line is not compared. Needs --enable-metrics; silent "
        "without it.",
        query_thresholds=(_MATCH_ON,),
    ),
    Alert(
        name="SpecServeTimeToFirstTokenHigh",
        severity="warning",
        enabled_by_default=False,
        for_="10m",
        window="5m",
        value_expr=f"[[rule:{TTFT_P99}]]",
        comparison=">",
        compare_to=Threshold(
            "max_seconds", 4.0, "number",
            "p99 time to first token (seconds) above which the alert fires; exact at SGLang's "
            "bucket bounds (..., 1, 2, 4, 6, 8, 10, 20, ...), interpolated between them.",
            minimum=0.0,
        ),
        summary="p99 time to first token is above the SLO",
        description=(
            "p99 time to first token on {{ $labels.instance }} over [[window]] is "
            "{{ $value | humanizeDuration }} (SLO [[max_seconds]] s). Prefill is queueing: "
            "too many running requests, long prompts, or speculation's extra memory leaving "
            "less room for the batch."
        ),
        meaning="p99 TTFT from SGLang's `time_to_first_token_seconds` histogram (streaming and "
        "non-streaming together) above the user's SLO while requests arrive. Needs "
        "--enable-metrics.",
    ),
    Alert(
        name="SpecServeInterTokenLatencyHigh",
        severity="warning",
        enabled_by_default=False,
        for_="10m",
        window="5m",
        value_expr=f"[[rule:{ITL_P99}]]",
        comparison=">",
        compare_to=Threshold(
            "max_seconds", 0.1, "number",
            "p99 inter-token latency (seconds) above which the alert fires; exact at SGLang's "
            "bucket bounds (..., 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, ...), interpolated between "
            "them.",
            minimum=0.0,
        ),
        summary="p99 inter-token latency is above the SLO",
        description=(
            "p99 inter-token latency on {{ $labels.instance }} over [[window]] is "
            "{{ $value | humanizeDuration }} (SLO [[max_seconds]] s). Decode steps are slow: "
            "a large batch, a verify pass that costs more than the drafts it accepts, or "
            "prefill interleaving with decode."
        ),
        meaning="p99 ITL from SGLang's `inter_token_latency_seconds` histogram above the "
        "user's SLO while decoding. Needs --enable-metrics.",
    ),
)

# --- fleet and router (issue 19) ------------------------------------------------------------
# Replicas are told apart by the target's own labels (instance; pod on Kubernetes); a fleet is
# everything else they share (job, and namespace/service on Kubernetes), so fleet aggregations
# drop exactly `instance, pod`. The router's series come from its own /metrics
# (specserve.monitoring.metrics.ROUTER_METRICS), scraped as the router job.
_REPLICA = "instance, pod"
REPLICA_THROUGHPUT = f"instance:{DECODE_GEN_THROUGHPUT.name}:mean"
FLEET_THROUGHPUT = f"fleet:{DECODE_GEN_THROUGHPUT.name}:sum"
FLEET_SLOWEST_THROUGHPUT = f"fleet:{DECODE_GEN_THROUGHPUT.name}:min"
REPLICA_THROUGHPUT_SHARE = f"instance:{DECODE_GEN_THROUGHPUT.name}_over_fleet_mean:ratio"

RECORDING_RULES += (
    RecordingRule(
        family=REPLICA_THROUGHPUT,
        # Every concurrency bucket at once: replicas behind one router see about the same mix,
        # so their whole-window means compare where per-bucket ones may not exist on both.
        expr=(
            "sum without (dp) (\n"
            "  sum without (tp, pp, concurrency) "
            f"(rate({DECODE_GEN_THROUGHPUT.sum}[[[window]]]))\n"
            "  /\n"
            "  (sum without (tp, pp, concurrency) "
            f"(rate({DECODE_GEN_THROUGHPUT.count}[[[window]]])) > 0)\n"
            ")"
        ),
        help="Mean decode throughput (tokens/s, DP ranks summed) of one replica over the "
        "rate window, all concurrency buckets together; absent while the replica is idle.",
    ),
    RecordingRule(
        family=FLEET_THROUGHPUT,
        expr=f"sum without ({_REPLICA}) ([[rule:{REPLICA_THROUGHPUT}]])",
        help="Decode throughput of the whole fleet (the replicas' means summed) over the rate "
        "window; replicas that were idle add nothing.",
    ),
    RecordingRule(
        family=FLEET_SLOWEST_THROUGHPUT,
        expr=f"min without ({_REPLICA}) ([[rule:{REPLICA_THROUGHPUT}]])",
        help="Decode throughput of the fleet's slowest decoding replica over the rate window.",
    ),
    RecordingRule(
        family=REPLICA_THROUGHPUT_SHARE,
        expr=(
            f"[[rule:{REPLICA_THROUGHPUT}]]\n"
            # `group_left ()`: a bare group_left would read the parenthesis as its label list.
            f"/ ignoring ({_REPLICA}) group_left ()\n"
            f"(avg without ({_REPLICA}) ([[rule:{REPLICA_THROUGHPUT}]]) > 0)"
        ),
        help="One replica's decode throughput over the mean of the fleet's decoding replicas "
        "(1 = average; always 1 with one replica decoding).",
    ),
)

# The job the Ansible monitoring role scrapes the router as; the chart's ServiceMonitor sets it.
ROUTER_JOB = "specserve-router"
_ROUTER_JOB = Threshold(
    "job", ROUTER_JOB, "regex",
    "Regular expression for the router's Prometheus job label.",
)

ALERTS += (
    Alert(
        name="SpecServeWorkerOutOfRotation",
        severity="warning",
        # The threshold of "too long": longer than a rolling deploy keeps a node out (its
        # drain, restart, weights load and gate); a removed worker reads -1 for 6 h after it
        # left the router's list (metrics.ROUTER_RETIRED_LOOKBACK).
        for_="30m",
        value_expr=router_worker_state('job=~"[[job]]"'),
        comparison="<",
        compare_to=1.0,
        summary="A worker has been out of the router's rotation too long",
        description=(
            "Worker {{ $labels.worker }} of the router {{ $labels.instance }} gets no traffic "
            "(its rotation state is {{ $value }}: 0 means failing health checks, draining or "
            "an open circuit, -1 removed from the router) for longer than this alert's `for`. "
            "The fleet serves with one replica less."
        ),
        meaning="The router reports a worker unhealthy, draining, or behind an open circuit "
        "breaker, or no longer lists a worker it listed within 6 h, for longer than `for` "
        "(the out-of-rotation threshold): a rollout that stopped with the node out, or a "
        "replica that keeps failing its health checks.",
        query_thresholds=(_ROUTER_JOB,),
    ),
    Alert(
        name="SpecServeRouterDown",
        severity="critical",
        for_="5m",
        # No `or vector(0)`: a deployment without a router has no target and no alert.
        value_expr=f'{UP}{{job=~"[[job]]"}}',
        comparison="<",
        compare_to=1.0,
        summary="The router is not scraped",
        description=(
            "Prometheus target '{{ $labels.instance }}' of the router job [[job]] is down: "
            "clients of the fleet may get no answer, and the workers' rotation is not watched."
        ),
        meaning="The router's metrics target is down (process gone, port closed, or the "
        "metrics listener unreachable).",
        query_thresholds=(_ROUTER_JOB,),
    ),
    Alert(
        name="SpecServeFleetReplicaSlow",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=f"[[rule:{REPLICA_THROUGHPUT_SHARE}]]",
        comparison="<",
        compare_to=Threshold(
            "min_share", 0.7, "number",
            "Share of the fleet's mean replica throughput below which a replica is slow.",
            minimum=0.0, maximum=1.0,
        ),
        summary="One replica decodes much slower than the rest of the fleet",
        description=(
            "Replica {{ $labels.instance }} decodes at {{ $value | humanizePercentage }} of "
            "the mean throughput of the fleet's decoding replicas over [[window]] (alert "
            "below [[min_share]]): behind one router it gets the same traffic, so the "
            "difference is the replica."
        ),
        meaning="A decoding replica's window-mean throughput is below a share of the mean of "
        "all decoding replicas of its fleet (same job; same namespace/service on Kubernetes). "
        "Never fires with one replica decoding, nor while idle.",
    ),
)

# --- adaptive speculation (issue 18 item 4) -----------------------------------------------------
ALERTS += (
    Alert(
        name="SpecDecodeAcceptAboveDraftTokens",
        severity="warning",
        for_="10m",
        window="5m",
        # A verify pass accepts at most steps + 1 <= draft tokens, so a mean above the largest
        # count the exporter held in the window means the count is not the server's.
        value_expr=(
            f"[[rule:{ACCEPT_LENGTH_MEAN}]]\n"
            "/ on (job, instance)\n"
            f"(max by (job, instance) (max_over_time({SPECULATIVE_DRAFT_TOKENS.name}[[[window]]]))"
            " > 0)"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_ratio", 1.02, "number",
            "Accept length over the draft-token count above which the alert fires (1.0 is "
            "the most a correct count allows; the margin absorbs the log's two decimals).",
            minimum=1.0, maximum=10.0,
        ),
        summary="Accept length is above the draft-token count the exporter was given",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }} times the largest draft-token count the exporter '
            "held (alert above [[max_ratio]]); no verify pass can accept more than its draft "
            "tokens. The server runs more draft tokens than the profile says: "
            "--speculative-adaptive on the server but not drafter.adaptive in the profile, or "
            "a stale --draft-tokens. The computed draft acceptance is wrong."
        ),
        meaning="The log-derived mean accept length exceeds the largest "
        f"`{SPECULATIVE_DRAFT_TOKENS.name}` of the window: the exporter's draft-token count "
        "is not the server's (adaptive speculation it was not told about, or a stale value).",
    ),
)

# --- fleet capacity and autoscaling (issue 32 item 3) -------------------------------------------
# How many replicas the load needs, counting what speculation delivers. Demand is SGLang's own
# series: the decode tokens/s the fleet delivers (sglang:gen_throughput) scaled by requests
# wanting service (running + queued) over requests served (running): a queued request would
# decode at the rate the running ones do. One replica's capacity is the profile's measured
# non-speculative baseline at its best concurrency times the speedup speculation measures now
# (the exporter's SPEEDUP_RATIO, its lowest bucket: a conservative credit; 1 while no bucket has
# one). Their quotient is the load in replicas: 3.2 means three replicas and a fifth of one
# busy at full speculative throughput. The HPA/KEDA target (chart `autoscaling`) and the
# SpecServeFleetNeedsReplicas alert both read it.
# A fleet is a namespace (Kubernetes) or the whole Prometheus (the Ansible path, where no series
# carries `namespace`): the exporter's and SGLang's series of one server have different jobs and
# instances, so the two sides join on what they share.
FLEET_BY = "namespace"
# SGLang records each queue's total under priority="" (per-priority breakdowns carry a value);
# every TP/PP/EP rank of a DP group reports the same scheduler, the DP groups add up.
_SCHEDULER_RANKS = "tp_rank, pp_rank, moe_ep_rank"


def _fleet_gauge(gauge: str) -> str:
    return (
        f"sum by ({FLEET_BY}) (max without ({_SCHEDULER_RANKS}) "
        f'(avg_over_time({gauge}{{priority=""}}[[[window]]])))'
    )


FLEET_REQUESTS_DEMANDED = "fleet:sglang_requests_running_and_queued:avg"
FLEET_RUNNING = "fleet:sglang_num_running_reqs:avg"
FLEET_DECODE_TOKENS = "fleet:sglang_gen_throughput:avg"
FLEET_SERVERS = "fleet:sglang_servers:count"
REPLICA_CAPACITY = f"fleet:{PREFIX}replica_capacity_tokens_per_second:speculative"
FLEET_REPLICA_LOAD = f"fleet:{PREFIX}replica_load:ratio"
FLEET_WORKERS_OUT = f"fleet:{PREFIX}workers_out_of_rotation:count"
FLEET_WORKERS_IN = f"fleet:{PREFIX}workers_in_rotation:count"

# The router's view of the replicas (smg_worker_health 1/0, smg_worker_cb_state 0 closed, 1 open,
# 2 half-open; a removed worker's series are gone). A replica out of rotation holds its pod and
# serves nothing, so the autoscaler asks for one more while it is out. Three traps, each kept
# out: a new replica still loading its weights is not healthy yet (counting it would ask for
# another, and that one for another: a cascade), so only a worker that was in rotation within
# ROUTER_RETIRED_LOOKBACK counts; a replica removed by scale-down leaves the router's list (the
# -1 "gone" of router_worker_state) and must not hold the count up, so only a worker listed now
# counts; and a removed worker is `draining` (health 0) for 5 s before it goes, so only one out
# at every sample of the window counts. Several routers list the same workers: each worker
# counts once per fleet. With a router scraped and nothing out the record is 0; without one,
# nothing (the autoscaler's query reads that as 0).
_WORKER = "job, instance, worker"


def _fleet_workers(selected: str) -> str:
    return (
        f"count by ({FLEET_BY}) (group by ({FLEET_BY}, worker) (\n{selected}\n))\n"
        f"or\ngroup by ({FLEET_BY}) ({ROUTER_WORKER_HEALTH}) * 0"
    )


RECORDING_RULES += (
    RecordingRule(
        family=FLEET_REQUESTS_DEMANDED,
        expr=(
            f"{_fleet_gauge(SGLANG_RUNNING_REQUESTS)}\n+\n{_fleet_gauge(SGLANG_QUEUED_REQUESTS)}"
        ),
        help="Requests wanting service in the fleet (running + queued, SGLang's gauges, DP "
        "groups and servers summed), averaged over the rate window.",
    ),
    RecordingRule(
        family=FLEET_RUNNING,
        expr=_fleet_gauge(SGLANG_RUNNING_REQUESTS),
        help="Requests running in the fleet (SGLang's gauge, DP groups and servers summed), "
        "averaged over the rate window.",
    ),
    RecordingRule(
        family=FLEET_DECODE_TOKENS,
        expr=(
            f"sum by ({FLEET_BY}) (max without ({_SCHEDULER_RANKS}) "
            f"(avg_over_time({SGLANG_GEN_THROUGHPUT}[[[window]]])))"
        ),
        help="Decode tokens/s the fleet delivers (SGLang's gen_throughput, speculation "
        "included), averaged over the rate window.",
    ),
    RecordingRule(
        family=FLEET_SERVERS,
        expr=(
            f"count by ({FLEET_BY}) (group by ({FLEET_BY}, job, instance, pod) "
            f'(last_over_time({SGLANG_RUNNING_REQUESTS}{{priority=""}}[[[window]]])))'
        ),
        help="SGLang servers of the fleet that reported their scheduler in the rate window.",
    ),
    RecordingRule(
        family=FLEET_WORKERS_OUT,
        expr=_fleet_workers(
            "  (\n"
            f"    max_over_time({ROUTER_WORKER_HEALTH}[[[window]]]) == 0\n"
            "    or\n"
            f"    min_over_time({ROUTER_WORKER_CIRCUIT}[[[window]]]) > 0\n"
            "  )\n"
            f"  and on ({_WORKER}) {ROUTER_WORKER_HEALTH}\n"
            f"  and on ({_WORKER}) "
            f"max_over_time({ROUTER_WORKER_HEALTH}[{ROUTER_RETIRED_LOOKBACK}]) == 1"
        ),
        help="Workers the router has taken out of rotation, per fleet: listed now, failing "
        "their health checks (or their circuit open) at every sample of the rate window, and "
        f"in rotation some time in the last {ROUTER_RETIRED_LOOKBACK} (a new replica still "
        "loading its weights is not out; a removed one, gone from the list, neither). The "
        "autoscaler adds them to the replicas the load needs (0 with none out; no series "
        "without a router).",
    ),
    RecordingRule(
        family=FLEET_WORKERS_IN,
        # Now, not over the window: a worker put back serves at once, and a window of health
        # before it counts would read a fleet just restored as having no capacity (the
        # monitoring e2e's worker, back in rotation, made SpecServeFleetNeedsReplicas pend).
        # The alert's `for` absorbs a blip out.
        expr=_fleet_workers(
            f"  {ROUTER_WORKER_HEALTH} == 1\n"
            f"  and on ({_WORKER}) {ROUTER_WORKER_CIRCUIT} == 0"
        ),
        help="Workers the router has in rotation, per fleet: listed, healthy and with the "
        "circuit closed at the latest sample. SpecServeFleetNeedsReplicas counts no more "
        "SGLang servers than these as capacity (no series without a router).",
    ),
    RecordingRule(
        family=REPLICA_CAPACITY,
        # The baseline's best bucket is what one replica decodes flat out without speculation;
        # the lowest measured speedup is the credit speculation earns there (speedup falls as the
        # batch grows, so a low bucket's would overstate it). No measured speedup: no credit.
        # The speedup is SPEEDUP_RATIO's quotient with `group_left ()`: a one-to-one `on` keeps
        # only the listed labels, and the fleet's `namespace` must survive the division.
        expr=(
            f"max by ({FLEET_BY}) ({BASELINE_GEN_THROUGHPUT.name} > 0)\n"
            f"* on ({FLEET_BY})\n"
            "(\n"
            f"  min by ({FLEET_BY}) (\n"
            f"    [[rule:{THROUGHPUT_MEAN}]]\n"
            "    / on (job, instance, concurrency) group_left ()\n"
            "    max by (job, instance, concurrency) "
            f"({BASELINE_GEN_THROUGHPUT.name} > 0)\n"
            "  )\n"
            "  or\n"
            f"  max by ({FLEET_BY}) ({BASELINE_GEN_THROUGHPUT.name} > 0) * 0 + 1\n"
            ")"
        ),
        help="Decode tokens/s one replica delivers with speculation: the baseline's best "
        "bucket times the lowest speedup measured in the rate window (1 while none is).",
    ),
    RecordingRule(
        family=FLEET_REPLICA_LOAD,
        # `or ... * 0`: an idle fleet (nothing running) needs no replica, and says so with 0
        # rather than no series (KEDA would read nothing as 0, an HPA as an error).
        expr=(
            "(\n"
            f"  [[rule:{FLEET_DECODE_TOKENS}]]\n"
            f"  * on ({FLEET_BY}) [[rule:{FLEET_REQUESTS_DEMANDED}]]\n"
            f"  / on ({FLEET_BY}) ([[rule:{FLEET_RUNNING}]] > 0)\n"
            f"  or on ({FLEET_BY}) [[rule:{FLEET_RUNNING}]] * 0\n"
            ")\n"
            f"/ on ({FLEET_BY}) [[rule:{REPLICA_CAPACITY}]]"
        ),
        help="The fleet's load in replicas: decode tokens/s demanded (delivered x (running + "
        "queued) / running) over what one replica delivers with speculation; the autoscaler "
        "holds it at target utilisation x the replicas in rotation (its query adds "
        f"{FLEET_WORKERS_OUT} x the target: a replica out of rotation carries nothing).",
    ),
)



def autoscaler_metric(selector: str, target: float | str) -> str:
    """The autoscaler's metric (the chart's KEDA query; prometheus-adapter's rule in the chart
    README says the same): the load in replicas plus the workers out of rotation at the target
    utilisation, so an AverageValue target of `target` asks for ceil(load / target) + out
    replicas. No router (no out-of-rotation series) adds 0; no load series is no answer."""
    load = f"{FLEET_REPLICA_LOAD}{RECORDING_WINDOW}{{{selector}}}"
    out = f"{FLEET_WORKERS_OUT}{RECORDING_WINDOW}{{{selector}}}"
    return f"max({load}) + (max({out}) or vector(0)) * {target}"


def autoscaler_adapter_query(target: float | str) -> str:
    """prometheus-adapter's `metricsQuery` for the same metric (its externalRules entry, whose
    seriesQuery is the load record): `<<.Series>>` is the load record, `<<.LabelMatchers>>` the
    HPA's namespace."""
    load = "<<.Series>>{<<.LabelMatchers>>}"
    out = f"{FLEET_WORKERS_OUT}{RECORDING_WINDOW}{{<<.LabelMatchers>>}}"
    return (f"max by ({FLEET_BY}) ({load}) + on ({FLEET_BY}) "
            f"(max by ({FLEET_BY}) ({out}) * {target} or max by ({FLEET_BY}) ({load}) * 0)")


ALERTS += (
    Alert(
        name="SpecServeFleetNeedsReplicas",
        severity="warning",
        for_="15m",
        window="5m",
        # The figure, where the servers serving carry more than the plan by more than the
        # tolerance: inside it an HPA does not act (its own 0.1), so an autoscaled fleet that
        # settled at 9 replicas for 9.4 replicas' worth never fires. Serving: the SGLang servers
        # reporting, but no more than the router has in rotation where a router is scraped (a
        # server out of rotation reports and serves nothing; one that stopped reporting is out
        # of both, so the smaller count, not a difference, counts it once). No worker in
        # rotation (a router whose workers have not passed a health check yet, or every one
        # out: SpecServeWorkerOutOfRotation's to say) tells nothing of capacity: the servers
        # reporting count, never a division by 0.
        value_expr=(
            f"ceil([[rule:{FLEET_REPLICA_LOAD}]] / [[max_utilisation]])\n"
            f"and on ({FLEET_BY})\n"
            "(\n"
            f"  [[rule:{FLEET_REPLICA_LOAD}]] / on ({FLEET_BY}) (\n"
            f"    [[rule:{FLEET_SERVERS}]] <= on ({FLEET_BY}) ([[rule:{FLEET_WORKERS_IN}]] > 0)\n"
            f"    or on ({FLEET_BY}) ([[rule:{FLEET_WORKERS_IN}]] > 0)\n"
            f"    or on ({FLEET_BY}) [[rule:{FLEET_SERVERS}]]\n"
            "  )\n"
            "  > [[max_utilisation]] * (1 + [[tolerance]])\n"
            ")"
        ),
        comparison=">",
        compare_to=0.0,
        query_thresholds=(
            Threshold(
                "max_utilisation", 0.8, "number",
                "Share of one replica's speculative throughput each replica is planned to "
                "carry (the autoscaler's target): the headroom left for bursts.",
                minimum=0.1, maximum=1.0,
            ),
            Threshold(
                "tolerance", 0.1, "number",
                "How far above the plan the servers may run before the alert counts them "
                "short (the HPA's own tolerance: within it an autoscaler does not act).",
                minimum=0.0, maximum=1.0,
            ),
        ),
        summary="The load needs more replicas than serve it: add a node",
        description=(
            "The fleet {{ $labels.namespace }} needs {{ $value }} replicas to carry its load "
            "at [[max_utilisation]] of one replica's speculative throughput over [[window]], "
            "more than the SGLang servers serving now (reporting, and in the router's rotation "
            "where a router is scraped). Add a node (Ansible: a host in the "
            "inventory and deploy.yml; Kubernetes: the autoscaler's maxReplicas or nodes)."
        ),
        meaning="Decode tokens/s demanded (delivered, scaled by running + queued over running) "
        "over one replica's speculative throughput (baseline x measured speedup) puts the "
        "SGLang servers serving (reporting, and no more than the router has in rotation) above "
        "the planned utilisation by more than the tolerance; "
        "the value is the load over the planned utilisation, rounded up: a capacity "
        "shortfall, whatever the speedup.",
    ),
)

# --- GPU health, from NVIDIA's dcgm-exporter (issue 32 item 2, docs/gpu-health.md) -------------
# Names from the pinned exporter's own counters file (specserve/monitoring/dcgm.py). Its series
# carry gpu, UUID, device, modelName, pci_bus_id and Hostname besides the target's labels; the
# alerts keep them all, so each names the GPU and the node.

# The job the Ansible monitoring role scrapes the exporter as; the chart's ServiceMonitor sets it.
DCGM_JOB = "dcgm-exporter"
# XID codes whose resolution is to take the node out of service (reset the GPU or reboot, then
# RMA on recurrence), from NVIDIA's Xid catalog
# (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and page retirement
# notes (https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html): 48 double-bit
# ECC, 63/64 row remapping pending/failed (page retirement on pre-Ampere), 74 NVLink error,
# 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC error.
# Application faults (13, 31, 43, 45) are not here: they fail a request, not the node.
DRAIN_XIDS: tuple[int, ...] = (48, 63, 64, 74, 79, 92, 94, 95)
_DCGM_JOB = Threshold(
    "job", DCGM_JOB, "regex",
    "Regular expression for the DCGM exporter's Prometheus job label.",
)
_GPU = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on {{ $labels.Hostname }}"

ALERTS += (
    Alert(
        name="SpecServeGpuXidDrain",
        severity="critical",
        for_="1m",
        # The exporter's XID field is the last code the driver logged, held until the next one.
        value_expr=" or ".join(f"{DCGM_XID_ERRORS} == {code}" for code in DRAIN_XIDS),
        comparison=">",
        compare_to=0.0,
        summary="A GPU logged an XID error that means: drain this node",
        description=(
            f"{_GPU} logged XID {{{{ $value }}}}, one of the codes whose remedy is a GPU reset "
            f"or reboot ({', '.join(str(code) for code in DRAIN_XIDS)}). Take the node out of "
            "rotation before its tensor-parallel group hangs or returns garbage."
        ),
        meaning=f"`{DCGM_XID_ERRORS}` (the last XID the driver logged) is one of the "
        "drain codes: a hardware or driver fault that needs a GPU reset or reboot.",
    ),
    Alert(
        name="SpecServeGpuUncorrectableEcc",
        severity="critical",
        for_="1m",
        # A fixed range like SpecServeLogFileGap: one counter step stays visible for 15m.
        value_expr=(
            f"increase({DCGM_ECC_DBE_VOLATILE}[15m]) > 0\n"
            "or\n"
            f"increase({DCGM_UNCORRECTABLE_REMAPPED_ROWS}[15m])"
        ),
        comparison=">",
        compare_to=0.0,
        summary="A GPU had an uncorrectable memory error",
        description=(
            f"{_GPU} counted {{{{ $value }}}} uncorrectable ECC errors or rows remapped for "
            "them over 15m: the process that touched the memory is corrupt or dead, and the "
            "remap only takes effect after a GPU reset. Drain the node and reset the GPU."
        ),
        meaning=f"`{DCGM_ECC_DBE_VOLATILE}` or `{DCGM_UNCORRECTABLE_REMAPPED_ROWS}` grew: "
        "double-bit (uncorrectable) ECC errors in HBM.",
    ),
    Alert(
        name="SpecServeGpuRowRemapFailure",
        severity="critical",
        for_="1m",
        value_expr=DCGM_ROW_REMAP_FAILURE,
        comparison=">",
        compare_to=0.0,
        summary="A GPU could not remap a failing memory row",
        description=(
            f"{_GPU} reports a failed row remap: the bad memory stays in use. The GPU needs "
            "service (RMA); keep the node out of rotation."
        ),
        meaning=f"`{DCGM_ROW_REMAP_FAILURE}` is 1: the GPU ran out of spare rows or the "
        "remap failed.",
    ),
    Alert(
        name="SpecServeGpuMissing",
        severity="critical",
        for_="5m",
        # Every GPU the exporter sees reports a temperature; a target that is down counts 0.
        value_expr=(
            f'count by (job, instance, Hostname) ({DCGM_GPU_TEMP}{{job=~"[[job]]"}})\n'
            "or\n"
            f'max by (job, instance) ({UP}{{job=~"[[job]]"}} == 0) * 0'
        ),
        comparison="<",
        compare_to=Threshold(
            "gpus", 8.0, "number",
            "GPUs each node must show: the profile's GPUs per node (gpu.count: tensor x data "
            "parallel over nodes). Ansible and the chart set it from the profile (the chart's "
            "value is null: a number wins); the stock rule file says 8.",
            minimum=1.0,
        ),
        summary="A node shows fewer GPUs than the profile needs",
        description=(
            "The DCGM exporter {{ $labels.instance }} ({{ $labels.Hostname }}) sees "
            "{{ $value }} GPUs (the profile needs [[gpus]]; 0 when the exporter is down): a "
            "GPU fell off the bus (XID 79) or the driver lost it. The server cannot start, or "
            "its running ranks hang."
        ),
        meaning="The exporter reports fewer GPUs than the profile's count (or is down): a "
        "GPU fell off the bus or the driver does not see it.",
        query_thresholds=(_DCGM_JOB,),
    ),
    Alert(
        name="SpecServeGpuThrottled",
        severity="warning",
        for_="15m",
        # A fixed range: rate windows belong to the recording-rule families.
        # The violation counters are microseconds spent throttled: rate / 1e6 is the share.
        value_expr=(
            f"(\n  rate({DCGM_POWER_VIOLATION}[5m])\n"
            f"  + rate({DCGM_THERMAL_VIOLATION}[5m])\n) / 1e6"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_share", 0.2, "number",
            "Share of the time clocks are held down by power or thermal limits above which "
            "the alert fires.",
            minimum=0.0, maximum=2.0,
        ),
        summary="A GPU's clocks are held down by power or temperature",
        description=(
            f"{_GPU} spent {{{{ $value | humanizePercentage }}}} of the last 5m "
            "throttled by power or thermal limits (alert above [[max_share]]): it decodes "
            "slower than its peers, and the whole tensor-parallel group waits for it."
        ),
        meaning=f"`{DCGM_POWER_VIOLATION}` + `{DCGM_THERMAL_VIOLATION}` grow for a large "
        "share of the time: cooling, power capping or a failing fan/PSU slows the GPU.",
    ),
    Alert(
        name="SpecServeGpuNvlinkErrors",
        severity="warning",
        for_="10m",
        value_expr=(
            f"increase({DCGM_NVLINK_CRC_FLIT_ERRORS}[5m])\n"
            f"+ increase({DCGM_NVLINK_CRC_DATA_ERRORS}[5m])\n"
            f"+ increase({DCGM_NVLINK_REPLAY_ERRORS}[5m])\n"
            f"+ increase({DCGM_NVLINK_RECOVERY_ERRORS}[5m])"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_errors", 10.0, "number",
            "NVLink CRC, replay and recovery errors over 5m above which the alert fires.",
            minimum=0.0,
        ),
        summary="A GPU's NVLinks keep retrying",
        description=(
            f"{_GPU} counted {{{{ $value }}}} NVLink CRC/replay/recovery errors over 5m "
            "(alert above [[max_errors]]): every all-reduce of its tensor-parallel "
            "group slows down, and a link that fails outright hangs the group (XID 74)."
        ),
        meaning="NVLink flit/data CRC, replay and recovery error counters grow: a degraded "
        "link, a badly seated GPU or an NVSwitch fault.",
    ),
)

# --- SLO burn rates (issue 32 item 1) --------------------------------------------------------
# The objectives, their recording rules and the workbook's window pairs are specserve.monitoring
# .slo's; these two alerts read its records by name (the windows are the pairs', fixed), per
# replica and per fleet. The burn rate is the error ratio over the budget (1 - target).
_BURN_MEANING = (
    "An objective (label slo: ttft, itl, availability; docs/slo.md) spends its error budget "
    "faster than the workbook's rate over both windows of a pair, per replica (instance) or "
    "for the whole fleet (no instance). Reads the slo:/fleet_slo: recording rules of the SLO "
    "group, which the objectives' settings (`slos:` in the overrides file, "
    "prometheusRule.slos in the chart) shape."
)
ALERTS += (
    Alert(
        name="SpecServeErrorBudgetBurn",
        severity="critical",
        for_="2m",
        value_expr=burn_expr("critical"),
        comparison=">",
        compare_to=0.0,
        needs_slo_records=True,
        summary="An SLO is burning its error budget fast",
        description=(
            "The {{ $labels.slo }} objective on {{ with $labels.instance }}{{ . }}{{ else }}the "
            "fleet {{ $labels.job }}{{ end }} burns its error budget "
            "{{ $value | printf \"%.1f\" }} "
            "times as fast as the objective allows (paged at 14.4x over 1h and 5m: 2% of a 30-day "
            "budget an hour; or 6x over 6h and 30m). At this rate the budget is gone in days."
        ),
        meaning=_BURN_MEANING + " Fast burn: 14.4x over 1h and 5m, or 6x over 6h and 30m: page.",
    ),
    Alert(
        name="SpecServeErrorBudgetBurnSlow",
        severity="warning",
        for_="15m",
        value_expr=burn_expr("warning"),
        comparison=">",
        compare_to=0.0,
        needs_slo_records=True,
        summary="An SLO is spending its error budget faster than it lasts",
        description=(
            "The {{ $labels.slo }} objective on {{ with $labels.instance }}{{ . }}{{ else }}the "
            "fleet {{ $labels.job }}{{ end }} burns its error budget "
            "{{ $value | printf \"%.2f\" }} "
            "times as fast as the objective allows over 3d (and still over 6h): the budget will "
            "not last the SLO window. A ticket, not a page."
        ),
        meaning=_BURN_MEANING + " Slow burn: above 1x over 3d and 6h: ticket.",
    ),
)

# --- accept length per request class (issue 31 item 2, docs/bench.md) ------------------------
# With server.request_class_label, SGLang puts each OpenAI request's class (its x-custom-labels
# header) on its tokenizer counters; a request without one counts under "". Any client may send
# any value, so only the bench's classes keep their name and every other non-empty value is
# summed into "other": the records stay within len(BUILTIN_CLASSES) + 1 series a server.
# Unlabelled requests ("", which is also how a server without the label reads) are no class and
# are left out, so a server without labelled traffic records nothing here.
# Retractions carry no custom label (the scheduler counts them): a retracted request's
# re-prefill token is in its class's generated tokens, so the per-class value can read up to one
# token a retraction high, where the server-wide one subtracts them.
CLASS_LABEL = RULES_CLASS_LABEL
assert all(re.fullmatch(r"[a-z][a-z-]*", kind) for kind in BUILTIN_CLASSES)  # no regex escapes
CLASS_VALUES = "|".join(BUILTIN_CLASSES)
CLASS_OTHER = "other"
CLASS_ACCEPT_LENGTH = "instance_class:sglang_spec_accept_length:ratio_rate"


def _per_class(counter: str, per_request: str = "is_streaming, priority") -> str:
    """The counter's rate per server and bounded class: known values by name, the other
    non-empty ones summed as one (`|` in the regex: the empty value is no class)."""
    return (
        "(\n"
        f"  sum without ({per_request}) "
        f'(rate({counter}{{{CLASS_LABEL}=~"{CLASS_VALUES}"}}[[[window]]]))\n'
        "  or\n"
        f'  label_replace(sum without ({per_request}, {CLASS_LABEL}) '
        f'(rate({counter}{{{CLASS_LABEL}!~"{CLASS_VALUES}|"}}[[[window]]])), '
        f'"{CLASS_LABEL}", "{CLASS_OTHER}", "", "")\n'
        ")"
    )


_CLASS_REQUESTS = _per_class(SGLANG_REQUESTS)
_CLASS_VERIFY_CALLS = _per_class(SGLANG_SPEC_VERIFY_CALLS, "priority")

RECORDING_RULES += (
    RecordingRule(
        family=CLASS_ACCEPT_LENGTH,
        expr=(
            "(\n"
            f"  {_per_class(SGLANG_GENERATION_TOKENS).replace(chr(10), chr(10) + '  ')}\n"
            f"  - {_CLASS_REQUESTS.replace(chr(10), chr(10) + '  ')}\n"
            ")\n"
            "/\n"
            f"({_CLASS_VERIFY_CALLS} > 0)"
        ),
        help=f"The native accept length per request class (SGLang's custom label "
        f"{CLASS_LABEL}, server.request_class_label): the tokens the verify passes added to the "
        "replies of the class's requests finished in the window over their verify calls. "
        f"Classes {', '.join(BUILTIN_CLASSES)} by name, any other value as {CLASS_OTHER}, "
        "unlabelled requests left out; absent without labelled requests, without "
        "speculation, or while no request of a class finished.",
    ),
)

_ACCEPT_FLOOR = next(a for a in ALERTS if a.name == "SpecDecodeAcceptLengthLow").compare_to
ALERTS += (
    Alert(
        name="SpecDecodeClassAcceptLengthLow",
        severity="warning",
        for_="15m",
        window="5m",
        # The class's value only where its requests averaged enough verify passes to speak for
        # the drafter (MIN_VERIFY_PER_REQUEST), and only while the server's own mean clears
        # the floor: a server-wide low is SpecDecodeAcceptLengthLow's.
        value_expr=(
            f"[[rule:{CLASS_ACCEPT_LENGTH}]]\n"
            "and\n"
            f"({_CLASS_VERIFY_CALLS}\n/\n({_CLASS_REQUESTS} > 0) >= {MIN_VERIFY_PER_REQUEST})\n"
            f"and ignoring ({CLASS_LABEL})\n"
            f"([[rule:{NATIVE_ACCEPT_LENGTH}]] >= [[floor]])"
        ),
        comparison="<",
        compare_to=_ACCEPT_FLOOR,
        summary="One request class accepts too few drafts while the server's mean is fine",
        description=(
            f"Requests of class {{{{ $labels.{CLASS_LABEL} }}}} on {{{{ $labels.instance }}}} "
            'accept {{ $value | printf "%.3f" }} tokens per verify pass over [[window]], below '
            "the floor of [[floor]], while the server's mean is above it: the drafter does not "
            "fit this class (code, another language, long context), and the mean hides it. "
            "Route the class to a server without speculation or with a drafter trained on it, "
            "or lower the draft tokens for it."
        ),
        meaning="The native accept length of one request class (SGLang's custom label "
        f"`{CLASS_LABEL}`, sent by clients in `x-custom-labels`) is below the accept-length "
        "floor while the server-wide native mean is at or above it: a workload the drafter "
        "does not fit, hidden in the mean. Needs `server.request_class_label` and labelled "
        f"clients; unknown class values count as `{CLASS_OTHER}`.",
    ),
)

ALERTS_BY_NAME: dict[str, Alert] = {alert.name: alert for alert in ALERTS}
RECORDING_RULES_BY_FAMILY: dict[str, RecordingRule] = {
    rule.family: rule for rule in RECORDING_RULES
}
