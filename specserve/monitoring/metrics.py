"""Names of the metrics the monitoring reads that other exporters serve: SGLang's own
(`--enable-metrics`), Prometheus' `up`, NVIDIA's dcgm-exporter and SGLang's router.

The specserve exporter's metrics are not here: their one table is `specserve_exporter.names`,
which the exporter's collector builds its families from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Prometheus' scrape health of a target.
UP = "up"

# SGLang, served on the server's /metrics with --enable-metrics.
SGLANG_RUNNING_REQUESTS = "sglang:num_running_reqs"
SGLANG_QUEUED_REQUESTS = "sglang:num_queue_reqs"
SGLANG_GEN_THROUGHPUT = "sglang:gen_throughput"
SGLANG_SPEC_ACCEPT_LENGTH = "sglang:spec_accept_length"
SGLANG_TIME_TO_FIRST_TOKEN = "sglang:time_to_first_token_seconds"
SGLANG_INTER_TOKEN_LATENCY = "sglang:inter_token_latency_seconds"
SGLANG_E2E_REQUEST_LATENCY = "sglang:e2e_request_latency_seconds"
# The counters native accept length and graph state are computed from (metrics_collector.py):
# generated tokens, finished requests (both per finished request, label is_streaming), verify
# calls (per finished request, only when it had any), retracted requests (per retraction, on
# every TP rank) and forward passes per `mode` (decode_cuda_graph, decode_none,
# prefill_cuda_graph, prefill_none; one per pass on every TP rank).
SGLANG_GENERATION_TOKENS = "sglang:generation_tokens_total"
SGLANG_REQUESTS = "sglang:num_requests_total"
SGLANG_SPEC_VERIFY_CALLS = "sglang:spec_verify_calls_total"
SGLANG_RETRACTED_REQUESTS = "sglang:num_retracted_requests_total"
SGLANG_CUDA_GRAPH_PASSES = "sglang:cuda_graph_passes_total"
# The active draft-token count (a scheduler gauge set with each decode stats window).
SGLANG_SPEC_DRAFT_TOKENS = "sglang:spec_num_draft_tokens"
# A block drafter's accept length before the verify cap trimmed it (each decode stats window; 0
# unless DSPARK verifies under SGLANG_RAGGED_VERIFY_MODE=cap-accept).
SGLANG_SPEC_BLOCK_ACCEPT_LENGTH = "sglang:spec_block_accept_length"

# dcgm-exporter's default counters.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
# GPU health (docs/gpu-health.md). Every DCGM_FI_* name is in the pinned exporter's own counters
# file (specserve/monitoring/dcgm.py); the ones its default file leaves commented out are
# enabled by the counters file specserve deploys (dcgm.ENABLED).
DCGM_XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"  # gauge: the last XID code seen, 0 for none
DCGM_ECC_DBE_VOLATILE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DCGM_UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
DCGM_ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # gauge: 1 when a remap failed
DCGM_POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"  # counter: microseconds throttled
DCGM_THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
DCGM_NVLINK_CRC_FLIT_ERRORS = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
DCGM_NVLINK_CRC_DATA_ERRORS = "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"
DCGM_NVLINK_REPLAY_ERRORS = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
DCGM_NVLINK_RECOVERY_ERRORS = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"

# SGLang's router (smg, Shepherd Model Gateway; sglang-router up to 0.3.2), served on
# --prometheus-port (default 29000) at /metrics. Names, types and labels as the pinned binary
# exports them (tests/monitoring/test_router_metrics.py scrapes the real binary in front of
# stand-ins); a worker's series carry `worker`, its URL as given to the router (http://host:port).
ROUTER_REQUESTS = "smg_router_requests_total"
ROUTER_UPSTREAM_RESPONSES = "smg_router_upstream_responses_total"
ROUTER_REQUEST_DURATION = "smg_router_request_duration_seconds"
ROUTER_WORKER_RETRIES = "smg_worker_retries_total"
# 1 in rotation, 0 failing its health checks or draining (smg keeps a removed worker in a
# `draining` state, not routed to, for 5 s); once removed, the worker's series are gone.
ROUTER_WORKER_HEALTH = "smg_worker_health"
# Circuit breaker: 0 closed, 1 open (no traffic sent), 2 half-open.
ROUTER_WORKER_CIRCUIT = "smg_worker_cb_state"
ROUTER_WORKER_ACTIVE_REQUESTS = "smg_worker_requests_active"
ROUTER_WORKER_POOL_SIZE = "smg_worker_pool_size"
# Requests dispatched to each worker (each send, retries included).
ROUTER_WORKER_REQUESTS = "smg_worker_requests_total"

# How long a worker that left the router's list still counts as out of rotation: smg drops a
# removed worker's series, so "removed" is read as "seen within this window, gone now".
# Longer than SpecServeWorkerOutOfRotation's `for` (30m), or a removal would never fire it; a
# worker retired on purpose stops counting this long after it left.
ROUTER_RETIRED_LOOKBACK = "6h"


def router_worker_state(selector: str) -> str:
    """PromQL for each worker's place in the router's rotation: 1 in rotation, 0 out (failing
    health checks, draining, or circuit open), -1 gone from the router's worker list (removed),
    for ROUTER_RETIRED_LOOKBACK after its last sample."""
    health = f"{ROUTER_WORKER_HEALTH}{{{selector}}}"
    circuit = f"{ROUTER_WORKER_CIRCUIT}{{{selector}}}"
    return (f"{health}\n"
            f"* ({circuit} != bool 1)\n"
            f"or on (job, instance, worker)\n"
            f"(0 * last_over_time({health}[{ROUTER_RETIRED_LOOKBACK}]) - 1)")


@dataclass(frozen=True)
class RouterMetric:
    """One router series family as /metrics declares it: its `# TYPE` and its label names."""

    name: str
    type: Literal["counter", "gauge", "histogram"]
    labels: tuple[str, ...]


ROUTER_METRICS: tuple[RouterMetric, ...] = (
    RouterMetric(ROUTER_REQUESTS, "counter", ("router_type", "backend_type", "connection_mode",
                                             "model", "endpoint", "streaming")),
    RouterMetric(ROUTER_UPSTREAM_RESPONSES, "counter",
                 ("router_type", "status_code", "error_code")),
    RouterMetric(ROUTER_REQUEST_DURATION, "histogram",
                 ("router_type", "backend_type", "connection_mode", "model", "endpoint")),
    RouterMetric(ROUTER_WORKER_RETRIES, "counter", ("worker_type", "endpoint")),
    RouterMetric(ROUTER_WORKER_HEALTH, "gauge", ("worker",)),
    RouterMetric(ROUTER_WORKER_CIRCUIT, "gauge", ("worker",)),
    RouterMetric(ROUTER_WORKER_ACTIVE_REQUESTS, "gauge", ("worker",)),
    RouterMetric(ROUTER_WORKER_POOL_SIZE, "gauge", ("worker_type", "connection_mode", "model")),
    RouterMetric(ROUTER_WORKER_REQUESTS, "counter", ("worker", "model")),
)
