"""The profile against SGLang's real facts (specserve.upstream, extracted from its own code), per
verified version: owned flags, extra_args, CUDA-graph switches, EAGLE drafter classes, the
running-request cap, the no-op option, per-version flags and the algorithm names (issue 14)."""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES, KIMI, SHIPPED, check_json, kimi_doc, run_cli, write_doc

from specserve.launch.launcher import main as launch_main
from specserve.profile.fields import FIELDS
from specserve.profile.flags import GRAPH_FLAGS, OWNED_DESTS, OWNED_FLAGS
from specserve.profile.loader import load_profile
from specserve.profile.render import render
from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS, sglang_contract
from tests.contract.sglang_venv import venv_python

VERSIONS = pytest.mark.parametrize("version", VERIFIED_VERSIONS)
MLA = FIXTURES / "kimi-k2.5-eagle3-mla"
MLA_ARCH = "Eagle3DeepseekV2ForCausalLM"


def _check(doc: dict[str, Any], tmp: Path, version: str, root: Path = FIXTURES, *extra: str):
    return check_json(
        write_doc(tmp, doc),
        "--weights-root",
        str(root),
        "--configs-only",
        "--sglang-version",
        version,
        *extra,
    )


def _on(report: dict[str, Any], kind: str, field: str) -> list[dict[str, str]]:
    return [i for i in report[kind] if i["field"] == field]


def _argv(doc: dict[str, Any], tmp: Path, version: str) -> list[str]:
    # A multi-node profile that leaves rank 0's address to the deploy gets one, as a deploy does.
    leader = [] if (doc.get("nodes") or {}).get("count", 1) == 1 or doc["nodes"].get(
        "rendezvous_host") else ["--rendezvous-host", "rank0.example.internal"]  # fmt: skip
    code, out, err = run_cli(
        "render", str(write_doc(tmp, doc)), "--format", "argv", "--sglang-version", version,
        *leader,
    )
    assert code == 0, err
    return out.splitlines()


# --- 1. owned flags are SGLang's real spellings ------------------------------------------------


def test_every_owned_flag_is_a_real_option_of_its_field_in_every_verified_version():
    # `--cuda-graph-max-bs`, `--tp` and `--dp` used to be here: abbreviations SGLang's parser
    # calls ambiguous or resolves to a different option. An option the table says is newer
    # (`since`, e.g. --attn-dp-size: 0.5.23) must be missing from the older versions only.
    assert VERIFIED_VERSIONS.index("0.5.21") < VERIFIED_VERSIONS.index("0.5.23")
    options = [o for f in FIELDS for o in f.owns]
    assert any(o.since for o in options)
    for version in VERIFIED_VERSIONS:
        contract = sglang_contract(version)
        missing = set()
        for flag, field in OWNED_FLAGS.items():
            opt = contract.option(flag)
            if opt is None:
                missing.add(flag)
                continue
            assert OWNED_DESTS.get(opt.dest) == field, (version, flag, opt.dest, field)
            assert opt.dest in {o.dest for o in options}, (version, flag)
        newer = {
            s
            for o in options
            if o.since and VERIFIED_VERSIONS.index(version) < VERIFIED_VERSIONS.index(o.since)
            for s in o.spellings
        }
        assert missing == newer, (version, missing)


def test_every_spelling_of_an_owned_option_is_owned():
    # Aliases (e.g. --tensor-parallel-size, --expert-parallel-size, --speculative-draft-model)
    # would otherwise slip through extra_args.
    for version in VERIFIED_VERSIONS:
        for opt in sglang_contract(version).options:
            if opt.dest in OWNED_DESTS:
                for flag in opt.flags:
                    assert OWNED_FLAGS.get(flag) == OWNED_DESTS[opt.dest], (version, flag)


def _variants() -> list[dict[str, Any]]:
    dp = kimi_doc()
    dp["parallelism"].update(dp=2, enable_dp_attention=True)
    graphs_off = kimi_doc()
    graphs_off["server"].update(
        disable_cuda_graph=True, allow_disable_cuda_graph=True, cuda_graph_max_bs=16
    )
    return [yaml.safe_load(p.read_text()) for p in SHIPPED] + [dp, graphs_off]


@VERSIONS
def test_every_rendered_flag_is_an_exact_option_of_the_targeted_version(tmp_path, version):
    contract = sglang_contract(version)
    for doc in _variants():
        extra = set(doc["server"].get("extra_args") or [])  # the profile's own words
        for arg in _argv(doc, tmp_path, version):
            if arg.startswith("--"):
                assert contract.option(arg) is not None, (version, arg)
                assert arg in OWNED_FLAGS or arg in GRAPH_FLAGS or arg in extra, arg


@VERSIONS
def test_cuda_graph_max_bs_renders_the_decode_flag(tmp_path, version):
    doc = kimi_doc()
    doc["server"]["cuda_graph_max_bs"] = 16
    doc["server"]["max_running_requests"] = 16  # within the graphs, or `check` refuses it
    argv = _argv(doc, tmp_path, version)
    assert argv[argv.index("--cuda-graph-max-bs-decode") + 1] == "16"
    assert "--cuda-graph-max-bs" not in argv
    assert sglang_contract(version).option("--cuda-graph-max-bs-decode").dest == (
        "cuda_graph_max_bs_decode"
    )


# --- 2. EAGLE-3 drafter classes come from SGLang's model registry ------------------------------


def _mla_profile(algorithm: str) -> dict[str, Any]:
    doc = kimi_doc()
    doc["drafter"].update(path="/models/kimi-k2.5-eagle3-mla", algorithm=algorithm)
    return doc


def test_mla_fixture_is_an_eagle3_drafter_sglang_serves():
    cfg = json.loads((MLA / "config.json").read_text())
    assert cfg["architectures"] == [MLA_ARCH]
    for version in VERIFIED_VERSIONS:
        drafters = {d.architecture: d.module for d in sglang_contract(version).eagle3_drafters}
        assert drafters[MLA_ARCH].endswith("kimi_k25_eagle3.py"), version


@VERSIONS
@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "eagle"])
def test_eagle_with_the_mla_drafter_is_the_seeds_bug_and_refused(tmp_path, version, algorithm):
    code, report = _check(_mla_profile(algorithm), tmp_path, version)
    assert code == 1, report
    [err] = _on(report, "errors", "drafter.algorithm")
    assert MLA_ARCH in err["problem"] and "EAGLE-3 drafter" in err["problem"]
    assert err["fix"] == "set drafter.algorithm: EAGLE3"


@VERSIONS
def test_eagle3_with_the_mla_drafter_passes(tmp_path, version):
    # The field notes' baseline records no settings (a warning of its own, test_profile_baseline_*).
    code, report = _check(
        _mla_profile("EAGLE3"), tmp_path, version, FIXTURES, "--no-baseline-check"
    )
    assert code == 0, report
    assert report["errors"] == [] and report["warnings"] == []


def _mla_root(tmp: Path, **changes: Any) -> Path:
    root = tmp / "models"
    shutil.copytree(FIXTURES / "Kimi-K2.5", root / "Kimi-K2.5")
    cfg = json.loads((MLA / "config.json").read_text())
    cfg.update(changes)
    (root / MLA.name).mkdir(parents=True)
    (root / MLA.name / "config.json").write_text(json.dumps(cfg))
    return root


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"target_hidden_size": 4096}, "expects target hidden size 4096 but the target's is 7168"),
        (
            {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 60]}},
            "[60] are outside the target's 61 layers",
        ),
        ({"draft_vocab_size": 200000}, "larger than the target's vocab_size 163840"),
    ],
    ids=["hidden-size", "aux-layers", "draft-vocab"],
)
def test_mla_drafter_shape_checks_still_apply(tmp_path, changes, problem):
    root = _mla_root(tmp_path, **changes)
    code, report = _check(_mla_profile("EAGLE3"), tmp_path, PINNED_VERSION, root)
    assert code == 1
    assert any(problem in e["problem"] for e in _on(report, "errors", "drafter.path")), report


@VERSIONS
def test_every_eagle_class_of_the_registry_is_recognised(tmp_path, version):
    # Each EAGLE-3 class refuses EAGLE, each EAGLE (v2) class refuses EAGLE3: no suffix rule.
    contract = sglang_contract(version)
    cases = [(a, "EAGLE", "EAGLE-3 drafter") for a in contract.eagle3_drafter_architectures]
    cases += [
        (a, "EAGLE3", "EAGLE / EAGLE-2 drafter") for a in contract.eagle_drafter_architectures
    ]
    assert len(cases) >= 3
    for n, (arch, algorithm, problem) in enumerate(cases):
        work = tmp_path / str(n)
        work.mkdir()
        root = _mla_root(work, architectures=[arch])
        code, report = _check(_mla_profile(algorithm), work, version, root)
        assert code == 1, (arch, report)
        assert any(problem in e["problem"] for e in _on(report, "errors", "drafter.algorithm"))


@VERSIONS
def test_a_drafter_of_another_algorithms_family_is_refused_naming_that_algorithm(
    tmp_path, version
):
    """Every MTP and block-drafter (DFLASH, DSPARK) class of the registry, given EAGLE3 or
    STANDALONE: an error naming the algorithm that loads it and the file that serves it; an
    architecture in no family, given EAGLE3, is an error naming the classes EAGLE3 takes."""
    from specserve.profile.algorithms import FROZEN_KV_MTP_DRAFTERS
    from specserve.upstream.contract import BLOCK_DRAFTER_KINDS

    contract = sglang_contract(version)
    cases = [(d, "MTP", "EAGLE / NEXTN") for d in contract.mtp_drafters]
    cases += [(d, kind, kind) for kind in BLOCK_DRAFTER_KINDS
              for d in contract.block_drafters[kind]]  # fmt: skip
    assert {k for _, k, _ in cases} == {"MTP", "DFLASH", "DSPARK"}, cases
    for n, (drafter, kind, loads) in enumerate(cases):
        for algorithm in ("EAGLE3", "STANDALONE"):
            work = tmp_path / f"{n}-{algorithm}"
            work.mkdir()
            root = _mla_root(work, architectures=[drafter.architecture])
            code, report = _check(_mla_profile(algorithm), work, version, root)
            assert code == 1, (drafter, report)
            [err] = _on(report, "errors", "drafter.algorithm")
            if drafter.architecture in FROZEN_KV_MTP_DRAFTERS:  # SGLang runs FROZEN_KV_MTP
                assert "FROZEN_KV_MTP" in err["fix"], err
                continue
            assert err["problem"] == (
                f"the drafter's config.json declares {drafter.architecture}, a {kind} drafter of "
                f"SGLang {version} ({drafter.module}), which {loads} loads, but the algorithm "
                f"is {algorithm}"
            ), err
            # Every family's algorithm is a profile choice: the fix names it.
            want = "set drafter.algorithm: " + ("EAGLE" if kind == "MTP" else kind)
            assert err["fix"] == want, err
    root = _mla_root(tmp_path / "plain", architectures=["LlamaForCausalLM"])
    code, report = _check(_mla_profile("EAGLE3"), tmp_path / "plain", version, root)
    assert code == 1, report
    [err] = _on(report, "errors", "drafter.algorithm")
    assert "none of the EAGLE-3 drafter classes" in err["problem"]
    assert all(a in err["fix"] for a in contract.eagle3_drafter_architectures), err


# --- 3. every way of turning decode CUDA graphs off --------------------------------------------

GRAPHS_OFF = {
    "disable-decode-flag": ["--disable-decode-cuda-graph"],
    "backend-disabled": ["--cuda-graph-backend-decode", "disabled"],
    "backend-disabled-equals": ["--cuda-graph-backend-decode=disabled"],
    "config-json": ["--cuda-graph-config", '{"decode": {"backend": "disabled"}}'],
    "config-json-over-flag": [
        "--cuda-graph-backend-decode",
        "full",
        "--cuda-graph-config",
        '{"decode": {"backend": "disabled"}}',
    ],
}


@VERSIONS
@pytest.mark.parametrize("args", GRAPHS_OFF.values(), ids=GRAPHS_OFF.keys())
def test_decode_graphs_off_is_refused_unless_allowed(tmp_path, version, args):
    doc = kimi_doc()
    doc["server"]["extra_args"] = args
    code, report = _check(doc, tmp_path, version)
    assert code == 1, report
    errs = [e for e in report["errors"] if "decode CUDA graphs would be disabled" in e["problem"]]
    assert errs and errs[0]["field"].startswith("server.extra_args["), report
    assert "allow_disable_cuda_graph: true" in errs[0]["fix"]
    doc["server"]["allow_disable_cuda_graph"] = True
    code, report = _check(doc, tmp_path, version)
    assert code == 0, report
    assert any("decode CUDA graphs are disabled" in w["problem"] for w in report["warnings"])


@VERSIONS
@pytest.mark.parametrize(
    "args",
    [
        ["--disable-decode-cuda-graph", "--cuda-graph-backend-decode", "full"],
        ["--disable-decode-cuda-graph", "--cuda-graph-config", '{"decode": {"backend": "full"}}'],
        ["--cuda-graph-config", '{"prefill": {"backend": "disabled"}}'],
        ["--cuda-graph-backend-decode", "breakable"],
    ],
    ids=["flag-overridden", "json-overridden", "prefill-only", "breakable"],
)
def test_decode_graphs_on_as_sglang_resolves_them(tmp_path, version, args):
    # cuda_graph_hook.parse_cuda_graph_config: JSON > per-phase backend > disable flags.
    doc = kimi_doc()
    doc["server"]["extra_args"] = args
    code, report = _check(doc, tmp_path, version)
    assert code == 0, report


@pytest.mark.parametrize(
    ("version", "value", "valid"),
    [
        ("0.5.21", "none", "full, breakable, tc_piecewise, disabled"),
        ("0.5.21", "off", "full, breakable, tc_piecewise, disabled"),
        ("0.5.23", "none", "full, breakable, disabled"),
        ("0.5.23", "tc_piecewise", "full, breakable, disabled"),
    ],
)
def test_invalid_graph_backend_names_the_versions_choices(tmp_path, version, value, valid):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--cuda-graph-backend-decode", value]
    code, report = _check(doc, tmp_path, version)
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert f"{value!r} is not a choice of SGLang {version}" in err["problem"]
    assert err["fix"] == f"use one of: {valid}"


def test_tc_piecewise_is_a_choice_of_0521_only(tmp_path):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--cuda-graph-backend-decode", "tc_piecewise"]
    assert _check(doc, tmp_path, "0.5.21")[0] == 0


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("{decode: x}", "is not JSON"),
        ('["decode"]', "must be a JSON object"),
        ('{"verify": {}}', "unknown phase 'verify'"),
        ('{"decode": {"backend": "off"}}', "backend 'off' is not allowed"),
    ],
)
def test_malformed_cuda_graph_config_is_refused(tmp_path, raw, problem):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--cuda-graph-config", raw]
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 1
    assert any(problem in e["problem"] for e in _on(report, "errors", "server.extra_args[0]"))


def test_graph_flags_conflicting_with_disable_cuda_graph_are_refused(tmp_path):
    doc = kimi_doc()
    doc["server"].update(
        disable_cuda_graph=True,
        allow_disable_cuda_graph=True,
        extra_args=["--cuda-graph-backend-decode", "full"],
    )
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert "while server.disable_cuda_graph is true" in err["problem"]


# --- 4. max_running_requests -------------------------------------------------------------------


@VERSIONS
def test_unset_max_running_requests_with_speculation_warns(tmp_path, version):
    doc = kimi_doc()
    del doc["server"]["max_running_requests"]
    code, report = _check(doc, tmp_path, version)
    assert code == 0
    [warn] = _on(report, "warnings", "server.max_running_requests")
    assert f"SGLang {version} then caps running requests at 48" in warn["problem"]
    assert "set server.max_running_requests explicitly" in warn["fix"]
    assert sglang_contract(version).eagle_max_running_requests_cap == 48


def test_no_cap_warning_without_speculation(tmp_path):
    doc = kimi_doc()
    del doc["server"]["max_running_requests"]
    del doc["drafter"]
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    # Only the graph coverage speaks of the uncapped server (tests/profile/test_graph_coverage.py).
    capped = [w for w in _on(report, "warnings", "server.max_running_requests")
              if "captured as a CUDA graph" not in w["problem"]]  # fmt: skip
    assert code == 0 and not capped


def test_max_running_requests_is_rendered_and_validated(tmp_path):
    doc = kimi_doc()
    doc["server"]["max_running_requests"] = 32
    argv = _argv(doc, tmp_path, PINNED_VERSION)
    assert argv[argv.index("--max-running-requests") + 1] == "32"
    doc["server"]["max_running_requests"] = 0
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 1 and _on(report, "errors", "server.max_running_requests")


def test_every_shipped_speculative_profile_sets_max_running_requests():
    for path in SHIPPED:
        profile = load_profile(path)
        if profile.speculative is not None:
            assert profile.server.max_running_requests == 48, path


# --- 5. --num-continuous-decode-steps has no effect --------------------------------------------


@VERSIONS
def test_num_continuous_decode_steps_warns_it_has_no_effect(tmp_path, version):
    doc = kimi_doc()
    doc["server"]["num_continuous_decode_steps"] = 4
    code, report = _check(doc, tmp_path, version)
    assert code == 0
    [warn] = _on(report, "warnings", "server.num_continuous_decode_steps")
    assert f"SGLang {version} declares --num-continuous-decode-steps but no code" in warn["problem"]
    assert warn["fix"] == "remove server.num_continuous_decode_steps from the profile"
    assert sglang_contract(version).facts["num_continuous_decode_steps_readers"] == []


def test_kimi_profile_no_longer_sets_the_no_op_flag():
    assert load_profile(KIMI).server.num_continuous_decode_steps is None
    assert "--num-continuous-decode-steps" not in render(load_profile(KIMI)).argv


# --- 6. per-version rendering and the option table of the targeted version ---------------------


def test_dp_attention_renders_per_version(tmp_path):
    doc = kimi_doc()
    doc["parallelism"].update(dp=2, enable_dp_attention=True)
    old = _argv(doc, tmp_path, "0.5.21")
    assert old[old.index("--dp-size") + 1] == "2" and "--enable-dp-attention" in old
    assert "--attn-dp-size" not in old
    new = _argv(doc, tmp_path, "0.5.23")
    assert new[new.index("--attn-dp-size") + 1] == "2"
    assert "--enable-dp-attention" not in new and "--dp-size" not in new


@pytest.mark.parametrize("flag", ["--cuda-graph-tc-compiler", "--speculative-skip-dp-mlp-sync"])
def test_flags_0523_removed_are_refused_there_only(tmp_path, flag):
    doc = kimi_doc()
    doc["server"]["extra_args"] = [flag, "eager"] if "compiler" in flag else [flag]
    code, report = _check(doc, tmp_path, "0.5.23")
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert f"{flag} is not an option of SGLang 0.5.23 (SGLang 0.5.21 has it)" in err["problem"]
    assert "--sglang-version 0.5.21" in err["fix"]
    code, report = _check(doc, tmp_path, "0.5.21")
    if "compiler" in flag:
        assert code == 0, report
        return
    # 0.5.21 has the flag, and refuses it at start for anything but EAGLE (speculative_hook.py).
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert "only supported with speculative_algorithm == EAGLE, got EAGLE3" in err["problem"]


@VERSIONS
def test_unknown_flag_is_refused_before_anything_stops(tmp_path, version):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--no-such-flag", "1"]
    code, report = _check(doc, tmp_path, version)
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert f"--no-such-flag is not an option of SGLang {version}" in err["problem"]
    path = write_doc(tmp_path, doc)
    code, out, err_text = run_cli("render", str(path), "--sglang-version", version)
    assert code == 1 and out == "" and "--no-such-flag" in err_text


@VERSIONS
@pytest.mark.parametrize(
    ("args", "longer"),
    [
        (["--cuda-graph-max-bs", "8"], "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
        (["--tp", "8"], "--tp-size"),
        (["--chunked-prefill", "4096"], "--chunked-prefill-size"),
    ],
    ids=["ambiguous", "owned-prefix", "unambiguous"],
)
def test_abbreviations_are_errors(tmp_path, version, args, longer):
    doc = kimi_doc()
    doc["server"]["extra_args"] = args
    code, report = _check(doc, tmp_path, version)
    assert code == 1
    [err] = _on(report, "errors", "server.extra_args[0]")
    assert "abbreviation of" in err["problem"] and longer in err["problem"]
    assert err["fix"] == "spell the option out in full"


def test_deprecated_extra_arg_warns(tmp_path):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--enable-flashinfer-allreduce-fusion"]
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 0
    [warn] = _on(report, "warnings", "server.extra_args[0]")
    assert "is deprecated in SGLang 0.5.21" in warn["problem"]


def test_a_real_non_owned_option_passes(tmp_path):
    doc = kimi_doc()
    doc["server"]["extra_args"] = [
        "--attention-backend",
        "flashinfer",
        "--chunked-prefill-size=4096",
    ]
    assert _check(doc, tmp_path, PINNED_VERSION)[0] == 0


def test_unverified_version_is_a_usage_error(tmp_path):
    code, out, err = run_cli("check", str(KIMI), "--sglang-version", "0.4.0")
    assert code == 2 and out == ""
    assert "SGLang 0.4.0 (from --sglang-version) is not a verified version" in err
    assert ", ".join(VERIFIED_VERSIONS) in err


def test_version_comes_from_the_image_env(tmp_path, monkeypatch):
    doc = kimi_doc()
    doc["parallelism"].update(dp=2, enable_dp_attention=True)
    path = write_doc(tmp_path, doc)
    monkeypatch.setenv("SPECSERVE_SGLANG_VERSION", "0.5.23")
    code, out, _ = run_cli("render", str(path), "--format", "argv")
    assert code == 0 and "--attn-dp-size\n" in out
    # The launcher (the image's entrypoint) reads the same variable, and its dry run ends with
    # that SGLang's own parser: 0.5.23's venv first on PATH is the image's python3.
    monkeypatch.setenv("PATH", f"{venv_python('0.5.23').parent}{os.pathsep}{os.environ['PATH']}")
    err = io.StringIO()
    with redirect_stderr(err):
        assert launch_main([str(path), "--dry-run"]) == 0, err.getvalue()
    assert "--attn-dp-size 2" in err.getvalue() and "SGLang 0.5.23" in err.getvalue()
    assert "SGLang 0.5.23's own parser accepts the command" in err.getvalue()
    monkeypatch.setenv("SPECSERVE_SGLANG_VERSION", "9.9")
    with redirect_stderr(io.StringIO()):
        assert launch_main([str(path), "--dry-run"]) == 2


# --- 7. algorithm names ------------------------------------------------------------------------


def test_lower_case_algorithm_is_accepted_and_rendered_canonical(tmp_path):
    doc = kimi_doc()
    doc["drafter"]["algorithm"] = "eagle3"
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 0, report
    argv = _argv(doc, tmp_path, PINNED_VERSION)
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("MEDUSA", "'MEDUSA' is not one of"),
        ("Eagle3", "mixes cases; write it EAGLE3"),
    ],
)
def test_unsupported_algorithm_is_refused_with_the_valid_list(tmp_path, value, problem):
    doc = kimi_doc()
    doc["drafter"]["algorithm"] = value
    code, report = _check(doc, tmp_path, PINNED_VERSION)
    assert code == 1
    [err] = _on(report, "errors", "drafter.algorithm")
    assert problem in err["problem"]
    assert err["fix"].startswith(
        "use one of: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK"
    )


def test_every_supported_algorithm_is_one_sglang_accepts():
    from specserve.profile.algorithms import SPECULATIVE_ALGORITHMS

    for version in VERIFIED_VERSIONS:
        contract = sglang_contract(version)
        assert contract.speculative_algorithm_case_insensitive
        assert set(SPECULATIVE_ALGORITHMS) <= contract.speculative_algorithms, version


# --- the real parser: what each field promises is what SGLang parses -----------------------


@VERSIONS
def test_sglang_parses_each_field_into_the_option_it_promises(tmp_path, version):
    from tests.contract.sglang_venv import parse_argvs

    dp = kimi_doc()
    dp["parallelism"].update(dp=2, enable_dp_attention=True)
    dp["server"].update(cuda_graph_max_bs=16, max_running_requests=32)
    off = kimi_doc()
    off["server"].update(disable_cuda_graph=True, allow_disable_cuda_graph=True)
    argvs = [_argv(d, tmp_path, version)[3:] for d in (dp, off)]
    argvs = [[a if a != "<from secret>" else "dummy-key-123" for a in v] for v in argvs]
    fields = [
        "cuda_graph_max_bs_decode",
        "max_running_requests",
        "dp_size",
        "attn_dp_size",
        "enable_dp_attention",
        "cuda_graph_backend_decode",
        "cuda_graph_backend_prefill",
        "disable_cuda_graph",
    ]
    dp_parsed, off_parsed = parse_argvs(version, argvs, fields)
    assert dp_parsed["ok"] and off_parsed["ok"], (dp_parsed, off_parsed)
    got = dp_parsed["fields"]
    assert got["cuda_graph_max_bs_decode"] == 16 and got["max_running_requests"] == 32
    if version == "0.5.21":
        assert got["dp_size"] == 2 and got["enable_dp_attention"] is True
    else:  # the 0.5.23 spelling, what its handle_deprecated_dp_attention turns the old one into
        assert got["attn_dp_size"] == 2 and got["dp_size"] == 1
    assert not off_parsed["warnings"] or all(
        "deprecated" not in w for w in off_parsed["warnings"]
    ), off_parsed["warnings"]
    got = off_parsed["fields"]
    assert got["cuda_graph_backend_decode"] == got["cuda_graph_backend_prefill"] == "disabled"


@VERSIONS
def test_decode_graph_precedence_is_sglangs(version):
    # checks/graphs.py ranks the switches as SGLang's parse_cuda_graph_config applies them (each
    # later one overwrites the decode backend): legacy flag, disable flag, backend flag, JSON.
    # Read from that version's own source, so a reordering upstream fails here.
    import ast

    from tests.contract.sglang_venv import venv_python

    lib = venv_python(version).parent.parent / "lib"
    [hook] = lib.glob("python3*/site-packages/sglang/srt/arg_groups/cuda_graph_hook.py")
    tree = ast.parse(hook.read_text(encoding="utf-8"))
    [func] = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "parse_cuda_graph_config"
    ]
    source = ast.get_source_segment(hook.read_text(encoding="utf-8"), func) or ""
    marks = [
        "if cfg.disable_cuda_graph:",
        "if cfg.disable_decode_cuda_graph:",
        "if cfg.cuda_graph_backend_decode is not None:",
        "for phase, phase_config in explicit_input.items():",
    ]
    positions = [source.find(m) for m in marks]
    assert -1 not in positions, (version, dict(zip(marks, positions, strict=True)))
    assert positions == sorted(positions), (version, positions)
