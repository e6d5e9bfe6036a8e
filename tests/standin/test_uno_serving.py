"""UNO on the stand-in: served with the EAGLE family's decode line SGLang prints for it
(`report_decode_stats` tells only DSPARK and no speculation apart), its linear mode drafting the
verify width Q in one step as a block. Its resolution is held to SGLang's by
tests/contract/test_uno.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specserve.standin.behaviour import SpecShape, accept_length
from specserve_exporter.parser import StatsLine, parse_line
from tests.standin.helpers import gauge, generate

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "models"


def test_a_uno_standin_serves_and_logs_its_lines(start_standin: Any) -> None:
    server = start_standin(
        "--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--speculative-algorithm", "UNO",
        "--uno-lora-path", str(MODELS / "uno-lora"), "--speculative-num-draft-tokens", "4",
        "--attention-backend", "fa3", "--decode-log-interval", "5", "--enable-metrics",
    )  # fmt: skip
    generate(server.url)
    parsed = [parse_line(line.encode()) for line in server.lines() if "Decode batch" in line]
    stats = [p for p in parsed if isinstance(p, StatsLine)]
    assert stats and len(stats) == len(parsed) and all(p.unknown_fields == 0 for p in stats)
    # Linear mode: Q - 1 = 3 tokens drafted at once, the whole block's chain.
    expected = accept_length(SpecShape(1, 1, 4, block=True), 0.6)
    mean = sum(p.values["accept_length"] for p in stats) / len(stats)
    assert abs(mean - expected) < 0.15, (mean, expected)
    assert gauge(server.url, "sglang:spec_num_draft_tokens") == 4
    assert gauge(server.url, "sglang:spec_num_steps") == 1
