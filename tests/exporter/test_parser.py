"""The reference parser on every variant in shared/sglang-log-formats.md."""

from __future__ import annotations

import pytest

from specserve_exporter.parser import (
    NO_RANKS,
    Kind,
    Ranks,
    Reason,
    Rejected,
    StatsLine,
    parse_line,
    read_fields,
    split_fields,
)

SEED_LINE = (
    b"[2026-02-23 17:53:14 TP0] Decode batch, #running-req: 1, #token: 671, token usage: 0.01, "
    b"accept len: 2.15, accept rate: 0.13, cuda graph: True, gen throughput (token/s): 66.89, "
    b"#queue-req: 0"
)


def parsed(line: bytes) -> StatsLine:
    result = parse_line(line)
    assert isinstance(result, StatsLine), result
    return result


def test_seed_line_from_the_brief() -> None:
    line = parsed(SEED_LINE)
    assert line.kind is Kind.DECODE
    assert line.ranks == Ranks(tp="0")
    assert line.values["running_requests"] == 1
    assert line.values["accept_length"] == 2.15
    assert line.values["accept_rate"] == 0.13
    assert line.values["gen_throughput"] == 66.89
    assert line.values["queued_requests"] == 0
    assert line.values["token_usage"] == 0.01
    assert (line.graph, line.graph_on) == ("cuda", True)
    assert line.unknown_fields == 0


DECODE_VARIANTS = [
    pytest.param(
        b"[2025-01-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: 100, token usage: 0.05, "
        b"gen throughput (token/s): 120.50, #queue-req: 2",
        {"running_requests": 3, "gen_throughput": 120.5, "queued_requests": 2},
        None,
        id="gen1-period-no-spec",
    ),
    pytest.param(
        b"[2025-01-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: 100, token usage: 0.05, "
        b"accept len: 1.80, gen throughput (token/s): 120.50, #queue-req: 2, ",
        {"accept_length": 1.8, "gen_throughput": 120.5},
        None,
        id="gen2-spec-trailing-comma",
    ),
    pytest.param(
        b"[2025-01-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: 100, token usage: 0.05, "
        b"accept len: 1.80, cuda graph: False, gen throughput (token/s): 120.50, #queue-req: 2",
        {"accept_length": 1.8},
        ("cuda", False),
        id="gen3-graph-false",
    ),
    pytest.param(
        b"[2025-01-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: 100, token usage: 0.05, "
        b"pre-allocated usage: 0.10, #retracted-req: 1, accept len: 1.80, cuda graph: True, "
        b"gen throughput (token/s): 120.50, #queue-req: 2",
        {"accept_length": 1.8, "gen_throughput": 120.5},
        ("cuda", True),
        id="gen3-pd-decode-fields",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Decode batch [1234], #running-req: 4, #token: 100, "
        b"token usage: 0.05, accept len: 2.50, accept rate: 0.50, #prealloc-req: 0, "
        b"#transfer-req: 0, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0, ",
        {"accept_length": 2.5, "accept_rate": 0.5, "running_requests": 4},
        ("cuda", True),
        id="gen4-iteration-counter",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00] Decode batch[77], #running-req: 4, #token: 100, token usage: 0.05, "
        b"npu graph: True, gen throughput (token/s): 30.00, #queue-req: 0",
        {"gen_throughput": 30.0},
        ("npu", True),
        id="gen4-counter-no-space-npu",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, "
        b"cpu graph: False, gen throughput (token/s): 3.00, #queue-req: 0",
        {"gen_throughput": 3.0},
        ("cpu", False),
        id="cpu-graph",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, "
        b"musa graph: True, gen throughput (token/s): 3.00, #queue-req: 0",
        {"gen_throughput": 3.0},
        ("musa", True),
        id="musa-graph",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 2, #full token: 100, "
        b"full token usage: 0.20, #swa token: 50, swa token usage: 0.10, accept len: 3.00, "
        b"cuda graph: True, gen throughput (token/s): 90.00, #queue-req: 0",
        {"full_token_usage": 0.2, "swa_token_usage": 0.1, "accept_length": 3.0},
        ("cuda", True),
        id="sliding-window-usage",
    ),
    pytest.param(
        # SGLang's PoolStats.get_decode_usage_msg_parts: a hybrid-mamba model prints the full
        # pool as "#full token" / "full token usage", never "#token" / "token usage".
        b"[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 2, #full token: 100, "
        b"full token usage: 0.20, mamba num: 4, mamba usage: 0.30, cuda graph: True, "
        b"gen throughput (token/s): 90.00, #queue-req: 0",
        {"mamba_usage": 0.3, "full_token_usage": 0.2},
        ("cuda", True),
        id="hybrid-mamba-usage",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 2, #gpu token: 100, "
        b"gpu token usage: 0.40, #cpu token: 900, cpu token usage: 0.70, cuda graph: True, "
        b"gen throughput (token/s): 90.00, #queue-req: 0",
        {"gpu_token_usage": 0.4, "cpu_token_usage": 0.7},
        ("cuda", True),
        id="hierarchical-sparse-usage",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 8, #token: 100, token usage: 0.05, "
        b"accept len: 2.00, accept rate: 0.33, cuda graph: True, gen throughput (token/s): 500.00, "
        b"#queue-req: 0, est. decode TFLOPS/s (per GPU): 12.50, est. read BW (GB/s per GPU): "
        b"900.00, est. write BW (GB/s per GPU): 10.00, fwd occupancy: 87.50%",
        {"gen_throughput": 500.0, "accept_length": 2.0},
        ("cuda", True),
        id="optional-tails",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00.123 TP0] Decode batch, #running-req: 1, #token: 10, "
        b"token usage: 0.00, waiting-image-req: 0, cuda graph: True, "
        b"gen throughput (token/s): 3.00, #queue-req: 0",
        {"gen_throughput": 3.0},
        ("cuda", True),
        id="milliseconds-and-multimodal",
    ),
]


@pytest.mark.parametrize(("line", "expected", "graph"), DECODE_VARIANTS)
def test_decode_variants(line: bytes, expected: dict[str, float], graph: object) -> None:
    result = parsed(line)
    assert result.kind is Kind.DECODE
    for key, value in expected.items():
        assert result.values[key] == pytest.approx(value)
    assert (None if result.graph is None else (result.graph, result.graph_on)) == graph
    assert result.unknown_fields == 0


@pytest.mark.parametrize(
    ("prefix", "ranks"),
    [
        (b"[2026-02-23 17:53:14] ", NO_RANKS),
        (b"[2026-02-23 17:53:14 TP3] ", Ranks(tp="3")),
        (b"[2026-02-23 17:53:14 DP1 TP0] ", Ranks(dp="1", tp="0")),
        (b"[2026-02-23 17:53:14 DP1 PP2 ATTN_CP0 MOE_DP0 TP0 EP4] ", Ranks(dp="1", tp="0", pp="2")),
        (b"[2026-02-23 17:53:14 TP0 PP1] ", Ranks(tp="0", pp="1")),  # older order: PP after TP
        (b"[2026-02-23 17:53:14.042 DP2 TP0] ", Ranks(dp="2", tp="0")),
        (b"", NO_RANKS),  # SGLANG_LOGGING_CONFIG_PATH with a bare message
        (b"2026-02-23T17:53:14Z sglang INFO ", NO_RANKS),  # a custom format: unknown prefix
    ],
)
def test_rank_prefixes(prefix: bytes, ranks: Ranks) -> None:
    line = prefix + SEED_LINE[SEED_LINE.index(b"Decode"):]
    assert parsed(line).ranks == ranks


PREFILL_VARIANTS = [
    pytest.param(
        b"[2026-02-23 17:53:10 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, "
        b"token usage: 0.01, #running-req: 0, #queue-req: 0",
        {"new_tokens": 6, "cached_tokens": 0},
        id="old-period",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 512, "
        b"#cached-token: 128, token usage: 0.02, #running-req: 1, #queue-req: 0, "
        b"#pending-token: 0, #bootstrap-req: 0, #inflight-req: 0, cuda graph: False, "
        b"input throughput (token/s): 4000.00, ",
        {"new_tokens": 512, "cached_tokens": 128, "input_throughput": 4000.0},
        id="new-with-pd-and-throughput",
    ),
    pytest.param(
        b"[2026-03-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 8, #cached-token: 0, "
        b"token usage: 0.00, #running-req: 0, #queue-req: 0, timestamp: 2026-03-01T10:00:00.123",
        {"new_tokens": 8},
        id="with-timestamp",
    ),
]


@pytest.mark.parametrize(("line", "expected"), PREFILL_VARIANTS)
def test_prefill_variants(line: bytes, expected: dict[str, float]) -> None:
    result = parsed(line)
    assert result.kind is Kind.PREFILL
    for key, value in expected.items():
        assert result.values[key] == pytest.approx(value)
    assert result.unknown_fields == 0


def test_unknown_fields_are_counted_not_fatal() -> None:
    line = SEED_LINE + b", #brand-new-field: 7, spec verify ms: 3.2, flag-without-value"
    result = parsed(line)
    assert result.unknown_fields == 3
    assert result.values["accept_length"] == 2.15


def test_crlf_and_trailing_newline() -> None:
    assert parsed(SEED_LINE + b"\r\n").values["queued_requests"] == 0


@pytest.mark.parametrize(
    "line",
    [
        b'[2026-02-23 17:53:14] INFO:     127.0.0.1:50000 - "POST /generate HTTP/1.1" 200 OK',
        b"[2026-02-23 17:53:14 TP0] Load weight end. type=DeepseekV3ForCausalLM",
        b"",
        b"\xff\xfe garbage",
    ],
)
def test_non_stats_lines_are_ignored(line: bytes) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (SEED_LINE.replace(b"accept len: 2.15", b"accept len: abc"), Reason.BAD_VALUE),
        (SEED_LINE.replace(b"cuda graph: True", b"cuda graph: maybe"), Reason.BAD_VALUE),
        (SEED_LINE.replace(b"#running-req: 1", b"#running-req: -1"), Reason.BAD_VALUE),
        (SEED_LINE.replace(b"gen throughput (token/s): 66.89", b"gen throughput (token/s): nan"),
         Reason.BAD_VALUE),
        (SEED_LINE.replace(b"#running-req: 1, ", b""), Reason.MISSING_FIELD),
        (SEED_LINE.replace(b", gen throughput (token/s): 66.89", b""), Reason.MISSING_FIELD),
        (b"[2026-02-23 17:53:14 TP0] Decode batch", Reason.MALFORMED),
        (b"[2026-02-23 17:53:14 TP0] Decode batch, ", Reason.MALFORMED),
        (SEED_LINE.replace(b"#queue-req: 0", b"#queue-req: 0, note: \xff\xfe"),
         Reason.INVALID_UTF8),
        (SEED_LINE + b", x: " + b"9" * 70000, Reason.TOO_LONG),
        (b"[2026-03-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #cached-token: 0",
         Reason.MISSING_FIELD),
    ],
)
def test_malformed_stats_lines_are_rejected_with_reason(line: bytes, reason: Reason) -> None:
    result = parse_line(line)
    assert isinstance(result, Rejected)
    assert result.reason is reason


def test_a_bracketed_value_is_one_field() -> None:
    # DSPARK's estimate, as SGLang's BlockAcceptEstimateRecorder.estimate_log_suffix prints it.
    line = SEED_LINE.replace(
        b", cuda graph", b", est uncap acc len: 2.67 [1.67, 3.67], cuda graph"
    )
    assert split_fields(b"a: 1, b: 2 [3, 4], c: 5") == [b"a: 1", b"b: 2 [3, 4]", b"c: 5"]
    result = parsed(line)
    assert result.unknown_fields == 0
    assert read_fields(line)[b"est uncap acc len"] == 2.67
