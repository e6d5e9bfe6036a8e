"""The Grafana dashboard, built with grafana-foundation-sdk.

Every panel queries the `${datasource}` variable (no datasource UID is written anywhere) and has
a unit. Panels that compare with alerts use the alert's own expressions at the alert's own
window and threshold (recording rules inlined), so the dashboard works where the Prometheus rule
file is not loaded and shows what the alerts see. The committed dashboard uses the default
settings; `specserve rules dashboard --overrides F` renders it for overridden windows/thresholds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    dashboard,
    heatmap,
    prometheus,
    stat,
    statetimeline,
    timeseries,
)
from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    DynamicConfigValue,
    FieldColorModeId,
    Threshold,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
)

from specserve.monitoring import slo
from specserve.monitoring.expansion import (
    AlertSettings,
    alert_value_expr,
    default_settings,
    inline_rule,
)
from specserve.monitoring.metrics import (
    DCGM_ECC_DBE_VOLATILE,
    DCGM_FB_USED,
    DCGM_GPU_TEMP,
    DCGM_GPU_UTIL,
    DCGM_POWER_USAGE,
    DCGM_POWER_VIOLATION,
    DCGM_ROW_REMAP_FAILURE,
    DCGM_THERMAL_VIOLATION,
    DCGM_UNCORRECTABLE_REMAPPED_ROWS,
    DCGM_XID_ERRORS,
    ROUTER_REQUEST_DURATION,
    ROUTER_REQUESTS,
    ROUTER_UPSTREAM_RESPONSES,
    ROUTER_WORKER_ACTIVE_REQUESTS,
    ROUTER_WORKER_POOL_SIZE,
    ROUTER_WORKER_REQUESTS,
    ROUTER_WORKER_RETRIES,
    SGLANG_E2E_REQUEST_LATENCY,
    SGLANG_GEN_THROUGHPUT,
    SGLANG_INTER_TOKEN_LATENCY,
    SGLANG_QUEUED_REQUESTS,
    SGLANG_RUNNING_REQUESTS,
    SGLANG_SPEC_ACCEPT_LENGTH,
    SGLANG_TIME_TO_FIRST_TOKEN,
    UP,
    router_worker_state,
)
from specserve.monitoring.rules import (
    ACCEPT_LENGTH_MEAN,
    ALERTS,
    DRAIN_XIDS,
    FLEET_REPLICA_LOAD,
    FLEET_SERVERS,
    FLEET_SLOWEST_THROUGHPUT,
    FLEET_THROUGHPUT,
    FLEET_WORKERS_OUT,
    NATIVE_ACCEPT_LENGTH,
    REJECTED_RATIO,
    REPLICA_THROUGHPUT,
    REPLICA_THROUGHPUT_SHARE,
    ROUTER_JOB,
    SPEEDUP_RATIO,
    THROUGHPUT_MEAN,
)
from specserve_exporter.names import (
    BASELINE_GEN_THROUGHPUT,
    DECODE_ACCEPT_LENGTH,
    DECODE_DRAFT_ACCEPTANCE,
    DECODE_GRAPH_ENABLED,
    DECODE_LAST_ACCEPT_LENGTH,
    DECODE_LAST_BLOCK_ACCEPT_LENGTH,
    DECODE_LAST_CAP_LENGTH,
    DECODE_LAST_GEN_THROUGHPUT,
    DECODE_LAST_LINE_TIMESTAMP,
    DECODE_PRINTED_ACCEPT_RATE,
    DECODE_QUEUED_REQUESTS,
    DECODE_RUNNING_REQUESTS,
    DECODE_TOKEN_USAGE,
    DECODE_UNCAPPED_ACCEPT_LENGTH_ESTIMATE,
    LOG_LINES_IGNORED,
    LOG_LINES_PARSED,
    LOG_LINES_READ,
    LOG_LINES_REJECTED,
    SOURCE_UP,
    SPECULATIVE_DRAFT_TOKENS,
)

DASHBOARD_UID = "specserve-overview"
DATASOURCE_VARIABLE = "datasource"
EXPORTER_JOB_VARIABLE = "exporter_job"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${" + DATASOURCE_VARIABLE + "}")
TOKENS_PER_SECOND = "suffix: tok/s"
TOKENS = "suffix: tok"
NEEDS_METRICS = "needs SGLang --enable-metrics"
NEEDS_DCGM = "needs a DCGM exporter"
# The alerts the accept-length panel draws a mean for, one per distinct window.
ACCEPT_LENGTH_ALERTS = ("SpecDecodeDraftsRejected", "SpecDecodeAcceptLengthLow")


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str
    instant: bool = False
    heatmap: bool = False


def _per_server(native_metric: str) -> str:
    # Sum DP ranks, count each DP group once however many of its TP/PP ranks export the gauge.
    return f"sum by (instance) (max by (instance, dp_rank) ({native_metric}))"


Settings = Mapping[str, AlertSettings]
# A dashboard row: its title and its panels' builders, left to right.
Row = tuple[str, list[Any]]


def _number(settings: Settings, alert: str, name: str) -> float:
    value = settings[alert].thresholds[name]
    assert isinstance(value, float)
    return value


def _window(settings: Settings, alert: str) -> str:
    window = settings[alert].window
    assert window is not None, f"{alert} has no window"
    return window


def _target(query: Query, ref_id: str) -> prometheus.Dataquery:
    target = (
        prometheus.Dataquery()
        .expr(query.expr)
        .legend_format(query.legend)
        .ref_id(ref_id)
        .datasource(DATASOURCE)
    )
    target = target.instant() if query.instant else target.range()
    if query.heatmap:
        target = target.format("heatmap")  # type: ignore[arg-type]
    return target


def _with_queries(panel: Any, queries: list[Query]) -> Any:
    for index, query in enumerate(queries):
        panel = panel.with_target(_target(query, chr(ord("A") + index)))
    return panel


def _thresholds(*steps: tuple[float | None, str]) -> dashboard.ThresholdsConfig:
    return (
        dashboard.ThresholdsConfig()
        .mode(ThresholdsMode.ABSOLUTE)
        .steps([Threshold(value=value, color=color) for value, color in steps])
    )


def _series(
    title: str, unit: str, queries: list[Query], description: str, *, width: int = 12,
    thresholds: dashboard.ThresholdsConfig | None = None, no_value: str | None = None,
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .height(8)
        .span(width)
    )
    if thresholds is not None:
        panel = panel.thresholds(thresholds).thresholds_style(
            GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.LINE)
        )
    if no_value is not None:
        panel = panel.no_value(no_value)
    return _with_queries(panel, queries)


_ON_OFF = [
    ValueMap(
        options={
            "0": ValueMappingResult(text="off", color="red", index=0),
            "1": ValueMappingResult(text="on", color="green", index=1),
        }
    )
]


def _state(title: str, queries: list[Query], description: str, width: int = 12) -> Any:
    panel = (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .unit("bool_on_off")
        .datasource(DATASOURCE)
        .mappings(_ON_OFF)  # type: ignore[arg-type]
        .height(6)
        .span(width)
    )
    return _with_queries(panel, queries)


def _accept_length_means(settings: Settings) -> list[Query]:
    """The mean at each accept-length alert's window, labelled with the alerts that use it."""
    users: dict[str, list[str]] = {}
    for alert in ACCEPT_LENGTH_ALERTS:
        users.setdefault(_window(settings, alert), []).append(alert)
    # Beside each log-derived mean, SGLang's own (the verify passes' tokens, each request's
    # prefill token left out, / verify calls): what the alerts read where it exists, and what
    # SpecServeAcceptLengthMismatch compares.
    return [
        query
        for window, alerts in users.items()
        for query in (
            Query(inline_rule(ACCEPT_LENGTH_MEAN, window),
                  f"{{{{instance}}}} {window} mean ({', '.join(alerts)})"),
            Query(inline_rule(NATIVE_ACCEPT_LENGTH, window),
                  f"{{{{instance}}}} {window} sglang verify-pass tokens / verify calls"),
        )
    ]  # fmt: skip


def _accept_length_row(settings: Settings) -> Row:
    rejected = _number(settings, "SpecDecodeDraftsRejected", "max_accept_length")
    floor = _number(settings, "SpecDecodeAcceptLengthLow", "floor")
    return "Speculative decoding", [
        _series(
            "Accept length",
            TOKENS,
            [
                *_accept_length_means(settings),
                Query(
                    f"max without (tp, pp) ({DECODE_LAST_ACCEPT_LENGTH.name})",
                    "{{instance}} dp{{dp}} last window",
                ),
                Query(f"max by (instance) ({SGLANG_SPEC_ACCEPT_LENGTH})",
                      "{{instance}} sglang native"),

            ],
            "Accepted tokens per verify pass, bonus token included (1.00 = every draft "
            f"rejected), as a mean over each accept-length alert's window. Lines mark the "
            f"alert thresholds: {rejected:g} (drafts rejected) and {floor:g} (break-even "
            "floor).",
            thresholds=_thresholds((None, "red"), (rejected, "orange"), (floor, "green")),
        ),
        heatmap.Panel()
        .title("Accept length distribution over time")
        .description("Decode windows per accept-length bucket.")
        .unit(TOKENS)
        .datasource(DATASOURCE)
        .calculate(False)
        .height(8)
        .span(8)
        .with_target(
            _target(
                Query(
                    f"sum by (le) (increase({DECODE_ACCEPT_LENGTH.bucket}"
                    "[$__rate_interval]))",
                    "{{le}}",
                    heatmap=True,
                ),
                "A",
            )
        ),
        bargauge.Panel()
        .title("Accept length distribution (time range)")
        .description("Decode windows per accept-length bucket over the selected range.")
        .unit("short")
        .datasource(DATASOURCE)
        .height(8)
        .span(4)
        .with_target(
            _target(
                Query(
                    f"sum by (le) (increase({DECODE_ACCEPT_LENGTH.bucket}[$__range]))",
                    "{{le}}",
                    instant=True,
                    heatmap=True,
                ),
                "A",
            )
        ),
        _series(
            "Draft acceptance",
            "percentunit",
            [
                Query(
                    f"max without (tp, pp) ({DECODE_DRAFT_ACCEPTANCE.name})",
                    "{{instance}} dp{{dp}} computed (accept_len-1)/(draft_tokens-1)",
                ),
                Query(
                    f"max without (tp, pp) ({DECODE_PRINTED_ACCEPT_RATE.name})",
                    "{{instance}} dp{{dp}} as printed (meaning changed in PR #23530)",
                ),
            ],
            "Share of drafted tokens the target accepted. The computed ratio means the same "
            "on every SGLang version; the printed accept rate changed meaning in 2026.",
        ),
        stat.Panel()
        .title("Draft tokens per step")
        .description(
            "--speculative-num-draft-tokens from the deployment profile; with adaptive "
            "speculation the server's current count, from its switch log lines."
        )
        .unit("short")
        .datasource(DATASOURCE)
        .height(8)
        .span(4)
        .with_target(
            _target(Query(f"max by (instance) ({SPECULATIVE_DRAFT_TOKENS.name})",
                          "{{instance}}", instant=True), "A")
        ),
        _series(
            "Block drafters (DFLASH, DSPARK)",
            TOKENS,
            [
                Query(f"max without (tp, pp) ({DECODE_LAST_BLOCK_ACCEPT_LENGTH.name})",
                      "{{instance}} dp{{dp}} block accept len"),
                Query(f"max without (tp, pp) ({DECODE_LAST_CAP_LENGTH.name})",
                      "{{instance}} dp{{dp}} cap len (drafts trimmed by the cap)"),
                Query(f"max without (tp, pp) ({DECODE_UNCAPPED_ACCEPT_LENGTH_ESTIMATE.name})",
                      "{{instance}} dp{{dp}} DSPARK uncapped accept len estimate"),
            ],
            "What SGLang prints for a block drafter beside its accept length, per verify pass "
            "of the last window: the tokens accepted counted over the whole block (cap-accept "
            "verify mode), the drafts the verify cap trimmed, and DSPARK's estimate of the "
            "accept length uncapped. Empty for the other methods: SGLang prints none of them.",
            width=8,
            no_value="not a block drafter",
        ),
    ]


def _throughput_row(settings: Settings) -> Row:
    tolerance = _number(settings, "SpecDecodeBelowBaseline", "tolerance")
    window = _window(settings, "SpecDecodeBelowBaseline")
    return "Throughput against the non-speculative baseline", [
        _series(
            "Decode throughput vs baseline per concurrency bucket",
            TOKENS_PER_SECOND,
            [
                Query(
                    inline_rule(THROUGHPUT_MEAN, window),
                    f"{{{{instance}}}} bucket {{{{concurrency}}}} speculative ({window} mean)",
                ),
                Query(
                    "max by (job, instance, concurrency) "
                    f"({BASELINE_GEN_THROUGHPUT.name})",
                    "baseline {{instance}} bucket {{concurrency}}",
                ),
            ],
            "Whole-server decode tokens/s (DP ranks summed), per bucket of running "
            "requests, next to the baseline measured without speculation at that bucket.",
        ).override_by_regexp(
            "^baseline.*",
            [DynamicConfigValue(id_val="custom.lineStyle",
                                value={"fill": "dash", "dash": [10, 10]})],
        ),
        _series(
            "Speedup over baseline",
            "percentunit",
            [Query(inline_rule(SPEEDUP_RATIO, window),
                   f"{{{{instance}}}} bucket {{{{concurrency}}}} ({window} mean)")],
            "Speculative throughput as a share of the baseline at the same bucket; below "
            f"{tolerance:g} (the SpecDecodeBelowBaseline line) speculation costs throughput.",
            thresholds=_thresholds((None, "red"), (tolerance, "green")),
        ),
        _series(
            "Decode throughput, last window",
            TOKENS_PER_SECOND,
            [
                Query(
                    "sum without (dp) (max without (tp, pp) "
                    f"({DECODE_LAST_GEN_THROUGHPUT.name}))",
                    "{{instance}} exporter",
                ),
                Query(_per_server(SGLANG_GEN_THROUGHPUT),
                      "{{instance}} sglang native"),
            ],
            "gen throughput of the latest decode line (window of --decode-log-interval "
            "iterations). The first line after idle can be tiny: its window included idle "
            "time.",
            width=24,
        ),
    ]


def _server_row(settings: Settings) -> Row:
    full = _number(settings, "SpecDecodeKVCacheNearFull", "max_ratio")
    return "Server state", [
        _state(
            "CUDA graph",
            [Query(f"min without (tp, pp, graph) ({DECODE_GRAPH_ENABLED.name})",
                   "{{instance}} dp{{dp}}")],
            "cuda graph: True/False from the decode lines. Off costs about 25% throughput.",
            width=24,
        ),
        _series(
            "Running and queued requests",
            "short",
            [
                Query(f"sum without (dp, tp, pp) ({DECODE_RUNNING_REQUESTS.name})",
                      "{{instance}} running"),
                Query(f"sum without (dp, tp, pp) ({DECODE_QUEUED_REQUESTS.name})",
                      "{{instance}} queued"),
            ],
            "#running-req and #queue-req of the latest decode lines, DP ranks summed.",
        ),
        _series(
            "KV cache token usage",
            "percentunit",
            [Query(f"max without (tp, pp) ({DECODE_TOKEN_USAGE.name})",
                   "{{instance}} dp{{dp}}")],
            f"token usage of the latest decode lines; the alert fires above {full:g}.",
            thresholds=_thresholds((None, "green"), (full, "red")),
        ),
    ]


def _exporter_row(settings: Settings) -> Row:
    window = _window(settings, "SpecServeLogLinesRejected")
    return "Exporter health", [
        _state(
            "Exporter scrape target",
            [Query(f'{UP}{{job=~"${EXPORTER_JOB_VARIABLE}"}}', "{{instance}}")],
            "Prometheus' up metric for the exporter job (dashboard variable "
            f"${EXPORTER_JOB_VARIABLE}).",
            width=8,
        ),
        _state(
            "Log source",
            [Query(f"min without (dp, tp, pp) ({SOURCE_UP.name})",
                   "{{instance}} {{source}}")],
            "Whether the exporter can read the SGLang log.",
            width=8,
        ),
        _series(
            "Time since the last decode line",
            "s",
            [Query("time() - max without (dp, tp, pp) "
                   f"({DECODE_LAST_LINE_TIMESTAMP.name})", "{{instance}}")],
            "Grows while idle (no lines are printed then); grows while requests run only "
            "when the server or the log pipeline is stuck.",
            width=8,
        ),
        _series(
            "Log lines",
            "cps",
            [
                Query(f"sum without (dp, tp, pp) (rate({LOG_LINES_READ.total}"
                      "[$__rate_interval]))", "{{instance}} read"),
                Query(f"sum without (dp, tp, pp) (rate({LOG_LINES_PARSED.total}"
                      "[$__rate_interval]))", "{{instance}} parsed {{kind}}"),
                Query(f"sum without (dp, tp, pp) (rate({LOG_LINES_IGNORED.total}"
                      "[$__rate_interval]))", "{{instance}} ignored (not stats)"),
                Query(f"sum without (dp, tp, pp) (rate({LOG_LINES_REJECTED.total}"
                      "[$__rate_interval]))", "{{instance}} rejected {{reason}}"),
            ],
            "Lines per second the exporter read, parsed, ignored and rejected.",
            no_value="0",
        ),
        _series(
            "Rejected share of stats lines",
            "percentunit",
            [Query(inline_rule(REJECTED_RATIO, window), f"{{{{instance}}}} ({window})")],
            f"Share of decode/prefill lines that failed to parse ({window}); a new SGLang "
            "log format shows here first.",
            thresholds=_thresholds(
                (None, "green"),
                (_number(settings, "SpecServeLogLinesRejected", "max_ratio"), "red"),
            ),
            no_value="0",
        ),
    ]


def _latency_query(metric: str, quantile: str) -> Query:
    return Query(
        f"histogram_quantile({quantile}, sum by (instance, le) "
        f"(rate({metric}_bucket[$__rate_interval])))",
        f"{{{{instance}}}} p{quantile[2:].ljust(2, '0')}",
    )


def _native_row(settings: Settings) -> Row:
    latencies = [
        _series(
            title, "s",
            [_latency_query(metric, q) for q in ("0.5", "0.9", "0.99")],
            f"p50/p90/p99 of {metric} (SGLang's own histogram).",
            width=8, no_value=NEEDS_METRICS,
        )
        for title, metric in (
            ("Time to first token", SGLANG_TIME_TO_FIRST_TOKEN),
            ("Inter-token latency", SGLANG_INTER_TOKEN_LATENCY),
            ("End-to-end request latency", SGLANG_E2E_REQUEST_LATENCY),
        )
    ]
    return "SGLang native metrics (--enable-metrics)", [
        *latencies,
        _series(
            "Running and queued requests (SGLang)",
            "short",
            [
                Query(_per_server(SGLANG_RUNNING_REQUESTS),
                      "{{instance}} running"),
                Query(_per_server(SGLANG_QUEUED_REQUESTS),
                      "{{instance}} queued"),
            ],
            "SGLang's scheduler gauges; refreshed every 30 s while idle.",
            width=24, no_value=NEEDS_METRICS,
        ),
    ]


# --- GPU health (issue 32 item 2, docs/gpu-health.md) ---------------------------------------
# What the six SpecServeGpu* alerts watch, each panel on the alert's own expression (settings
# applied), so a red panel and a firing alert read the same series. Every series keeps the
# exporter's labels (gpu, UUID, Hostname) and the target's (instance; node and rank where Ansible
# scrapes the ranks of a multi-node server), so two nodes' GPU 0 are two series.
_GPU_LEGEND = "{{Hostname}} GPU {{gpu}}"
# The drain codes' meanings (rules.DRAIN_XIDS, NVIDIA's Xid catalog; docs/gpu-health.md).
XID_MEANINGS: dict[int, str] = {
    48: "double-bit ECC",
    63: "row remapping pending",
    64: "row remapping failed",
    74: "NVLink error",
    79: "fell off the bus",
    92: "high single-bit ECC rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
}
assert tuple(sorted(XID_MEANINGS)) == tuple(sorted(DRAIN_XIDS)), "a drain XID without a meaning"
# 0: none logged; a drain code: red with its meaning; any other code (an application fault,
# 13/31/43/45) is unmapped: shown as the number, orange from the panel's thresholds.
_XID_MAPPINGS = [
    ValueMap(options={
        "0": ValueMappingResult(text="none", color="green", index=0),
        **{str(code): ValueMappingResult(text=f"XID {code}: {XID_MEANINGS[code]} (drain)",
                                         color="red", index=index)
           for index, code in enumerate(DRAIN_XIDS, start=1)},
    }),
]  # fmt: skip
_REMAP = [
    ValueMap(options={
        "0": ValueMappingResult(text="ok", color="green", index=0),
        "1": ValueMappingResult(text="remap failed: RMA", color="red", index=1),
    })
]  # fmt: skip


def _alert_query(settings: Settings, name: str) -> str:
    """The alert's value query as its rules evaluate it, with the settings' thresholds."""
    (alert,) = [a for a in ALERTS if a.name == name]
    return alert_value_expr(alert, settings[name].threshold_text, inline=True)


def _gpu_state(title: str, query: Query, mappings: list[Any], description: str,
               width: int) -> Any:
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .unit("short")
        .datasource(DATASOURCE)
        .mappings(mappings)
        .color_scheme(dashboard.FieldColor().mode(FieldColorModeId.THRESHOLDS))
        .thresholds(_thresholds((None, "green"), (1, "orange")))
        .no_value(NEEDS_DCGM)
        .height(8)
        .span(width)
        .with_target(_target(query, "A"))
    )


def _gpu_health_row(settings: Settings) -> Row:
    gpus = _number(settings, "SpecServeGpuMissing", "gpus")
    share = _number(settings, "SpecServeGpuThrottled", "max_share")
    nvlink = _number(settings, "SpecServeGpuNvlinkErrors", "max_errors")
    drain = ", ".join(str(code) for code in DRAIN_XIDS)
    context = [
        _series(
            title, unit,
            [Query(f"max by (instance, Hostname, gpu) ({metric})", _GPU_LEGEND)],
            f"{metric} from dcgm-exporter.",
            width=6, no_value=NEEDS_DCGM,
        )
        for title, metric, unit in (
            ("GPU utilisation", DCGM_GPU_UTIL, "percent"),
            ("GPU memory used", DCGM_FB_USED, "mbytes"),
            ("GPU power", DCGM_POWER_USAGE, "watt"),
            ("GPU temperature", DCGM_GPU_TEMP, "celsius"),
        )
    ]
    return "GPU health (DCGM exporter)", [
        _series(
            "GPUs seen per node",
            "short",
            [Query(_alert_query(settings, "SpecServeGpuMissing"), "{{Hostname}} {{instance}}")],
            "GPUs each node's DCGM exporter reports (0 while the exporter is down), against "
            f"the profile's GPUs per node ({gpus:g}, the line): SpecServeGpuMissing fires "
            "below it. A GPU that fell off the bus (XID 79) leaves the count.",
            width=8, no_value=NEEDS_DCGM,
            thresholds=_thresholds((None, "red"), (gpus, "green")),
        ),
        _gpu_state(
            "Last XID per GPU",
            Query(DCGM_XID_ERRORS, _GPU_LEGEND),
            _XID_MAPPINGS,
            f"{DCGM_XID_ERRORS}: the last XID the driver logged for each GPU. Red: a drain "
            f"code ({drain}), SpecServeGpuXidDrain fires; orange: another code (an application "
            "fault such as 13, 31, 43 or 45 fails a request, not the node).",
            width=16,
        ),
        _series(
            "Uncorrectable memory errors (15m)",
            "short",
            [Query(f"increase({DCGM_ECC_DBE_VOLATILE}[15m])", f"{_GPU_LEGEND} double-bit ECC"),
             Query(f"increase({DCGM_UNCORRECTABLE_REMAPPED_ROWS}[15m])",
                   f"{_GPU_LEGEND} rows remapped")],
            "Double-bit ECC errors and rows remapped for uncorrectable errors over 15m, as "
            "SpecServeGpuUncorrectableEcc reads them: above 0 it fires.",
            width=8, no_value=NEEDS_DCGM,
            thresholds=_thresholds((None, "green"), (0.5, "red")),
        ),
        _gpu_state(
            "Row remap failure",
            Query(DCGM_ROW_REMAP_FAILURE, _GPU_LEGEND),
            _REMAP,
            f"{DCGM_ROW_REMAP_FAILURE}: 1 when a GPU could not remap a failing row "
            "(SpecServeGpuRowRemapFailure): the bad memory stays in use, the GPU needs service.",
            width=8,
        ),
        _series(
            "NVLink errors (5m)",
            "short",
            [Query(_alert_query(settings, "SpecServeGpuNvlinkErrors"), _GPU_LEGEND)],
            "NVLink CRC flit/data, replay and recovery errors over 5m per GPU, as "
            f"SpecServeGpuNvlinkErrors sums them; above {nvlink:g} (the line) for 10m it fires.",
            width=8, no_value=NEEDS_DCGM,
            thresholds=_thresholds((None, "green"), (nvlink, "orange")),
        ),
        _series(
            "Clocks held down (power + thermal)",
            "percentunit",
            [Query(_alert_query(settings, "SpecServeGpuThrottled"), _GPU_LEGEND)],
            "Share of the last 5m each GPU's clocks were held down by power or thermal limits "
            f"(the violation counters, µs): above {share:g} (the line) for 15m "
            "SpecServeGpuThrottled fires.",
            no_value=NEEDS_DCGM,
            thresholds=_thresholds((None, "green"), (share, "orange")),
        ),
        _series(
            "Clocks held down, by reason",
            "percentunit",
            [Query(f"rate({DCGM_POWER_VIOLATION}[5m]) / 1e6", f"{_GPU_LEGEND} power"),
             Query(f"rate({DCGM_THERMAL_VIOLATION}[5m]) / 1e6", f"{_GPU_LEGEND} thermal")],
            "The two reasons the throttle alert adds up: power capping (a PSU or the power "
            "limit) and temperature (cooling, a failing fan).",
            no_value=NEEDS_DCGM,
        ),
        *context,
    ]


# --- fleet and router (issue 19) ------------------------------------------------------------
ROUTER_JOB_VARIABLE = "router_job"
_ROUTER_JOB = f'job=~"${ROUTER_JOB_VARIABLE}"'
# The router's worker state as SpecServeWorkerOutOfRotation reads it (router_worker_state).
_WORKER_STATE = [
    ValueMap(
        options={
            "1": ValueMappingResult(text="in rotation", color="green", index=0),
            "0": ValueMappingResult(text="out: unhealthy, draining or circuit open", color="red",
                                   index=1),
            "-1": ValueMappingResult(text="removed from the router", color="orange", index=2),
        }
    )
]


def _fleet_row(settings: Settings) -> Row:
    window = _window(settings, "SpecServeFleetReplicaSlow")
    share = _number(settings, "SpecServeFleetReplicaSlow", "min_share")
    replica = inline_rule(REPLICA_THROUGHPUT, window)
    return "Fleet: replicas behind the router", [
        _series(
            "Decode throughput per replica",
            TOKENS_PER_SECOND,
            [Query(replica, f"{{{{instance}}}} {{{{pod}}}} ({window} mean)")],
            "Each replica's mean decode tokens/s over the window, all concurrency buckets "
            "together, DP ranks summed. A replica is an instance (a pod on Kubernetes).",
        ),
        _series(
            "Fleet throughput and the slowest replica",
            TOKENS_PER_SECOND,
            [
                Query(inline_rule(FLEET_THROUGHPUT, window),
                      f"{{{{job}}}} fleet total ({window} mean)"),
                Query(inline_rule(FLEET_SLOWEST_THROUGHPUT, window),
                      f"{{{{job}}}} slowest replica ({window} mean)"),
            ],
            "The fleet's decode tokens/s (every decoding replica summed) and its slowest "
            "replica's. The fleet is every label but instance and pod.",
        ),
        _series(
            "Replica throughput over the fleet mean",
            "percentunit",
            [Query(inline_rule(REPLICA_THROUGHPUT_SHARE, window),
                   f"{{{{instance}}}} {{{{pod}}}} ({window})")],
            "Each replica's throughput as a share of the mean of the fleet's decoding "
            f"replicas; below {share:g} (the SpecServeFleetReplicaSlow line) for long, that "
            "replica is slow.",
            width=16,
            thresholds=_thresholds((None, "red"), (share, "green")),
        ),
        stat.Panel()
        .title("Replicas decoding")
        .description("Replicas of each fleet that logged decode lines in the window.")
        .unit("short")
        .datasource(DATASOURCE)
        .height(8)
        .span(8)
        .with_target(
            _target(Query(f"count without (instance, pod) ({replica})", "{{job}}",
                          instant=True), "A")
        ),
        _capacity_panel(settings),
    ]


def _capacity_panel(settings: Settings) -> timeseries.Panel:
    """The autoscaler's signal (issue 32 item 3): the load in replicas, the replicas it asks for
    at the planned utilisation (one more per worker out of rotation, as the chart's query
    counts them), the workers out and the SGLang servers reporting."""
    window = _window(settings, "SpecServeFleetNeedsReplicas")
    planned = _number(settings, "SpecServeFleetNeedsReplicas", "max_utilisation")
    load = inline_rule(FLEET_REPLICA_LOAD, window)
    out = inline_rule(FLEET_WORKERS_OUT, window)
    return _series(
        "Replicas the load needs (speculation counted)",
        "short",
        [
            Query(load, f"{{{{namespace}}}} load in replicas ({window})"),
            # No router, no out-of-rotation series: nothing to add.
            Query(f"ceil(({load}) / {planned:g}) + ({out} or ({load}) * 0)",
                  f"{{{{namespace}}}} replicas asked for at {planned:g} (out of rotation "
                  "added)"),
            Query(out, "{{namespace}} workers out of rotation"),
            Query(inline_rule(FLEET_SERVERS, window), "{{namespace}} SGLang servers reporting"),
        ],
        "Decode tokens/s demanded (SGLang's gen_throughput x (running + queued) / running) "
        "over what one replica delivers with speculation (the baseline's best bucket x the "
        "lowest measured speedup). The chart's autoscaler asks for that load over "
        f"{planned:g}, rounded up, plus one replica per worker the router took out of rotation "
        "(a replica out carries nothing); SpecServeFleetNeedsReplicas fires when the servers "
        "in rotation stay short of the load.",
        width=24,
    )


def _router_row(settings: Settings) -> Row:
    def rate(metric: str) -> str:
        return f"rate({metric}[$__rate_interval])"

    return "Router (SGLang's smg)", [
        _state(
            "Router scrape target",
            [Query(f"{UP}{{{_ROUTER_JOB}}}", "{{instance}}")],
            f"Prometheus' up metric for the router job (dashboard variable "
            f"${ROUTER_JOB_VARIABLE}); SpecServeRouterDown fires when it stays 0.",
            width=6,
        ),
        statetimeline.Panel()
        .title("Workers in rotation")
        .description("Each worker as the router sees it: in rotation, out (failing health "
                     "checks, draining, or circuit breaker open) or removed (gone from the "
                     "router's list, shown for 6 h after). SpecServeWorkerOutOfRotation "
                     "fires when a worker stays out longer than its `for`.")
        .unit("short")
        .datasource(DATASOURCE)
        .mappings(_WORKER_STATE)  # type: ignore[arg-type]
        .height(6)
        .span(18)
        .with_target(_target(Query(
            router_worker_state(_ROUTER_JOB),
            "{{worker}}"), "A")),
        _series(
            "Router responses by status",
            "reqps",
            [Query(f"sum by (instance, status_code) ({rate(ROUTER_UPSTREAM_RESPONSES)})",
                   "{{instance}} {{status_code}}")],
            "Responses the router returned per second, by HTTP status (a 503 with "
            "no_available_workers: every worker out of rotation).",
            width=8,
        ),
        _series(
            "Router requests and retries",
            "reqps",
            [
                Query(f"sum by (instance, endpoint) ({rate(ROUTER_REQUESTS)})",
                      "{{instance}} {{endpoint}} requests"),
                # `or ... * 0`: the retry counter only exists after a first retry.
                Query(f"sum by (instance) ({rate(ROUTER_WORKER_RETRIES)})\nor\n"
                      f"sum by (instance) ({rate(ROUTER_REQUESTS)}) * 0",
                      "{{instance}} retries"),
            ],
            "Requests routed per second and retries on another worker (a worker failed a "
            "request the router then sent elsewhere).",
            width=8,
        ),
        _series(
            "Router request latency",
            "s",
            [
                Query(f"histogram_quantile({q}, sum by (instance, le) "
                      f"({rate(ROUTER_REQUEST_DURATION + '_bucket')}))",
                      f"{{{{instance}}}} p{q[2:].ljust(2, '0')}")
                for q in ("0.5", "0.99")
            ],
            "p50/p99 of the router's request duration (routing plus the worker's answer).",
            width=8,
        ),
        _series(
            "In-flight requests per worker",
            "short",
            [Query(f"max by (instance, worker) ({ROUTER_WORKER_ACTIVE_REQUESTS}"
                   f"{{{_ROUTER_JOB}}})", "{{worker}}")],
            "Requests the router has in flight on each worker: an even spread means the "
            "replicas share the load; a drained worker goes to 0 before its restart.",
            width=8,
        ),
        _series(
            "Requests sent per worker",
            "reqps",
            [Query(f"sum by (instance, worker) ({rate(ROUTER_WORKER_REQUESTS)})", "{{worker}}")],
            "Requests the router sends each worker per second, retries included: a worker "
            "its overload protection leaves out (8 waiting requests or 0.8 KV usage by "
            "default) gets fewer than the rest.",
            width=8,
        ),
        stat.Panel()
        .title("Workers in the router's pool")
        .description("Workers the router knows (removed ones leave the pool).")
        .unit("short")
        .datasource(DATASOURCE)
        .height(8)
        .span(8)
        .with_target(_target(Query(
            f"sum by (instance) ({ROUTER_WORKER_POOL_SIZE}{{{_ROUTER_JOB}}})",
            "{{instance}}", instant=True), "A")),
    ]


# --- SLOs (issue 32 item 1) -----------------------------------------------------------------
NEEDS_SLO_RULES = "needs the specserve.slo recording rules (docs/slo.md)"


def _burn_rate(ratio: str, window: str) -> str:
    return f"{ratio}{window}\n/ on (slo) group_left ()\n{slo.ERROR_BUDGET}"


def _slo_row(settings: Settings) -> Row:
    """Budget remaining and burn rates from the SLO group's records by name: a 28-day ratio is
    not a query to inline into a dashboard refreshed every 30 s."""
    page = max(rate.factor for rate in slo.BURN_RATES)
    slow_page = sorted({rate.factor for rate in slo.BURN_RATES})[-2]
    budget_steps = _thresholds((None, "red"), (0.0, "orange"), (0.5, "green"))
    return "SLO error budget", [
        _series(
            "Error budget remaining (fleet)", "percentunit",
            [Query(slo.FLEET_BUDGET_REMAINING, "{{slo}} {{job}}")],
            "Share of each objective's error budget (1 - target) left over its SLO window "
            "(default 28d), for the whole fleet; below 0 the objective is missed.",
            width=8, thresholds=budget_steps, no_value=NEEDS_SLO_RULES,
        ),
        _series(
            "Error budget remaining per replica", "percentunit",
            [Query(slo.BUDGET_REMAINING, "{{slo}} {{instance}}")],
            "The same per replica (latency objectives; availability is the router's, fleet "
            "only).",
            width=8, thresholds=budget_steps, no_value=NEEDS_SLO_RULES,
        ),
        _series(
            "Burn rate (fleet)", "short",
            [Query(_burn_rate(slo.FLEET_ERROR_RATIO, "1h"), "{{slo}} 1h"),
             Query(_burn_rate(slo.FLEET_ERROR_RATIO, "6h"), "{{slo}} 6h"),
             Query(_burn_rate(slo.FLEET_ERROR_RATIO, "3d"), "{{slo}} 3d")],
            f"Error ratio over the budget: 1 spends the budget exactly in the SLO window. Pages "
            f"at {page:g}x over 1h (and 5m) or {slow_page:g}x over 6h (and 30m), a ticket at "
            "1x over 3d (and 6h).",
            width=8,
            thresholds=_thresholds((None, "green"), (1.0, "orange"), (slow_page, "red")),
            no_value=NEEDS_SLO_RULES,
        ),
    ]


def build_dashboard(settings: Settings | None = None) -> dict[str, Any]:
    """The dashboard for `settings` (overrides resolved); the defaults when None."""
    if settings is None:
        settings = {alert.name: default_settings(alert) for alert in ALERTS}
    builder = (
        dashboard.Dashboard("specserve: speculative decoding")
        .uid(DASHBOARD_UID)
        .description("Accept length, throughput against the non-speculative baseline, server "
                     "state and exporter health of an SGLang speculative-decoding deployment.")
        .tags(["specserve", "sglang", "speculative-decoding"])
        .refresh("30s")
        .time("now-3h", "now")
        .with_variable(
            dashboard.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus").type("prometheus")
        )
        .with_variable(
            dashboard.TextBoxVariable(EXPORTER_JOB_VARIABLE)
            .label("Exporter job")
            .default_value("specserve-exporter")
        )
        .with_variable(
            dashboard.TextBoxVariable(ROUTER_JOB_VARIABLE)
            .label("Router job")
            .default_value(ROUTER_JOB)
        )
    )
    for row in (_accept_length_row, _throughput_row, _server_row, _exporter_row,
                _native_row, _gpu_health_row, _fleet_row, _router_row, _slo_row):
        title, panels = row(settings)
        builder = builder.with_row(dashboard.Row(title))
        for panel in panels:
            builder = builder.with_panel(panel)
    model = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    for panel_id, panel in enumerate(model["panels"], start=1):
        panel["id"] = panel_id
    return model


def dashboard_json(settings: Settings | None = None) -> str:
    return json.dumps(build_dashboard(settings), indent=2, sort_keys=False) + "\n"


def iter_panels(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' collapsed children included."""
    for panel in model["panels"]:
        yield panel
        yield from panel.get("panels", [])
