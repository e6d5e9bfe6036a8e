"""Adaptive speculation (`--speculative-adaptive`) against SGLang's real code, every verified
version.

- specserve/adaptive.py's built-in config and step policy are SGLang's: `DEFAULT_ADAPTIVE_CONFIG`
  and the steps `AdaptiveSpeculativeParams` picks over random verify results, in its venv;
- the log lines the stand-in writes and the exporter reads are the ones SGLang's code formats
  (`AdaptiveSpeculativeParams` at start; `EAGLEWorkerV2.apply_runtime_state`'s message
  expression evaluated from its source: that module imports the scheduler, FastAPI and more than
  a CPU venv has);
- `specserve check` predicts what SGLang's resolution does with profiles that ask for adaptive
  (kept on, turned off with which warning, refused at start with which message), and the
  stand-in resolves the same argvs to the same steps, top-k, draft tokens and adaptive switch.
"""

from __future__ import annotations

import copy
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.adaptive import (
    DEFAULT_CONFIG,
    DISABLED_WARNING,
    INIT_LINE,
    INIT_MARKER,
    SWITCH_LINE,
    SWITCH_MARKER,
    SWITCH_PATTERN,
    StepPolicy,
    load_config,
)
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.model import profile_from_document
from specserve.profile.render import render_argv
from specserve.standin.args import ResolutionError
from specserve.standin.args import parse_args as standin_parse_args
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT
from tests.contract.sglang_venv import run_script, run_snippet
from tests.contract.test_resolved_argv import FIXTURES, cpu_argv

LLAMA = ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml"
FIELDS = [
    "speculative_algorithm",
    "speculative_adaptive",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
]
TRACE_CONFIG = FIXTURES.parent / "adaptive" / "trace-config.json"

SNIPPET = r"""
import ast, importlib.util, json, logging, sys, types
from sglang.srt.speculative import adaptive_spec_params as asp
req = json.load(sys.stdin)
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
def info(logger, msg):  # SGLang logs these on TP rank 0; here there is no process group
    logger.info(msg)
asp.log_info_on_rank0 = info
logging.getLogger(asp.__name__).addHandler(Keep())
logging.getLogger(asp.__name__).setLevel(logging.INFO)
traces = []
for case in req["traces"]:
    policy = asp.AdaptiveSpeculativeParams(case["initial_steps"], cfg_path=case["config"])
    steps = []
    for drafts, bs in case["feed"]:
        policy.on_verify_complete(drafts, bs)
        steps.append(policy.get_steps_for_batch(bs))
    traces.append(steps)
source = open(importlib.util.find_spec("sglang.srt.speculative.eagle_worker_v2").origin).read()
fn = next(n for n in ast.walk(ast.parse(source))
          if isinstance(n, ast.FunctionDef) and n.name == "apply_runtime_state")
call = next(n for n in ast.walk(fn) if isinstance(n, ast.Call)
            and getattr(n.func, "id", None) == "log_info_on_rank0")
switch = eval(compile(ast.Expression(call.args[1]), "apply_runtime_state", "eval"), {
    "self": types.SimpleNamespace(speculative_num_steps=3, speculative_num_draft_tokens=4),
    "state": types.SimpleNamespace(speculative_num_steps=1, speculative_num_draft_tokens=2),
})
print(json.dumps({"default_config": asp.DEFAULT_ADAPTIVE_CONFIG, "traces": traces,
                  "records": records, "switch": switch}))
"""


def _feed(seed: int, n: int = 400) -> list[tuple[list[int], int]]:
    """Random verify results: per-request accepted drafts (0..7) at batch sizes 1..80, in runs."""
    rng = random.Random(seed)
    feed: list[tuple[list[int], int]] = []
    while len(feed) < n:
        bs = rng.choice([1, 1, 2, 8, 12, 32, 64, 80])
        skill = rng.uniform(0.0, 7.0)
        for _ in range(rng.randint(5, 40)):
            feed.append(([min(7, max(0, round(rng.gauss(skill, 1.0)))) for _ in range(min(bs, 4))],
                         bs))  # fmt: skip
    return feed[:n]


TRACES: list[dict[str, Any]] = [
    {"config": None, "initial_steps": 3, "feed": _feed(1)},
    {"config": None, "initial_steps": 7, "feed": _feed(2)},
    {"config": str(TRACE_CONFIG), "initial_steps": 2, "feed": _feed(3)},
]


@cache
def upstream(version: str) -> dict[str, Any]:
    return run_snippet(version, SNIPPET, {"traces": TRACES})


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_built_in_config_is_sglangs(version: str) -> None:
    assert upstream(version)["default_config"] == DEFAULT_CONFIG


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_step_policy_picks_the_steps_sglang_picks(version: str) -> None:
    # The trace config sets every knob the policy reads (EMA, interval, warm-up, hysteresis,
    # ceiling) to non-defaults, so a knob the port ignored would change the trace.
    assert set(json.loads(TRACE_CONFIG.read_text())) >= {"ema_alpha", "warmup_batches", "1"}
    for case, theirs in zip(TRACES, upstream(version)["traces"], strict=True):
        policy = StepPolicy(case["initial_steps"], load_config(case["config"]))
        ours = []
        for drafts, bs in case["feed"]:
            policy.on_verify_complete(drafts, bs)
            ours.append(policy.steps_for_batch(bs))
        assert ours == theirs, case["config"]
        assert len(set(ours)) >= 3, "the trace moves the steps between several candidates"


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_log_lines_are_sglangs(version: str) -> None:
    got = upstream(version)
    init = INIT_LINE.format(steps=3, candidates=[1, 3, 5, 7])
    assert init in got["records"], got["records"]
    assert got["switch"] == SWITCH_LINE.format(
        old_steps=3, steps=1, old_draft_tokens=4, draft_tokens=2
    )
    # What the exporter looks for is in SGLang's own lines.
    assert init.encode().startswith(INIT_MARKER)
    assert got["switch"].encode().startswith(SWITCH_MARKER)
    match = SWITCH_PATTERN.search(got["switch"].encode())
    assert match is not None and match.groups() == (b"3", b"1", b"4", b"2")


# --- check and the stand-in against resolution ------------------------------------------------


def _llama(**drafter: Any) -> dict[str, Any]:
    doc = copy.deepcopy(yaml.safe_load(LLAMA.read_text(encoding="utf-8")))
    for key, value in drafter.items():
        if value is None:
            doc["drafter"].pop(key, None)
        else:
            doc["drafter"][key] = value
    return doc


NO_TREE = {"num_steps": None, "eagle_topk": None, "num_draft_tokens": None}
CASES: dict[str, dict[str, Any]] = {
    "tree unset": _llama(adaptive=True, **NO_TREE),
    "chain 5/1/6": _llama(adaptive=True, num_steps=5, eagle_topk=1, num_draft_tokens=6),
    "steps only": _llama(adaptive=True, num_steps=7, eagle_topk=None, num_draft_tokens=None),
    "top-k 8": _llama(adaptive=True),
    "steps 2 not a candidate": _llama(adaptive=True, num_steps=2, eagle_topk=1, num_draft_tokens=3),
    "STANDALONE": _llama(adaptive=True, algorithm="STANDALONE", **NO_TREE),
    # NGRAM: SGLang logs "speculative_adaptive disabled" and runs its static n-gram tree.
    "NGRAM": _llama(adaptive=True, algorithm="NGRAM", path=None, **NO_TREE),
    "config file": _llama(adaptive=True, adaptive_config=str(TRACE_CONFIG), **NO_TREE),
    "two-batch overlap": {
        **_llama(adaptive=True, **NO_TREE),
        "server": {"extra_args": ["--enable-two-batch-overlap"]},
    },
}


def _profile(doc: dict[str, Any]):
    return profile_from_document(doc, LLAMA)


def _argv(doc: dict[str, Any], version: str) -> list[str]:
    """The rendered flags (without the launch command) in the form this CPU host resolves."""
    profile = _profile(doc)
    return cpu_argv(render_argv(profile, version)[len(profile.server.launch_command) :])


@cache
def resolved(version: str) -> dict[str, dict[str, Any]]:
    argvs = [_argv(d, version) for d in CASES.values()]
    results = run_script(version, "resolve_argv.py", {"argvs": argvs, "fields": FIELDS})
    return dict(zip(CASES, results, strict=True))


def _adaptive_errors(doc: dict[str, Any], version: str) -> list[str]:
    issues = run_checks(_profile(doc), CheckOptions(sglang_version=version, configs_only=True))
    return [i.problem for i in issues if i.severity == "error" and i.field.startswith("drafter.")]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("name", CASES)
def test_check_says_what_sglang_resolution_does(name: str, version: str) -> None:
    result = resolved(version)[name]
    problems = _adaptive_errors(CASES[name], version)
    if not result["ok"]:
        # SGLang refuses to start: check refuses with SGLang's own message.
        assert result["stage"] == "resolve", result
        message = result["error"].partition(": ")[2].split(". ")[0]
        assert any(message in p for p in problems), (problems, result["error"])
        return
    got = result["resolved"]
    off = [w for w in result["warnings"] if w.startswith("speculative_adaptive disabled")]
    if got["speculative_adaptive"]:
        assert not off and problems == [], (problems, result)
        assert got["speculative_eagle_topk"] == 1
        assert got["speculative_num_draft_tokens"] == got["speculative_num_steps"] + 1
    else:
        # Turned off with a warning only: check makes it an error quoting SGLang's reason.
        assert len(off) == 1, result
        reason = off[0].removeprefix("speculative_adaptive disabled: ").partition(". Falling")[0]
        assert off[0] == DISABLED_WARNING.format(reason=reason)
        assert any(reason in p for p in problems), (problems, off)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_cases_cover_on_off_and_refused(version: str) -> None:
    results = resolved(version).values()
    assert sum(1 for r in results if not r["ok"]) == 1
    states = [r["resolved"]["speculative_adaptive"] for r in results if r["ok"]]
    assert states.count(True) >= 4 and states.count(False) >= 3, states
    # Left unset, the steps are the middle candidate (3 of 0, 1, 3, 5, 7), not Llama's 5/4/8.
    tree = resolved(version)["tree unset"]["resolved"]
    assert (tree["speculative_num_steps"], tree["speculative_eagle_topk"]) == (3, 1)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("name", CASES)
def test_the_standin_resolves_adaptive_like_sglang(name: str, version: str) -> None:
    result = resolved(version)[name]
    argv = _argv(CASES[name], version)
    if not result["ok"]:
        with pytest.raises(ResolutionError, match="not in the adaptive config candidate_steps"):
            standin_parse_args(argv, version)
        return
    got = result["resolved"]
    spec = standin_parse_args(argv, version).spec
    assert spec is not None
    assert (spec.num_steps, spec.eagle_topk, spec.num_draft_tokens, spec.adaptive) == (
        got["speculative_num_steps"],
        got["speculative_eagle_topk"],
        got["speculative_num_draft_tokens"],
        got["speculative_adaptive"],
    ), name


def test_the_trace_config_is_a_fixture() -> None:
    assert Path(TRACE_CONFIG).is_file()
