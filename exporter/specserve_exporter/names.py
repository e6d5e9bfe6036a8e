"""Every metric the exporter serves: its name, type, labels and help text, in one place.

The collector builds its families from these; the monitoring generator, the verification gate
and bench import the same constants instead of spelling names out. Standard library only, so any
tool can import it without the exporter's dependencies.

Names follow Prometheus' naming guide: one prefix (`specserve_`), base units in the name
(`_seconds`, `_ratio`, `_tokens_per_second`); a counter's samples end in `_total`, a histogram's
in `_bucket`, `_sum` and `_count` (the properties below), as prometheus_client writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

PREFIX = "specserve_"
# The printing rank of a stats line; every per-rank series carries all three.
RANK_LABELS: tuple[str, ...] = ("dp", "tp", "pp")


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # the family's name: without `_total` for a counter
    type: MetricType
    labels: tuple[str, ...]
    help: str

    @property
    def sample(self) -> str:
        """The name of the sample a query selects (a counter's `_total`)."""
        return self.name + "_total" if self.type is MetricType.COUNTER else self.name

    @property
    def total(self) -> str:
        return self._suffixed(MetricType.COUNTER, "_total")

    @property
    def bucket(self) -> str:
        return self._suffixed(MetricType.HISTOGRAM, "_bucket")

    @property
    def sum(self) -> str:
        return self._suffixed(MetricType.HISTOGRAM, "_sum")

    @property
    def count(self) -> str:
        return self._suffixed(MetricType.HISTOGRAM, "_count")

    def _suffixed(self, type_: MetricType, suffix: str) -> str:
        if self.type is not type_:
            raise AttributeError(f"{self.name} is a {self.type}, it has no {suffix} series")
        return self.name + suffix


def _metric(name: str, type_: MetricType, labels: tuple[str, ...], help_: str) -> Metric:
    return Metric(PREFIX + name, type_, labels, help_)


_C, _G, _H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM
_R = RANK_LABELS

# Label names other than the ranks.
KIND = "kind"  # decode | prefill (fields.Kind)
REASON = "reason"  # parser.Reason; sources.base.ErrorReason for source errors
POOL = "pool"  # KV pool: kv, full, swa, mamba, gpu, cpu (fields.USAGES)
GRAPH = "graph"  # cuda, cpu, npu, musa (fields.GRAPHS)
CONCURRENCY = "concurrency"  # specserve.buckets.concurrency_bucket
SOURCE = "source"  # file, docker, kubernetes

# --- line counters -----------------------------------------------------------------------------
LOG_LINES_READ = _metric("log_lines_read", _C, (), "Log lines read from the source.")
LOG_LINES_PARSED = _metric(
    "log_lines_parsed", _C, (KIND,),
    "SGLang scheduler stats lines parsed, by kind (decode or prefill).")
LOG_LINES_REJECTED = _metric(
    "log_lines_rejected", _C, (REASON,),
    "Stats lines that could not be read, by reason. Never fatal.")
LOG_LINES_IGNORED = _metric(
    "log_lines_ignored", _C, (),
    "Lines that are not scheduler stats lines (HTTP access lines, warnings, ...).")
LOG_UNKNOWN_FIELDS = _metric(
    "log_unknown_fields", _C, (),
    "Fields of parsed stats lines this exporter does not know (a newer SGLang format).")
LOG_FILE_GAPS = _metric(
    "log_file_gaps", _C, (),
    "Times specserve-launch could not write the log file (full disk, read-only, directory "
    "gone) and said so in it once it could (`specserve-launch: log file unavailable from T1 to "
    "T2, N bytes not written (...)`): output the exporter never saw.")
LOG_FILE_GAP_BYTES = _metric(
    "log_file_gap_bytes", _C, (),
    "Bytes of server output specserve-launch could not write to the log file (the N of each "
    "gap marker).")

# --- decode ------------------------------------------------------------------------------------
DECODE_ACCEPT_LENGTH = _metric(
    "decode_accept_length", _H, _R,
    "Per-window mean accept length (accepted tokens per verify pass, bonus token included: "
    "1.0 = every draft token rejected).")
DECODE_GEN_THROUGHPUT = _metric(
    "decode_gen_throughput_tokens_per_second", _H, (*_R, CONCURRENCY),
    "Per-window whole-server decode throughput, by concurrency bucket of #running-req "
    "(compare with the baseline of the same bucket).")
DECODE_LAST_ACCEPT_LENGTH = _metric(
    "decode_last_accept_length", _G, _R, "Accept length of the last window.")
DECODE_LAST_GEN_THROUGHPUT = _metric(
    "decode_last_gen_throughput_tokens_per_second", _G, _R,
    "Whole-server decode throughput of the last window, as printed by SGLang.")
DECODE_RUNNING_REQUESTS = _metric(
    "decode_running_requests", _G, _R, "Running requests (#running-req).")
DECODE_QUEUED_REQUESTS = _metric(
    "decode_queued_requests", _G, _R, "Queued requests (#queue-req).")
DECODE_TOKEN_USAGE = _metric(
    "decode_token_usage_ratio", _G, (*_R, POOL),
    "KV cache usage of the last decode window, one series per pool the line prints (kv for "
    "standard models; docs/metrics.md tells which model kind prints which).")
DECODE_GRAPH_ENABLED = _metric(
    "decode_graph_enabled", _G, (*_R, GRAPH),
    "1 when the last decode window ran with graphs (CUDA graphs on NVIDIA).")
DECODE_GRAPH_LINES = _metric(
    "decode_graph_lines", _H, (*_R, GRAPH, CONCURRENCY),
    "Decode lines by graph kind and concurrency bucket of #running-req: 1 when the window ran "
    "on a captured graph, 0 when eagerly. `_bucket{le=\"0.0\"}` counts the lines off the "
    "graphs (on CUDA: a batch above the largest captured one), `_count` all of them.")
DECODE_PRINTED_ACCEPT_RATE = _metric(
    "decode_printed_accept_rate_ratio", _G, _R,
    "SGLang's own `accept rate`, as printed. Its meaning changed in SGLang PR #23530 "
    "(accept_len/draft_tokens before, (accept_len-1)/(draft_tokens-1) after).")
DECODE_DRAFT_ACCEPTANCE = _metric(
    "decode_draft_acceptance_ratio", _G, _R,
    "Computed by the exporter for every SGLang version: (accept_len - 1) / (draft_tokens - 1) "
    "with the configured draft-token count (under adaptive speculation the server's current "
    "one); absent without one. With top-k > 1 the maximum is steps / (draft_tokens - 1).")
# The block drafters' own fields (DFLASH, DSPARK): SGLang prints each only when it is above 0.
DECODE_LAST_BLOCK_ACCEPT_LENGTH = _metric(
    "decode_last_block_accept_length", _G, _R,
    "`block accept len` of the last window: tokens accepted per verify pass counted over the "
    "whole drafted block (DFLASH / DSPARK in cap-accept verify mode); absent when not printed.")
DECODE_LAST_CAP_LENGTH = _metric(
    "decode_last_cap_length", _G, _R,
    "`cap len` of the last window: drafted tokens per verify pass trimmed by the verify cap "
    "(block drafters); absent when not printed.")
DECODE_UNCAPPED_ACCEPT_LENGTH_ESTIMATE = _metric(
    "decode_uncapped_accept_length_estimate", _G, _R,
    "DSPARK's `est uncap acc len` of the last window, its mid value: the accept length the "
    "drafted block would give without the cap; absent when not printed.")
DECODE_LAST_LINE_TIMESTAMP = _metric(
    "decode_last_line_timestamp_seconds", _G, _R,
    "Unix time at which the exporter read the last decode line of this rank.")

# --- prefill -----------------------------------------------------------------------------------
PREFILL_NEW_TOKENS = _metric("prefill_new_tokens", _C, _R, "Prefilled tokens (#new-token).")
PREFILL_CACHED_TOKENS = _metric(
    "prefill_cached_tokens", _C, _R,
    "Prompt tokens served from the prefix cache (#cached-token).")
PREFILL_LAST_INPUT_THROUGHPUT = _metric(
    "prefill_last_input_throughput_tokens_per_second", _G, _R,
    "Input throughput of the last prefill line (newer SGLang versions only).")

# --- configuration and source ------------------------------------------------------------------
SPECULATIVE_DRAFT_TOKENS = _metric(
    "speculative_draft_tokens", _G, (),
    "Draft tokens per verify pass: the configured --speculative-num-draft-tokens, or with "
    "--speculative-adaptive the server's current value from its last `Switch adaptive runtime "
    "state` log line (the configured start value until then).")
SPECULATIVE_ADAPTIVE = _metric(
    "speculative_adaptive", _G, (),
    "1 when the server runs --speculative-adaptive (steps and draft tokens change at run time).")
SPECULATIVE_ADAPTIVE_SWITCHES = _metric(
    "speculative_adaptive_switches", _C, (),
    "`Switch adaptive runtime state` lines read: the server changed its steps and draft tokens.")
BASELINE_GEN_THROUGHPUT = _metric(
    "baseline_gen_throughput_tokens_per_second", _G, (CONCURRENCY,),
    "Measured non-speculative throughput per concurrency bucket: the alert threshold.")
SOURCE_UP = _metric("source_up", _G, (SOURCE,), "1 while the log source is being read.")
SOURCE_REOPENS = _metric(
    "source_reopens", _C, (SOURCE,),
    "Times the source was reopened: file rotations and truncations, container or pod restarts.")
SOURCE_ERRORS = _metric(
    "source_errors", _C, (SOURCE, REASON),
    "Times the log source went into the error state, by reason (the log path is a directory, "
    "a FIFO or a device; permission denied; a read error; the API unreachable): retried every "
    "poll interval, specserve_source_up is 0 meanwhile.")

# Every metric the exporter can serve, in the order a scrape lists them.
ALL: tuple[Metric, ...] = (
    LOG_LINES_READ, LOG_LINES_PARSED, LOG_LINES_REJECTED, LOG_LINES_IGNORED, LOG_UNKNOWN_FIELDS,
    LOG_FILE_GAPS, LOG_FILE_GAP_BYTES,
    DECODE_ACCEPT_LENGTH, DECODE_GEN_THROUGHPUT, DECODE_LAST_ACCEPT_LENGTH,
    DECODE_LAST_GEN_THROUGHPUT, DECODE_RUNNING_REQUESTS, DECODE_QUEUED_REQUESTS,
    DECODE_TOKEN_USAGE, DECODE_GRAPH_ENABLED, DECODE_GRAPH_LINES, DECODE_PRINTED_ACCEPT_RATE,
    DECODE_DRAFT_ACCEPTANCE, DECODE_LAST_BLOCK_ACCEPT_LENGTH, DECODE_LAST_CAP_LENGTH,
    DECODE_UNCAPPED_ACCEPT_LENGTH_ESTIMATE, DECODE_LAST_LINE_TIMESTAMP,
    PREFILL_NEW_TOKENS, PREFILL_CACHED_TOKENS, PREFILL_LAST_INPUT_THROUGHPUT,
    SPECULATIVE_DRAFT_TOKENS, SPECULATIVE_ADAPTIVE, SPECULATIVE_ADAPTIVE_SWITCHES,
    BASELINE_GEN_THROUGHPUT, SOURCE_UP, SOURCE_REOPENS, SOURCE_ERRORS,
)
BY_NAME: dict[str, Metric] = {m.name: m for m in ALL}
