"""Names of the metrics the monitoring reads that other exporters serve: SGLang's own
(`--enable-metrics`), Prometheus' `up` and NVIDIA's dcgm-exporter.

The specserve exporter's metrics are not here: their one table is `specserve_exporter.names`,
which the exporter's collector builds its families from.
"""

from __future__ import annotations

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

# dcgm-exporter's default counters.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
