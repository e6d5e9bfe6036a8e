"""The stand-in simulates SGLang's block drafters, DFLASH and DSPARK.

- Resolution: the stand-in resolves each argv as SGLang's real `prepare_server_args` +
  `resolve_once` does on every verified version (run with `--device cuda`: the handlers refuse
  other devices first; the stand-in skips that check on purpose): the same verdict, the same
  draft tokens, steps, top-k, request cap and drafter, the same refusal words and warnings.
- Decode lines: for the same window counters, the stand-in's Decode line is byte for byte the
  one SGLang's own `report_decode_stats` prints (with its real `estimate_log_suffix`), under
  every SGLANG_RAGGED_VERIFY_MODE, with and without DSPARK's estimate.
- Running servers: DFLASH and DSPARK stand-ins serve generations and print decode lines that
  match the corpus shapes where the corpus has them, that the exporter's parser reads with no
  unknown field, and, under cap-accept, with accept len <= block accept len; their
  `sglang:spec_cap_length` / `sglang:spec_block_accept_length` gauges carry the line's values.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from specserve.standin.args import ResolutionError, parse_args
from specserve.standin.behaviour import (
    BlockEstimate,
    SpecShape,
    accept_length,
    verify_cap_split,
)
from specserve.standin.blocks import ragged_verify_mode
from specserve.standin.knobs import KnobError, load_knobs
from specserve.standin.logfmt import DecodeStats, block_window, decode_line, spec_window
from specserve.upstream import VERIFIED_VERSIONS
from specserve_exporter.parser import StatsLine, parse_line
from tests.contract.sglang_venv import resolve_argvs, run_python, run_snippet
from tests.standin.helpers import gauge, generate, standin_resolution
from tests.standin.test_log_corpus import corpus_shapes, shape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODELS = ROOT / "tests" / "fixtures" / "models"
TARGET = str(MODELS / "Llama-3.1-8B-Instruct")
DFLASH = str(MODELS / "llama-3.1-8b-dflash")  # block_size 16
DSPARK = str(MODELS / "llama-3.1-8b-dspark")  # gamma 7 (dflash_config.block_size)
# A drafter config with no block size at all (an EAGLE-3 drafter's): SGLang's defaults apply.
NO_BLOCK = str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B")
BASE = ["--model-path", TARGET, "--device", "cuda"]


def _dflash(*extra: str, drafter: str | None = DFLASH) -> list[str]:
    path = ["--speculative-draft-model-path", drafter] if drafter else []
    return [*BASE, "--speculative-algorithm", "DFLASH", *path, *extra]


def _dspark(*extra: str, drafter: str | None = DSPARK) -> list[str]:
    path = ["--speculative-draft-model-path", drafter] if drafter else []
    return [*BASE, "--speculative-algorithm", "DSPARK", *path, *extra]


DP = ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"]
# name -> argv; every one resolved by SGLang and by the stand-in on every verified version.
CASES: dict[str, list[str]] = {
    "dflash, block from the drafter's config": _dflash(),
    "dflash, block 10": _dflash("--speculative-dflash-block-size", "10"),
    "dflash, draft tokens 12": _dflash("--speculative-num-draft-tokens", "12"),
    "dflash, block = draft tokens": _dflash(
        "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "8"
    ),
    "dflash, lower case, steps 3, top-k 4": [
        *BASE, "--speculative-algorithm", "dflash", "--speculative-draft-model-path", DFLASH,
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
    ],
    "dflash, drafter config without a block size": _dflash(drafter=NO_BLOCK),
    "dflash, 64 running": _dflash("--max-running-requests", "64"),
    "dflash, block and draft tokens differ": _dflash(
        "--speculative-dflash-block-size", "16", "--speculative-num-draft-tokens", "10"
    ),
    "dflash, block 0": _dflash("--speculative-dflash-block-size", "0"),
    "dflash, no drafter": _dflash(drafter=None),
    "dflash, pp 2": _dflash("--pp-size", "2"),
    "dflash, window below the block": _dflash("--speculative-draft-window-size", "8"),
    "dflash, dp attention": _dflash(*DP),
    "dflash, dp attention, dp lm head": _dflash(*DP, "--enable-dp-lm-head"),
    "dspark, gamma from the drafter's config": _dspark(),
    "dspark, gamma 4": _dspark("--speculative-dspark-block-size", "4"),
    "dspark, draft tokens 8 = the drafter's gamma + 1": _dspark(
        "--speculative-num-draft-tokens", "8"
    ),
    "dspark, gamma 5 and draft tokens 6": _dspark(
        "--speculative-dspark-block-size", "5", "--speculative-num-draft-tokens", "6"
    ),
    "dspark, steps 3": _dspark("--speculative-num-steps", "3"),
    "dspark, drafter config without a gamma": _dspark(drafter=NO_BLOCK),
    "dspark, draft tokens 5 (not the drafter's gamma + 1)": _dspark(
        "--speculative-num-draft-tokens", "5"
    ),
    "dspark, gamma 7 and draft tokens 5": _dspark(
        "--speculative-dspark-block-size", "7", "--speculative-num-draft-tokens", "5"
    ),
    "dspark, gamma 0": _dspark("--speculative-dspark-block-size", "0"),
    "dspark, no drafter": _dspark(drafter=None),
    "dspark, pp 2": _dspark("--pp-size", "2"),
    "dspark, dp attention": _dspark(*DP),
}  # fmt: skip


@cache
def _sglang(version: str) -> dict[str, dict[str, Any]]:
    return dict(zip(CASES, resolve_argvs(version, list(CASES.values())), strict=True))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_standin_resolves_a_block_drafter_as_sglang(version: str, case: str) -> None:
    real, ours = _sglang(version)[case], standin_resolution(CASES[case], version)
    assert ours["ok"] == real["ok"], (real, ours)
    if not real["ok"]:
        assert real["stage"] == "resolve", real
        # SGLang's message (after "ValueError: ") is the stand-in's.
        assert real["error"].split(": ", 1)[1] == " ".join(ours["error"].split()), (real, ours)
        return
    resolved = real["resolved"]
    assert ours["algorithm"] == resolved["speculative_algorithm"]
    assert ours["draft"] == resolved["speculative_draft_model_path"]
    assert ours["tree"] == (
        resolved["speculative_num_steps"],
        resolved["speculative_eagle_topk"],
        resolved["speculative_num_draft_tokens"],
    )
    assert ours["max_running_requests"] == resolved["max_running_requests"]
    # Every warning SGLang logged about the block drafter's parameters the stand-in logs too.
    theirs = [w for w in real["warnings"] if re.search(r"DFLASH|DSpark|Max running", w)]
    for warning in theirs:
        key = warning.split(" Error:")[0]  # the error text after it is the reader's own
        assert any(w.startswith(key) for w in ours["warnings"]), (warning, ours["warnings"])


def test_the_cases_hold_what_they_say() -> None:
    """The resolved counts, by hand: DFLASH's block is the count, DSPARK's gamma + 1; the
    drafter's config gives 16 and 8; a drafter without a config leaves SGLang's defaults."""
    counts = {
        name: standin_resolution(argv, "0.5.23")["tree"]
        for name, argv in CASES.items()
        if standin_resolution(argv, "0.5.23")["ok"]
    }
    assert counts["dflash, block from the drafter's config"] == (1, 1, 16)
    assert counts["dflash, block 10"] == (1, 1, 10)
    assert counts["dflash, draft tokens 12"] == (1, 1, 12)
    assert counts["dflash, lower case, steps 3, top-k 4"] == (1, 1, 16)
    assert counts["dflash, drafter config without a block size"] == (1, 1, 16)
    assert counts["dspark, gamma from the drafter's config"] == (1, 1, 8)
    assert counts["dspark, gamma 4"] == (1, 1, 5)
    assert counts["dspark, drafter config without a gamma"] == (1, 1, 8)  # DEFAULT_DSPARK_GAMMA
    refused = {name for name, argv in CASES.items() if not standin_resolution(argv, "0.5.23")["ok"]}
    assert "dflash, block and draft tokens differ" in refused
    assert "dspark, draft tokens 5 (not the drafter's gamma + 1)" in refused
    assert "dflash, dp attention, dp lm head" not in refused  # 0.5.23 takes it; 0.5.21 not
    assert not standin_resolution(CASES["dflash, dp attention, dp lm head"], "0.5.21")["ok"]


READ_MODE = """
import json, os, sys
from sglang.srt.speculative.ragged_verify import read_ragged_verify_mode
out = []
for value in json.load(sys.stdin):
    os.environ["SGLANG_RAGGED_VERIFY_MODE"] = value
    try:
        out.append(read_ragged_verify_mode().value)
    except ValueError as exc:
        out.append("ValueError: " + str(exc))
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_ragged_verify_mode_is_read_as_sglang_reads_it(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = ["static", "cap-accept", "compact", "CAP-ACCEPT", "bogus"]
    real = run_snippet(version, READ_MODE, values)
    ours = []
    for value in values:
        try:
            ours.append(ragged_verify_mode({"SGLANG_RAGGED_VERIFY_MODE": value}))
        except ValueError as exc:
            ours.append(f"ValueError: {exc}")
    assert ours == real
    assert real[-1].startswith("ValueError")  # the case that must be refused is refused
    # _handle_dspark reads it last: a DSPARK stand-in refuses to start on a bad value.
    monkeypatch.setenv("SGLANG_RAGGED_VERIFY_MODE", "bogus")
    with pytest.raises(ResolutionError, match="invalid SGLANG_RAGGED_VERIFY_MODE='bogus'"):
        parse_args(_dspark(), version)
    monkeypatch.setenv("SGLANG_RAGGED_VERIFY_MODE", "compact")
    spec = parse_args(_dspark(), version).spec
    assert spec is not None and spec.ragged_verify_mode == "compact"


# -- the behaviour model ----------------------------------------------------------------------


def test_a_block_drafter_drafts_the_whole_block() -> None:
    """Resolved to one step of top-k 1, a block drafter still proposes draft tokens - 1 tokens:
    its accept length is the chain's 1 + a + ... + a^(block - 1), not one step's 1 + a."""
    a = 0.6
    block = SpecShape(1, 1, 16, block=True)
    assert accept_length(block, a) == pytest.approx(1 + sum(a**i for i in range(1, 16)))
    assert accept_length(SpecShape(1, 1, 16), a) == pytest.approx(1 + a)
    assert accept_length(block, 0.0) == 1.0


def test_the_verify_cap_trims_the_accepted_run() -> None:
    assert verify_cap_split(5, 3) == (3, 2)
    assert verify_cap_split(2, 3) == (2, 0)
    assert verify_cap_split(8, None) == (8, 0)


def test_block_accept_len_is_printed_only_in_cap_accept_mode() -> None:
    # report_decode_stats: cap tokens / passes always; block tokens / passes under cap-accept.
    assert block_window(30, 24, 8, "cap-accept") == (3.0, 3.75)
    assert block_window(30, 24, 8, "compact") == (3.0, 0.0)
    assert block_window(30, 0, 8, "static") == (0.0, 0.0)
    assert block_window(0, 0, 0, "cap-accept") == (0.0, 0.0)


def test_the_estimate_brackets_the_uncapped_length() -> None:
    estimate = BlockEstimate()
    assert estimate.bounds() is None  # before any block: SGLang prints no estimate
    estimate.add(4, 4)
    estimate.add(3, 8)  # compact: stopped at a cap of 3 of an 8-token block
    assert estimate.bounds() == (3.5, 6.0)


@pytest.mark.parametrize("raw", ["0", "-1", "2.5", "x"])
def test_a_bad_verify_cap_is_refused(raw: str) -> None:
    with pytest.raises(KnobError, match="SPECSERVE_STANDIN_VERIFY_CAP"):
        load_knobs({"SPECSERVE_STANDIN_VERIFY_CAP": raw})
    assert load_knobs({"SPECSERVE_STANDIN_VERIFY_CAP": "3"}).verify_cap == 3
    assert load_knobs({}).verify_cap is None


# -- decode lines against SGLang's own report_decode_stats ------------------------------------

# (algorithm, draft tokens, mode, passes, accepted, cap tokens, block tokens, estimate)
WINDOWS: list[tuple[str, int, str, int, int, int, int, tuple[float, float] | None]] = [
    ("DFLASH", 16, "static", 40, 99, 0, 0, None),
    ("DSPARK", 8, "static", 40, 97, 0, 0, None),
    ("DSPARK", 8, "static", 40, 97, 0, 0, (2.425, 2.425)),
    ("DSPARK", 8, "cap-accept", 80, 231, 240, 262, None),
    ("DSPARK", 8, "cap-accept", 80, 231, 240, 262, (3.2754, 3.2754)),
    ("DSPARK", 8, "compact", 120, 300, 360, 0, (2.5, 4.125)),
    ("DSPARK", 8, "compact", 120, 300, 360, 0, None),
]


def _stats(window: tuple[Any, ...]) -> DecodeStats:
    _, draft, mode, passes, accepted, cap, block, estimate = window
    accept_len, accept_rate = spec_window(accepted, passes, draft)
    cap_len, block_len = block_window(block, cap, passes, mode)
    return DecodeStats(
        running=2, num_tokens=1234, token_usage=1234 / 500_000, accept_length=accept_len,
        accept_rate=accept_rate, graph=True, gen_throughput=187.5, queued=1,
        cap_length=cap_len, block_accept_length=block_len, estimate=estimate,
    )  # fmt: skip


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_decode_lines_are_sglangs_own(version: str) -> None:
    cases = [
        {
            "algorithm": algorithm, "draft_tokens": draft, "steps": 1, "mode": mode,
            "running": 2, "used": 1234, "usage": 1234 / 500_000, "capacity": 500_000,
            "queued": 1, "gen_tokens": 187.5, "graph": True, "passes": passes,
            "accepted": accepted, "cap_tokens": cap, "block_tokens": block,
            "estimate": list(estimate) if estimate else None,
        }
        for algorithm, draft, mode, passes, accepted, cap, block, estimate in WINDOWS
    ]  # fmt: skip
    request = {
        "version": version,
        "log_corpus": str(ROOT / "scripts" / "sglang" / "log_corpus.py"),
        "cases": cases,
    }
    real = run_python(version, [str(HERE / "decode_line_real.py")], request)
    ours = [decode_line(_stats(window)) for window in WINDOWS]
    assert ours == real
    # Not vacuous: every block-drafter field occurs, each only where SGLang prints it.
    assert "cap len" not in real[0] and "block accept len" not in real[1]
    assert "block accept len: 3.27, est uncap acc len: 3.28 [3.28, 3.28]" in real[4]
    assert "cap len: 3.00, est uncap acc len: 3.31 [2.50, 4.12]" in real[5]


def test_the_corpus_shapes_cover_the_block_lines_it_holds() -> None:
    """Where SGLang's corpus has the shape (plain, cap len, cap len + block accept len), the
    stand-in's block-drafter lines have it; the estimate combinations are checked above
    against SGLang's code directly (the corpus holds no line with both cap len and estimate)."""
    lines = [f"[2026-03-01 12:00:00] {decode_line(_stats(w))}" for w in WINDOWS if not w[-1]]
    for version in VERIFIED_VERSIONS:
        known = corpus_shapes(version)
        assert [shape(line) in known for line in lines] == [True] * len(lines), version


# -- running stand-ins ------------------------------------------------------------------------


def _decode_lines(server: Any) -> list[str]:
    return [line for line in server.lines() if "Decode batch" in line]


def _parsed(line: str) -> StatsLine:
    parsed = parse_line(line.encode())
    assert isinstance(parsed, StatsLine), (line, parsed)
    assert parsed.unknown_fields == 0, line
    return parsed


def test_a_dflash_standin_serves_and_logs_dflash_lines(start_standin: Any) -> None:
    server = start_standin(
        "--model-path", TARGET, "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", DFLASH, "--decode-log-interval", "5",
        "--enable-metrics",
    )  # fmt: skip
    generate(server.url)
    lines = _decode_lines(server)
    assert lines
    parsed = [_parsed(line) for line in lines]
    assert all("cap len" not in line and "est uncap" not in line for line in lines)
    # The block of 16 is drafted whole: the window mean is the chain's accept length.
    expected = accept_length(SpecShape(1, 1, 16, block=True), 0.6)
    mean = sum(p.values["accept_length"] for p in parsed) / len(parsed)
    assert abs(mean - expected) < 0.15, (mean, expected)
    assert gauge(server.url, "sglang:spec_num_draft_tokens") == 16
    assert gauge(server.url, "sglang:spec_num_steps") == 1
    assert gauge(server.url, "sglang:spec_cap_length") == 0


def _dspark_server(start_standin: Any, env: dict[str, str]) -> Any:
    return start_standin(
        "--model-path", TARGET, "--speculative-algorithm", "DSPARK",
        "--speculative-draft-model-path", DSPARK, "--decode-log-interval", "5",
        "--enable-metrics", env=env,
    )  # fmt: skip


def test_a_dspark_standin_in_cap_accept_mode(start_standin: Any, tmp_path: Path) -> None:
    # High acceptance: uncapped runs of ~5.7 tokens against a cap of 3, so the cap must trim.
    behaviour = tmp_path / "behaviour.yaml"
    behaviour.write_text("acceptance: 0.9\n", encoding="utf-8")
    server = _dspark_server(start_standin, {
        "SGLANG_RAGGED_VERIFY_MODE": "cap-accept", "SPECSERVE_STANDIN_VERIFY_CAP": "3",
        "SGLANG_DSPARK_BLOCK_ACCEPT_ONLINE_INTERVAL": "64",
        "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour),
    })  # fmt: skip
    generate(server.url)
    lines = _decode_lines(server)
    assert lines
    trimmed = False
    for line in lines:
        values = _parsed(line).values
        assert values["cap_length"] == 3.0, line
        # The cap trims the accepted run: what commits never exceeds the uncapped block.
        assert values["accept_length"] <= values["block_accept_length"], line
        assert values["accept_length"] <= 3.0, line
        assert "uncapped_accept_length_estimate" in values, line
        trimmed = trimmed or values["accept_length"] < values["block_accept_length"]
    assert len(server.decode_matches()) == len(lines)  # the helpers' regex reads them too
    assert trimmed, "the cap of 3 never trimmed a run: the test would not see a broken cap"
    last = _parsed(lines[-1]).values
    assert gauge(server.url, "sglang:spec_cap_length") == 3.0
    assert gauge(server.url, "sglang:spec_block_accept_length") == pytest.approx(
        last["block_accept_length"], abs=0.005
    )


def test_a_dspark_standin_in_static_mode_prints_no_cap(start_standin: Any) -> None:
    server = _dspark_server(start_standin, {"SPECSERVE_STANDIN_VERIFY_CAP": "3"})
    generate(server.url)
    lines = _decode_lines(server)
    assert lines
    for line in lines:
        values = _parsed(line).values
        assert "cap_length" not in values and "block_accept_length" not in values, line
        assert "uncapped_accept_length_estimate" not in values, line  # estimator off
    # No cap applies in static mode: the runs reach past 3 tokens.
    assert max(_parsed(line).values["accept_length"] for line in lines) > 2.0


def test_a_dspark_standin_in_compact_mode_prints_cap_but_no_block(start_standin: Any) -> None:
    server = _dspark_server(start_standin, {
        "SGLANG_RAGGED_VERIFY_MODE": "compact", "SPECSERVE_STANDIN_VERIFY_CAP": "2",
        "SGLANG_DSPARK_BLOCK_ACCEPT_ESTIMATE_PATH": "/nonexistent/estimate.jsonl",
    })  # fmt: skip
    generate(server.url)
    lines = _decode_lines(server)
    assert lines
    brackets = []
    for line in lines:
        values = _parsed(line).values
        assert values["cap_length"] == 2.0 and "block_accept_length" not in values, line
        assert values["accept_length"] <= 2.0, line
        lo, hi = map(float, re.findall(r"\[([0-9.]+), ([0-9.]+)\]", line)[0])
        assert 1.0 <= lo <= hi <= 8.0, line  # the bracket reaches at most the whole block
        brackets.append((lo, hi))
    # Runs stopped at the cap were verified only that far: the bracket is open above.
    assert any(hi > lo for lo, hi in brackets), brackets
