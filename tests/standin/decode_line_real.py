"""Run inside an SGLang venv (tests/contract/sglang_venv.py): print Decode lines with SGLang's
own `SchedulerMetricsReporter.report_decode_stats` for the window counters on stdin, as JSON.

It reuses scripts/sglang/log_corpus.py (the generator of the log corpus: its fake scheduler,
SGLang's real PoolStats, logger set-up and frozen clock) but takes the counters from the caller,
so a test can hand SGLang exactly the window the stand-in printed and compare the two lines.
stdin: {"version", "log_corpus": path, "cases": [{algorithm, draft_tokens, steps, mode,
running, used, usage, capacity, queued, gen_tokens, graph, passes, accepted, cap_tokens,
block_tokens, estimate: [lo, hi] | null}]}; `mode` is SGLANG_RAGGED_VERIFY_MODE; an estimate is
handed to SGLang's real BlockAcceptEstimateRecorder.estimate_log_suffix as its cumulative
snapshot. stdout: the printed lines, the prefix cut off at "] ".
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import types
from typing import Any


def _corpus_module(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("standin_log_corpus", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def _line(mod: Any, corpus: Any, case: dict[str, Any]) -> str:
    scenario = mod.Scenario(
        "standin", "decode", 1, mod.Ranks(), algorithm=case["algorithm"],
        draft_tokens=case["draft_tokens"], steps=case["steps"],
        block_accept=case["mode"] == "cap-accept",
    )  # fmt: skip
    corpus.configure_logger(scenario)
    reporter = corpus.reporter(scenario, random.Random(0))
    os.environ["SGLANG_RAGGED_VERIFY_MODE"] = case["mode"]  # read when the line is built
    scheduler = reporter.scheduler
    req = types.SimpleNamespace(seqlen=1, priority=None, routing_key=None, host_staged=False)
    batch = types.SimpleNamespace(
        reqs=[req] * case["running"], forward_iter=1, seq_lens_cpu=None, dp_cooperation_info=None
    )
    scheduler.running_batch = batch
    scheduler.waiting_queue = [object()] * case["queued"]
    pool = corpus.PoolStats(
        full_num_used=case["used"], full_token_usage=case["usage"],
        full_available_size=case["capacity"] - case["used"], full_evictable_size=0,
    )  # fmt: skip
    scheduler.pool_stats_observer = types.SimpleNamespace(get_pool_stats=lambda: pool)
    reporter.num_generated_tokens = case["gen_tokens"]
    reporter.last_decode_stats_tic = corpus.clock.now
    corpus.clock.now += 1.0  # a 1 s window: gen throughput = gen_tokens
    reporter.spec_num_forward_ct = case["passes"]
    reporter.spec_num_accept_tokens = case["accepted"]
    reporter.spec_num_correct_drafts = case["accepted"] - case["passes"]
    reporter.spec_num_cap_tokens = case["cap_tokens"]
    reporter.spec_num_block_accept_tokens = case["block_tokens"]
    if case["estimate"] is not None:
        lo, hi = case["estimate"]
        snapshot = corpus.estimator._CeilingSnapshot(
            window_lo=lo, window_hi=hi, window_blocks=1, window_horizon=1,
            cumulative_lo=lo, cumulative_hi=hi, cumulative_blocks=1,
        )  # fmt: skip
        recorder = types.SimpleNamespace(online_estimate=lambda: snapshot)
        suffix = corpus.estimator.BlockAcceptEstimateRecorder.estimate_log_suffix
        scheduler.draft_worker = types.SimpleNamespace(
            block_accept_estimate_log_suffix=lambda: suffix(recorder)
        )
    reporter.forward_ct_decode = 0
    before = len(corpus.stream.getvalue())
    reporter.report_decode_stats(can_run_cuda_graph=case["graph"], running_batch=batch)
    printed = corpus.stream.getvalue()[before:].rstrip("\n")
    return printed.split("] ", 1)[1]


def main() -> None:
    request = json.load(sys.stdin)
    mod = _corpus_module(request["log_corpus"])
    corpus = mod.Corpus(request["version"])
    json.dump([_line(mod, corpus, case) for case in request["cases"]], sys.stdout)


if __name__ == "__main__":
    main()
