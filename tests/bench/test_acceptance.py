"""Acceptance per request, class and draft position, and degenerate outputs (issue 31 items 2
and 3): units over request records, the results sections, the report and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib import image as mpimg

from specserve.bench.acceptance import add_histograms, survival
from specserve.bench.acceptplot import plot_acceptance
from specserve.bench.client import RequestRecord, _consume
from specserve.bench.degenerate import THRESHOLD, is_degenerate, repetition, seq_rep
from specserve.bench.perrequest import level_sections
from specserve.bench.report import markdown
from specserve.bench.results import validate_result
from tests.bench.test_units import _result

NORMAL = (
    "Sunlight is made of many colours. As it passes through the atmosphere, the short blue "
    "waves scatter off gas molecules far more than the long red ones, so blue light reaches "
    "your eyes from every direction of the sky. At sunset the light crosses much more air, the "
    "blue is scattered away before it arrives, and the reds and oranges are what remain."
)
CODE = (
    "def parse(line: str) -> dict:\n    key, _, value = line.partition('=')\n"
    "    return {key.strip(): value.strip()}\n\n\ndef load(path):\n    out = {}\n"
    "    with open(path) as f:\n        for line in f:\n            if line.strip():\n"
    "                out.update(parse(line))\n    return out\n"
)
LOOP = "I think that the answer is " + "the answer is the answer is " * 12
CJK_LOOP = "我觉得" + "答案是这个。" * 20


def test_a_looping_text_is_flagged_and_normal_ones_are_not() -> None:
    assert is_degenerate(repetition(LOOP)) and is_degenerate(repetition(CJK_LOOP))
    chinese = "这是一个关于秋天树叶为什么变色的简短说明。叶绿素分解后胡萝卜素显现出来。"
    for text in (NORMAL, CODE, chinese):
        score = repetition(text)
        assert score is not None and score < THRESHOLD, text[:30]
    assert repetition("too short to judge") is None and not is_degenerate(None)


def test_seq_rep_is_the_share_of_repeated_ngrams() -> None:
    # 16 tokens, period 4: 13 4-grams, 4 distinct -> 1 - 4/13.
    assert seq_rep(list("abcd" * 4)) == pytest.approx(1 - 4 / 13)
    assert seq_rep([str(i) for i in range(20)]) == 0.0


def test_position_survival_from_the_per_step_histogram() -> None:
    # Passes that accepted 0, 1, 2, 3 drafts: 2, 1, 1, 4 of 8.
    assert survival([2, 1, 1, 4]) == pytest.approx([6 / 8, 5 / 8, 4 / 8])
    assert add_histograms([[1, 2], [0, 0, 3], []]) == [1, 2, 3]
    assert survival([]) == [] and survival([0, 0]) == []


def _record(pid: str, kind: str, text: str, spec: dict | None) -> RequestRecord:
    record = RequestRecord(prompt_id=pid, kind=kind, ok=True, output_tokens=40)
    for piece in text.split(" "):
        _consume(record, {"choices": [{"delta": {"content": piece + " "}}]}, 0.1)
    if spec is not None:  # the stream's sglext chunk, as SGLang sends it before usage
        _consume(record, {"choices": [], "sglext": {"spec_tokens_details": spec}}, 0.2)
    return record


def _spec(verify_ct: int, histogram: list[int], tokens: int = 40) -> dict:
    return {"spec_accept_length": tokens / verify_ct, "spec_accept_rate": 0.5,
            "spec_verify_ct": verify_ct, "spec_correct_drafts_histogram": histogram}


def _records() -> list[RequestRecord]:
    return [
        _record("c1", "chat", NORMAL, _spec(20, [10, 5, 5])),
        _record("c2", "chat", NORMAL + " again", _spec(10, [0, 5, 5])),
        _record("k1", "code", CODE, _spec(8, [0, 0, 2, 6])),
        _record("l1", "chat", LOOP, _spec(10, [0, 0, 0, 10])),
        _record("n1", "chat", NORMAL, None),  # a server that sent no details
    ]


def test_level_sections_per_request_per_class_per_position() -> None:
    sections = level_sections(_records())
    rows = {r["prompt_id"]: r for r in sections["per_request"]}
    assert rows["c1"]["accept_length"] == 2.0 and rows["n1"]["accept_length"] is None
    acceptance = sections["acceptance"]
    assert acceptance["accept_length"]["n"] == 4
    chat = acceptance["by_kind"]["chat"]
    assert chat["accept_length"]["n"] == 3 and chat["accept_length"]["p50"] == 4.0
    assert chat["histogram"] == [10, 10, 10, 10]
    assert chat["position_survival"] == pytest.approx([0.75, 0.5, 0.25])
    assert acceptance["by_kind"]["code"]["position_survival"] == pytest.approx([1, 1, 0.75])
    deg = sections["degenerate"]
    assert deg["count"] == 1 and deg["prompt_ids"] == ["l1"] and deg["judged"] == 5


def test_results_carry_the_sections_and_old_results_still_load(tmp_path: Path) -> None:
    result = _result("speculative", True, {1: 140.0, 2: 240.0})
    validate_result(result)  # written before issue 31: no per_request, acceptance, degenerate
    for level in result["levels"]:
        level.update(level_sections(_records()))
    validate_result(result)
    text = markdown(result)
    assert "## Acceptance per request, class and draft position" in text
    assert "| 1 | code | 1 | 5.00 | 5.00 | 5.00 | 8 | 1:1.00 2:1.00 3:0.75 |" in text
    assert "## Degenerate outputs" in text and "1 of 5 requests degenerate (20%)" in text
    plot_acceptance(result, tmp_path / "acceptance.png")
    assert mpimg.imread(tmp_path / "acceptance.png").shape[0] > 300
