"""The stand-in against SGLang's real code: same accept/reject as `prepare_server_args`, same
parsed values and deprecation warnings, same tree defaults, for every verified version.

SGLang runs in its own venv (tests/contract/sglang_venv.py); a missing venv fails these tests
with the command that creates it, never skips them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from specserve.standin.args import build_parser, parse_args
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.sglang_venv import parse_argvs, run_snippet

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "fixtures" / "models"
BASE = ["--model-path", "/m"]

# Each divergence issue 14 names, plus the parser's edges (types, choices, nargs, abbreviations,
# deprecated actions, --no- switches, missing values, the required flag).
ARGVS: list[list[str]] = [
    [*BASE, "--cuda-graph-bs", "1", "2"],
    [*BASE, "--api-key-file", "x"],
    [*BASE, "--collect-tokens-histogram"],
    [*BASE, "--enable-nan-detection"],
    [*BASE, "--cuda-graph-max-bs", "8"],
    [*BASE, "--cuda-graph-max-bs-decode", "8"],
    [*BASE, "--cuda-graph-backend-decode", "disabled"],
    [*BASE, "--cuda-graph-backend-decode", "none"],
    [*BASE, "--cuda-graph-backend-decode", "tc_piecewise"],
    [*BASE, "--disable-decode-cuda-graph"],
    [*BASE, "--disable-cuda-graph"],
    [*BASE, "--speculative-algorithm", "eagle3"],
    [*BASE, "--speculative-algorithm", "nextn"],
    [*BASE, "--speculative-algorithm", "DFLASH"],
    [*BASE, "--speculative-algorithm", "DSPARK"],
    [*BASE, "--speculative-algorithm", "UNO"],
    [*BASE, "--speculative-algorithm", "EAGLE4"],
    [*BASE, "--no-such-flag"],
    [],
    ["--model", "/m", "--port=8000"],
    [*BASE, "--tp", "2"],
    [*BASE, "--tensor-parallel-size", "2", "--ep", "2"],
    [*BASE, "--enable-dp-attention", "--dp-size", "2"],
    [*BASE, "--attn-dp-size", "2"],
    [*BASE, "--cuda-graph-tc-compiler", "eager"],
    [*BASE, "--speculative-skip-dp-mlp-sync"],
    [*BASE, "--speculative-num-steps", "x"],
    [*BASE, "--mem-fraction-static", "0.85x"],
    [*BASE, "--context-length", "32k"],
    [*BASE, "--context-length", "1.5Ki"],
    [*BASE, "--context-length", "lots"],
    [*BASE, "--lora-paths", "a", "b=c"],
    [*BASE, "--no-lora-strict-loading"],
    [*BASE, "--cuda-graph-config", '{"decode": {"backend": "disabled"}}'],
    [*BASE, "--cuda-graph-config", "[1]"],
    [*BASE, "--cuda-graph-config", '{"decode": {"backend": "tc_piecewise"}}'],
    [*BASE, "--monokernel-backend", "amd"],
    [*BASE, "--host"],
    [*BASE, "--enable-metrics", "yes"],
    [*BASE, "--num-continuous-decode-steps", "4", "--disable-custom-all-reduce"],
    [*BASE, "--speculative-draft-model", "/d", "--speculative-eagle-topk", "1"],
    [*BASE, "--max-running-requests", "64", "--decode-log-interval", "10", "--api-key", "k"],
]
# The unresolved values compared (parse_argv.py's default fields).
FIELDS = [
    "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "max_running_requests",
    "cuda_graph_max_bs_decode", "cuda_graph_backend_decode", "disable_cuda_graph",
    "disable_decode_cuda_graph", "num_continuous_decode_steps", "tp_size", "enable_metrics",
]  # fmt: skip


def _standin_parse(version: str, argv: list[str]) -> dict[str, Any]:
    """The stand-in's parser on `argv`, shaped like parse_argv.py's result."""
    parser = build_parser(sglang_contract(version))
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            ns = parser.parse_args(argv)
    except SystemExit as exc:
        lines = stderr.getvalue().strip().splitlines()
        return {"ok": False, "exit_code": exc.code, "error": lines[-1] if lines else ""}
    warnings = [
        line.replace("\033[1;33m", "").replace("\033[0m", "")
        for line in stderr.getvalue().splitlines()
    ]
    return {"ok": True, "namespace": ns, "warnings": warnings}


def _message(error: str) -> str:
    # The program names differ ("sglang serve" / "specserve-standin"); the message must not.
    return error.split(": error: ", 1)[-1]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_accept_reject_and_values_equal_sglang(version: str) -> None:
    upstream = parse_argvs(version, ARGVS)
    mismatches: list[str] = []
    for argv, real in zip(ARGVS, upstream, strict=True):
        ours = _standin_parse(version, argv)
        if ours["ok"] != real["ok"]:
            mismatches.append(f"{argv}: SGLang ok={real['ok']} {real.get('error', '')!r}, "
                              f"stand-in ok={ours['ok']} {ours.get('error', '')!r}")  # fmt: skip
            continue
        if not real["ok"]:
            if (ours["exit_code"], _message(ours["error"])) != (2, _message(real["error"])):
                mismatches.append(f"{argv}: {real['error']!r} != {ours['error']!r}")
            continue
        ns: argparse.Namespace = ours["namespace"]
        for name in FIELDS:
            want = real["fields"][name]
            if isinstance(want, dict) and "missing" in want:
                assert not hasattr(ns, name), f"{version} has no {name}; the stand-in has"
                continue
            if getattr(ns, name) != want:
                mismatches.append(f"{argv}: {name} = {getattr(ns, name)!r}, SGLang {want!r}")
        if ours["warnings"] != real["warnings"]:
            mismatches.append(f"{argv}: warnings {ours['warnings']} != {real['warnings']}")
    assert not mismatches, "\n".join(mismatches)
    # The set is not trivial: both verdicts occur, and the named cases are as stated.
    verdicts = {tuple(a): r["ok"] for a, r in zip(ARGVS, upstream, strict=True)}
    assert verdicts[(*BASE, "--cuda-graph-max-bs", "8")] is False
    assert verdicts[(*BASE, "--cuda-graph-max-bs-decode", "8")] is True
    assert verdicts[(*BASE, "--speculative-algorithm", "eagle3")] is True


def test_the_versions_differ_where_the_tables_do() -> None:
    # tc_piecewise is a decode backend in 0.5.21 and retired in 0.5.23; --attn-dp-size is new.
    old, new = (sglang_contract(v) for v in ("0.5.21", "0.5.23"))
    for argv in (
        [*BASE, "--cuda-graph-backend-decode", "tc_piecewise"],
        [*BASE, "--monokernel-backend", "amd"],
        [*BASE, "--speculative-skip-dp-mlp-sync"],
    ):
        assert _standin_parse(old.version, argv)["ok"] != _standin_parse(new.version, argv)["ok"]


def test_version_knob_selects_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSERVE_STANDIN_SGLANG_VERSION", "0.5.23")
    assert parse_args([*BASE, "--attn-dp-size", "2"]).enable_dp_attention
    monkeypatch.setenv("SPECSERVE_STANDIN_SGLANG_VERSION", "0.5.21")
    with pytest.raises(SystemExit) as exc, contextlib.redirect_stderr(io.StringIO()):
        parse_args([*BASE, "--attn-dp-size", "2"])
    assert exc.value.code == 2


# -- resolution defaults against SGLang's own functions ---------------------------------------

TARGETS = {
    "Llama-3.1-8B-Instruct": "EAGLE3-LLaMA3.1-Instruct-8B",
    "Kimi-K2.5": "kimi-k2.5-eagle3",
}
AUTO_CHOOSE = """
import json, sys
from sglang.srt.server_args import prepare_server_args
from sglang.srt.arg_groups.speculative_hook import _auto_choose_speculative_params
out = []
for argv, arch in json.load(sys.stdin):
    out.append(list(_auto_choose_speculative_params(prepare_server_args(argv), arch)))
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_tree_defaults_are_sglangs_per_target_architecture(version: str) -> None:
    cases = []
    for target, drafter in TARGETS.items():
        for algorithm in ("EAGLE3", "eagle", "STANDALONE"):
            argv = [
                "--model-path", str(MODELS / target), "--speculative-algorithm", algorithm,
                "--speculative-draft-model-path", str(MODELS / drafter),
            ]  # fmt: skip
            arch = json.loads((MODELS / target / "config.json").read_text())["architectures"][0]
            cases.append((argv, arch))
    upstream = run_snippet(version, AUTO_CHOOSE, cases)
    for (argv, arch), want in zip(cases, upstream, strict=True):
        spec = parse_args(argv, version).spec
        assert spec is not None
        got = [spec.num_steps, spec.eagle_topk, spec.num_draft_tokens]
        assert got == want, f"{version} {arch} {argv[3]}: stand-in {got}, SGLang {want}"
    # The field notes' figures: Llama 5/4/8, Kimi 3/1/4 (EAGLE3).
    assert upstream[0] == [5, 4, 8] and upstream[3] == [3, 1, 4]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_max_running_requests_capped_under_speculation(version: str) -> None:
    target, drafter = MODELS / "Kimi-K2.5", MODELS / "kimi-k2.5-eagle3"
    spec = ["--model-path", str(target), "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", str(drafter)]  # fmt: skip
    cap = sglang_contract(version).eagle_max_running_requests_cap
    assert cap == 48
    capped = parse_args(spec, version)
    assert capped.max_running_requests == 48
    assert capped.warnings[0] == (
        "Max running requests is reset to 48 for speculative decoding. You can override this "
        "by explicitly setting --max-running-requests."
    )
    assert parse_args([*spec, "--max-running-requests", "96"], version).max_running_requests == 96
    baseline = parse_args(["--model-path", str(target)], version)
    assert baseline.max_running_requests is None and not baseline.warnings
