"""Write a corpus of SGLang scheduler stats lines printed by SGLang's own code.

    .sglang/<version>/bin/python scripts/sglang/log_corpus.py --version <version> --out DIR

Runs inside an SGLang venv (stdlib + sglang only). It calls SGLang's real
`SchedulerMetricsReporter.report_decode_stats` / `report_prefill_stats` on a small fake scheduler
(only the attributes those functions read), with SGLang's real `PoolStats`, enums and DSPARK
estimate formatter, through the log format SGLang's `configure_scheduler_process` sets up (the
"[time DP0 TP0] " prefix, SGLANG_LOG_MS). The lines are never written by hand: DIR/corpus.log is
what SGLang's logger printed, and DIR/expected.jsonl says per line what the code was given and
what an exporter must read (kind, rank words, every field's exact printed text). The generator
checks each expected field against the printed line, so a drift in SGLang's formatting fails here.

Deterministic: fixed seeds, a fixed clock for log records (UTC) and for the reporter's timers.
`scripts/sglang/regenerate <version>` calls it for tests/fixtures/sglang-logs/<version>/.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.abc
import importlib.machinery
import io
import json
import logging
import os
import random
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

# Packages SGLang's scheduler module imports at module level that the contract venv does not
# hold: opentelemetry (imported unguarded by fastapi 0.165's fastapi/telemetry/_api.py).
# Nothing the stats-line code runs touches it, so a placeholder module stands in, and only when
# the real package is absent. torchvision and tvm_ffi are real packages of the venv now
# (versions.yaml sglang.venv_packages: CUDA torch and torchvision import on a CPU).
_PLACEHOLDER_PACKAGES = frozenset({"opentelemetry"})

# Base of the frozen log clock (UTC) and its step between lines.
_CLOCK_START = 1_772_366_400.0  # 2026-03-01 12:00:00 UTC
_CLOCK_STEP = 2.137
SEED = 20260301


class _Placeholder:
    """Any attribute, call or subclass of a placeholder package (sphinx autodoc-mock style)."""

    __display_name__ = "_Placeholder"

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 3 and isinstance(args[1], tuple):  # used as a base class
            superclass = args[1][-1].__class__
            if superclass is cls:
                return _placeholder_class(args[0], superclass.__display_name__, superclass, args[2])
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (self.__class__,)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        return _placeholder_class(key, self.__display_name__)()

    def __getitem__(self, key: Any) -> Any:
        return _placeholder_class(str(key), self.__display_name__)()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __or__(self, other: Any) -> Any:
        return self

    __ror__ = __or__


def _placeholder_class(
    name: str,
    module: str,
    superclass: type = _Placeholder,
    attributes: dict[str, Any] | None = None,
) -> type:
    attrs = {"__module__": module, "__display_name__": f"{module}.{name}", **(attributes or {})}
    return type(name, (superclass,), attrs)


class _PlaceholderModule(types.ModuleType):
    __version__ = "0.0.0"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__file__ = f"<placeholder {name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder_class(name, self.__name__)()


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: answers only for _PLACEHOLDER_PACKAGES not found for real."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.partition(".")[0] in _PLACEHOLDER_PACKAGES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _PlaceholderModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


# --- the fixed clock -----------------------------------------------------------------------


class _Clock:
    """The reporter's `time` module: perf_counter / monotonic_ns return what the scenario sets."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.now_ns = 10**12

    def perf_counter(self) -> float:
        return self.now

    def monotonic_ns(self) -> int:
        return self.now_ns

    def time(self) -> float:
        return _CLOCK_START

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _FrozenRecords:
    """A log-record factory that stamps records with the frozen clock."""

    def __init__(self) -> None:
        self.count = 0
        self._factory = logging.getLogRecordFactory()

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self._factory(*args, **kwargs)
        created = _CLOCK_START + self.count * _CLOCK_STEP
        self.count += 1
        record.created = created
        record.msecs = float(int((created - int(created)) * 1000))
        return record


# --- scenarios ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ranks:
    """What configure_scheduler_process reads from the parallel context."""

    dp: int | None = None
    tp_size: int = 1
    tp: int = 0
    pp_size: int = 1
    pp: int = 0
    attn_cp_size: int = 1
    attn_cp: int = 0
    moe_dp_size: int = 1
    moe_dp: int = 0
    ep_size: int = 1
    ep: int = 0


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "decode" | "prefill"
    lines: int
    ranks: Ranks = Ranks()
    log_ms: bool = False
    iters: bool = False  # SGLANG_LOG_FORWARD_ITERS
    occupancy: bool = False  # SGLANG_ENABLE_METRICS_DEVICE_TIMER
    device: str = "cuda"
    algorithm: str = "EAGLE3"
    draft_tokens: int | None = 4
    steps: int | None = 3
    pools: str = "plain"  # plain | swa | mamba | swa+mamba; "+hisparse" adds the breakdown
    disagg: str = "null"  # null | prefill | decode
    host_receive: bool = False
    epd: bool = False  # language-only server receiving images over zmq_to_scheduler
    mfu: bool = False
    cap: bool = False  # cap len (ragged verify)
    block_accept: bool = False  # SGLANG_RAGGED_VERIFY_MODE=cap-accept
    replay: bool = False
    dspark_estimate: bool = False


def scenarios() -> list[Scenario]:
    tp8 = Ranks(dp=None, tp_size=8, tp=0)
    return [
        # The shipped deployment: Kimi-K2.5, TP8, EAGLE-3.
        Scenario("eagle3-tp8", "decode", 24, tp8),
        Scenario("eagle3-tp8-prefill", "prefill", 10, tp8),
        # One GPU, no rank words at all; counters and milliseconds.
        Scenario("single-gpu", "decode", 8, Ranks()),
        Scenario("single-gpu-prefill", "prefill", 6, Ranks()),
        Scenario("log-ms", "decode", 6, tp8, log_ms=True),
        Scenario("iters", "decode", 6, tp8, iters=True),
        Scenario("iters-prefill", "prefill", 4, tp8, iters=True, log_ms=True),
        # DP attention: DP + TP, then PP, ATTN_CP, MOE_DP, EP rank words.
        Scenario("dp-attention", "decode", 8, Ranks(dp=1, tp_size=8, tp=4)),
        Scenario("dp-pp", "decode", 6, Ranks(dp=0, tp_size=4, tp=0, pp_size=2, pp=1)),
        Scenario("attn-cp", "decode", 6, Ranks(dp=0, tp_size=8, tp=2, attn_cp_size=2, attn_cp=1)),
        Scenario(
            "moe-dp-ep",
            "decode",
            6,
            Ranks(dp=0, tp_size=8, tp=0, moe_dp_size=2, moe_dp=1, ep_size=4, ep=3),
        ),
        Scenario(
            "all-ranks-prefill",
            "prefill",
            4,
            Ranks(
                dp=3,
                tp_size=8,
                tp=6,
                pp_size=2,
                pp=1,
                attn_cp_size=2,
                attn_cp=1,
                moe_dp_size=2,
                moe_dp=1,
                ep_size=2,
                ep=1,
            ),
        ),
        # Speculation variants.
        Scenario(
            "no-speculation", "decode", 8, tp8, algorithm="NONE", draft_tokens=None, steps=None
        ),
        Scenario("ngram", "decode", 6, tp8, algorithm="NGRAM", draft_tokens=8, steps=None),
        Scenario(
            "eagle-steps-only", "decode", 4, tp8, algorithm="EAGLE", draft_tokens=None, steps=3
        ),
        Scenario("cap-len", "decode", 6, tp8, cap=True),
        Scenario("cap-and-block-accept", "decode", 6, tp8, cap=True, block_accept=True),
        Scenario(
            "dspark-estimate",
            "decode",
            6,
            tp8,
            algorithm="DSPARK",
            draft_tokens=8,
            steps=None,
            block_accept=True,
            dspark_estimate=True,
        ),
        # KV pool kinds.
        Scenario("swa", "decode", 6, tp8, pools="swa"),
        Scenario("swa-prefill", "prefill", 4, tp8, pools="swa"),
        Scenario(
            "mamba",
            "decode",
            6,
            tp8,
            pools="mamba",
            algorithm="NONE",
            draft_tokens=None,
            steps=None,
        ),
        Scenario("mamba-prefill", "prefill", 4, tp8, pools="mamba"),
        Scenario("swa-mamba", "decode", 4, tp8, pools="swa+mamba"),
        Scenario("swa-mamba-prefill", "prefill", 4, tp8, pools="swa+mamba"),
        Scenario("hisparse", "decode", 6, tp8, pools="plain+hisparse"),
        Scenario("hisparse-swa", "decode", 4, tp8, pools="swa+hisparse"),
        Scenario("hisparse-prefill", "prefill", 4, tp8, pools="plain+hisparse"),
        # PD disaggregation.
        Scenario("pd-prefill", "prefill", 8, tp8, disagg="prefill"),
        Scenario("pd-prefill-replay", "prefill", 4, tp8, disagg="prefill", replay=True),
        Scenario("pd-decode", "decode", 8, tp8, disagg="decode"),
        Scenario("pd-decode-host-receive", "decode", 6, tp8, disagg="decode", host_receive=True),
        Scenario("replay-prefill", "prefill", 4, tp8, replay=True),
        # EPD: language-only server, images from the encoder.
        Scenario("epd", "decode", 4, tp8, epd=True),
        Scenario("epd-prefill", "prefill", 4, tp8, epd=True),
        # MFU estimates and forward occupancy.
        Scenario("mfu", "decode", 6, tp8, mfu=True),
        Scenario("mfu-prefill", "prefill", 4, tp8, mfu=True),
        Scenario("occupancy", "decode", 6, tp8, occupancy=True),
        Scenario("mfu-occupancy-prefill", "prefill", 4, tp8, mfu=True, occupancy=True),
        Scenario(
            "everything",
            "decode",
            6,
            Ranks(dp=2, tp_size=8, tp=4),
            iters=True,
            log_ms=True,
            occupancy=True,
            mfu=True,
            cap=True,
            block_accept=True,
            disagg="decode",
            host_receive=True,
            epd=True,
            pools="swa+mamba+hisparse",
        ),
        Scenario(
            "everything-prefill",
            "prefill",
            4,
            Ranks(dp=2, tp_size=8, tp=4),
            iters=True,
            log_ms=True,
            occupancy=True,
            mfu=True,
            disagg="prefill",
            epd=True,
            replay=True,
            pools="swa+mamba",
        ),
        # Other devices: the graph label follows the device.
        Scenario(
            "cpu-device",
            "decode",
            6,
            Ranks(),
            device="cpu",
            algorithm="NONE",
            draft_tokens=None,
            steps=None,
        ),
        Scenario("cpu-device-prefill", "prefill", 4, Ranks(), device="cpu"),
        Scenario("npu-device", "decode", 4, tp8, device="npu"),
        Scenario("musa-device", "decode", 4, tp8, device="musa"),
        # Every other algorithm a profile takes (appended: the lines above keep their draws).
        Scenario("standalone", "decode", 4, tp8, algorithm="STANDALONE"),
        Scenario("dflash", "decode", 4, tp8, algorithm="DFLASH", draft_tokens=16, steps=None),
        Scenario("frozen-kv-mtp", "decode", 4, tp8, algorithm="FROZEN_KV_MTP"),
        Scenario("uno", "decode", 4, Ranks(), algorithm="UNO", draft_tokens=4, steps=1),
    ]


# --- SGLang ----------------------------------------------------------------------------


class Corpus:
    def __init__(self, version: str) -> None:
        self.version = version
        sys.meta_path.append(_PlaceholderFinder())
        os.environ.pop("SGLANG_LOGGING_CONFIG_PATH", None)
        import sglang

        if sglang.__version__ != version:
            raise SystemExit(
                f"log_corpus: this venv holds SGLang {sglang.__version__}, not {version}; run "
                f"it with .sglang/{version}/bin/python (bash scripts/setup/sglang.sh {version})"
            )
        try:
            from sglang.srt.managers import scheduler
            from sglang.srt.managers.scheduler_components import metrics_reporter
        except ModuleNotFoundError as error:
            raise SystemExit(
                f"log_corpus: SGLang {version}'s scheduler needs the package {error.name!r}, "
                "missing from its venv: add it to versions.yaml sglang.venv_packages and run "
                f"bash scripts/setup/sglang.sh {version}"
            ) from error
        from sglang.srt.disaggregation.utils import DisaggregationMode
        from sglang.srt.managers.scheduler_components.pool_stats_observer import PoolStats
        from sglang.srt.runtime_context import get_parallel
        from sglang.srt.server_args import prepare_server_args
        from sglang.srt.speculative.dspark_components import dspark_block_accept_estimator
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.scheduler_module = scheduler
        self.mr = metrics_reporter
        self.DisaggregationMode = DisaggregationMode
        self.PoolStats = PoolStats
        self.SpeculativeAlgorithm = SpeculativeAlgorithm
        self.estimator = dspark_block_accept_estimator
        self.parallel = get_parallel()
        self.server_args = prepare_server_args(
            ["--model-path", "/models/corpus", "--device", "cpu", "--log-level", "info"]
        )
        self.clock = _Clock()
        metrics_reporter.time = self.clock  # the reporter's timers; log records: _FrozenRecords
        logging.Formatter.converter = time.gmtime
        self.records = _FrozenRecords()
        logging.setLogRecordFactory(self.records)
        self.stream = io.StringIO()

    # --- the logger: SGLang's own prefix and format --------------------------------------

    def configure_logger(self, s: Scenario) -> None:
        r = s.ranks
        os.environ["SGLANG_LOG_MS"] = "1" if s.log_ms else "0"
        values: dict[str, Any] = {
            "tp_size": r.tp_size,
            "tp_rank": r.tp,
            "pp_size": r.pp_size,
            "pp_rank": r.pp,
            "attn_cp_size": r.attn_cp_size,
            "attn_cp_rank": r.attn_cp,
            "moe_dp_size": r.moe_dp_size,
            "moe_dp_rank": r.moe_dp,
            "ep_size": r.ep_size,
            "moe_ep_rank": r.ep,
            "dp_rank": r.dp,
        }
        with self.parallel.override(**values):
            # Its process-level side effects (proctitle, faulthandler, parent-death signal) are
            # harmless in this short-lived process.
            self.scheduler_module.configure_scheduler_process(self.server_args, gpu_id=0)
        root = logging.getLogger()
        for handler in root.handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(self.stream)
        logging.getLogger(self.mr.__name__).setLevel(logging.INFO)

    # --- the fake scheduler -------------------------------------------------------------

    def reporter(self, s: Scenario, rng: random.Random) -> Any:
        mr = self.mr
        scheduler = types.SimpleNamespace(
            device=s.device,
            enable_fpm=False,
            spec_algorithm=self.SpeculativeAlgorithm[s.algorithm],
            disaggregation_mode=self.DisaggregationMode(s.disagg),
            enable_priority_scheduling=False,
            waiting_queue=[],
            forward_ct=0,
            draft_worker=None,
            running_batch=None,
            max_total_num_tokens=rng.choice([262144, 524288, 1048576]),
            grammar_manager=[],
        )
        mr.get_observability = lambda: types.SimpleNamespace(
            decode_log_interval=40, enable_mfu_metrics=s.mfu, enable_forward_pass_metrics=False
        )
        mr.get_spec = lambda: types.SimpleNamespace(
            speculative_num_draft_tokens=s.draft_tokens, speculative_num_steps=s.steps
        )
        mr.get_disagg = lambda: types.SimpleNamespace(
            # Host receive is off at the version's own default (0.5.21: 0 = off, printed when
            # > 0; 0.5.23: 1 = off, printed when < 1); 0.5 turns it on in both.
            disaggregation_decode_host_receive_threshold=(
                0.5
                if s.host_receive
                else self.server_args.disaggregation_decode_host_receive_threshold
            ),
            language_only=s.epd,
            encoder_transfer_backend="zmq_to_scheduler" if s.epd else "",
        )
        mr.LOG_FORWARD_ITERS = s.iters
        mr.ENABLE_METRICS_DEVICE_TIMER = False  # _init_metrics must not build a device timer
        os.environ["SGLANG_RAGGED_VERIFY_MODE"] = "cap-accept" if s.block_accept else "static"
        reporter = mr.SchedulerMetricsReporter.__new__(mr.SchedulerMetricsReporter)
        reporter.scheduler = scheduler
        reporter.enable_metrics = False
        reporter.is_stats_logging_rank = True
        reporter.current_scheduler_metrics_enabled = False
        reporter.metrics_collector = None
        reporter._init_metrics()  # SGLang's own init: counters, graph label, MFU switch
        reporter.enable_mfu_metrics = s.mfu
        if s.mfu:
            # What _init_estimated_perf_constants derives from a model config, per GPU.
            reporter._linear_flops_per_token = rng.uniform(2e9, 6e10)
            reporter._attn_dot_flops_coeff = rng.uniform(1e5, 1e7)
            reporter._kv_cache_bytes_per_token = rng.uniform(1e4, 2e5)
            reporter._weight_read_bytes_per_token = rng.uniform(1e9, 3e10)
            reporter._qkv_act_bytes_per_token = rng.uniform(1e4, 1e6)
            reporter._ffn_act_bytes_per_token = rng.uniform(1e4, 1e6)
            reporter._prefill_attn_act_read_per_token = rng.uniform(1e4, 1e6)
            reporter._decode_q_read_bytes_per_token = rng.uniform(1e4, 1e6)
        mr.ENABLE_METRICS_DEVICE_TIMER = s.occupancy
        if s.occupancy:
            reporter.forward_pass_device_timer = types.SimpleNamespace(_report=lambda: None)
            reporter._forward_occupancy_log_window = mr._ForwardOccupancyLogWindow(
                start_ns=self.clock.now_ns
            )
            reporter._scheduler_time_accounting = None
        reporter.scheduler_status_logger = None
        scheduler.kv_events_publisher = types.SimpleNamespace(
            publish_kv_events=lambda: None, emit_kv_metrics=lambda: None
        )
        return reporter

    def pool_stats(self, s: Scenario, rng: random.Random, capacity: int) -> tuple[Any, dict]:
        """SGLang's PoolStats for the scenario's pools, and what was given."""
        kinds = set(s.pools.split("+"))
        full_used = rng.randrange(0, capacity)
        given: dict[str, Any] = {
            "full_num_used": full_used,
            "full_token_usage": full_used / capacity,
            "full_available_size": capacity - full_used,
            "full_evictable_size": 0,
        }
        if "swa" in kinds:
            swa_capacity = capacity // 4
            swa_used = rng.randrange(0, swa_capacity)
            given.update(
                is_hybrid_swa=True,
                full_capacity=capacity,
                swa_capacity=swa_capacity,
                swa_num_used=swa_used,
                swa_token_usage=swa_used / swa_capacity,
                swa_available_size=swa_capacity - swa_used,
                swa_evictable_size=0,
            )
        if "mamba" in kinds:
            slots = rng.choice([256, 512, 1024])
            mamba_used = rng.randrange(0, slots)
            given.update(
                is_hybrid_ssm=True,
                mamba_num_used=mamba_used,
                mamba_usage=mamba_used / slots,
                mamba_available_size=slots - mamba_used,
                mamba_evictable_size=0,
            )
        if "hisparse" in kinds:
            device = rng.randrange(0, capacity // 2)
            host = rng.randrange(0, capacity * 4)
            given.update(
                is_hisparse=True,
                hisparse_device_tokens=device,
                hisparse_device_token_usage=device / (capacity // 2),
                hisparse_host_tokens=host,
                hisparse_host_token_usage=host / (capacity * 4),
            )
        return self.PoolStats(**given), given

    # --- one line ----------------------------------------------------------------------------

    def decode_line(self, s: Scenario, reporter: Any, rng: random.Random, index: int) -> dict:
        scheduler = reporter.scheduler
        capacity = scheduler.max_total_num_tokens
        running = rng.choice([1, 2, 4, 8, 16, 32, 48, 64, 128]) + rng.randrange(0, 3)
        reqs = [
            types.SimpleNamespace(
                seqlen=rng.randrange(100, 30000),
                priority=None,
                routing_key=None,
                host_staged=bool(i % 2),
            )
            for i in range(running)
        ]
        forward_iter = rng.randrange(1, 10**7)
        batch = types.SimpleNamespace(
            reqs=reqs, forward_iter=forward_iter, seq_lens_cpu=None, dp_cooperation_info=None
        )
        scheduler.running_batch = batch
        scheduler.waiting_queue = [object()] * rng.choice([0, 0, 1, 3, 12, 40])
        pool, pool_given = self.pool_stats(s, rng, capacity)
        scheduler.pool_stats_observer = types.SimpleNamespace(get_pool_stats=lambda: pool)
        gap = rng.uniform(0.2, 4.0)
        generated = rng.randrange(1, 40 * running * 5)
        reporter.num_generated_tokens = generated
        reporter.last_decode_stats_tic = self.clock.now
        self.clock.now += gap
        given: dict[str, Any] = {
            "running_requests": running,
            "forward_iter": forward_iter,
            "gap_s": gap,
            "generated_tokens": generated,
            "queued_requests": len(scheduler.waiting_queue),
            "pool": pool_given,
        }
        if s.algorithm != "NONE":
            forward_ct = running * 40
            per_round = (s.draft_tokens - 1) if s.draft_tokens else (s.steps or 0)
            accepted = rng.randrange(forward_ct, forward_ct * (per_round + 1) + 1)
            correct = min(accepted - forward_ct, forward_ct * per_round)
            reporter.spec_num_forward_ct = forward_ct
            reporter.spec_num_accept_tokens = accepted
            reporter.spec_num_correct_drafts = correct
            reporter.spec_num_cap_tokens = (
                rng.randrange(forward_ct, forward_ct * (per_round + 1)) if s.cap else 0
            )
            reporter.spec_num_block_accept_tokens = (
                rng.randrange(forward_ct, accepted + 1) if s.block_accept else 0
            )
            given.update(
                spec_forward_ct=forward_ct,
                spec_accept_tokens=accepted,
                spec_correct_drafts=correct,
                spec_cap_tokens=reporter.spec_num_cap_tokens,
                spec_block_accept_tokens=reporter.spec_num_block_accept_tokens,
            )
        if s.dspark_estimate:
            lo = rng.uniform(1.0, 4.0)
            hi = lo + rng.uniform(0.0, 2.0)
            snapshot = self.estimator._CeilingSnapshot(
                window_lo=lo,
                window_hi=hi,
                window_blocks=8,
                window_horizon=64,
                cumulative_lo=lo,
                cumulative_hi=hi,
                cumulative_blocks=64,
            )
            recorder = types.SimpleNamespace(online_estimate=lambda: snapshot)
            recorder_cls = self.estimator.BlockAcceptEstimateRecorder
            scheduler.draft_worker = types.SimpleNamespace(
                block_accept_estimate_log_suffix=lambda: recorder_cls.estimate_log_suffix(recorder)
            )
            given.update(estimate_lo=lo, estimate_hi=hi)
        if s.disagg == "decode":
            prealloc = rng.randrange(0, capacity)
            transfer = [
                types.SimpleNamespace(host_staged=bool(rng.randrange(2)), priority=None)
                for _ in range(rng.randrange(0, 9))
            ]
            scheduler.disagg_decode_prealloc_queue = types.SimpleNamespace(
                num_tokens_pre_allocated=prealloc,
                queue=[object()] * rng.randrange(0, 20),
                retracted_queue=[object()] * rng.randrange(0, 4),
                pre_allocated_token_counts=lambda: (0, 0),
            )  # read by 0.5.23, not printed
            scheduler.disagg_decode_transfer_queue = types.SimpleNamespace(
                queue=transfer, num_pending_deferred_releases=lambda: 0
            )  # read by 0.5.23
            given.update(
                preallocated_tokens=prealloc,
                transfer_requests=len(transfer),
                host_staged=sum(r.host_staged for r in transfer),
            )
        if s.epd:
            scheduler.mm_receiver = types.SimpleNamespace(
                waiting_list=[object()] * rng.randrange(0, 7)
            )
        if s.mfu:
            reporter._mfu_log_flops = rng.uniform(1e12, 5e14) * gap
            reporter._mfu_log_read_bytes = rng.uniform(1e11, 4e12) * gap
            reporter._mfu_log_write_bytes = rng.uniform(1e9, 1e11) * gap
        self._occupancy(s, reporter, rng, given)
        graph = bool(rng.randrange(4))
        given["graph"] = graph
        reporter.forward_ct_decode = 0
        reporter.report_decode_stats(can_run_cuda_graph=graph, running_batch=batch)
        return given

    def prefill_line(self, s: Scenario, reporter: Any, rng: random.Random, index: int) -> dict:
        scheduler = reporter.scheduler
        capacity = scheduler.max_total_num_tokens
        pool, pool_given = self.pool_stats(s, rng, capacity)
        scheduler.pool_stats_observer = types.SimpleNamespace(get_pool_stats=lambda: pool)
        scheduler.waiting_queue = [object()] * rng.choice([0, 0, 2, 9, 30])
        new_seqs = rng.randrange(1, 9)
        extend = [rng.randrange(1, 8192) for _ in range(new_seqs)]
        prefix = [rng.choice([0, 0, rng.randrange(0, 30000)]) for _ in range(new_seqs)]
        forward_iter = rng.randrange(1, 10**7)
        reqs = [
            types.SimpleNamespace(pending_bootstrap=bool(rng.randrange(3) == 0), priority=None)
            for _ in range(new_seqs)
        ]
        batch = types.SimpleNamespace(
            reqs=reqs, forward_iter=forward_iter, extend_lens=extend, prefix_lens=prefix
        )
        running = [types.SimpleNamespace(priority=None) for _ in range(rng.randrange(0, 64))]
        replay = rng.randrange(1, 4096) if s.replay and rng.randrange(4) else 0
        stats = self.mr.PrefillStats(
            log_input_tokens=sum(extend),
            log_hit_tokens=sum(prefix),
            new_token_ratio=rng.random(),
            num_running_reqs=self.mr.QueueCount.from_reqs(running),
            num_new_seqs=new_seqs,
            num_pending_tokens=rng.choice([0, rng.randrange(0, 10**5)]),
            log_replay_tokens=replay,
        )
        if s.disagg == "prefill":
            scheduler.disagg_prefill_bootstrap_queue = types.SimpleNamespace(
                queue=[object()] * rng.randrange(0, 12)
            )
            scheduler.disagg_prefill_inflight_queue = [object()] * rng.randrange(0, 30)
        if s.epd:
            scheduler.mm_receiver = types.SimpleNamespace(
                waiting_list=[object()] * rng.randrange(0, 7)
            )
        gap = rng.uniform(0.05, 3.0)
        reporter.last_prefill_stats_tic = self.clock.now
        self.clock.now += gap
        given: dict[str, Any] = {
            "new_seqs": new_seqs,
            "extend_lens": extend,
            "prefix_lens": prefix,
            "forward_iter": forward_iter,
            "running_requests": len(running),
            "queued_requests": len(scheduler.waiting_queue),
            "pending_tokens": stats.num_pending_tokens,
            "replay_tokens": replay,
            "gap_s": gap,
            "pool": pool_given,
        }
        self._occupancy(s, reporter, rng, given)
        graph = bool(rng.randrange(3))
        given["graph"] = graph
        reporter.report_prefill_stats(batch, stats, can_run_cuda_graph=graph)
        return given

    def _occupancy(self, s: Scenario, reporter: Any, rng: random.Random, given: dict) -> None:
        if not s.occupancy:
            return
        window = reporter._forward_occupancy_log_window
        window.reset(self.clock.now_ns)
        wall_ns = rng.randrange(10**8, 5 * 10**9)
        window.gpu_seconds = rng.uniform(0.0, 1.1) * wall_ns / 1e9
        window.idle_ns = rng.randrange(0, wall_ns // 2)
        self.clock.now_ns += wall_ns
        given.update(
            window_wall_ns=wall_ns, window_gpu_s=window.gpu_seconds, window_idle_ns=window.idle_ns
        )

    # --- the whole corpus -----------------------------------------------------------------

    def generate(self) -> tuple[str, list[dict]]:
        rng = random.Random(SEED)
        entries: list[dict] = []
        for s in scenarios():
            self.configure_logger(s)
            reporter = self.reporter(s, rng)
            for index in range(s.lines):
                before = self.stream.tell()
                if s.kind == "decode":
                    given = self.decode_line(s, reporter, rng, index)
                else:
                    given = self.prefill_line(s, reporter, rng, index)
                printed = self.stream.getvalue()[before:]
                if printed.count("\n") != 1:
                    raise SystemExit(f"log_corpus: {s.name} printed {printed!r}, not one line")
                entries.append(
                    {
                        "scenario": s.name,
                        "algorithm": s.algorithm,
                        "kind": s.kind,
                        "ranks": dataclasses.asdict(s.ranks),
                        "given": given,
                        "line": printed.rstrip("\n"),
                    }
                )
        logging.setLogRecordFactory(self.records._factory)
        return self.stream.getvalue(), entries


def expected_fields(entry: dict) -> list[list[str]]:
    """The line's fields as printed, "name: value" split at the first ": ".

    The field list is the text after the kind's marker and counter; a DSPARK estimate's value
    holds ", " inside brackets, so the split keeps bracketed text whole."""
    line = entry["line"]
    marker = "Decode batch" if entry["kind"] == "decode" else "Prefill batch"
    body = line[line.index(marker) + len(marker) :]
    if body.startswith(" ["):
        body = body[body.index("]") + 1 :]
    body = body.removeprefix(",").removeprefix(" ")
    parts, depth, start = [], 0, 0
    for i, char in enumerate(body):
        depth += char == "["
        depth -= char == "]"
        if depth == 0 and body.startswith(", ", i):
            parts.append(body[start:i])
            start = i + 2
    parts.append(body[start:])
    return [list(part.split(": ", 1)) for part in parts]


def check(entry: dict) -> None:
    """The printed line holds what the code was given: a formatting drift fails generation."""
    given, fields = entry["given"], dict(entry["fields"])
    want = {
        "#running-req": str(given["running_requests"]),
        "#queue-req": str(given["queued_requests"]),
    }
    if entry["kind"] == "decode":
        want["gen throughput (token/s)"] = f"{given['generated_tokens'] / given['gap_s']:.2f}"
        if "spec_forward_ct" in given:
            want["accept len"] = f"{given['spec_accept_tokens'] / given['spec_forward_ct']:.2f}"
    else:
        want["#new-token"] = str(sum(given["extend_lens"]))
        want["#cached-token"] = str(sum(given["prefix_lens"]))
        want["#new-seq"] = str(given["new_seqs"])
    for name, value in want.items():
        if fields.get(name) != value:
            raise SystemExit(
                f"log_corpus: {entry['scenario']}: {name} printed "
                f"{fields.get(name)!r}, given {value!r}: {entry['line']}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", required=True, help="the SGLang version of this venv")
    parser.add_argument("--out", required=True, help="directory for corpus.log, expected.jsonl")
    args = parser.parse_args(argv)
    text, entries = Corpus(args.version).generate()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "expected.jsonl"), "w", encoding="utf-8") as out:
        for number, entry in enumerate(entries, 1):
            entry["fields"] = expected_fields(entry)
            check(entry)
            record = {
                "n": number,
                "scenario": entry["scenario"],
                "algorithm": entry["algorithm"],
                "kind": entry["kind"],
                "ranks": entry["ranks"],
                "fields": entry["fields"],
                "given": entry["given"],
            }
            out.write(json.dumps(record, sort_keys=True) + "\n")
    with open(os.path.join(args.out, "corpus.log"), "w", encoding="utf-8") as out:
        out.write(text)
    print(f"log_corpus: SGLang {args.version}: {len(entries)} lines -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
