"""The per-request speculative details the stand-in returns are what SGLang's own code computes
from the same per-step counts, in every verified version.

SGLang's side: TokenizerManager._calculate_spec_decoding_metrics, its statements taken from the
installed tokenizer_manager.py (the module itself imports fastapi's telemetry, which the contract
venv lacks) and run with SGLang's `spec_tokens_details_from_meta_info` (imported: the OpenAI
routes' sglext); `get_spec()` answers the case's draft tokens. The stand-in's side:
specserve.standin.api.spec_meta_info and sglext over a Request fed the same verify passes.
The facts the bench relies on (which keys, under which switch) are read from the committed
per-version data, and held to the source here too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from specserve.standin.api import sglext, spec_meta_info
from specserve.standin.engine import Request
from specserve.upstream import VERIFIED_VERSIONS
from specserve.upstream.contract import sglang_contract
from tests.contract.sglang_venv import run_snippet

RUN_SGLANG = r"""
import ast, json, sys, types
from pathlib import Path
import sglang
from sglang.srt.entrypoints.openai.utils import spec_tokens_details_from_meta_info

path = Path(sglang.__file__).parent / "srt" / "managers" / "tokenizer_manager.py"
tree = ast.parse(path.read_text(encoding="utf-8"))
method = next(n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef) and n.name == "_calculate_spec_decoding_metrics")
for arg in method.args.args:
    arg.annotation = None
method.returns = None
module = ast.Module(body=[method], type_ignores=[])
cases = json.load(sys.stdin)
out = []
for case in cases:
    namespace = {
        "get_spec": lambda: types.SimpleNamespace(
            speculative_num_draft_tokens=case["draft_tokens"]),
        "_ragged_verify_cap_accept": lambda: False,
    }
    exec(compile(ast.fix_missing_locations(module), str(path), "exec"), namespace)
    recv = types.SimpleNamespace(
        spec_verify_ct=[case["verify_ct"]],
        spec_num_correct_drafts=[case["correct"]],
        completion_tokens=[case["completion"]],
        spec_correct_drafts_histogram=[case["histogram"]],
    )
    meta = {}
    namespace["_calculate_spec_decoding_metrics"](None, meta, recv, 0)
    details = spec_tokens_details_from_meta_info(meta)
    out.append({"meta": meta, "details": None if details is None else details.model_dump()})
print(json.dumps(out))
"""

# (draft tokens, the prefill's token then each verify pass's committed drafts).
STEPS: list[tuple[int, list[int]]] = [
    (4, [3, 0, 1, 2, 3, 3, 0]),
    (4, [0, 0, 0]),
    (2, [1, 1, 0, 1]),
    (8, [7, 2, 5, 0, 6]),
    (6, [5]),
]


def _request(draft_tokens: int, steps: list[int]) -> Request:
    req = Request(text="x", prompt_tokens=1, max_new_tokens=10_000, natural_tokens=None,
                  content_factor=1.0)
    req.spec_num_draft_tokens = draft_tokens
    req.generated = 1  # the prefill's token: counted in completion_tokens, no verify pass
    for correct in steps:
        req.add_verify(correct)
        req.generated += correct + 1  # the accepted drafts and the bonus token
    return req


@cache
def sglang_answers(version: str) -> list[dict[str, Any]]:
    cases = []
    for draft_tokens, steps in STEPS:
        req = _request(draft_tokens, steps)
        cases.append({"draft_tokens": draft_tokens, "verify_ct": req.spec_verify_ct,
                      "correct": req.spec_num_correct_drafts, "completion": req.generated,
                      "histogram": req.spec_correct_drafts_histogram})
    return run_snippet(version, RUN_SGLANG, cases)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_standins_meta_info_is_sglangs_formula(version: str) -> None:
    for (draft_tokens, steps), theirs in zip(STEPS, sglang_answers(version), strict=True):
        req = _request(draft_tokens, steps)
        ours = spec_meta_info(req)
        assert ours.keys() == theirs["meta"].keys(), (draft_tokens, steps)
        for key, value in theirs["meta"].items():
            assert ours[key] == pytest.approx(value), (key, draft_tokens, steps)
        # The histogram is what the bench turns into per-position acceptance.
        assert sum(ours["spec_correct_drafts_histogram"]) == len(steps)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_standins_sglext_is_sglangs_spec_tokens_details(version: str) -> None:
    for (draft_tokens, steps), theirs in zip(STEPS, sglang_answers(version), strict=True):
        ext = sglext(_request(draft_tokens, steps))
        assert ext is not None
        assert ext["spec_tokens_details"] == theirs["details"]


def test_no_verify_pass_no_details() -> None:
    # SGLang writes nothing before a verify pass (spec_verify_ct > 0), nor without speculation.
    req = _request(4, [])
    assert spec_meta_info(req) == {} and sglext(req) is None
    req.spec_num_draft_tokens = None
    req.add_verify(2)
    assert spec_meta_info(req) == {}


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_recorded_facts_name_what_the_standin_and_bench_use(version: str) -> None:
    facts = sglang_contract(version).request_spec_details
    assert facts["only_when_speculative_algorithm"] is True
    assert facts["openai_request_switch"] == "return_spec_tokens_details"
    assert all(facts["openai_routes"].values())
    ours = {key for steps in STEPS for key in spec_meta_info(_request(steps[0], steps[1]))}
    # Everything but DSPARK's cap and block figures, which the stand-in leaves out.
    assert set(facts["meta_info_keys"]) - ours == {
        "spec_cap_length", "spec_block_accept_length", "spec_cap_lens_histogram"}
    ext = sglext(_request(4, [1]))
    assert ext is not None
    assert sorted(ext["spec_tokens_details"]) == facts["openai_fields"]
