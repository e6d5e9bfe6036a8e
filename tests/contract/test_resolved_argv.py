"""Every argv the product renders survives SGLang's own resolution, with the values it assumes.

test_rendered_argv.py proves SGLang's parser takes each argv; this runs what SGLang's launcher
runs next, `ServerArgs.resolve_once()` (sglang/srt/arg_groups/pipeline.py: defaults per model
and platform, then validation), for every verified version and the same sources (its collection
is imported, not copied), plus two variants per drafter profile that leave SGLang's defaults to
act: `unset-cap:` (no `--max-running-requests`) and `default-tree:` (no tree flags). All argvs of
a version resolve in one subprocess (scripts/sglang/resolve_argv.py).

Rewritten for this CPU host only where resolution needs it (`cpu_argv`): `--device cpu`, and a
model path that does not exist here pointing to the config-only fixture of the same name in
tests/fixtures/models/ (resolution reads config.json, never weights). tp/dp/ep stay as rendered:
resolution checks no device count (docs/sglang-contract.md, "What only a GPU node checks").

Asserted against SGLang's resolved values: the speculative algorithm; `max_running_requests`
(the profile's value, else the product's `speculative_running_cap` under speculation; the
baseline resolves to the speculative run's); the tree (the profile's, else the per-architecture
default of `specserve.upstream`, and the stand-in's resolution of the same argv); the decode
CUDA graph not disabled (and the stand-in agreeing).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.sglang import speculative_running_cap
from specserve.profile.tree import block_draft_tokens
from specserve.standin.args import parse_args as standin_parse_args
from specserve.tune.edit import profile_edit
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import (
    ROOT,
    _has_drafter,
    _profiles,
    _render_document,
)
from tests.contract.sglang_venv import resolve_argvs, run_script
from tests.contract.test_rendered_argv import SOURCES, rendered

FIXTURES = ROOT / "tests" / "fixtures" / "models"
PATH_FLAGS = ("--model-path", "--speculative-draft-model-path")
BLOCK_ALGORITHMS = ("DFLASH", "DSPARK")
BLOCK_FLAGS = ("--speculative-dflash-block-size", "--speculative-dspark-block-size")
TREE_FLAGS = (
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)
TREE_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def cpu_argv(argv: list[str]) -> list[str]:
    """`argv` as this CPU host can resolve it: `--device cpu` (cuda for a block drafter), absent
    model paths -> fixtures."""
    out = list(argv)
    for flag in PATH_FLAGS:
        if flag not in out:
            continue
        index = out.index(flag) + 1
        if Path(out[index], "config.json").is_file():
            # Absolute: SGLang runs outside the checkout (sglang_venv's fork server).
            out[index] = str(Path(out[index]).resolve())
            continue
        fixture = FIXTURES / Path(out[index]).name
        if not (fixture / "config.json").is_file():
            pytest.fail(
                f"{flag} {out[index]}: not here and no fixture {fixture.relative_to(ROOT)}; "
                "add its config.json there (tests/fixtures/models/README.md)"
            )
        out[index] = str(fixture)
    # A block drafter and UNO resolve as `--device cuda`: _handle_dflash / _handle_dspark /
    # _handle_uno refuse any other device before reading anything else, and resolution needs no
    # GPU for them.
    algorithm = out[out.index("--speculative-algorithm") + 1] if (
        "--speculative-algorithm" in out) else None  # fmt: skip
    device = "cuda" if str(algorithm).upper() in (*BLOCK_ALGORITHMS, "UNO") else "cpu"
    if "--device" in out:
        out[out.index("--device") + 1] = device
    else:
        out += ["--device", device]
    if "--mamba-radix-cache-strategy" not in out and _linear_attention_hybrid(out):
        # SGLang's default state-cache strategy for a hybrid target, extra_buffer, asserts a
        # GPU platform at resolution (mamba_hook: "extra_buffer requires platform support");
        # this host resolves the other one, which SGLang takes only without the overlap
        # scheduler ("no_buffer do not support overlap schedule"); every other word as rendered.
        out += ["--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"]
    return out


def _linear_attention_hybrid(argv: list[str]) -> bool:
    """Whether --model-path's config has linear-attention layers (Kimi-K3, Kimi-Linear)."""
    if "--model-path" not in argv:
        return False
    config = json.loads(Path(argv[argv.index("--model-path") + 1], "config.json").read_text())
    return "linear_attn_config" in config.get("text_config", config)


def _variant_doc(path: Path, drop: str) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    if drop == "cap":
        doc["server"].pop("max_running_requests", None)
    else:
        for key in ("num_steps", "eagle_topk", "num_draft_tokens"):
            doc["drafter"].pop(key, None)
    return doc


@cache
def variants(version: str) -> dict[str, list[str]]:
    """`unset-cap:` / `default-tree:` (+ their `baseline-` twins) of every drafter profile."""
    out: dict[str, list[str]] = {}
    for path in filter(_has_drafter, _profiles()):
        for drop, kind in (("cap", "unset-cap"), ("tree", "default-tree")):
            doc = _variant_doc(path, drop)
            out[f"{kind}:{path.name}"] = _render_document(doc, version, path.name)
            off = profile_edit(yaml.safe_dump(doc, sort_keys=False), "off")
            off_doc = yaml.safe_load(off)
            out[f"baseline-{kind}:{path.name}"] = _render_document(off_doc, version, path.name)
    return out


@cache
def argvs(version: str) -> dict[str, list[str]]:
    """name -> the rendered argv (not yet rewritten for the CPU) of every case of `version`."""
    out = {name: argv for name, argv in rendered(version).items() if isinstance(argv, list)}
    out.update(variants(version))
    return out


@cache
def resolved(version: str) -> dict[str, dict[str, Any]]:
    cases = argvs(version)
    results = resolve_argvs(version, [cpu_argv(a) for a in cases.values()])
    return dict(zip(cases, results, strict=True))


def flag_value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def target_architecture(argv: list[str]) -> str:
    import json

    config = Path(flag_value(cpu_argv(argv), "--model-path") or "", "config.json")
    return str(json.loads(config.read_text(encoding="utf-8"))["architectures"][0])


def result_of(name: str, version: str) -> dict[str, Any]:
    result = resolved(version)[name]
    if not result["ok"]:
        pytest.fail(
            f"{name}: SGLang {version} rejects the argv at {result['stage']}: {result['error']}\n"
            f"  argv (CPU form): {' '.join(cpu_argv(argvs(version)[name]))}",
            pytrace=False,
        )
    return result


NAMES = [s.name for s in SOURCES]
VARIANT_NAMES = [
    f"{kind}:{p.name}"
    for p in filter(_has_drafter, _profiles())
    for kind in ("unset-cap", "default-tree", "baseline-unset-cap", "baseline-default-tree")
]
CASES = [(n, v) for v in VERIFIED_VERSIONS for n in NAMES + VARIANT_NAMES]
IDS = [f"{n}@{v}" for n, v in CASES]


def test_variants_cover_every_drafter_profile() -> None:
    drafters = [p.name for p in filter(_has_drafter, _profiles())]
    assert len(drafters) >= 2, drafters
    for version in VERIFIED_VERSIONS:
        names = set(variants(version))
        for profile in drafters:
            assert f"unset-cap:{profile}" in names and f"default-tree:{profile}" in names
            # The variants really leave SGLang's defaults to act.
            assert "--max-running-requests" not in variants(version)[f"unset-cap:{profile}"]
            tree = variants(version)[f"default-tree:{profile}"]
            assert not any(f in tree for f in TREE_FLAGS), tree


@pytest.mark.parametrize(("name", "version"), CASES, ids=IDS)
def test_sglang_resolves_the_rendered_argv(name: str, version: str) -> None:
    result = result_of(name, version)
    argv = argvs(version)[name]
    got = result["resolved"]
    contract = sglang_contract(version)
    algorithm = flag_value(argv, "--speculative-algorithm")
    problems = []

    expected_algorithm = algorithm.upper() if algorithm else None
    if got["speculative_algorithm"] != expected_algorithm:
        problems.append(f"speculative_algorithm {got['speculative_algorithm']!r}")

    explicit_cap = flag_value(argv, "--max-running-requests")
    cap = int(explicit_cap) if explicit_cap else speculative_running_cap(contract, algorithm)
    if got["max_running_requests"] != cap:
        problems.append(f"max_running_requests {got['max_running_requests']!r}, product: {cap!r}")

    if algorithm:
        tree = tuple(got[f] for f in TREE_FIELDS)
        given = [flag_value(argv, f) for f in TREE_FLAGS]
        if algorithm.upper() in BLOCK_ALGORITHMS:
            # One step of top-k 1 whatever the argv says; the count as the product decides it.
            block = [flag_value(argv, f) for f in BLOCK_FLAGS]
            dflash, dspark, draft = (None if v is None else int(v) for v in (*block, given[2]))
            want = (1, 1, block_draft_tokens(algorithm.upper(), dflash, dspark, draft))
        elif all(v is not None for v in given):
            steps, topk, draft = (int(v) for v in given if v is not None)
            # top-k 1: SGLang sets draft tokens to steps + 1 (a chain); the stand-in does too.
            want = (steps, topk, steps + 1 if topk == 1 else draft)
        else:
            want = contract.default_tree(target_architecture(argv), algorithm)
        if tree != tuple(want):
            problems.append(f"tree (steps, topk, draft) {tree}, product: {tuple(want)}")

    # Every shipped argv serves decode from CUDA graphs (docs/profile.md); "disabled" would
    # mean eager decode, a silent throughput loss the exporter would not see.
    graph = result["decode_cuda_graph"]
    if got["disable_cuda_graph"] or graph is None or graph["backend"] == "disabled":
        problems.append(
            f"decode CUDA graph off: {graph}, disable_cuda_graph {got['disable_cuda_graph']}"
        )
    assert not problems, f"{name} on SGLang {version}: " + "; ".join(problems)


@pytest.mark.parametrize(("name", "version"), CASES, ids=IDS)
def test_the_standin_resolves_like_sglang(name: str, version: str) -> None:
    got = result_of(name, version)["resolved"]
    standin = standin_parse_args(cpu_argv(argvs(version)[name]), version)
    assert standin.max_running_requests == got["max_running_requests"], name
    tree = tuple(got[f] for f in TREE_FIELDS)
    if standin.spec is None:
        assert got["speculative_algorithm"] is None, name
    else:
        assert standin.spec.algorithm == got["speculative_algorithm"], name
        assert (standin.spec.num_steps, standin.spec.eagle_topk, standin.spec.num_draft_tokens) == (
            tree
        ), name
    graph = result_of(name, version)["decode_cuda_graph"]
    assert standin.decode_cuda_graph == (graph["backend"] != "disabled"), name


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_baseline_runs_as_many_requests_as_the_speculative_server(version: str) -> None:
    pairs = [(f"baseline:{p.name}", f"profile:{p.name}") for p in filter(_has_drafter, _profiles())]
    pairs += [
        (f"baseline-{kind}:{p.name}", f"{kind}:{p.name}")
        for p in filter(_has_drafter, _profiles())
        for kind in ("unset-cap", "default-tree")
    ]
    problems = []
    for baseline, speculative in pairs:
        base = result_of(baseline, version)["resolved"]
        spec = result_of(speculative, version)["resolved"]
        assert base["speculative_algorithm"] is None, baseline
        if base["max_running_requests"] != spec["max_running_requests"]:
            problems.append(
                f"{baseline}: {base['max_running_requests']} running requests, "
                f"{speculative}: {spec['max_running_requests']}"
            )
    assert not problems, "; ".join(problems)


def test_resolution_really_validates() -> None:
    # The oracle rejects what it must, through resolve_argv.py's error paths: a partial tree
    # (SGLang's resolution raises), DFLASH on a CPU (its device check), --help and an unknown
    # flag (the parser exits); and a bare EAGLE3 argv gets the 48 cap from resolution itself.
    version = VERIFIED_VERSIONS[0]
    llama = str(FIXTURES / "Llama-3.1-8B-Instruct")
    drafter = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")
    base = ["--model-path", llama, "--device", "cpu"]
    spec = [*base, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", drafter]
    dflash = [*base, "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter]
    results = run_script(
        version,
        "resolve_argv.py",
        [
            [*spec, "--speculative-num-steps", "3"],
            dflash,
            [*base, "--help"],
            [*base, "--no-such-flag"],
            spec,
        ],
    )
    partial, on_cpu, helped, unknown, ok = results
    assert not partial["ok"] and partial["stage"] == "resolve", partial
    assert not on_cpu["ok"] and on_cpu["stage"] == "resolve", on_cpu
    assert "device 'cpu'" in on_cpu["error"], on_cpu
    assert not helped["ok"] and helped["stage"] == "parse" and "--help" in helped["error"], helped
    assert not unknown["ok"] and unknown["exit_code"] == 2, unknown
    assert "--no-such-flag" in unknown["error"], unknown
    assert ok["ok"] and ok["resolved"]["max_running_requests"] == 48, ok
    assert ok["resolved"]["device"] == "cpu", ok
