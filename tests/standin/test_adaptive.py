"""The stand-in under --speculative-adaptive: SGLang's step policy changes the draft shape at run
time, reported as SGLang reports it (its switch log lines and sglang:spec_num_* gauges; the
formats and the policy are checked against SGLang's code in tests/contract/test_adaptive.py)."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
import requests

from specserve.adaptive import SWITCH_PATTERN
from specserve.standin.args import parse_args
from specserve.standin.behaviour import Behaviour, SpecShape, accept_length, step_seconds
from specserve.standin.engine import Engine, Request
from specserve.standin.logfmt import LinePrinter
from specserve.standin.metrics import NativeMetrics
from tests.standin.helpers import DECODE_RE, make_drafter

SWITCH_RE = re.compile(
    r"\] Switch adaptive runtime state: steps (\d+) -> (\d+), draft_tokens (\d+) -> (\d+)$"
)


def _switches(lines: list[str]) -> list[tuple[int, int, int, int]]:
    return [tuple(int(g) for g in m.groups()) for ln in lines if (m := SWITCH_RE.search(ln))]


def test_zero_steps_accept_one_token_and_cost_what_no_speculation_costs() -> None:
    zero = SpecShape(0, 1, 1)
    assert accept_length(zero, 0.9) == 1.0
    assert step_seconds(zero, 8, 90.0, True, 1.0) == step_seconds(None, 8, 90.0, True, 1.0)


class _Fixed:
    """A behaviour source the test changes between requests (no file, no reload)."""

    def __init__(self, acceptance: float) -> None:
        self.value = Behaviour(acceptance=acceptance)

    def current(self) -> tuple[Behaviour, str | None]:
        return self.value, None


def _engine(tmp_path: Path, acceptance: float) -> tuple[Engine, io.StringIO, _Fixed, NativeMetrics]:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    argv = [
        "--model-path", str(tmp_path / "model"), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(drafter), "--speculative-adaptive",
        "--decode-log-interval", "5", "--enable-metrics",
    ]  # fmt: skip
    args = parse_args(argv, "0.5.21")
    out, source = io.StringIO(), _Fixed(acceptance)
    metrics = NativeMetrics("m")
    engine = Engine(args, source, LinePrinter("", out), metrics, 90.0, 0.0, False)  # type: ignore[arg-type]
    engine.start()
    return engine, out, source, metrics


def _run(engine: Engine, batch: int, tokens: int) -> None:
    reqs = [Request(f"r{i}", 8, tokens, None, 1.0) for i in range(batch)]
    for req in reqs:
        engine.submit(req)
    for req in reqs:
        while req.out.get(timeout=30)[0] != "done":
            pass


def _gauge(metrics: NativeMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(
        name,
        {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
         "moe_ep_rank": "0"},
    )  # fmt: skip


def test_good_drafts_raise_the_steps_and_bad_ones_lower_them(tmp_path: Path) -> None:
    engine, out, source, metrics = _engine(tmp_path, acceptance=1.0)
    try:
        lines = out.getvalue().splitlines()
        # SGLang starts at the middle candidate (3 of 0, 1, 3, 5, 7) and says so.
        assert lines[0].endswith("AdaptiveSpeculativeParams initialized: steps=3, "
                                 "candidate_steps=[1, 3, 5, 7]")  # fmt: skip
        _run(engine, 1, 400)
        up = _switches(out.getvalue().splitlines())
        assert up and up[-1][1] == 7, up  # batch 1: the largest candidate
        assert all(d == s + 1 for _, s, _, d in up)
        assert _gauge(metrics, "sglang:spec_num_draft_tokens") == 8
        assert _gauge(metrics, "sglang:spec_num_steps") == 7
        decode = [m for ln in out.getvalue().splitlines() if (m := DECODE_RE.match(ln))]
        # Above anything 3 steps (4 draft tokens) can accept.
        assert float(decode[-1]["accept_len"]) > 4.0

        source.value = Behaviour(acceptance=0.0)
        before = len(out.getvalue().splitlines())
        _run(engine, 1, 200)
        down = _switches(out.getvalue().splitlines()[before:])
        assert down and down[-1][1] == 1, down  # batch 1's smallest candidate
        updated = [ln for ln in out.getvalue().splitlines()[before:]
                   if "Adaptive spec params updated: steps " in ln]  # fmt: skip
        assert updated and "(ema_accept_len=" in updated[-1]
        assert _gauge(metrics, "sglang:spec_num_draft_tokens") == 2
    finally:
        engine.shutdown(5.0)


def test_large_batches_route_to_their_slot_and_may_stop_drafting(tmp_path: Path) -> None:
    # Batch 8 uses the "8" slot (candidates 0, 1, 3): with nothing accepted it reaches 0 steps,
    # one draft token, and an accept length of exactly 1.00 that is not a broken drafter.
    engine, out, _, metrics = _engine(tmp_path, acceptance=0.0)
    try:
        _run(engine, 8, 120)
        switches = _switches(out.getvalue().splitlines())
        assert (1, 0, 2, 1) in switches, switches
        assert _gauge(metrics, "sglang:spec_num_draft_tokens") == 1
        decode = [m for ln in out.getvalue().splitlines() if (m := DECODE_RE.match(ln))]
        assert decode[-1]["accept_len"] == "1.00" and decode[-1]["accept_rate"] == "0.00"
    finally:
        engine.shutdown(5.0)


def test_the_exporters_pattern_reads_the_stand_ins_switch_lines(tmp_path: Path) -> None:
    engine, out, _, _ = _engine(tmp_path, acceptance=1.0)
    try:
        _run(engine, 1, 200)
    finally:
        engine.shutdown(5.0)
    text = out.getvalue().encode()
    found = [tuple(int(g) for g in m.groups()) for m in SWITCH_PATTERN.finditer(text)]
    assert found and found == _switches(out.getvalue().splitlines())


def test_a_server_process_serves_the_active_shape_on_metrics(start_standin, tmp_path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text('{"acceptance": 1.0}')  # good drafts: the steps go up from 3
    server = start_standin(
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(drafter),
        "--speculative-adaptive", "--enable-metrics", "--decode-log-interval", "5",
        env={"SPECSERVE_STANDIN_TIME_SCALE": "0.01",
             "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)},
    )  # fmt: skip
    server.chat("hello", max_tokens=300, ignore_eos=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _switches(server.lines()):
        time.sleep(0.05)
    last = _switches(server.lines())[-1]
    body = requests.get(server.url + "/metrics", timeout=5).text
    value = re.search(r"^sglang:spec_num_draft_tokens\{[^}]*\} (\S+)$", body, re.M)
    assert value is not None and float(value.group(1)) == pytest.approx(last[3])
    info = requests.get(server.url + "/server_info", timeout=5).json()
    assert info["speculative_adaptive"] is True


@pytest.mark.parametrize(("level", "printed"), [("info", True), ("debug", True),
                                                 ("warning", False), ("error", False)])
def test_batch_lines_follow_the_log_level_as_sglangs_do(
    tmp_path: Path, level: str, printed: bool
) -> None:
    """SGLang writes Prefill / Decode batch lines with logger.info (tests/contract/
    test_log_level.py runs its configure_logger per level); the stand-in drops them alike."""
    argv = ["--model-path", str(tmp_path / "model"), "--decode-log-interval", "2",
            "--log-level", level]  # fmt: skip
    out = io.StringIO()
    engine = Engine(parse_args(argv, "0.5.21"), _Fixed(0.5), LinePrinter("", out), None,  # type: ignore[arg-type]
                    90.0, 0.0, False)
    engine.start()
    try:
        _run(engine, 1, 8)
    finally:
        engine.shutdown(1.0)
    text = out.getvalue()
    assert ("Decode batch" in text and "Prefill batch" in text) is printed, text
    assert ("Decode batch" in text or "Prefill batch" in text) is printed, text
