"""`check` says what SGLang's whole resolution does with a profile (issue 27): every way decode
graphs go off, the start-time refusals, adaptive per algorithm, partial trees, silenced logs.
tests/contract/ proves the same rules against SGLang's own code; these pin the messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, SHIPPED, check_json, kimi_doc, write_doc

from specserve.profile.argview import attention_backend, parse_view, profile_view
from specserve.profile.checks.graphs import DISABLED, resolve_decode_graph
from specserve.profile.checks.startup import REFUSALS, start_refusals
from specserve.profile.facts import facts
from specserve.profile.loader import load_profile
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract

VERSIONS = pytest.mark.parametrize("version", VERIFIED_VERSIONS)


def _check(tmp: Path, doc: dict[str, Any], version: str) -> tuple[int, dict[str, Any]]:
    return check_json(
        write_doc(tmp, doc),
        "--weights-root",
        str(FIXTURES),
        "--configs-only",
        "--sglang-version",
        version,
    )


def _kimi(*extra: str, **server: Any) -> dict[str, Any]:
    doc = kimi_doc()
    doc["server"]["extra_args"] = list(extra)
    doc["server"].update(server)
    return doc


def _errors(report: dict[str, Any], field: str | None = None) -> list[dict[str, str]]:
    return [e for e in report["errors"] if field is None or e["field"] == field]


# --- the argv view ------------------------------------------------------------------------


def test_the_view_reads_the_argv_as_argparse_does():
    contract = sglang_contract("0.5.23")
    argv = [
        "python3", "-m", "sglang.launch_server",
        "--tp-size", "8", "--attention-backend=triton", "--attention-backend", "fa3",
        "--enable-mis", "--no-dcp-replicate-q-proj", "--lora-paths", "a", "b",
        "--mem-fraction-static", "0.85", "--page-size", "x",
    ]  # fmt: skip
    sources = [f"w{i}" for i in range(len(argv))]
    view = parse_view(argv, contract, sources)
    assert view["tp_size"] == 8 and view["mem_fraction_static"] == 0.85
    assert view["attention_backend"] == "fa3" and view.where("attention_backend") == "w6"
    assert view["enable_mis"] is True and view["dcp_replicate_q_proj"] is False
    assert view["lora_paths"] == ["a", "b"]
    assert view["page_size"] == "x"  # not an int: left for SGLang's own parser to refuse
    assert not view.given("enable_lmcache") and view["enable_lmcache"] is False  # the default
    assert view.words("attention_backend") == "--attention-backend fa3"


def test_split_attention_backends_resolve_as_sglang_resolves_them():
    contract = sglang_contract("0.5.23")
    same = parse_view(
        ["--prefill-attention-backend", "torch_native", "--decode-attention-backend",
         "torch_native"], contract)  # fmt: skip
    assert attention_backend(same) == "torch_native"
    split = parse_view(["--prefill-attention-backend", "torch_native"], contract)
    assert attention_backend(split) is None  # the GPU's default decides


# --- decode CUDA graphs -------------------------------------------------------------------

GRAPH_OFF_CASES = [
    (("--attention-backend", "torch_native"), "torch native attention backend"),
    (("--debug-tensor-dump-output-folder", "/tmp/dump"), "tensor dump mode"),
    (("--msprobe-dump-config", "/tmp/msprobe.json"), "msProbe only supports dump in eager"),
    (("--moe-a2a-backend", "deepep", "--deepep-mode", "normal"), "deepep_mode=`normal`"),
    (("--enable-mis", "--attention-backend", "flashinfer"), "--enable-mis is set"),
    (("--disaggregation-mode", "prefill"), "a PD prefill worker runs no decode"),
    (("--attention-backend", "torch_native", "--cuda-graph-backend-decode", "full"),
     "torch native attention backend"),
]  # fmt: skip


@VERSIONS
@pytest.mark.parametrize(("words", "says"), GRAPH_OFF_CASES, ids=lambda c: str(c)[:40])
def test_decode_graphs_turned_off_by_another_option_are_refused(tmp_path, version, words, says):
    code, report = _check(tmp_path, _kimi(*words), version)
    assert code == 1
    graph = [e for e in _errors(report) if "decode CUDA graphs would be disabled" in e["problem"]]
    assert len(graph) == 1, report["errors"]
    assert graph[0]["field"].startswith("server.extra_args[")
    assert says in graph[0]["problem"] and f"SGLang {version}" in graph[0]["problem"]
    assert "remove" in graph[0]["fix"] and "allow_disable_cuda_graph" in graph[0]["fix"]


@VERSIONS
def test_an_allowed_switch_off_is_a_warning_naming_it(tmp_path, version):
    doc = _kimi("--attention-backend", "torch_native", allow_disable_cuda_graph=True)
    code, report = _check(tmp_path, doc, version)
    assert code == 0, report["errors"]
    [warn] = [w for w in report["warnings"] if "decode CUDA graphs are disabled" in w["problem"]]
    assert "--attention-backend torch_native" in warn["problem"]
    assert warn["field"] == "server.extra_args[0]"


@VERSIONS
def test_a_prefill_worker_keeps_a_decode_backend_written_explicitly(tmp_path, version):
    # cuda_graph_hook.py checks the locked decode backend first; the other hooks do not.
    profile = load_profile(write_doc(tmp_path, _kimi(
        "--disaggregation-mode", "prefill", "--cuda-graph-backend-decode", "full")))  # fmt: skip
    state, _ = resolve_decode_graph(profile, sglang_contract(version))
    assert state.backend == "full"


@VERSIONS
def test_options_that_leave_decode_graphs_alone_are_not_flagged(tmp_path, version):
    for words in (
        ("--attention-backend", "triton"),
        ("--prefill-attention-backend", "torch_native"),
        ("--moe-a2a-backend", "deepep", "--deepep-mode", "low_latency"),
        ("--disaggregation-mode", "decode"),
    ):
        profile = load_profile(write_doc(tmp_path, _kimi(*words)))
        state, _ = resolve_decode_graph(profile, sglang_contract(version))
        assert state.backend != DISABLED, words


# --- start-time refusals ------------------------------------------------------------------


@VERSIONS
def test_flex_attention_with_speculation_is_refused_in_sglangs_words(tmp_path, version):
    code, report = _check(tmp_path, _kimi("--attention-backend", "flex_attention"), version)
    assert code == 1
    [refused] = [e for e in _errors(report, "server.extra_args[0]") if "refuses" in e["problem"]]
    assert refused["problem"] == (
        f"SGLang {version} refuses to start (attention_hook.py::"
        "handle_attention_backend_compatibility): Speculative decoding is currently not "
        "supported with Flex Attention backend"
    )


def test_kv_cache_sharding_is_refused_on_0_5_23_and_unknown_on_0_5_21(tmp_path):
    code, report = _check(tmp_path, _kimi("--enable-kv-cache-sharding"), "0.5.23")
    assert code == 1
    [refused] = _errors(report, "server.extra_args[0]")
    assert "is only supported on PD prefill workers" in refused["problem"]
    code, report = _check(
        tmp_path, _kimi("--enable-kv-cache-sharding", "--disaggregation-mode", "prefill"), "0.5.23"
    )
    problems = " ".join(e["problem"] for e in _errors(report))
    assert "KV sharding supports speculative decoding only for GLM DSA" in problems
    code, report = _check(tmp_path, _kimi("--enable-kv-cache-sharding"), "0.5.21")
    [unknown] = _errors(report, "server.extra_args[0]")
    assert "is not an option of SGLang 0.5.21" in unknown["problem"]


@VERSIONS
def test_multi_item_scoring_needs_flashinfer(tmp_path, version):
    code, report = _check(tmp_path, _kimi("--enable-mis"), version)
    assert code == 1
    problems = [e["problem"] for e in _errors(report, "server.extra_args[0]")]
    assert any("Please set --attention-backend flashinfer when using --enable-mis" in p
               for p in problems), problems  # fmt: skip
    # With flashinfer SGLang starts (graphs off: refused as such, not as a start failure).
    code, report = _check(tmp_path, _kimi("--enable-mis", "--attention-backend", "flashinfer"),
                          version)  # fmt: skip
    assert not [e for e in _errors(report) if "refuses to start" in e["problem"]]


@VERSIONS
def test_the_shipped_profiles_reach_no_refusal(version):
    for path in SHIPPED:
        view = profile_view(load_profile(path), sglang_contract(version))
        assert view is not None and start_refusals(view) == [], path.name


def test_every_rule_names_an_option_and_where_sglang_raises():
    names = {o.dest for v in VERIFIED_VERSIONS for o in sglang_contract(v).options}
    for rule in REFUSALS:
        assert rule.dest in names, rule.dest
        assert "::" in rule.hook and rule.fix
        assert rule.words or rule.says, rule.dest
        assert rule.trigger, f"{rule.dest}: the contract suite needs an example"


@VERSIONS
def test_a_log_level_logging_does_not_know_is_refused_before_start(tmp_path, version):
    code, report = _check(tmp_path, _kimi("--log-level", "verbose"), version)
    assert code == 1
    problems = [e["problem"] for e in _errors(report, "server.extra_args[0]")]
    assert any("module 'logging' has no attribute 'VERBOSE'" in p for p in problems), problems


# --- silenced logs ------------------------------------------------------------------------


@VERSIONS
@pytest.mark.parametrize("level", ["warning", "ERROR", "critical"])
def test_a_log_level_that_silences_the_batch_lines_is_refused(tmp_path, version, level):
    code, report = _check(tmp_path, _kimi("--log-level", level), version)
    assert code == 1
    [silenced] = [e for e in _errors(report) if "silences" in e["problem"]]
    assert silenced["field"] == "server.extra_args[0]"
    assert f"--log-level {level} silences SGLang {version}'s Decode batch" in silenced["problem"]
    assert "remove --log-level" in silenced["fix"]


@VERSIONS
@pytest.mark.parametrize("words", [("--log-level", "info"), ("--log-level", "debug"),
                                   ("--log-level-http", "warning")])  # fmt: skip
def test_levels_that_keep_the_batch_lines_pass(tmp_path, version, words):
    code, report = _check(tmp_path, _kimi(*words), version)
    assert code == 0, report["errors"]


def test_a_logging_config_file_is_named_as_what_decides(tmp_path):
    doc = _kimi()
    doc["env"]["SGLANG_LOGGING_CONFIG_PATH"] = "/etc/sglang/logging.json"
    _, report = _check(tmp_path, doc, "0.5.21")
    [warn] = [w for w in report["warnings"] if w["field"] == "env.SGLANG_LOGGING_CONFIG_PATH"]
    assert "ignores --log-level" in warn["problem"]
    assert "sglang.srt.managers.scheduler_components.metrics_reporter" in warn["fix"]


# --- adaptive per algorithm, partial trees --------------------------------------------------


def _ngram(**drafter: Any) -> dict[str, Any]:
    doc = kimi_doc()
    doc["drafter"] = {"algorithm": "NGRAM", **drafter}
    return doc


@VERSIONS
def test_adaptive_with_ngram_is_an_error_in_sglangs_words(tmp_path, version):
    code, report = _check(tmp_path, _ngram(adaptive=True), version)
    assert code == 1
    [err] = _errors(report, "drafter.adaptive")
    assert "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)" in err["problem"]
    assert "serves the static parameters" in err["problem"]


def test_the_adaptive_fact_follows_sglang(tmp_path):
    assert facts(load_profile(write_doc(tmp_path, _ngram(adaptive=True)))).adaptive is False
    tree = kimi_doc()
    tree["drafter"].update(adaptive=True, eagle_topk=4, num_draft_tokens=8)
    assert facts(load_profile(write_doc(tmp_path, tree))).adaptive is False
    chain = kimi_doc()
    chain["drafter"]["adaptive"] = True
    assert facts(load_profile(write_doc(tmp_path, chain))).adaptive is True


PARTIAL = [
    ({"num_steps": None}, "drafter.num_steps", "AssertionError with no message"),
    ({"eagle_topk": None}, "drafter.eagle_topk",
     "TypeError: '>' not supported between instances of 'NoneType' and 'int'"),
    ({"num_draft_tokens": None}, "drafter.num_draft_tokens",
     "sets num_draft_tokens to num_steps + 1 = 4 itself"),
    ({"num_draft_tokens": None, "eagle_topk": 4}, "drafter.num_draft_tokens",
     "leaves num_draft_tokens unset (None"),
]  # fmt: skip


@VERSIONS
@pytest.mark.parametrize(("change", "field", "says"), PARTIAL, ids=[p[1] for p in PARTIAL])
def test_a_partial_tree_says_what_sglang_does(tmp_path, version, change, field, says):
    doc = kimi_doc()
    for key, value in change.items():
        if value is None:
            doc["drafter"].pop(key)
        else:
            doc["drafter"][key] = value
    code, report = _check(tmp_path, doc, version)
    assert code == 1
    [err] = _errors(report, field)
    assert says in err["problem"] and "fills the rest" not in err["problem"]
