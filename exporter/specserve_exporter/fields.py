"""The stats-line field table: every field SGLang prints that the exporter knows, and per kind of
line which metric each one feeds and how.

Both paths read it. The reference parser (parser.py) recognises FIELDS, converts and checks the
values of EXPORTED ones and refuses a line without its kind's REQUIRED fields. The fast path
(shape.py, _scan.c) captures from every line the fields an EVERY_LINE feed needs
(`captured_fields`) and sums them as `every_line(kind)` says. Both hand what they read to
`LogState.observe` (state.py) as a Window (window.py), and the collector turns the state into
the metrics each feed names (names.py). The C scanner knows no field name: shape.py compiles
its program from a learned line and this table.

Adding a field that feeds a metric is one row in FIELDS plus one Feed in its kind's LineKind;
tests/exporter/test_fields.py fails when a path does not carry it to its metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from . import names
from .histogram import ACCEPT_LENGTH_BUCKETS, THROUGHPUT_BUCKETS


class Kind(StrEnum):
    DECODE = "decode"
    PREFILL = "prefill"


class Value(StrEnum):
    """How a field's value is printed and read."""

    NUMBER = "number"  # "12", "0.35", "87.5%": a float, a "%" dropped
    GRAPH = "graph"  # "True" or "False": whether the window ran with graphs
    ESTIMATE = "estimate"  # DSPARK's "2.67 [1.67, 3.67]": mid [lo, hi], read as its mid value
    TEXT = "text"  # not a number: recognised, never read


class Read(StrEnum):
    """Which lines' values a metric shows."""

    EVERY_LINE = "every_line"  # summed over every line (histogram, counter): the scanner reads it
    LAST_LINE = "last_line"  # a gauge of the last line; gone when the last line lacks the field
    LAST_PRINTED = "last_printed"  # a gauge of the last line that printed the field


# Fields and feeds compare by identity (eq=False): each is one row of the table, and the parser
# looks one up per field of every line, where hashing every attribute would cost.
@dataclass(frozen=True, slots=True, eq=False)
class Field:
    printed: bytes  # SGLang's name, as printed before ": "
    name: str  # the exporter's name: the key of StatsLine.values
    unit: str  # what the number counts ("" for a graph state or text)
    value: Value = Value.NUMBER
    label: str = ""  # the label value it gives its metric: the KV pool, the graph kind


@dataclass(frozen=True, slots=True, eq=False)
class Feed:
    """One field of one kind of line feeding one metric."""

    field: Field
    metric: names.Metric
    read: Read
    # EVERY_LINE only: the histogram's bucket bounds (none for a counter), and the field whose
    # value picks the series (its concurrency bucket, specserve.buckets.concurrency_bucket).
    bounds: tuple[float, ...] = ()
    key: Field | None = None


@dataclass(frozen=True, slots=True)
class LineKind:
    kind: Kind
    marker: bytes  # what makes a line a stats line of this kind
    required: tuple[Field, ...]  # a line without one of them is rejected (missing_field)
    feeds: tuple[Feed, ...]
    last_seen: names.Metric | None = None  # a gauge of when its last line was read


def _f(printed: bytes, name: str, unit: str, value: Value = Value.NUMBER, label: str = "") -> Field:
    return Field(printed, name, unit, value, label)


RUNNING_REQUESTS = _f(b"#running-req", "running_requests", "requests")
QUEUED_REQUESTS = _f(b"#queue-req", "queued_requests", "requests")
ACCEPT_LENGTH = _f(b"accept len", "accept_length", "tokens per verify pass")
ACCEPT_RATE = _f(b"accept rate", "accept_rate", "ratio")
# The block drafters' (DFLASH, DSPARK): printed only when above 0.
CAP_LENGTH = _f(b"cap len", "cap_length", "tokens")
BLOCK_ACCEPT_LENGTH = _f(b"block accept len", "block_accept_length", "tokens")
UNCAPPED_ACCEPT_ESTIMATE = _f(b"est uncap acc len", "uncapped_accept_length_estimate", "tokens",
                              Value.ESTIMATE)
GEN_THROUGHPUT = _f(b"gen throughput (token/s)", "gen_throughput", "tokens/s")
INPUT_THROUGHPUT = _f(b"input throughput (token/s)", "input_throughput", "tokens/s")
NEW_TOKENS = _f(b"#new-token", "new_tokens", "tokens")
CACHED_TOKENS = _f(b"#cached-token", "cached_tokens", "tokens")
# KV cache usage by pool, in the order SGLang's model kinds print them; the label is the pool.
USAGES: tuple[Field, ...] = (
    _f(b"token usage", "token_usage", "ratio", label="kv"),
    _f(b"full token usage", "full_token_usage", "ratio", label="full"),
    _f(b"swa token usage", "swa_token_usage", "ratio", label="swa"),
    _f(b"mamba usage", "mamba_usage", "ratio", label="mamba"),
    _f(b"gpu token usage", "gpu_token_usage", "ratio", label="gpu"),
    _f(b"cpu token usage", "cpu_token_usage", "ratio", label="cpu"),
)
GRAPHS: tuple[Field, ...] = tuple(
    _f(b"%s graph" % kind.encode(), f"{kind}_graph", "", Value.GRAPH, label=kind)
    for kind in ("cuda", "cpu", "npu", "musa")
)
# One histogram bucket: le="0" holds the lines that ran off the graphs (a state read as 0).
GRAPH_STATE_BUCKETS: tuple[float, ...] = (0.0,)
# Fields the exporter recognises (a newer format's field would count as unknown) but exports not.
RECOGNISED: tuple[Field, ...] = (
    _f(b"#token", "tokens", "tokens"),
    _f(b"#full token", "full_tokens", "tokens"),
    _f(b"#swa token", "swa_tokens", "tokens"),
    _f(b"mamba num", "mamba_num", "slots"),
    _f(b"#gpu token", "gpu_tokens", "tokens"),
    _f(b"#cpu token", "cpu_tokens", "tokens"),
    _f(b"pre-allocated usage", "preallocated_usage", "ratio"),
    _f(b"#retracted-req", "retracted_requests", "requests"),
    _f(b"#prealloc-req", "prealloc_requests", "requests"),
    _f(b"#transfer-req", "transfer_requests", "requests"),
    _f(b"#new-seq", "new_seqs", "sequences"),
    _f(b"#pending-token", "pending_tokens", "tokens"),
    _f(b"#bootstrap-req", "bootstrap_requests", "requests"),
    _f(b"#inflight-req", "inflight_requests", "requests"),
    _f(b"waiting-image-req", "waiting_image_requests", "requests"),
    _f(b"est. decode TFLOPS/s (per GPU)", "decode_tflops_per_gpu", "TFLOPS/s"),
    _f(b"est. read BW (GB/s per GPU)", "read_bw_gbps_per_gpu", "GB/s"),
    _f(b"est. write BW (GB/s per GPU)", "write_bw_gbps_per_gpu", "GB/s"),
    _f(b"fwd occupancy", "fwd_occupancy", "percent"),
    _f(b"fwd+idle occupancy", "fwd_idle_occupancy", "percent"),
    _f(b"#replay-token", "replay_tokens", "tokens"),
    _f(b"#optimistic-req", "optimistic_requests", "requests"),
    _f(b"#host-receive-req", "host_receive_requests", "requests"),
    _f(b"est. prefill TFLOPS/s (per GPU)", "prefill_tflops_per_gpu", "TFLOPS/s"),
    _f(b"timestamp", "timestamp", "", Value.TEXT),
)

_DECODE = LineKind(
    Kind.DECODE,
    b"Decode batch",
    required=(RUNNING_REQUESTS, GEN_THROUGHPUT),
    feeds=(
        Feed(ACCEPT_LENGTH, names.DECODE_ACCEPT_LENGTH, Read.EVERY_LINE, ACCEPT_LENGTH_BUCKETS),
        Feed(GEN_THROUGHPUT, names.DECODE_GEN_THROUGHPUT, Read.EVERY_LINE, THROUGHPUT_BUCKETS,
             key=RUNNING_REQUESTS),
        Feed(ACCEPT_LENGTH, names.DECODE_LAST_ACCEPT_LENGTH, Read.LAST_LINE),
        # Computed from the accept length and the configured draft tokens (state.py).
        Feed(ACCEPT_LENGTH, names.DECODE_DRAFT_ACCEPTANCE, Read.LAST_LINE),
        Feed(ACCEPT_RATE, names.DECODE_PRINTED_ACCEPT_RATE, Read.LAST_LINE),
        Feed(BLOCK_ACCEPT_LENGTH, names.DECODE_LAST_BLOCK_ACCEPT_LENGTH, Read.LAST_LINE),
        Feed(CAP_LENGTH, names.DECODE_LAST_CAP_LENGTH, Read.LAST_LINE),
        Feed(UNCAPPED_ACCEPT_ESTIMATE, names.DECODE_UNCAPPED_ACCEPT_LENGTH_ESTIMATE,
             Read.LAST_LINE),
        Feed(GEN_THROUGHPUT, names.DECODE_LAST_GEN_THROUGHPUT, Read.LAST_LINE),
        Feed(RUNNING_REQUESTS, names.DECODE_RUNNING_REQUESTS, Read.LAST_LINE),
        Feed(QUEUED_REQUESTS, names.DECODE_QUEUED_REQUESTS, Read.LAST_LINE),
        *(Feed(usage, names.DECODE_TOKEN_USAGE, Read.LAST_LINE) for usage in USAGES),
        *(Feed(graph, names.DECODE_GRAPH_ENABLED, Read.LAST_PRINTED) for graph in GRAPHS),
        # Every line's graph state by its batch: the share off the graphs at high batch.
        *(Feed(graph, names.DECODE_GRAPH_LINES, Read.EVERY_LINE, GRAPH_STATE_BUCKETS,
               key=RUNNING_REQUESTS) for graph in GRAPHS),
    ),
    last_seen=names.DECODE_LAST_LINE_TIMESTAMP,
)
_PREFILL = LineKind(
    Kind.PREFILL,
    b"Prefill batch",
    required=(NEW_TOKENS,),
    feeds=(
        Feed(NEW_TOKENS, names.PREFILL_NEW_TOKENS, Read.EVERY_LINE),
        Feed(CACHED_TOKENS, names.PREFILL_CACHED_TOKENS, Read.EVERY_LINE),
        Feed(INPUT_THROUGHPUT, names.PREFILL_LAST_INPUT_THROUGHPUT, Read.LAST_PRINTED),
    ),
)
LINE_KINDS: dict[Kind, LineKind] = {Kind.DECODE: _DECODE, Kind.PREFILL: _PREFILL}

# --- derived: what each path looks up ---------------------------------------------------------
FIELDS: tuple[Field, ...] = (
    RUNNING_REQUESTS, QUEUED_REQUESTS, ACCEPT_LENGTH, ACCEPT_RATE, CAP_LENGTH,
    BLOCK_ACCEPT_LENGTH, UNCAPPED_ACCEPT_ESTIMATE, GEN_THROUGHPUT, INPUT_THROUGHPUT, NEW_TOKENS,
    CACHED_TOKENS, *USAGES, *GRAPHS, *RECOGNISED,
)
BY_PRINTED: dict[bytes, Field] = {f.printed: f for f in FIELDS}
# The fields that feed a metric on any kind of line: their values must be numbers (or True /
# False) or the line is rejected (bad_value); the other known fields are not checked.
EXPORTED: frozenset[Field] = frozenset(
    feed.field for kind in LINE_KINDS.values() for feed in kind.feeds)


def every_line(kind: Kind) -> tuple[Feed, ...]:
    """The feeds summed over every line of `kind`: what the chunk scanner must read."""
    return tuple(f for f in LINE_KINDS[kind].feeds if f.read is Read.EVERY_LINE)


def captured_fields(kind: Kind) -> tuple[Field, ...]:
    """The numeric fields read from every line of `kind`: values and keys of its EVERY_LINE
    feeds."""
    out: dict[Field, None] = {}
    for feed in every_line(kind):
        out[feed.field] = None
        if feed.key is not None:
            out[feed.key] = None
    return tuple(out)
