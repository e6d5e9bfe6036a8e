"""UNO on the stand-in: served with the EAGLE family's decode line SGLang prints for it
(`report_decode_stats` tells only DSPARK and no speculation apart), its linear mode drafting the
verify width Q in one step as a block. Its resolution is held to SGLang's by
tests/contract/test_uno.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from specserve.standin.behaviour import SpecShape, accept_length
from specserve_exporter.parser import StatsLine, parse_line

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "models"


def _gauge(server: Any, name: str) -> float:
    text = requests.get(server.url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} not served")


def test_a_uno_standin_serves_and_logs_its_lines(start_standin: Any) -> None:
    server = start_standin(
        "--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--speculative-algorithm", "UNO",
        "--uno-lora-path", str(MODELS / "uno-lora"), "--speculative-num-draft-tokens", "4",
        "--attention-backend", "fa3", "--decode-log-interval", "5", "--enable-metrics",
    )  # fmt: skip
    for i in range(4):
        reply = requests.post(
            server.url + "/generate", timeout=60,
            json={"text": f"prompt {i}",
                  "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}},
        )  # fmt: skip
        assert reply.status_code == 200, reply.text
    parsed = [parse_line(line.encode()) for line in server.lines() if "Decode batch" in line]
    stats = [p for p in parsed if isinstance(p, StatsLine)]
    assert stats and len(stats) == len(parsed) and all(p.unknown_fields == 0 for p in stats)
    # Linear mode: Q - 1 = 3 tokens drafted at once, the whole block's chain.
    expected = accept_length(SpecShape(1, 1, 4, block=True), 0.6)
    mean = sum(p.values["accept_length"] for p in stats) / len(stats)
    assert abs(mean - expected) < 0.15, (mean, expected)
    assert _gauge(server, "sglang:spec_num_draft_tokens") == 4
    assert _gauge(server, "sglang:spec_num_steps") == 1
