"""The stand-in's scheduler: a continuous-batching loop at a simulated, deterministic pace.

One thread admits waiting requests (a "prefill", printing a Prefill line) and runs decode
iterations over all running requests. Each iteration lasts `behaviour.step_seconds(...)` of model
time (slept as model time x SPECSERVE_STANDIN_TIME_SCALE of wall time) and gives each request
`floor` of its running sum of the model's accept length, so a window's printed `accept len`
converges on the formula. Every `--decode-log-interval` iterations it prints a Decode line whose
`gen throughput` is tokens generated / model time of the window (prefills included, idle time
excluded: deterministic, unlike upstream's wall-clock gap).

DSPARK under a ragged verify mode (SGLANG_RAGGED_VERIFY_MODE cap-accept or compact) caps each
request's verify at SPECSERVE_STANDIN_VERIFY_CAP tokens: a pass commits min(n, cap) of the n
tokens it would accept uncapped (behaviour.verify_cap_split), so `accept len` counts commits,
`block accept len` (cap-accept only) the uncapped n, and `cap len` the cap, as SGLang's DSPARK
worker reports accept_lens = commit_lens, block_accept_lens = commit_lens + cap_trim_lens and
cap_lens = the verify lengths.
"""

from __future__ import annotations

import math
import queue
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

from specserve.adaptive import INIT_LINE, SWITCH_LINE, UPDATED_LINE, StepPolicy
from specserve.profile.checks.logs import silences_batch_lines
from specserve.standin.args import StandinArgs
from specserve.standin.behaviour import (
    BehaviourSource,
    BlockEstimate,
    SpecShape,
    accept_length,
    step_seconds,
    verify_cap_split,
)
from specserve.standin.logfmt import (
    DecodeStats,
    LinePrinter,
    PrefillStats,
    block_window,
    decode_line,
    prefill_line,
    spec_window,
)
from specserve.standin.metrics import NativeMetrics

VOCAB: tuple[str, ...] = (
    "the", "stand-in", "server", "speaks", "in", "simulated", "tokens", "while", "a", "real",
    "model", "would", "reason", "about", "your", "prompt", "and", "this", "text", "is",
    "deterministic", "so", "tests", "can", "compare", "it", "across", "runs", "of", "speculative",
    "decoding", "drafts", "verify", "accept", "tree", "step", "batch", "graph", "cache", "token",
)  # fmt: skip

# Without speculation SGLang sizes max_running_requests from the KV pool; the stand-in has none
# and uses this (with EAGLE-family speculation, resolution caps it at 48: args.py).
DEFAULT_MAX_RUNNING = 128
DEFAULT_CUDA_GRAPH_MAX_BS = 160
DEFAULT_MAX_TOTAL_TOKENS = 500_000
# A looping request's period in words (SPECSERVE_STANDIN_LOOP_WHEN).
LOOP_PERIOD = 3
# Per-draft acceptance of a looping request: a drafter predicts a loop almost perfectly, which
# is how a degenerate point would "win" a tuning run on accept length.
LOOPING_ACCEPTANCE = 0.98
# SGLang's idle metrics refresh (_maybe_log_idle_metrics: `last_log_time + 30`), wall seconds.
IDLE_METRICS_INTERVAL_S = 30.0


class EngineClosed(RuntimeError):
    """The server is shutting down and takes no new requests."""


@dataclass
class Request:
    """One generation request. Events on `out`: ("tokens", [str]) then ("done", reason)."""

    text: str
    prompt_tokens: int
    max_new_tokens: int
    natural_tokens: int | None
    content_factor: float
    rid: str = ""
    created: float = field(default_factory=time.monotonic)
    out: queue.Queue[tuple[str, object]] = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    generated: int = 0
    acc: float = 0.0
    first_token_at: float | None = None
    finish_reason: str | None = None
    seed: int = 0
    log_metrics: bool = True
    """False for health-check probes: upstream keeps them out of the request metrics."""
    stream: bool = False
    """Upstream's `is_streaming` label of the request metrics."""
    custom_labels: dict[str, object] | None = None
    """The allowed custom labels its header carried (upstream's GenerateReqInput.custom_labels)."""
    spec_verify_ct: int = 0
    """Verify passes the request took part in (upstream's req.spec_verify_ct)."""
    spec_num_correct_drafts: int = 0
    """Draft tokens its verify passes accepted, the bonus token left out (upstream's)."""
    spec_correct_drafts_histogram: list[int] = field(default_factory=list)
    """[k] = verify passes that accepted k drafts (Req.update_spec_correct_drafts_histogram)."""
    spec_num_draft_tokens: int | None = None
    """The server's draft tokens per verify (get_spec().speculative_num_draft_tokens, what
    upstream's per-request accept rate divides by); None without speculation."""
    looping: bool = False
    """SPECSERVE_STANDIN_LOOP_WHEN matched: the output repeats LOOP_PERIOD words forever."""

    def __post_init__(self) -> None:
        self.seed = zlib.crc32(self.text.encode("utf-8"))

    def token_text(self, index: int) -> str:
        # A hash per position, not an arithmetic progression over VOCAB: a progression repeats
        # with the vocabulary's period, which a repetition measure rightly calls a loop.
        position = index % LOOP_PERIOD if self.looping else index
        word = VOCAB[zlib.crc32(f"{self.seed}:{position}".encode()) % len(VOCAB)]
        return word if index == 0 else " " + word

    def add_verify(self, correct_drafts: int) -> None:
        """One verify pass that accepted `correct_drafts` drafts (batch_result_processor)."""
        self.spec_verify_ct += 1
        self.spec_num_correct_drafts += correct_drafts
        histogram = self.spec_correct_drafts_histogram
        if len(histogram) <= correct_drafts:
            histogram.extend([0] * (correct_drafts - len(histogram) + 1))
        histogram[correct_drafts] += 1

    @property
    def limit(self) -> int:
        if self.natural_tokens is None:
            return self.max_new_tokens
        return min(self.max_new_tokens, self.natural_tokens)


def natural_length(text: str) -> int:
    """Where a response "naturally" ends (finish_reason "stop"): 16..63 tokens, from the text."""
    return 16 + zlib.crc32(text.encode("utf-8")) % 48


def _int_or(raw: object, default: int) -> int:
    try:
        return int(str(raw)) if raw is not None else default
    except ValueError:
        return default


class Engine:
    """The scheduler loop and its queues; thread-safe `submit`, `shutdown`."""

    def __init__(
        self,
        args: StandinArgs,
        behaviour: BehaviourSource,
        printer: LinePrinter,
        metrics: NativeMetrics | None,
        base_tps: float,
        time_scale: float,
        drafter_mismatch: bool,
        verify_cap: int | None = None,
        looping: bool = False,
    ) -> None:
        self.args = args
        self.looping = looping
        self.behaviour = behaviour
        self.printer = printer
        self.metrics = metrics
        self.base_tps = base_tps
        self.time_scale = time_scale
        self.drafter_mismatch = drafter_mismatch
        # SGLang writes its batch lines with logger.info (metrics_reporter.py): a level above
        # INFO keeps them out of the log, and so does the stand-in's.
        self.batch_lines = not silences_batch_lines(str(args.resolved.get("log_level") or "info"))
        spec = args.spec
        self.shape = (
            None
            if spec is None
            else SpecShape(spec.num_steps, spec.eagle_topk, spec.num_draft_tokens, spec.block)
        )
        # DSPARK's ragged verify: each pass verifies at most this many tokens (None: no cap).
        self.ragged_mode = "static" if spec is None else spec.ragged_verify_mode
        self.verify_cap = (
            None
            if spec is None or self.ragged_mode == "static"
            else min(verify_cap or spec.num_draft_tokens, spec.num_draft_tokens)
        )
        self.estimate = BlockEstimate() if spec is not None and spec.block_estimate else None
        # --speculative-adaptive: SGLang's step policy moves the shape between candidate steps.
        self.policy = (
            StepPolicy(args.spec.num_steps, args.spec.adaptive_slots)
            if args.spec is not None and args.spec.adaptive
            else None
        )
        self.max_running = args.max_running_requests or DEFAULT_MAX_RUNNING
        self.graph_max_bs = args.cuda_graph_max_bs or DEFAULT_CUDA_GRAPH_MAX_BS
        self.max_total_tokens = _int_or(
            args.resolved.get("max_total_tokens"), DEFAULT_MAX_TOTAL_TOKENS
        )
        # When the scheduler last produced output (monotonic): what /health_generate waits for,
        # as upstream's tokenizer manager's last_receive_tstamp.
        self.last_output = time.monotonic()
        self._cond = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._stopping = False
        self._abort_all = False
        self._counter = 0
        self._thread = threading.Thread(target=self._loop, name="standin-scheduler", daemon=True)
        # Window counters, reset at every Decode line (as upstream resets its own).
        self.forward_ct_decode = 0
        self._win_generated = 0
        self._win_seconds = 0.0
        self._win_accepted = 0
        self._win_verify = 0
        self._win_block = 0  # uncapped accepted tokens (DSPARK's block accept lens)
        self._win_cap = 0  # verify lengths (DSPARK's cap lens), 0 without a ragged verify
        self.last_decode: DecodeStats | None = None
        # What the scheduler gauges last published (SchedulerStats.num_running_reqs, starting at
        # its default 0) and when (the metrics collector's last_log_time, set at its creation).
        self._published_running = 0
        self._published_at = time.perf_counter()

    # -- public -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.metrics is not None:
            self.metrics.constants(self.max_total_tokens)
        if self.policy is not None:
            first = self.policy.slot(0)  # upstream reports its smallest batch-size slot
            self.printer.log(
                INIT_LINE.format(steps=first.current_steps, candidates=first.candidate_steps)
            )
        self._thread.start()

    def submit(self, req: Request) -> None:
        with self._cond:
            if self._stopping:
                raise EngineClosed("server is shutting down")
            self._counter += 1
            req.rid = f"{self._counter:016x}"
            req.looping = self.looping
            if self.args.spec is not None:
                req.spec_num_draft_tokens = self.args.spec.num_draft_tokens
            self._waiting.append(req)
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return not self._running and not self._waiting

    def counts(self) -> tuple[int, int]:
        with self._cond:
            return len(self._running), len(self._waiting)

    def shutdown(self, grace_seconds: float) -> None:
        """Take no new requests, drop the queue, let running ones finish for `grace_seconds`."""
        with self._cond:
            self._stopping = True
            while self._waiting:
                self._finish(self._waiting.popleft(), "abort")
            self._cond.notify_all()
        self._thread.join(timeout=grace_seconds)
        if self._thread.is_alive():
            with self._cond:
                self._abort_all = True
                self._cond.notify_all()
            self._thread.join(timeout=5.0)

    # -- the loop -----------------------------------------------------------------------------

    def _sleep(self, model_seconds: float) -> None:
        time.sleep(model_seconds * self.time_scale)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._waiting or self._running or self._stopping):
                    self._cond.wait(timeout=self._on_idle())
                if self._abort_all:
                    for req in self._running:
                        self._finish(req, "abort")
                    self._running.clear()
                if self._stopping and not self._running and not self._waiting:
                    return
                self._running = [r for r in self._running if not self._drop_cancelled(r)]
                admitted: list[Request] = []
                running_before = len(self._running)
                while self._waiting and len(self._running) < self.max_running:
                    req = self._waiting.popleft()
                    if not self._drop_cancelled(req):
                        self._running.append(req)
                        admitted.append(req)
                queued = len(self._waiting)
            if admitted:
                self._prefill(admitted, running_before, queued)
                with self._cond:
                    # A request its prefill token finished (max_new_tokens 1: the health check's
                    # probe) takes no decode pass: SGLang's get_next_batch_to_run filters the
                    # prefill batch (finished requests out) before it joins the running batch.
                    self._running = [r for r in self._running if r.finish_reason is None]
            if self._running:
                self._decode()

    def _published(self, running: int) -> None:
        self._published_running = running
        self._published_at = time.perf_counter()

    def _on_idle(self) -> float:
        """Nothing runs or waits: SGLang's idle metrics publish; the seconds until the next.

        Upstream (0.5.21 and 0.5.23, managers/scheduler.py): the event loop calls on_idle each
        time it finds no batch, and on a fully idle scheduler on_idle calls
        SchedulerMetricsReporter._maybe_log_idle_metrics
        (managers/scheduler_components/metrics_reporter.py), which publishes when the running
        gauge disagrees with the empty running batch (`gauge_stale`: at once after the last
        request, so sglang:num_running_reqs drops to 0 instead of holding the last decode
        line's count) or 30 s after the last publish (`last_log_time + 30`, wall clock).
        Upstream's loop polls; this one sleeps until a request comes or that 30 s is due.
        """
        if self.metrics is None:
            return IDLE_METRICS_INTERVAL_S
        now = time.perf_counter()
        if self._published_running != 0 or now > self._published_at + IDLE_METRICS_INTERVAL_S:
            self.metrics.idle()
            self._published(0)
        return max(0.0, self._published_at + IDLE_METRICS_INTERVAL_S - now)

    def _drop_cancelled(self, req: Request) -> bool:
        if req.cancelled.is_set():
            self._finish(req, "abort")
            return True
        return False

    def _used_tokens(self, reqs: list[Request]) -> int:
        return sum(r.prompt_tokens + r.generated for r in reqs)

    def _prefill(self, admitted: list[Request], running_before: int, queued: int) -> None:
        behaviour, _ = self.behaviour.current()
        new_tokens = sum(r.prompt_tokens for r in admitted)
        seconds = (1.0 + new_tokens / 512.0) / self.base_tps / behaviour.throughput_scale
        self._sleep(seconds)
        self._win_seconds += seconds
        usage = self._used_tokens(self._running) / self.max_total_tokens
        line = prefill_line(
            PrefillStats(
                new_seq=len(admitted),
                new_token=new_tokens,
                cached_token=0,
                token_usage=usage,
                running=running_before,
                queued=queued,
                pending_token=0,
                graph=False,
                input_throughput=new_tokens / seconds,
            )
        )
        if self.batch_lines:
            self.printer.log(line)
        now = time.monotonic()
        for req in admitted:
            # Prefill yields each request's first token, as upstream's does.
            req.first_token_at = now
            if self.metrics is not None and req.log_metrics:
                self.metrics.first_token(now - req.created, req.stream, req.custom_labels)
            self._emit(req, 1)

    def _decode(self) -> None:
        behaviour, problem = self.behaviour.current()
        if problem:
            self.printer.log(f"specserve-standin: behaviour file: {problem}")
        running = list(self._running)
        bs = len(running)
        graph = self.args.decode_cuda_graph and bs <= self.graph_max_bs
        if self.policy is not None:  # AdaptiveController.activate_step_by_batch
            self._switch(self.policy.steps_for_batch(bs))
        seconds = step_seconds(self.shape, bs, self.base_tps, graph, behaviour.throughput_scale)
        grants: list[int] = []
        for req in running:
            if self.shape is None:
                n = 1
            else:
                a = 0.0 if self.drafter_mismatch else behaviour.acceptance * req.content_factor
                if req.looping and not self.drafter_mismatch:
                    a = LOOPING_ACCEPTANCE
                req.acc += accept_length(self.shape, a)
                # 1e-9 keeps 2.0 from flooring to 1 after float drift.
                n = max(1, math.floor(req.acc + 1e-9))
                req.acc -= n
            grants.append(n)
        if self.policy is not None:  # on_verify_complete: accepted drafts, the bonus left out
            changed = self.policy.on_verify_complete([n - 1 for n in grants], bs)
            update = self.policy.slot(bs).last_update
            if changed is not None and update is not None:
                self.printer.log(UPDATED_LINE.format(old=update[0], new=update[1], ema=update[2]))
                self._switch(changed)
        self._sleep(seconds)
        accepted = 0
        for req, n in zip(running, grants, strict=True):
            if self.shape is not None:
                n = self._verify_capped(n)
                req.add_verify(n - 1)  # the committed run less its bonus token
            accepted += n
            emitted = self._emit(req, n)
            if self.metrics is not None and emitted and req.log_metrics:
                self.metrics.inter_token(seconds * self.time_scale, emitted, req.custom_labels)
        if self.metrics is not None:
            self.metrics.decode_pass(graph)
        self._win_seconds += seconds
        self._win_accepted += accepted
        self._win_verify += bs
        self.forward_ct_decode += 1
        with self._cond:
            self._running = [r for r in self._running if r.finish_reason is None]
            queued = len(self._waiting)
        if self.forward_ct_decode % self.args.decode_log_interval == 0:
            self._decode_line(bs, running, graph, queued)

    def _verify_capped(self, uncapped: int) -> int:
        """One request's pass under DSPARK's verify cap: the tokens it commits. Counts the
        window's block-accept and cap tokens and feeds the estimator."""
        commit, _trimmed = verify_cap_split(uncapped, self.verify_cap)
        self._win_block += uncapped
        self._win_cap += self.verify_cap or 0
        if self.estimate is not None:
            assert self.shape is not None
            if self.ragged_mode == "compact" and commit == self.verify_cap:
                # Verified only up to the cap: the rest of the block is unknown.
                self.estimate.add(commit, self.shape.num_draft_tokens)
            else:
                self.estimate.add(uncapped, uncapped)
        return commit

    def _switch(self, steps: int) -> None:
        """EAGLEWorkerV2.apply_runtime_state: the new shape (top-k 1), logged as upstream does."""
        shape = self.shape
        if shape is None or steps == shape.num_steps:
            return
        self.printer.log(
            SWITCH_LINE.format(
                old_steps=shape.num_steps,
                steps=steps,
                old_draft_tokens=shape.num_draft_tokens,
                draft_tokens=steps + 1,
            )
        )
        self.shape = SpecShape(steps, 1, steps + 1)

    def _decode_line(self, bs: int, reqs: list[Request], graph: bool, queued: int) -> None:
        accept_len: float | None = None
        accept_rate: float | None = None
        cap_len, block_len = block_window(
            self._win_block, self._win_cap, self._win_verify, self.ragged_mode
        )
        if self.shape is not None and self._win_verify:
            accept_len, accept_rate = spec_window(
                self._win_accepted, self._win_verify, self.shape.num_draft_tokens
            )
        throughput = self._win_generated / self._win_seconds if self._win_seconds else 0.0
        used = self._used_tokens(reqs)
        stats = DecodeStats(
            running=bs,
            num_tokens=used,
            token_usage=used / self.max_total_tokens,
            accept_length=accept_len,
            accept_rate=accept_rate,
            graph=graph,
            gen_throughput=throughput,
            queued=queued,
            cap_length=cap_len,
            block_accept_length=block_len,
            estimate=None if self.estimate is None else self.estimate.bounds(),
        )
        if self.batch_lines:
            self.printer.log(decode_line(stats))
        self.last_decode = stats
        if self.metrics is not None:
            shape = self.shape
            self.metrics.scheduler_window(
                running=bs,
                used_tokens=used,
                token_usage=stats.token_usage,
                queued=queued,
                gen_throughput=throughput,
                accept_length=accept_len or 0.0,
                accept_rate=accept_rate or 0.0,
                num_steps=0 if shape is None else shape.num_steps,
                num_draft_tokens=0 if shape is None else shape.num_draft_tokens,
                cap_length=cap_len,
                block_accept_length=block_len,
            )
            self._published(bs)
        self._win_generated = 0
        self._win_seconds = 0.0
        self._win_accepted = 0
        self._win_verify = 0
        self._win_block = 0
        self._win_cap = 0

    def _emit(self, req: Request, n: int) -> int:
        """Give `req` up to `n` tokens; finish it at its limit. Returns tokens given."""
        if req.finish_reason is not None:
            return 0
        n = min(n, req.limit - req.generated)
        if n > 0:
            pieces = [req.token_text(req.generated + i) for i in range(n)]
            req.generated += n
            self._win_generated += n
            req.out.put(("tokens", pieces))
            self.last_output = time.monotonic()
        if req.generated >= req.limit:
            reason = "length" if req.generated >= req.max_new_tokens else "stop"
            self._finish(req, reason)
        return max(n, 0)

    def _finish(self, req: Request, reason: str) -> None:
        if req.finish_reason is not None:
            return
        req.finish_reason = reason
        self.last_output = time.monotonic()
        if self.metrics is not None and req.log_metrics:
            if reason == "abort":
                self.metrics.aborted()
            else:
                self.metrics.finished(
                    req.prompt_tokens,
                    req.generated,
                    time.monotonic() - req.created,
                    spec_verify_ct=req.spec_verify_ct,
                    stream=req.stream,
                    custom=req.custom_labels,
                )
        req.out.put(("done", reason))
