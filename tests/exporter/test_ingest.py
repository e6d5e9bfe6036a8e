"""The chunk fast path must give exactly what the line-by-line reference path gives."""

from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specserve_exporter.collector import LogCollector
from specserve_exporter.ingest import Ingestor
from specserve_exporter.parser import parse_line
from specserve_exporter.state import LogState, SpeculationConfig

from .test_parser import DECODE_VARIANTS, PREFILL_VARIANTS, SEED_LINE

CONFIG = SpeculationConfig(draft_tokens=4, baseline={"1": 90.0, "4": 250.0})
HTTP = (
    b'[2026-02-23 17:53:14] INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" '
    b"200 OK"
)


class ReferenceIngestor(Ingestor):
    """The same ingestor with the fast path switched off: every line through parse_line."""

    def _fast(self, chunk: bytes, n_lines: int, now: float) -> bool:
        return False


def samples(ingestor_class: type[Ingestor], chunks: list[bytes]) -> dict[tuple[str, tuple], float]:
    state = LogState(CONFIG)
    ingestor = ingestor_class(state)
    for chunk in chunks:
        ingestor.feed(chunk, now=1000.0)
    registry = CollectorRegistry()
    registry.register(LogCollector(state))
    out: dict[tuple[str, tuple], float] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def assert_same(chunks: list[bytes]) -> dict[tuple[str, tuple], float]:
    fast = samples(Ingestor, chunks)
    reference = samples(ReferenceIngestor, chunks)
    assert fast.keys() == reference.keys()
    for key, value in reference.items():
        # Sums may differ in the last bits: the fast path adds a chunk's values in another order.
        assert abs(fast[key] - value) <= 1e-9 * max(1.0, abs(value)), key
    return fast


def decode_line(rng: random.Random, ranks: bytes = b" TP0") -> bytes:
    return (
        b"[2026-02-23 17:53:%02d%s] Decode batch, #running-req: %d, #token: %d, token usage: %.2f, "
        b"accept len: %.2f, accept rate: %.2f, cuda graph: True, gen throughput (token/s): %.2f, "
        b"#queue-req: %d"
        % (rng.randrange(60), ranks, rng.randint(1, 40), rng.randint(1, 9999), rng.random(),
           1 + 3 * rng.random(), rng.random(), 500 * rng.random(), rng.randint(0, 3))
    )


def test_fast_path_is_taken_and_matches_reference() -> None:
    rng = random.Random(7)
    lines = [decode_line(rng) if rng.random() < 0.8 else HTTP for _ in range(3000)]
    prefill = PREFILL_VARIANTS[1].values[0]
    lines = [prefill, *lines[:1500], prefill, *lines[1500:], prefill]
    body = b"\n".join(lines) + b"\n"
    chunks = [body[: len(body) // 3], body[len(body) // 3:]]
    # Chunks must hold whole lines.
    cut = chunks[0].rfind(b"\n") + 1
    chunks = [chunks[0][:cut], chunks[0][cut:] + chunks[1]]
    state = LogState(CONFIG)
    ingestor = Ingestor(state)
    ingestor.feed(chunks[0], now=1.0)
    assert ingestor._shapes, "the first chunk teaches the shape"
    taken = ingestor._fast(chunks[1], chunks[1].count(b"\n"), 1.0)
    assert taken, "a second chunk of the same shape takes the fast path"
    fast = assert_same(chunks)
    decode = sum(1 for line in lines if b"Decode" in line)
    assert fast[("specserve_log_lines_parsed_total", (("kind", "decode"),))] == decode
    assert fast[("specserve_log_lines_read_total", ())] == len(lines)


def test_interleaved_dp_ranks_are_kept_apart() -> None:
    rng = random.Random(3)
    lines = [decode_line(rng, b" DP%d TP0" % (i % 2)) for i in range(400)]
    chunk = b"\n".join(lines) + b"\n"
    fast = assert_same([chunk, chunk])
    counts = {k[1]: v for k, v in fast.items() if k[0] == "specserve_decode_accept_length_count"}
    assert counts[(("dp", "0"), ("pp", "0"), ("tp", "0"))] == 400
    assert counts[(("dp", "1"), ("pp", "0"), ("tp", "0"))] == 400


def test_rank_change_mid_log_is_not_swallowed_by_the_learned_shape() -> None:
    rng = random.Random(5)
    first = b"\n".join(decode_line(rng, b" TP0") for _ in range(50)) + b"\n"
    second = b"\n".join(decode_line(rng, b" DP1 TP0") for _ in range(50)) + b"\n"
    fast = assert_same([first, second])
    dp1 = (("dp", "1"), ("pp", "0"), ("tp", "0"))
    assert fast[("specserve_decode_accept_length_count", dp1)] == 50


VARIANT_LINES = [p.values[0] for p in DECODE_VARIANTS + PREFILL_VARIANTS] + [SEED_LINE, HTTP]


def _mutate(line: bytes, data: st.DataObject) -> bytes:
    ops = data.draw(st.lists(st.sampled_from(["flip", "cut", "insert", "dup"]), max_size=3))
    for op in ops:
        if not line:
            break
        i = data.draw(st.integers(0, len(line) - 1))
        if op == "flip":
            line = line[:i] + bytes([data.draw(st.integers(0, 255))]) + line[i + 1:]
        elif op == "cut":
            line = line[:i]
        elif op == "insert":
            extra = data.draw(st.sampled_from([b", ", b": ", b"\r", b"9", b".", b"\xff"]))
            line = line[:i] + extra + line[i:]
        else:
            line = line + line[i:]
    return line.replace(b"\n", b" ")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_real_lines_never_raise_and_paths_agree(data: st.DataObject) -> None:
    lines = [
        _mutate(data.draw(st.sampled_from(VARIANT_LINES)), data)
        for _ in range(data.draw(st.integers(1, 12)))
    ]
    for line in lines:
        parse_line(line)  # must not raise
    body = b"\n".join(lines) + b"\n"
    # The same lines twice: the second copy may take the fast path with the learned shapes.
    assert_same([body, body])


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=2000))
def test_random_bytes_never_raise(blob: bytes) -> None:
    for line in blob.split(b"\n"):
        parse_line(line)
    body = blob if blob.endswith(b"\n") else blob + b"\n"
    fast = assert_same([body, body])
    assert fast[("specserve_log_lines_read_total", ())] == 2 * body.count(b"\n")


def test_shape_with_one_captured_value_counts_the_value_not_its_bytes() -> None:
    # A prefill shape without #cached-token asks the scanner for one sum, not two: the sum must
    # still be the #new-token values (6 per line), not anything positional.
    line = (
        b"[2026-03-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 6, "
        b"token usage: 0.01, #running-req: 0, #queue-req: 0"
    )
    body = b"\n".join([line] * 10) + b"\n"
    fast = assert_same([body, body])
    rank0 = (("dp", "0"), ("pp", "0"), ("tp", "0"))
    assert fast[("specserve_prefill_new_tokens_total", rank0)] == 120


def _learned(rng: random.Random, n: int = 200) -> tuple[Ingestor, list[bytes]]:
    lines = [decode_line(rng) for _ in range(n)]
    ingestor = Ingestor(LogState(CONFIG))
    ingestor.feed(b"\n".join(lines) + b"\n", now=1.0)
    return ingestor, lines


def test_a_line_printed_in_another_form_sends_its_chunk_to_the_reference_path() -> None:
    # The shape expects "accept len: 2.91"; "accept len: 3" is valid for the reference parser,
    # so the chunk holding it must be read line by line, and lose nothing.
    rng = random.Random(11)
    ingestor, lines = _learned(rng)
    good = [decode_line(rng) for _ in range(100)]
    odd = re.sub(rb"accept len: [\d.]+", b"accept len: 3", good[50])
    assert odd != good[50]
    chunk = b"\n".join([*good[:50], odd, *good[51:]]) + b"\n"
    assert ingestor._fast(chunk, chunk.count(b"\n"), 1.0) is False
    fast = assert_same([b"\n".join(lines) + b"\n", chunk])
    assert fast[("specserve_log_lines_parsed_total", (("kind", "decode"),))] == 300


def test_a_chunk_of_the_learned_shape_takes_the_fast_path() -> None:
    rng = random.Random(12)
    ingestor, _ = _learned(rng)
    chunk = b"\n".join(decode_line(rng) for _ in range(100)) + b"\n"
    assert ingestor._fast(chunk, chunk.count(b"\n"), 1.0) is True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_damaged_line_among_learned_ones_is_read_as_the_reference_reads_it(
    data: st.DataObject,
) -> None:
    # The fast path's own check: a chunk of the learned shape with one line that is not.
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    lines = [decode_line(rng) for _ in range(30)]
    damaged = list(lines)
    at = data.draw(st.integers(0, len(lines) - 1))
    damaged[at] = _mutate(lines[at], data)
    assert_same([b"\n".join(lines) + b"\n", b"\n".join(damaged) + b"\n"])
