"""Unit tests: flag parsing, the behaviour model's formulas, the behaviour file, log lines."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from specserve.standin import behaviour as bm
from specserve.standin.args import ResolutionError, parse_args
from specserve.standin.behaviour import (
    Behaviour,
    BehaviourError,
    BehaviourSource,
    SpecShape,
    accept_length,
    model_throughput,
    parse_behaviour,
)
from specserve.standin.knobs import KnobError, load_knobs
from specserve.standin.logfmt import DecodeStats, decode_line, rank_prefix
from specserve.upstream import PINNED_VERSION
from tests.standin.helpers import DECODE_RE

BASE = ["--model-path", "/m"]


def test_unknown_flag_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args([*BASE, "--no-such-flag"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


SEEDS_ARGV = (
    "--model-path /shared/kimi-k2.5-int4 --trust-remote-code --tp-size 8 "
    "--mem-fraction-static 0.85 --host 0.0.0.0 --port 8000 --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path /d --speculative-num-steps 3 --speculative-eagle-topk 4 "
    "--speculative-num-draft-tokens 16 --num-continuous-decode-steps 4 "
    "--disable-custom-all-reduce --tool-call-parser kimi_k2 --reasoning-parser kimi_k2 "
    "--enable-metrics --api-key k-0123456789 --context-length 8192 --cuda-graph-max-bs-decode 8 "
    "--dp-size 1 --ep-size 1 --enable-dp-attention --disable-cuda-graph"
)


def test_seeds_command_line_is_accepted() -> None:
    args = parse_args(SEEDS_ARGV.split(" "))
    assert args.tp_size == 8 and args.port == 8000 and args.api_key == "k-0123456789"
    assert args.spec is not None
    assert (args.spec.num_steps, args.spec.eagle_topk, args.spec.num_draft_tokens) == (3, 4, 16)
    assert not args.decode_cuda_graph and args.enable_dp_attention
    assert args.cuda_graph_max_bs == 8
    # As upstream: the resolved arguments and the launch command carry the key in clear.
    assert args.resolved["api_key"] == "k-0123456789"
    assert args.launch_command == SEEDS_ARGV


def test_aliases_and_topk1_forces_draft_tokens() -> None:
    args = parse_args(
        [*BASE, "--tensor-parallel-size", "2", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "/d", "--speculative-num-steps", "5",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16"]
    )  # fmt: skip
    assert args.tp_size == 2
    assert args.spec is not None and args.spec.num_draft_tokens == 6


def test_eagle3_needs_a_drafter() -> None:
    with pytest.raises(ResolutionError, match="needs --speculative-draft-model-path"):
        parse_args([*BASE, "--speculative-algorithm", "EAGLE3"])


def test_unknown_algorithm_parses_but_fails_resolution_as_upstream() -> None:
    # SGLang's flag has no argparse choices: from_string refuses the name at resolution.
    with pytest.raises(ResolutionError, match="Unknown speculative algorithm name: EAGLE4"):
        parse_args([*BASE, "--speculative-algorithm", "EAGLE4"])


def test_knobs_reject_bad_values() -> None:
    with pytest.raises(KnobError, match="SPECSERVE_STANDIN_LOAD_SECONDS='x' is not a number"):
        load_knobs({"SPECSERVE_STANDIN_LOAD_SECONDS": "x"})
    with pytest.raises(KnobError, match="TIME_SCALE"):
        load_knobs({"SPECSERVE_STANDIN_TIME_SCALE": "0"})
    knobs = load_knobs({"SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "1.5"})
    assert knobs.crash_after_seconds == 1.5 and knobs.crash_exit_code == 1
    assert knobs.sglang_version == PINNED_VERSION
    assert load_knobs({"SPECSERVE_STANDIN_SGLANG_VERSION": "0.5.23"}).sglang_version == "0.5.23"
    no_data = re.escape("SGLANG_VERSION='0.4.0' has no SGLang contract data")
    with pytest.raises(KnobError, match=no_data):
        load_knobs({"SPECSERVE_STANDIN_SGLANG_VERSION": "0.4.0"})


# -- the behaviour model ------------------------------------------------------------------------


def test_accept_length_formula() -> None:
    # Chain of 3 (top-k 1): p = a, E = 1 + a + a^2 + a^3.
    assert accept_length(SpecShape(3, 1, 4), 0.6) == pytest.approx(1 + 0.6 + 0.36 + 0.216)
    # Nothing accepted: exactly 1.00, the EAGLE-on-EAGLE3 signature.
    assert accept_length(SpecShape(3, 4, 16), 0.0) == 1.0
    # A wider tree accepts more per level: b = 1 + 0.25 * (4 - 1).
    p = 1 - 0.4**1.75
    assert accept_length(SpecShape(3, 4, 16), 0.6) == pytest.approx(1 + p + p**2 + p**3)


def test_throughput_formula_and_baseline() -> None:
    assert model_throughput(None, 1, 0.6) == pytest.approx(90.0)
    assert model_throughput(None, 8, 0.6) == pytest.approx(8 * 90.0 / (1 + 0.05 * 7))
    shape = SpecShape(3, 1, 4)
    step = (1 + 0.05 * 3 + 3 * 0.08) / 90.0
    assert model_throughput(shape, 1, 0.6) == pytest.approx(accept_length(shape, 0.6) / step)


def test_no_cuda_graph_is_slower_by_the_seeds_ratio() -> None:
    shape = SpecShape(3, 1, 4)
    on, off = model_throughput(shape, 1, 0.6), model_throughput(shape, 1, 0.6, graph=False)
    assert on / off == pytest.approx(74.9 / 56.7)


def test_mismatched_drafter_is_slower_than_the_baseline() -> None:
    assert model_throughput(SpecShape(3, 1, 4), 1, 0.0) < model_throughput(None, 1, 0.0)


def test_sweep_has_one_optimum_per_concurrency() -> None:
    grid = [
        SpecShape(s, k, d)
        for s in (1, 2, 3, 4, 5)
        for k in (1, 2, 4)
        for d in sorted({s + 1, 8, 16})
        if (k == 1 and d == s + 1) or (k > 1 and d >= s + 1)
    ]
    best: dict[int, SpecShape] = {}
    for bs in (1, 4, 8):
        ranked = sorted(grid, key=lambda sh: model_throughput(sh, bs, 0.6), reverse=True)
        top, second = (model_throughput(sh, bs, 0.6) for sh in ranked[:2])
        assert top > second  # a unique best, no ties
        best[bs] = ranked[0]
    # Speculation pays less as the batch grows: the optimum gets shallower.
    assert best[1].num_steps >= best[4].num_steps >= best[8].num_steps
    assert best[1] != best[8]


def test_behaviour_file_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    with pytest.raises(BehaviourError, match=re.escape("unknown field(s) acceptence")):
        parse_behaviour('{"acceptence": 0.7}', path)
    with pytest.raises(
        BehaviourError, match=re.escape("'acceptance' must be >= 0.0 and <= 1.0, got 1.5")
    ):
        parse_behaviour("acceptance: 1.5", path)
    with pytest.raises(BehaviourError, match="'throughput_scale' must be a number"):
        parse_behaviour("throughput_scale: fast", path)
    assert parse_behaviour('{"acceptance": 0.7}', path).acceptance == 0.7


def test_behaviour_source_reloads_and_keeps_last_good(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"acceptance": 0.5}')
    source = BehaviourSource(path)
    assert source.current() == (Behaviour(acceptance=0.5), None)
    path.write_text('{"acceptance": 0.9, "throughput_scale": 2}')
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    current, error = source.current()
    assert (current.acceptance, current.throughput_scale, error) == (0.9, 2.0, None)
    path.write_text('{"acceptance": "high"}')
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    current, error = source.current()
    assert current.acceptance == 0.9  # nothing lost
    assert error is not None and "keeping the previous behaviour" in error
    assert source.current() == (current, None)  # reported once


def test_content_factor_is_keyword_based() -> None:
    b = Behaviour()
    assert b.content_factor("Write CODE for me") == bm.DEFAULT_CONTENT_FACTORS["code"]
    assert b.content_factor("hello") == 1.0


# -- log lines ----------------------------------------------------------------------------------


def test_rank_prefix_follows_upstream_rules() -> None:
    assert rank_prefix(parse_args(BASE)) == ""
    assert rank_prefix(parse_args([*BASE, "--tp-size", "8"])) == " TP0"
    assert rank_prefix(parse_args([*BASE, "--tp", "8", "--enable-dp-attention"])) == " DP0 TP0"
    assert rank_prefix(parse_args([*BASE, "--tp-size", "8", "--ep-size", "8"])) == " TP0 EP0"


def test_decode_line_matches_the_documented_format() -> None:
    line = "[2026-02-23 17:53:14 TP0] " + decode_line(
        DecodeStats(1, 671, 0.0123, 2.15, 0.38, True, 66.891, 0)
    )
    assert line == (
        "[2026-02-23 17:53:14 TP0] Decode batch, #running-req: 1, #token: 671, "
        "token usage: 0.01, accept len: 2.15, accept rate: 0.38, cuda graph: True, "
        "gen throughput (token/s): 66.89, #queue-req: 0"
    )
    assert DECODE_RE.match(line)
    baseline = decode_line(DecodeStats(2, 10, 0.0, None, None, False, 5.0, 1))
    assert "accept len" not in baseline and "cuda graph: False" in baseline


def test_an_action_or_type_the_stand_in_cannot_mimic_fails_the_build() -> None:
    # A new SGLang version with a new argparse action must be taught, not silently accepted.
    import dataclasses

    from specserve.standin.args import OptionTableError, build_parser
    from specserve.upstream import sglang_contract

    contract = sglang_contract()
    for change in ({"action": "append"}, {"type_name": "parse_something_new"}):
        opts = tuple(
            dataclasses.replace(o, **change) if o.dest == "port" else o for o in contract.options
        )
        clone = object.__new__(type(contract))
        clone.__dict__.update(contract.__dict__, options=opts)
        with pytest.raises(OptionTableError, match="--port"):
            build_parser(clone)
