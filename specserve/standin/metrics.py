"""SGLang's native Prometheus metrics (`--enable-metrics`), with upstream's names and labels.

Names, types, label sets and bucket bounds follow upstream
`python/sglang/srt/observability/metrics_collector.py` (SchedulerMetricsCollector and
TokenizerMetricsCollector), and so do the updates: scheduler gauges are set when a stats line is
printed (they hold the last window's values) and when the scheduler goes idle (`idle`, SGLang's
idle publish: running and queued 0, so the running-requests gauge never sticks at the last
window's count once nothing runs); `cuda_graph_passes_total` steps once per
decode pass; the tokenizer's counters step when a request finishes (`is_streaming` on tokens,
requests, TTFT and e2e; `spec_verify_calls_total` by the request's verify passes, only when it
had any); ITL adds the whole interval to the sum and `num_new_tokens` to one bucket, as
upstream's fast path does. tests/standin/test_native_metrics_parity.py drives the real collectors
(and SGLang's real idle publish) and this class with the same events and compares every series.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800,
    2400,
)  # fmt: skip
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip


class NativeMetrics:
    """One registry per server, so tests can run several stand-ins in one process."""

    def __init__(self, model_name: str, custom_labels: tuple[str, ...] = ()) -> None:
        self.registry = CollectorRegistry()
        sched = {
            "model_name": model_name,
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        names = list(sched)
        r = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=r)

        self.num_running_reqs = gauge("sglang:num_running_reqs", "The number of running requests.")
        self.num_used_tokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.token_usage = gauge("sglang:token_usage", "The token usage.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        self.num_queue_reqs = gauge(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue."
        )
        self.spec_accept_length = gauge(
            "sglang:spec_accept_length", "The average acceptance length of speculative decoding."
        )
        self.spec_accept_rate = gauge(
            "sglang:spec_accept_rate",
            "The average acceptance rate of speculative decoding "
            "(`accepted tokens / total draft tokens` in batch).",
        )
        # DSPARK's ragged verify (0 for every other algorithm and in static mode).
        self.spec_cap_length = gauge(
            "sglang:spec_cap_length",
            "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot "
            "(0 when no cap is scheduled).",
        )
        self.spec_block_accept_length = gauge(
            "sglang:spec_block_accept_length",
            "Mean uncapped full-block accept length per verify step (accept + cap-trimmed "
            "drafts; exact only in DSpark cap-accept mode).",
        )
        self.is_cuda_graph = gauge("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.")
        # The shape of the running speculation, which --speculative-adaptive changes at run time.
        self.spec_num_steps = gauge(
            "sglang:spec_num_steps", "Currently active speculative_num_steps."
        )
        self.spec_num_draft_tokens = gauge(
            "sglang:spec_num_draft_tokens",
            "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
        )
        self.max_total_num_tokens = gauge(
            "sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."
        )
        self.cuda_graph_passes = Counter(
            "sglang:cuda_graph_passes",
            "Total number of forward passes categorized by CUDA graph.",
            [*names, "mode"],
            registry=r,
        )
        self._sched = sched
        # SchedulerStats' fields behind the gauges above, at its defaults: log_stats sets each
        # gauge from them at every publish, so a gauge holds its field's last value.
        self._stats: dict[str, float] = dict.fromkeys(
            ("num_running_reqs", "num_queue_reqs", "gen_throughput", "num_used_tokens",
             "token_usage", "spec_accept_length", "spec_accept_rate", "spec_cap_length",
             "spec_block_accept_length", "spec_num_steps", "spec_num_draft_tokens",
             "is_cuda_graph"),
            0.0,
        )  # fmt: skip

        # TokenizerManager.init_metric_collector_watchdog's labels (no priority scheduling),
        # then each --tokenizer-metrics-allowed-custom-labels name at "" (0.5.23:
        # tokenizer_metric_labels): a request without the label counts under "".
        tok = {"model_name": model_name, "engine_type": "unified"}
        tok.update(dict.fromkeys(custom_labels, ""))
        tnames = list(tok)
        snames = [*tnames, "is_streaming"]
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens", "Number of prefill tokens processed.", snames, registry=r
        )
        self.generation_tokens = Counter(
            "sglang:generation_tokens", "Number of generation tokens processed.", snames, registry=r
        )
        self.spec_verify_calls = Counter(
            "sglang:spec_verify_calls",
            "Number of speculative decoding verification calls.",
            tnames,
            registry=r,
        )
        self.num_requests = Counter(
            "sglang:num_requests", "Number of requests processed.", snames, registry=r
        )
        self.num_aborted_requests = Counter(
            "sglang:num_aborted_requests", "Number of requests aborted.", tnames, registry=r
        )
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            snames,
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            tnames,
            buckets=ITL_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            snames,
            buckets=E2E_BUCKETS,
            registry=r,
        )
        self._tok = tok

    def constants(self, max_total_tokens: int) -> None:
        """SchedulerMetricsCollector.emit_constants, once when the scheduler starts."""
        self.max_total_num_tokens.labels(**self._sched).set(max_total_tokens)

    def _log_stats(self, **changes: float) -> None:
        """Update the held SchedulerStats fields, then SchedulerMetricsCollector.log_stats:
        every scheduler gauge is set from the held stats at every publish."""
        self._stats.update(changes)
        for name, value in self._stats.items():
            gauge: Gauge = getattr(self, name)
            gauge.labels(**self._sched).set(value)

    def scheduler_window(
        self,
        running: int,
        used_tokens: int,
        token_usage: float,
        queued: int,
        gen_throughput: float,
        accept_length: float,
        accept_rate: float,
        num_steps: int,
        num_draft_tokens: int,
        cap_length: float = 0.0,
        block_accept_length: float = 0.0,
    ) -> None:
        """A Decode stats line's publish: the fields report_decode_stats sets, then log_stats.
        `num_steps` / `num_draft_tokens` are the active shape, 0 / 0 without speculation
        (_active_spec_config_snapshot). `cap_length` / `block_accept_length` are the line's
        `cap len` / `block accept len` (0 where not printed: report_decode_stats sets the stats
        to the same values it prints). is_cuda_graph is not among them: SchedulerStats'
        is_cuda_graph is assigned nowhere in SGLang 0.5.21 / 0.5.23, so it exports its default
        0 whatever the batch ran (the decode line's `cuda graph` and cuda_graph_passes_total
        carry the graph state)."""
        self._log_stats(
            num_running_reqs=running,
            num_queue_reqs=queued,
            gen_throughput=gen_throughput,
            num_used_tokens=used_tokens,
            # PoolStats.update_scheduler_stats (pool_stats_observer.py) rounds it to 2 decimals.
            token_usage=round(token_usage, 2),
            spec_accept_length=accept_length,
            spec_accept_rate=accept_rate,
            spec_cap_length=cap_length,
            spec_block_accept_length=block_accept_length,
            spec_num_steps=num_steps,
            spec_num_draft_tokens=num_draft_tokens,
        )

    def idle(self) -> None:
        """The scheduler is idle: SGLang's idle publish of the scheduler gauges.

        Upstream (0.5.21 and 0.5.23): the event loop calls Scheduler.on_idle whenever it finds
        no batch to run; once the scheduler is fully idle (no running batch, nothing waiting),
        on_idle calls SchedulerMetricsReporter._maybe_log_idle_metrics
        (managers/scheduler_components/metrics_reporter.py). That publishes at once when the
        running gauge disagrees with the empty running batch (`gauge_stale`), else at most every
        30 s: num_running_reqs from the empty running batch, num_queue_reqs from the empty
        waiting queue, gen_throughput 0, the pool's used tokens and usage (0: a finished
        request's KV is free or evictable cache), then log_stats, which sets every other gauge
        to its held value. The engine decides when (engine.py, Engine._on_idle).
        """
        self._log_stats(
            num_running_reqs=0, num_queue_reqs=0, gen_throughput=0, num_used_tokens=0,
            token_usage=0,
        )  # fmt: skip

    def decode_pass(self, graph: bool) -> None:
        mode = "decode_cuda_graph" if graph else "decode_none"
        self.cuda_graph_passes.labels(**self._sched, mode=mode).inc()

    def _request(self, custom: dict[str, object] | None) -> dict[str, str]:
        """collect_metrics' labels: the collector's, updated with the request's custom labels
        (extract_custom_labels kept only allowed names; prometheus_client str()s each value)."""
        return {**self._tok, **{k: str(v) for k, v in (custom or {}).items()}}

    def _streaming(self, stream: bool, custom: dict[str, object] | None = None) -> dict[str, str]:
        return {**self._request(custom), "is_streaming": "true" if stream else "false"}

    def first_token(
        self, seconds: float, stream: bool = False, custom: dict[str, object] | None = None
    ) -> None:
        self.ttft.labels(**self._streaming(stream, custom)).observe(seconds)

    def inter_token(
        self, interval: float, num_new_tokens: int, custom: dict[str, object] | None = None
    ) -> None:
        """Upstream's observe_inter_token_latency: `interval` since the request's last output,
        which brought `num_new_tokens`; each token counts interval / num_new_tokens."""
        adjusted = interval / num_new_tokens
        hist = self.itl.labels(**self._request(custom))
        # Upstream's own fast path, on the same prometheus_client internals: the sum grows by
        # the whole interval and one bucket by all the tokens.
        hist._sum.inc(interval)
        for i, bound in enumerate(hist._upper_bounds):
            if adjusted <= bound:
                hist._buckets[i].inc(num_new_tokens)
                break

    def finished(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        e2e: float,
        spec_verify_ct: int = 0,
        stream: bool = False,
        custom: dict[str, object] | None = None,
    ) -> None:
        t = self._streaming(stream, custom)
        self.prompt_tokens.labels(**t).inc(prompt_tokens)
        self.generation_tokens.labels(**t).inc(completion_tokens)
        if spec_verify_ct > 0:
            self.spec_verify_calls.labels(**self._request(custom)).inc(spec_verify_ct)
        self.num_requests.labels(**t).inc()
        self.e2e.labels(**t).observe(e2e)

    def aborted(self) -> None:
        # Upstream passes the collector's own labels here ("TODO: also use custom_labels").
        self.num_aborted_requests.labels(**self._tok).inc()
