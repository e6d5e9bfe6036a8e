"""Every option of SGLang's table, resolved by SGLang and judged by `check`, on shipped profiles.

For each verified version, every option of its table (`specserve.upstream`, held to the real
parser by test_upstream_data.py) becomes a probe: a flag alone, each choice but the default, or
one value of its type (`probe_words`). Each probe is appended to `server.extra_args` of three
bases: the Llama profile without speculation, the same with its EAGLE-3 tree (top-k 8) and the
Kimi-K2.5 profile (EAGLE-3 chain, MLA, tp 8). The argv `render` writes for each is resolved with
SGLang's real `prepare_server_args` + `resolve_once()` + `check_server_args()` on this CPU
(scripts/sglang/sweep_resolution.py, `cpu_argv`), and judged by the product: the start-time
refusals of checks/startup.py and the decode-graph state of checks/graphs.py, on the same
profile. The rules' own examples (`trigger`, `passes`) and the graph examples below run with them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from specserve.profile.argview import profile_view
from specserve.profile.checks.graphs import DISABLED, resolve_decode_graph
from specserve.profile.checks.startup import REFUSALS, Hit, start_refusals
from specserve.profile.flags import OWNED_FLAGS
from specserve.profile.model import Profile, profile_from_document
from specserve.profile.render import API_KEY_PLACEHOLDER, render_argv
from specserve.profile.schema import schema_issues
from specserve.upstream import Option, sglang_contract
from tests.contract.rendered_sources import DUMMY_API_KEY, ROOT
from tests.contract.sglang_venv import run_script
from tests.contract.test_resolved_argv import cpu_argv

LLAMA = ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml"
KIMI = ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
BASES: tuple[str, ...] = ("llama", "llama-eagle3", "kimi-eagle3")
# The examples also run on Kimi-K2.5 without speculation (tp 8: what --dwdp-size 8 needs).
EXAMPLE_BASES: tuple[str, ...] = (*BASES, "kimi")
# --device is what this host rewrites (cpu_argv); the others the parser or the launcher own.
NOT_PROBED = frozenset({"--device"})
PROBE_TEXT = "specserve-probe"

# Options that turn decode graphs off only together, or only with a value the probes do not
# write: each is resolved on every base, with an explicit decode backend where SGLang may keep it.
GRAPH_EXAMPLES: tuple[tuple[str, ...], ...] = (
    ("--moe-a2a-backend", "deepep", "--deepep-mode", "normal"),
    ("--moe-a2a-backend", "deepep", "--deepep-mode", "low_latency"),
    ("--attention-backend", "torch_native", "--cuda-graph-backend-decode", "full"),
    ("--disaggregation-mode", "prefill", "--cuda-graph-backend-decode", "full"),
    ("--prefill-attention-backend", "torch_native", "--decode-attention-backend", "torch_native"),
    ("--enable-mis", "--attention-backend", "flashinfer"),
    ("--dwdp-size", "8"),
    ("--debug-tensor-dump-output-folder", "/tmp/specserve-dump", "--cuda-graph-backend-decode",
     "full"),
)  # fmt: skip


def _doc(base: str) -> dict[str, Any]:
    path = KIMI if base.startswith("kimi") else LLAMA
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(path.read_text(encoding="utf-8")))
    if base in ("llama", "kimi"):
        doc["drafter"] = None
    return doc


@cache
def _checked_doc(base: str) -> dict[str, Any]:
    doc = _doc(base)
    assert not schema_issues(doc), (base, schema_issues(doc))
    return doc


def profile_with(base: str, words: tuple[str, ...]) -> Profile:
    doc = copy.deepcopy(_checked_doc(base))
    server = doc.setdefault("server", {})
    server["extra_args"] = [*(server.get("extra_args") or []), *words]
    return profile_from_document(doc, KIMI if base.startswith("kimi") else LLAMA)


def sglang_argv(profile: Profile, version: str) -> list[str]:
    """The flags `render` writes for `profile`, as this CPU host resolves them."""
    argv = render_argv(profile, version)[len(profile.server.launch_command) :]
    argv = [DUMMY_API_KEY if word == API_KEY_PLACEHOLDER else word for word in argv]
    return cpu_argv(argv)


def _value(option: Option) -> str:
    if option.type_name in ("int", "human_readable_int"):
        default = option.default
        plain = isinstance(default, int) and not isinstance(default, bool)
        return str(default + 1) if plain else "2"
    if option.type_name == "float":
        default = option.default
        plain = isinstance(default, (int, float)) and not isinstance(default, bool) and default
        return str(default * 0.5) if plain else "0.5"
    if option.type_name in ("loads", "parse_cuda_graph_config_arg"):
        return "{}"
    if option.type_name == "json_list_type":
        return "[]"
    return PROBE_TEXT


def probe_words(option: Option) -> list[tuple[str, ...]]:
    """What a probe of `option` writes: the flag alone, each choice but the default, or one
    value of the option's type."""
    flag = option.flags[0]
    if not option.takes_value:
        words = [(flag,)]
        if option.action == "boolean_optional":
            words += [(f,) for f in option.flags[1:] if f.startswith("--no-")]
        return words
    if option.choices:
        return [(flag, str(c)) for c in option.choices if c != option.default]
    return [(flag, _value(option))]


@cache
def probes(version: str) -> tuple[tuple[str, ...], ...]:
    found: list[tuple[str, ...]] = []
    for option in sglang_contract(version).options:
        if any(f in OWNED_FLAGS or f in NOT_PROBED for f in option.flags):
            continue
        if option.action in ("help", "version"):
            continue
        found += probe_words(option)
    return tuple(found)


def fits(version: str, words: tuple[str, ...]) -> bool:
    """Whether every flag of `words` is an option of `version`, with a value it offers."""
    contract = sglang_contract(version)
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        option = contract.option(word)
        if option is None:
            return False
        offered = [str(c) for c in option.choices or ()]
        if offered and option.takes_value and i + 1 < len(words) and words[i + 1] not in offered:
            return False
    return True


def rule_examples(version: str) -> list[tuple[str, ...]]:
    examples = []
    for rule in REFUSALS:
        for words in (rule.trigger, rule.trigger + rule.passes if rule.passes else ()):
            if words and fits(version, words):
                examples.append(words)
    return examples


@cache
def cases(version: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(base, extra_args words) of every case of `version`, each once."""
    examples = [w for w in (*rule_examples(version), *GRAPH_EXAMPLES) if fits(version, w)]
    found = dict.fromkeys((base, w) for base in BASES for w in probes(version))
    found.update(dict.fromkeys((base, w) for base in EXAMPLE_BASES for w in examples))
    return tuple(found)


@dataclass(frozen=True)
class Case:
    base: str
    words: tuple[str, ...]
    sglang: dict[str, Any]  # scripts/sglang/sweep_resolution.py's result
    hits: tuple[Hit, ...]  # check's start-time refusals
    graph_off: bool  # check's decode-graph verdict
    graph_how: str

    @property
    def name(self) -> str:
        return f"{self.base} + {' '.join(self.words)}"

    @property
    def refused(self) -> bool:
        return not self.sglang["ok"]

    @property
    def error(self) -> str:
        return str(self.sglang.get("error", ""))


def matches(words: str, error: str) -> bool:
    """Whether SGLang's error carries a rule's words ("" = a bare assertion, no message)."""
    if not words:
        return error.strip() == "AssertionError:"
    return words in error


def covered_by(case: Case) -> list[Hit]:
    return [h for h in case.hits if matches(h.words, case.error)]


@cache
def sweep(version: str) -> dict[tuple[str, tuple[str, ...]], Case]:
    contract = sglang_contract(version)
    profiles = {key: profile_with(*key) for key in cases(version)}
    argvs = [sglang_argv(p, version) for p in profiles.values()]
    results = run_script(version, "sweep_resolution.py", {"argvs": argvs, "isolate": "process"})
    assert len(results) == len(argvs)
    out = {}
    for (key, profile), result in zip(profiles.items(), results, strict=True):
        view = profile_view(profile, contract)
        assert view is not None, key
        state, _ = resolve_decode_graph(profile, contract)
        out[key] = Case(
            key[0],
            key[1],
            result,
            tuple(start_refusals(view)),
            state.backend == DISABLED,
            state.how,
        )
    return out
