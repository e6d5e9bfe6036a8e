"""The exporter reads every line SGLang's own code prints, exactly, on both paths.

tests/fixtures/sglang-logs/<version>/ is written by scripts/sglang/log_corpus.py, which calls
SGLang's real report_decode_stats / report_prefill_stats and logger set-up (tests/contract/
test_log_corpus_fresh.py proves the committed files are what SGLang prints). expected.jsonl holds,
per line, each field as printed: the reference parser must know every name and read every value
exactly, and the fast path (learned shapes + the C scanner) must end in the same metric state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.core import CollectorRegistry

from specserve_exporter import ingest
from specserve_exporter.collector import LogCollector
from specserve_exporter.fields import BY_PRINTED, EXPORTED, Value
from specserve_exporter.ingest import Ingestor
from specserve_exporter.parser import Kind, StatsLine, parse_line, read_fields
from specserve_exporter.state import LogState, SpeculationConfig

from .test_ingest import ReferenceIngestor, assert_same

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "sglang-logs"


def verified_versions() -> list[str]:
    with open(ROOT / "versions.yaml", encoding="utf-8") as f:
        return list(yaml.safe_load(f)["sglang"]["verified"])


VERSIONS = verified_versions()


def corpus(version: str) -> tuple[list[bytes], list[dict[str, Any]]]:
    folder = FIXTURES / version
    if not (folder / "corpus.log").is_file():
        pytest.fail(
            f"no log corpus for SGLang {version} in {folder}: generate it with "
            f".sglang/{version}/bin/python scripts/sglang/log_corpus.py --version {version} "
            f"--out {folder.relative_to(ROOT)}",
            pytrace=False,
        )
    lines = (folder / "corpus.log").read_bytes().split(b"\n")
    assert lines[-1] == b"", "corpus.log must end with a newline"
    expected = [json.loads(row) for row in (folder / "expected.jsonl").read_text().splitlines()]
    assert len(lines) - 1 == len(expected)
    return lines[:-1], expected


def value_of(name: str, printed: str) -> float | bool:
    """What the exporter must read from a printed value (independent of the parser's code)."""
    known = BY_PRINTED.get(name.encode())
    if known is not None and known.value is Value.GRAPH:
        assert printed in ("True", "False")
        return printed == "True"
    if name == "est uncap acc len":  # "mid [lo, hi]": the mid value
        printed = printed.split(" [")[0]
    return float(printed.removesuffix("%"))


def expected_ranks(ranks: dict[str, Any]) -> tuple[str, str, str]:
    """The dp/tp/pp labels of a line: a rank word is printed only when its width is > 1
    (DP whenever a DP rank exists), and a missing word reads as rank 0."""
    dp = "0" if ranks["dp"] is None else str(ranks["dp"])
    tp = str(ranks["tp"]) if ranks["tp_size"] > 1 else "0"
    pp = str(ranks["pp"]) if ranks["pp_size"] > 1 else "0"
    return dp, tp, pp


@pytest.mark.parametrize("version", VERSIONS)
def test_corpus_covers_every_variant(version: str) -> None:
    lines, expected = corpus(version)
    assert 150 <= len(lines) <= 600
    names = {name for row in expected for name, _ in row["fields"]}
    # The variants issue 14 lists, each present: fails if the generator stops producing one.
    for name in (
        "fwd+idle occupancy",
        "#optimistic-req",
        "#host-receive-req",
        "cap len",
        "block accept len",
        "est. prefill TFLOPS/s (per GPU)",
        "#replay-token",
        "#full token",
        "full token usage",
        "mamba num",
        "mamba usage",
        "#swa token",
        "#gpu token",
        "cpu token usage",
        "waiting-image-req",
        "cpu graph",
        "est. decode TFLOPS/s (per GPU)",
        "est. read BW (GB/s per GPU)",
        "pre-allocated usage",
        "#bootstrap-req",
        "est uncap acc len",
    ):
        assert name in names, name
    text = b"\n".join(lines)
    for words in (
        b" ATTN_CP1 ",
        b" MOE_DP1 ",
        b" EP3] ",
        b" PP1 ",
        b"] Decode batch [",
        b"] Prefill batch [",
        b".575 TP0] ",
    ):
        assert words in text, words
    assert any(b"accept len" not in line and b"Decode" in line for line in lines)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_corpus_holds_decode_lines_of_every_algorithm_a_profile_takes(version: str) -> None:
    """SGLang's formatter was given each algorithm (NEXTN is SGLang's alias of EAGLE), and each
    speculative one printed its accept length: the exporter reads every one of them (the parser
    tests below go over every line)."""
    from specserve.profile.algorithms import SPECULATIVE_ALGORITHMS

    _, expected = corpus(version)
    decode = [row for row in expected if row["kind"] == "decode"]
    given = {row["algorithm"] for row in decode}
    assert {a for a in SPECULATIVE_ALGORITHMS if a != "NEXTN"} <= given, given
    for algorithm in given - {"NONE"}:
        rows = [row for row in decode if row["algorithm"] == algorithm]
        assert all("accept len" in dict(row["fields"]) for row in rows), algorithm


@pytest.mark.parametrize("version", VERSIONS)
def test_reference_parser_reads_every_line_exactly(version: str) -> None:
    lines, expected = corpus(version)
    for line, row in zip(lines, expected, strict=True):
        where = f"{version} line {row['n']} ({row['scenario']}): {line.decode()}"
        parsed = parse_line(line)
        assert isinstance(parsed, StatsLine), where
        assert parsed.kind is Kind(row["kind"]), where
        assert parsed.unknown_fields == 0, where
        assert (parsed.ranks.dp, parsed.ranks.tp, parsed.ranks.pp) == expected_ranks(
            row["ranks"]
        ), where
        read = read_fields(line)
        assert read is not None, where
        assert [name.decode() for name in read] == [name for name, _ in row["fields"]], where
        for name, printed in row["fields"]:
            key = name.encode()
            known = BY_PRINTED.get(key)
            assert known is not None, f"unknown field {name!r}: {where}"
            want = value_of(name, printed)
            assert read[key] == want, f"{name}: read {read[key]!r}, printed {printed}: {where}"
            if known in EXPORTED and known.value in (Value.NUMBER, Value.ESTIMATE):
                assert parsed.values[known.name] == want, f"{name}: {where}"
            if known.value is Value.GRAPH:
                assert (parsed.graph, parsed.graph_on) == (known.label, want), where


def chunkings(lines: list[bytes]) -> dict[str, list[bytes]]:
    one = [line + b"\n" for line in lines]
    threes = [b"".join(one[i : i + 3]) for i in range(0, len(one), 3)]
    return {"line by line": one, "three lines a chunk": threes, "one chunk": [b"".join(one)]}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how", ["line by line", "three lines a chunk", "one chunk"])
def test_fast_path_ends_in_the_reference_state(
    version: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines, _ = corpus(version)
    chunks = chunkings(lines)[how]
    taken = []
    original = Ingestor._fast

    def counting(self: Ingestor, chunk: bytes, n_lines: int, now: float) -> bool:
        result = original(self, chunk, n_lines, now)
        if result and type(self) is Ingestor:
            taken.append(n_lines)
        return result

    monkeypatch.setattr(Ingestor, "_fast", counting)
    fast = assert_same(chunks)
    assert fast[("specserve_log_lines_read_total", ())] == len(lines)
    assert fast[("specserve_log_unknown_fields_total", ())] == 0
    for (name, _), value in fast.items():
        if name == "specserve_log_lines_rejected_total":
            assert value == 0
    parsed = sum(v for (n, _), v in fast.items() if n == "specserve_log_lines_parsed_total")
    assert parsed == len(lines)
    if how == "line by line":
        # Most corpus lines repeat the layout of the line before: the scanner must read them.
        assert sum(taken) > len(lines) // 2, f"fast path read only {sum(taken)} lines"


def test_dspark_estimate_is_one_field_on_both_paths() -> None:
    """DSPARK prints ", " inside a value ("est uncap acc len: 2.67 [1.67, 3.67]"): split at
    every ", " it was two fields, one of them unknown, and the shape never matched."""
    lines, expected = corpus(VERSIONS[0])
    dspark = [
        line
        for line, row in zip(lines, expected, strict=True)
        if row["scenario"] == "dspark-estimate"
    ]
    assert len(dspark) >= 2
    parsed = parse_line(dspark[0])
    assert isinstance(parsed, StatsLine) and parsed.unknown_fields == 0
    shape = ingest.Shape(Kind.DECODE, dspark[0], parsed)
    chunk = b"\n".join(dspark) + b"\n"
    scanned = shape.scan(chunk, ())
    assert scanned is not None and scanned.lines == len(dspark)
    assert_same([line + b"\n" for line in dspark])


def test_reference_ingestor_is_the_line_parser() -> None:
    # The comparison above is only meaningful if the reference side never takes the fast path.
    assert (
        ReferenceIngestor._fast(ReferenceIngestor.__new__(ReferenceIngestor), b"x\n", 1, 0.0)
        is False
    )


# Each usage field SGLang prints, and the `pool` series it must become (docs/metrics.md).
USAGE_POOL_OF = {
    "token usage": "kv",
    "full token usage": "full",
    "swa token usage": "swa",
    "mamba usage": "mamba",
    "gpu token usage": "gpu",
    "cpu token usage": "cpu",
}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_printed_usage_is_a_token_usage_series(version: str) -> None:
    """Standard, SWA, mamba, SWA + mamba and HiSparse lines all feed
    specserve_decode_token_usage_ratio, one series per pool the line prints, at its value."""
    lines, expected = corpus(version)
    seen: set[frozenset[str]] = set()
    for line, row in zip(lines, expected, strict=True):
        if row["kind"] != "decode":
            continue
        printed = {USAGE_POOL_OF[n]: float(v) for n, v in row["fields"] if n in USAGE_POOL_OF}
        samples = assert_same([line + b"\n"])
        usage = {
            dict(labels)["pool"]: value
            for (name, labels), value in samples.items()
            if name == "specserve_decode_token_usage_ratio"
        }
        assert usage == printed, f"{row['scenario']}: {line.decode()}"
        seen.add(frozenset(printed))
    assert {
        frozenset({"kv"}),
        frozenset({"full", "swa"}),
        frozenset({"full", "mamba"}),
        frozenset({"full", "swa", "mamba"}),
        frozenset({"gpu", "cpu"}),
    } <= seen


BLOCK_GAUGES = {
    "cap len": "specserve_decode_last_cap_length",
    "block accept len": "specserve_decode_last_block_accept_length",
    "est uncap acc len": "specserve_decode_uncapped_accept_length_estimate",
}


@pytest.mark.parametrize("version", VERSIONS)
def test_block_drafter_fields_are_gauges_of_the_last_line(version: str) -> None:
    """Each decode line of SGLang's own, fed after the one before on its rank: the block
    drafters' gauges hold that line's printed values, and are gone when it printed none (SGLang
    prints them only above 0). Fails if a field stops feeding its gauge or a gauge outlives its
    line."""
    lines, expected = corpus(version)
    state = LogState(SpeculationConfig(draft_tokens=8))
    ingestor = Ingestor(state)
    registry = CollectorRegistry()
    registry.register(LogCollector(state))
    seen = dict.fromkeys(BLOCK_GAUGES, 0)
    for line, row in zip(lines, expected, strict=True):
        if row["kind"] != "decode":
            continue
        ingestor.feed(line + b"\n")
        labels = dict(zip(("dp", "tp", "pp"), expected_ranks(row["ranks"]), strict=True))
        printed = dict(row["fields"])
        for name, metric in BLOCK_GAUGES.items():
            served = registry.get_sample_value(metric, labels)
            where = f"{version} line {row['n']} ({row['scenario']}) {name}"
            if name in printed:
                seen[name] += 1
                assert served == value_of(name, printed[name]), where
            else:
                assert served is None, where
    assert all(seen.values()), seen  # the corpus printed each of them
