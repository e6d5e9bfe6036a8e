"""Run inside an SGLang venv (tests/contract/sglang_venv.py): drive SGLang's real metric
collectors with the events on stdin and print every series they would expose, as JSON.

The venvs hold no prometheus_client (SGLang imports it only inside the collectors), so a
recording stand-in of its Counter/Gauge/Histogram is installed under that name first. It keeps
what upstream reads of prometheus_client's internals (`_sum`, `_upper_bounds`, `_buckets`: the
inter-token fast path) and exposes series as prometheus_client does (`_total`, `_bucket` with
cumulative counts and `le`, `_count`, `_sum`).

Events: ["first_token", seconds, stream], ["inter_token", interval, new_tokens],
["finished", prompt, completion, e2e, spec_verify_ct, stream], ["aborted"],
["decode_pass", graph]; the scheduler gauges: ["constants", max_total_tokens] (emit_constants),
["window", running, used_tokens, queued, gen_throughput, accept_length, accept_rate, num_steps,
num_draft_tokens(, cap_length, block_accept_length)] (a decode stats line: the SchedulerStats
fields report_decode_stats sets, the pool's through PoolStats.update_scheduler_stats, then
log_stats) and ["idle"]: SGLang's own SchedulerMetricsReporter._maybe_log_idle_metrics, what
Scheduler.on_idle calls on a fully idle scheduler, run on a reporter whose scheduler has an
empty running batch and waiting queue and whose pool holds no request's tokens.
["snapshot", name] adds every series as it is at that point, each row with "snapshot": name,
to the output (the final rows have no such key).
With "custom_labels" (a list of names) in the request, SGLang starts with
--tokenizer-metrics-allowed-custom-labels and those names, and first_token, inter_token and
finished may end with the request's custom labels (a dict), merged over the collector's labels
as TokenizerManager.collect_metrics merges them.
"""

from __future__ import annotations

import json
import math
import sys
import types
from typing import Any


class _Value:
    def __init__(self) -> None:
        self.v = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.v += amount

    def set(self, value: float) -> None:
        self.v = value


class _Histogram:
    def __init__(self, bounds: list[float]) -> None:
        self._upper_bounds = bounds
        self._buckets = [_Value() for _ in bounds]
        self._sum = _Value()

    def observe(self, value: float) -> None:
        self._sum.inc(value)
        for i, bound in enumerate(self._upper_bounds):
            if value <= bound:
                self._buckets[i].inc(1)
                break


FAMILIES: dict[str, Any] = {}


class _Metric:
    kind = ""

    def __init__(self, name: str, documentation: str = "", labelnames: Any = (), **kw: Any):
        self.name = name.removesuffix("_total") if self.kind == "counter" else name
        self.labelnames = tuple(labelnames)
        buckets = kw.get("buckets")
        self.bounds = [float(b) for b in buckets] if buckets is not None else [math.inf]
        if self.bounds[-1] != math.inf:
            self.bounds.append(math.inf)
        self.children: dict[tuple[str, ...], Any] = {}
        FAMILIES[self.name] = self

    def labels(self, *args: Any, **kw: Any) -> Any:
        values = tuple(str(kw[n]) for n in self.labelnames) if kw else tuple(map(str, args))
        if len(values) != len(self.labelnames) or (kw and set(kw) != set(self.labelnames)):
            raise ValueError(f"{self.name}: labels {sorted(kw)} != {self.labelnames}")
        if values not in self.children:
            self.children[values] = self._child()
        return self.children[values]

    def _child(self) -> Any:
        return _Value()


class Counter(_Metric):
    kind = "counter"


class Gauge(_Metric):
    kind = "gauge"


class Histogram(_Metric):
    kind = "histogram"

    def _child(self) -> Any:
        return _Histogram(self.bounds)


class Summary(Histogram):
    kind = "summary"


def _go_float(value: float) -> str:
    return "+Inf" if value == math.inf else repr(float(value))


def _series() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for family in FAMILIES.values():
        for values, child in family.children.items():
            labels = dict(zip(family.labelnames, values, strict=True))
            base = {"family": family.name, "type": family.kind}
            if family.kind == "counter":
                out.append({**base, "name": family.name + "_total", "labels": labels,
                            "value": child.v})  # fmt: skip
            elif family.kind == "gauge":
                out.append({**base, "name": family.name, "labels": labels, "value": child.v})
            else:
                total = 0.0
                for bound, bucket in zip(child._upper_bounds, child._buckets, strict=True):
                    total += bucket.v
                    bucket_labels = {**labels, "le": _go_float(bound)}
                    out.append({**base, "name": family.name + "_bucket", "labels": bucket_labels,
                                "value": total})  # fmt: skip
                out.append({**base, "name": family.name + "_count", "labels": labels,
                            "value": total})  # fmt: skip
                out.append({**base, "name": family.name + "_sum", "labels": labels,
                            "value": child._sum.v})  # fmt: skip
    return out


class _SchedulerGauges:
    """The scheduler's stats and its real publishing code around one SchedulerMetricsCollector."""

    def __init__(self, collector: Any) -> None:
        from sglang.srt.observability.metrics_collector import SchedulerStats

        self.collector = collector
        self.stats = SchedulerStats()
        self.max_total = 0

    def constants(self, max_total_tokens: int) -> None:
        self.max_total = max_total_tokens
        self.collector.emit_constants(max_total_tokens, None, 0.0, 0.0, {}, None, 1,
                                      max_total_tokens, 0, 0)  # fmt: skip

    def _pool(self, used: int) -> Any:
        from sglang.srt.managers.scheduler_components.pool_stats_observer import PoolStats

        return PoolStats(
            full_num_used=used, full_token_usage=used / self.max_total,
            full_available_size=self.max_total - used, full_evictable_size=0,
        )  # fmt: skip

    def window(self, running: int, used: int, queued: int, gen_throughput: float,
               accept_length: float, accept_rate: float, num_steps: int,
               num_draft_tokens: int, cap_length: float = 0.0,
               block_accept_length: float = 0.0) -> None:  # fmt: skip
        """What report_decode_stats assigns before log_stats (no priority scheduling)."""
        from sglang.srt.observability.metrics_collector import QueueCount

        stats = self.stats
        stats.num_running_reqs = QueueCount(total=running)
        stats.num_queue_reqs = QueueCount(total=queued)
        stats.gen_throughput = gen_throughput
        self._pool(used).update_scheduler_stats(stats)
        stats.spec_accept_length, stats.spec_accept_rate = accept_length, accept_rate
        # DSPARK's ragged verify: report_decode_stats sets them at every line (0 elsewhere).
        stats.spec_cap_length, stats.spec_block_accept_length = cap_length, block_accept_length
        stats.spec_num_steps, stats.spec_num_draft_tokens = num_steps, num_draft_tokens
        self.collector.log_stats(stats)

    def idle(self) -> None:
        """SGLang's _maybe_log_idle_metrics itself, its helpers the real ones too."""
        from sglang.srt.disaggregation.utils import DisaggregationMode
        from sglang.srt.managers.scheduler_components.metrics_reporter import (
            SchedulerMetricsReporter as Reporter,
        )

        scheduler = types.SimpleNamespace(
            enable_fpm=False, enable_priority_scheduling=False, enable_hierarchical_cache=False,
            disaggregation_mode=DisaggregationMode.NULL,
            running_batch=types.SimpleNamespace(reqs=[]), waiting_queue=[], grammar_manager=[],
            pool_stats_observer=types.SimpleNamespace(
                get_pool_stats=lambda: self._pool(0), streaming_session_count=lambda: 0,
                session_held_tokens=lambda: 0,
            ),
        )  # fmt: skip
        reporter = types.SimpleNamespace(
            scheduler=scheduler, stats=self.stats, metrics_collector=self.collector,
            current_scheduler_metrics_enabled=True,
        )  # fmt: skip
        for name in ("_reset_device_timer_window", "_log_hicache_stats"):
            setattr(reporter, name, types.MethodType(getattr(Reporter, name), reporter))
        Reporter._maybe_log_idle_metrics(reporter)


def main() -> None:
    request = json.load(sys.stdin)
    fake = types.ModuleType("prometheus_client")
    fake.Counter, fake.Gauge, fake.Histogram, fake.Summary = Counter, Gauge, Histogram, Summary  # type: ignore[attr-defined]
    sys.modules["prometheus_client"] = fake

    from sglang.srt import runtime_context
    from sglang.srt.observability.metrics_collector import (
        SchedulerMetricsCollector,
        TokenizerMetricsCollector,
    )
    from sglang.srt.server_args import prepare_server_args

    allowed = request.get("custom_labels") or []
    custom_flags = ["--tokenizer-metrics-allowed-custom-labels", *allowed] if allowed else []
    args = prepare_server_args(
        ["--model-path", request["model_path"], "--served-model-name", request["model_name"],
         "--device", "cpu", "--enable-metrics", *custom_flags]
    )  # fmt: skip
    runtime_context.publish(args, role="tokenizer")
    # The label sets TokenizerManager.init_metric_collector_watchdog and
    # SchedulerMetricsCollector.init_new build without priority scheduling, DP or extra labels.
    tok_labels = {"model_name": request["model_name"], "engine_type": "unified"}
    sched_labels = {**tok_labels, "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0}
    if allowed:
        try:  # 0.5.23: the function the tokenizer manager builds its labels with
            from sglang.srt.observability.metrics_collector import tokenizer_metric_labels
        except ImportError:  # 0.5.21: the same statements inline in the tokenizer manager
            tok_labels.update(dict.fromkeys(args.tokenizer_metrics_allowed_custom_labels, ""))
        else:
            tok_labels = tokenizer_metric_labels()

    def labels(extra: list[Any]) -> dict[str, Any]:
        # collect_metrics: dict(self.metrics_collector.labels), updated with custom_labels.
        return {**tok_labels, **(extra[0] if extra else {})}

    tokenizer = TokenizerMetricsCollector(server_args=args, labels=tok_labels)
    scheduler = SchedulerMetricsCollector(
        labels=sched_labels, enable_lora=False, enable_hierarchical_cache=False,
        enable_streaming_session=False, server_args=args,
    )  # fmt: skip
    gauges = _SchedulerGauges(scheduler)
    snapshots: list[dict[str, Any]] = []
    for event, *values in request["events"]:
        if event == "snapshot":
            snapshots += [{**row, "snapshot": values[0]} for row in _series()]
        elif event in ("constants", "window", "idle"):
            getattr(gauges, event)(*values)
        elif event == "first_token":
            tokenizer.observe_time_to_first_token(
                labels(values[2:]), values[0], stream=values[1])
        elif event == "inter_token":
            tokenizer.observe_inter_token_latency(labels(values[2:]), values[0], values[1])
        elif event == "finished":
            prompt, completion, e2e, verify, stream, *extra = values
            tokenizer.observe_one_finished_request(
                labels(extra), prompt, completion, 0, e2e, False,
                spec_verify_ct=verify, is_streaming=stream,
            )  # fmt: skip
        elif event == "aborted":
            tokenizer.observe_one_aborted_request(tok_labels)
        elif event == "decode_pass":
            scheduler.increment_decode_cuda_graph_pass(values[0])
        else:
            raise SystemExit(f"unknown event {event!r}")
    json.dump(snapshots + _series(), sys.stdout)


if __name__ == "__main__":
    main()
