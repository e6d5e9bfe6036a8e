"""Under --speculative-adaptive the exporter's draft-token count is the server's, read from its
`Switch adaptive runtime state` lines (SGLang's format: tests/contract/test_adaptive.py), not the
profile's; without adaptive the configured count stays."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from specserve.adaptive import SWITCH_LINE
from specserve_exporter.collector import LogCollector
from specserve_exporter.config import load_config
from specserve_exporter.ingest import Ingestor
from specserve_exporter.state import LogState, SpeculationConfig
from tests.exporter.conftest import Metrics, StartExporter, decode_line, noise_line
from tests.standin.helpers import FAST_ENV, free_port, make_drafter

ROOT = Path(__file__).resolve().parents[2]


def switch(old: int, new: int) -> str:
    text = SWITCH_LINE.format(
        old_steps=old, steps=new, old_draft_tokens=old + 1, draft_tokens=new + 1
    )
    return f"[2026-02-23 17:53:15 TP0] {text}\n"


# Steps 3 -> 7 -> 5 while decoding: the server's draft tokens end at 6, not the profile's 4.
LOG = (
    decode_line(accept=3.1)
    + switch(3, 5)
    + decode_line(accept=4.2)
    + noise_line()
    + switch(5, 7)
    + decode_line(accept=5.9)
    + switch(7, 5)
    + decode_line(accept=4.6)
)


def _metrics(config: SpeculationConfig, chunks: list[str]) -> Metrics:
    state = LogState(config)
    ingestor = Ingestor(state)
    for chunk in chunks:
        ingestor.feed(chunk.encode(), now=1000.0)
    registry = CollectorRegistry()
    registry.register(LogCollector(state))
    return Metrics.parse(generate_latest(registry).decode())


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@pytest.mark.parametrize("chunks", [[LOG], _lines(LOG)], ids=["one chunk", "line by line"])
def test_adaptive_follows_the_servers_switch_lines(chunks: list[str]) -> None:
    m = _metrics(SpeculationConfig(draft_tokens=4, adaptive=True), chunks)
    assert m.value("specserve_speculative_adaptive") == 1
    assert m.value("specserve_speculative_draft_tokens") == 6
    assert m.value("specserve_speculative_adaptive_switches_total") == 3
    # The computed acceptance uses the server's 6 draft tokens: (4.6 - 1) / 5.
    assert m.value("specserve_decode_draft_acceptance_ratio") == pytest.approx(3.6 / 5)


@pytest.mark.parametrize("split", [False, True], ids=["one chunk", "two chunks"])
def test_a_restarted_server_starts_again_at_the_configured_count(split: bool) -> None:
    start = (
        "[2026-02-23 17:54:00 TP0] AdaptiveSpeculativeParams initialized: steps=3, "
        "candidate_steps=[1, 3, 5, 7]\n"
    )
    chunks = [LOG, start] if split else [LOG + start]
    m = _metrics(SpeculationConfig(draft_tokens=4, adaptive=True), chunks)
    assert m.value("specserve_speculative_draft_tokens") == 4
    # ... until the new server switches.
    m = _metrics(SpeculationConfig(draft_tokens=4, adaptive=True), [*chunks, switch(3, 7)])
    assert m.value("specserve_speculative_draft_tokens") == 8


def test_before_the_first_switch_the_configured_start_value_holds() -> None:
    m = _metrics(SpeculationConfig(draft_tokens=4, adaptive=True), [decode_line(accept=3.1)])
    assert m.value("specserve_speculative_draft_tokens") == 4
    assert m.value("specserve_speculative_adaptive_switches_total") == 0


def test_without_adaptive_the_configured_count_stays() -> None:
    m = _metrics(SpeculationConfig(draft_tokens=4), [LOG])
    assert m.value("specserve_speculative_adaptive") == 0
    assert m.value("specserve_speculative_draft_tokens") == 4
    # The lines are counted either way; they change nothing without adaptive.
    assert m.value("specserve_speculative_adaptive_switches_total") == 3
    assert m.value("specserve_decode_draft_acceptance_ratio") == pytest.approx(3.6 / 3)


def test_the_profile_turns_adaptive_on(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text(encoding="utf-8"))
    doc["drafter"]["adaptive"] = True
    doc.pop("baseline", None)  # not what this test is about
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert load_config(["--profile", str(path)]).speculation.adaptive is True
    doc["drafter"]["adaptive"] = False
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert load_config(["--profile", str(path)]).speculation.adaptive is False
    assert load_config(["--draft-tokens", "4", "--adaptive"]).speculation.adaptive is True


def test_the_exporter_process_serves_the_servers_count(
    start_exporter: StartExporter, tmp_path: Path
) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(LOG)
    exporter = start_exporter(
        "--source", "file", "--file", str(log), "--from-beginning", "--poll-interval", "0.05",
        "--draft-tokens", "4", "--adaptive",
    )  # fmt: skip
    m = exporter.wait_for(lambda m: m.decode == 4, "the four decode lines")
    assert m.value("specserve_speculative_draft_tokens") == 6
    with log.open("a") as fh:
        fh.write(switch(5, 1) + decode_line(accept=1.7))
    m = exporter.wait_for(lambda m: m.decode == 5, "the fifth decode line")
    assert m.value("specserve_speculative_draft_tokens") == 2
    assert m.value("specserve_speculative_adaptive_switches_total") == 4


def test_the_exporter_agrees_with_a_real_stand_in_s_native_gauge(
    start_exporter: StartExporter, tmp_path: Path
) -> None:
    # The two witnesses of the server's count: SGLang's native sglang:spec_num_draft_tokens (the
    # stand-in's, derived from SGLang's metrics code) and the exporter reading its switch lines.
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text('{"acceptance": 1.0}')  # good drafts: the steps climb from 3 to 7
    log, port = tmp_path / "sglang.log", free_port()
    env = {**os.environ, **FAST_ENV, "SPECSERVE_STANDIN_TIME_SCALE": "0.01",
           "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)}  # fmt: skip
    argv = [
        sys.executable, "-m", "specserve.standin.server", "--model-path", str(tmp_path / "m"),
        "--host", "127.0.0.1", "--port", str(port), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(drafter), "--speculative-adaptive",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--enable-metrics", "--decode-log-interval", "5",
    ]  # fmt: skip
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        exporter = start_exporter(
            "--source", "file", "--file", str(log), "--from-beginning", "--poll-interval", "0.05",
            "--draft-tokens", "4", "--adaptive",
        )  # fmt: skip
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 300,
                "ignore_eos": True}  # fmt: skip
        requests.post(url + "/v1/chat/completions", json=body, timeout=60).raise_for_status()
        native = re.search(
            r"^sglang:spec_num_draft_tokens\{[^}]*\} (\S+)$",
            requests.get(url + "/metrics", timeout=5).text,
            re.M,
        )
        assert native is not None and float(native.group(1)) > 4  # it did adapt
        m = exporter.wait_for(
            lambda m: m.value("specserve_speculative_draft_tokens") == float(native.group(1)),
            "the exporter's count to reach the server's",
        )
        assert m.value("specserve_speculative_adaptive_switches_total") >= 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


@pytest.mark.parametrize(("drafter", "architecture", "draft_tokens"), [
    ({"num_steps": None, "eagle_topk": None, "num_draft_tokens": None}, "LlamaForCausalLM", 8),
    ({"num_steps": None, "eagle_topk": None, "num_draft_tokens": None},
     "KimiK25ForConditionalGeneration", 4),
    ({"algorithm": "NGRAM", "path": None, "num_steps": None, "eagle_topk": None,
      "num_draft_tokens": None}, None, 12),
])  # fmt: skip
def test_a_tree_left_to_sglang_still_gives_the_exporter_its_count(
    tmp_path: Path, drafter: dict[str, object], architecture: str | None, draft_tokens: int
) -> None:
    """SGLang's choice (tests/contract/test_effective_tree.py resolves it with SGLang's code):
    the draft-token gauge and the draft acceptance ratio are served."""
    doc = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text(encoding="utf-8"))
    doc.pop("baseline", None)
    for key, value in drafter.items():
        if value is None:
            doc["drafter"].pop(key, None)
        else:
            doc["drafter"][key] = value
    if architecture:
        doc["target"]["architecture"] = architecture
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    config = load_config(["--profile", str(path)]).speculation
    assert config.draft_tokens == draft_tokens
    m = _metrics(config, [decode_line(accept=3.1)])
    assert m.value("specserve_speculative_draft_tokens") == draft_tokens
    assert m.value("specserve_decode_draft_acceptance_ratio") == pytest.approx(
        2.1 / (draft_tokens - 1)
    )
