"""SGLang's scheduler log format, as the stand-in prints it.

Read from SGLang's `sglang/srt/managers/scheduler_components/metrics_reporter.py`
(`report_prefill_stats` / `report_decode_stats`, 0.5.21 and 0.5.23: the same for the fields
printed here, DSPARK's `cap len`, `block accept len` and `est uncap acc len` included) and
`configure_scheduler_process`'s prefix rule (see rank_prefix), inside
`[%(asctime)s...]`, date format `%Y-%m-%d %H:%M:%S`, `.%03d` milliseconds when SGLANG_LOG_MS is
set (`configure_logger`). Only the first rank prints stats lines, so the stand-in prints rank 0.
tests/standin/test_log_corpus.py checks every line shape against a corpus printed by SGLang's own
code.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from specserve.standin.args import StandinArgs


def rank_prefix(args: StandinArgs) -> str:
    """The ` DP0 PP0 ATTN_CP0 MOE_DP0 TP0 EP0` part for rank 0 under upstream's rules
    (`configure_scheduler_process`, same order in 0.5.21 and 0.5.23). Upstream prints DP<n>
    when the process has a data-parallel rank; the stand-in takes that to mean dp > 1 or
    attention DP."""
    prefix = ""
    if args.dp_size > 1 or args.enable_dp_attention:
        prefix += " DP0"
    if args.pp_size > 1:
        prefix += " PP0"
    if args.attn_cp_size > 1:
        prefix += " ATTN_CP0"
    if args.moe_dp_size > 1:
        prefix += " MOE_DP0"
    if args.tp_size > 1:
        prefix += " TP0"
    if args.ep_size > 1:
        prefix += " EP0"
    return prefix


class LinePrinter:
    """Writes `[time{ranks}] message` lines, one write per line so lines never interleave."""

    def __init__(
        self, ranks: str, stream: TextIO | None = None, with_ms: bool | None = None
    ) -> None:
        self._ranks = ranks
        self._stream = stream if stream is not None else sys.stdout
        self._lock = threading.Lock()
        ms_env = os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true", "yes")
        self._with_ms = ms_env if with_ms is None else with_ms

    def stamp(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        if self._with_ms:
            text += f".{int((now % 1) * 1000):03d}"
        return text

    def log(self, message: str, ranks: bool = True) -> None:
        line = f"[{self.stamp()}{self._ranks if ranks else ''}] {message}\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                # stdout closed by a dying pipe reader: the server keeps serving.
                pass

    def raw(self, text: str) -> None:
        """A line without the prefix (uvicorn-style access lines)."""
        with self._lock:
            try:
                self._stream.write(text + "\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                pass


@dataclass(frozen=True)
class DecodeStats:
    running: int
    num_tokens: int
    token_usage: float
    accept_length: float | None
    accept_rate: float | None
    graph: bool
    gen_throughput: float
    queued: int
    cap_length: float = 0.0
    """`cap len`, printed when > 0 (DSPARK under a ragged verify mode)."""
    block_accept_length: float = 0.0
    """`block accept len`, printed when > 0 (DSPARK under cap-accept: block_window)."""
    estimate: tuple[float, float] | None = None
    """DSPARK's cumulative uncapped-accept bracket (lo, hi), printed as estimate_suffix."""


@dataclass(frozen=True)
class PrefillStats:
    new_seq: int
    new_token: int
    cached_token: int
    token_usage: float
    running: int
    queued: int
    pending_token: int
    graph: bool
    input_throughput: float


def spec_window(
    accepted: int, passes: int, draft_tokens: int | None, steps: int | None = None
) -> tuple[float, float]:
    """(accept len, accept rate) of a window as `report_decode_stats` computes them (0.5.21 and
    0.5.23): accepted tokens (the bonus token included) / verify passes, and accepted draft
    tokens / (passes x drafts per round), drafts per round being draft tokens - 1 (steps when
    the draft-token count is unset)."""
    accept_len = accepted / passes if passes else 0.0
    per_round = (draft_tokens - 1) if draft_tokens else (steps or 0)
    total = passes * per_round
    return accept_len, ((accepted - passes) / total if total > 0 else 0.0)


def block_window(
    block_tokens: int, cap_tokens: int, passes: int, ragged_mode: str
) -> tuple[float, float]:
    """(cap len, block accept len) of a window as `report_decode_stats` computes them (0.5.21
    and 0.5.23): cap tokens / passes; block-accept tokens / passes, but only under
    SGLANG_RAGGED_VERIFY_MODE=cap-accept (0 otherwise: the only mode where the whole block is
    verified, so the uncapped length is exact)."""
    if passes <= 0:
        return 0.0, 0.0
    block = block_tokens / passes if ragged_mode == "cap-accept" else 0.0
    return cap_tokens / passes, block


def estimate_suffix(lo: float, hi: float) -> str:
    """BlockAcceptEstimateRecorder.estimate_log_suffix (dspark_block_accept_estimator.py,
    0.5.21 and 0.5.23): the cumulative bracket's midpoint, then the bracket."""
    return f"est uncap acc len: {0.5 * (lo + hi):.2f} [{lo:.2f}, {hi:.2f}]"


def decode_line(stats: DecodeStats) -> str:
    msg = (
        f"Decode batch, #running-req: {stats.running}, "
        f"#token: {stats.num_tokens}, token usage: {stats.token_usage:.2f}, "
    )
    if stats.accept_length is not None:
        msg += f"accept len: {stats.accept_length:.2f}, accept rate: {stats.accept_rate or 0:.2f}, "
        # In upstream's order, each only when it applies (report_decode_stats).
        if stats.cap_length > 0:
            msg += f"cap len: {stats.cap_length:.2f}, "
        if stats.block_accept_length > 0:
            msg += f"block accept len: {stats.block_accept_length:.2f}, "
        if stats.estimate is not None:
            msg += f"{estimate_suffix(*stats.estimate)}, "
    msg += (
        f"cuda graph: {stats.graph}, "
        f"gen throughput (token/s): {stats.gen_throughput:.2f}, "
        f"#queue-req: {stats.queued}"
    )
    return msg


def prefill_line(stats: PrefillStats) -> str:
    return (
        f"Prefill batch, #new-seq: {stats.new_seq}, #new-token: {stats.new_token}, "
        f"#cached-token: {stats.cached_token}, token usage: {stats.token_usage:.2f}, "
        f"#running-req: {stats.running}, #queue-req: {stats.queued}, "
        f"#pending-token: {stats.pending_token}, "
        f"cuda graph: {stats.graph}, input throughput (token/s): {stats.input_throughput:.2f}"
    )
