"""`check` refuses what SGLang refuses at start and sees decode graphs go off where SGLang does,
for every option of every verified version (tests/contract/resolution_sweep.py says how).

Per version, over every probe on every base:
- SGLang refuses it -> one of check's rules (checks/startup.py) fires with SGLang's words, or the
  refusal is in startup_not_covered.py with its reason; a version that adds a refusal fails here
  until one of the two says it;
- SGLang accepts it -> no rule fires (no false refusal), and check's decode-graph state
  (checks/graphs.py) is SGLang's: a version that adds a way to turn decode graphs off fails
  here, naming the option;
- every rule and every graph hook is seen doing its job against SGLang at least once, and every
  rule's `passes` example (the requirement met) is accepted by both.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from specserve.profile.argview import profile_view
from specserve.profile.checks.graphs import GRAPHS_OFF, graphs_off
from specserve.profile.checks.startup import REFUSALS, Refusal
from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract import resolution_sweep as rs
from tests.contract.rendered_sources import ROOT
from tests.contract.sglang_venv import run_script
from tests.contract.startup_not_covered import KINDS, NOT_COVERED, not_covered

DOCS = ROOT / "docs" / "sglang-contract.md"


def _lines(problems: Iterable[str], limit: int = 25) -> str:
    problems = list(problems)
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return "\n  " + "\n  ".join(problems[:limit]) + more


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglang_refuses_nothing_check_does_not_know(version: str) -> None:
    problems = []
    for case in rs.sweep(version).values():
        if not case.refused or rs.covered_by(case) or not_covered(case.words[0], case.error):
            continue
        said = f"; check says: {[h.words for h in case.hits]}" if case.hits else ""
        problems.append(
            f"{case.name}: SGLang {version} refuses at {case.sglang['stage']} "
            f"({case.sglang.get('raised_at') or 'the parser'}): {case.error[:300]}{said}"
        )
    assert not problems, (
        "refusals check neither makes (specserve/profile/checks/startup.py REFUSALS) nor lists "
        "with a reason (tests/contract/startup_not_covered.py):" + _lines(problems)
    )


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_refuses_nothing_sglang_accepts(version: str) -> None:
    problems = [
        f"{case.name}: check refuses ({'; '.join(h.words or h.rule.says or '' for h in case.hits)})"
        " but SGLang resolves it"
        for case in rs.sweep(version).values()
        if not case.refused and case.hits
    ]
    assert not problems, _lines(problems)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_decode_graph_state_is_the_one_sglang_resolves(version: str) -> None:
    problems = []
    for case in rs.sweep(version).values():
        if case.refused or case.graph_off == case.sglang["decode_graph_off"]:
            continue
        if case.sglang["decode_graph_off"]:
            problems.append(
                f"{case.name}: SGLang {version} turns decode CUDA graphs off "
                f"(decode backend {case.sglang['decode_backend']}); checks/graphs.py GRAPHS_OFF "
                "does not name it"
            )
        else:
            problems.append(f"{case.name}: check says decode graphs off ({case.graph_how}), "
                            f"SGLang {version} keeps them")  # fmt: skip
    assert not problems, _lines(problems)


def _applies(rule: Refusal, version: str) -> bool:
    if not any(o.dest == rule.dest for o in sglang_contract(version).options):
        return False
    key = tuple(int(p) for p in version.split("."))
    since = tuple(int(p) for p in rule.since.split(".")) if rule.since else key
    until = tuple(int(p) for p in rule.until.split(".")) if rule.until else key
    return since <= key <= until


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_every_rule_is_seen_refusing_with_sglangs_words(version: str) -> None:
    seen = {id(h.rule) for case in rs.sweep(version).values() for h in rs.covered_by(case)}
    unseen = [
        f"{rule.dest}: {rule.words if isinstance(rule.words, str) else rule.trigger}"
        for rule in REFUSALS
        if _applies(rule, version) and id(rule) not in seen
    ]
    assert not unseen, (
        f"rules no refusal of SGLang {version} matched (wrong words, or a condition SGLang does "
        "not have): " + _lines(unseen)
    )


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_a_rule_whose_requirement_is_met_is_quiet(version: str) -> None:
    checked, problems = 0, []
    for rule in REFUSALS:
        words = rule.trigger + rule.passes
        if not rule.passes or not _applies(rule, version) or not rs.fits(version, words):
            continue
        for base in rs.EXAMPLE_BASES:
            case = rs.sweep(version)[(base, words)]
            checked += 1
            if any(h.rule is rule for h in case.hits):
                problems.append(f"{case.name}: check still refuses")
            view = profile_view(rs.profile_with(base, words), sglang_contract(version))
            assert view is not None
            if case.refused and rs.matches(rule.text(view), case.error):
                problems.append(f"{case.name}: SGLang still refuses: {case.error[:200]}")
    assert checked >= 4 and not problems, _lines(problems)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_every_graph_hook_is_seen_turning_decode_graphs_off(version: str) -> None:
    contract = sglang_contract(version)
    seen: set[int] = set()
    for case in rs.sweep(version).values():
        if case.refused or not case.sglang["decode_graph_off"]:
            continue
        view = profile_view(rs.profile_with(case.base, case.words), contract)
        assert view is not None
        seen |= {id(g) for g in graphs_off(view)}
    unseen = [g.says for g in GRAPHS_OFF if id(g) not in seen]
    assert not unseen, f"SGLang {version} never turned decode graphs off for: {unseen}"


def test_the_named_cases_of_issue_27_are_refused_or_flagged() -> None:
    # The five graph switch-offs and three refusals the issue found, on every version with them.
    for version in VERIFIED_VERSIONS:
        sweep = rs.sweep(version)
        for words in (
            ("--attention-backend", "torch_native"),
            ("--debug-tensor-dump-output-folder", rs.PROBE_TEXT),
            ("--msprobe-dump-config", rs.PROBE_TEXT),
            ("--moe-a2a-backend", "deepep", "--deepep-mode", "normal"),
            ("--enable-mis", "--attention-backend", "flashinfer"),
        ):
            case = sweep[("kimi-eagle3", words)]
            assert not case.refused and case.sglang["decode_graph_off"], (version, case.name)
            assert case.graph_off, (version, case.name)
        for base, words in (
            ("kimi-eagle3", ("--attention-backend", "flex_attention")),
            ("llama", ("--enable-mis",)),
        ):
            case = sweep[(base, words)]
            assert case.refused and rs.covered_by(case), (version, case.name, case.error)
    case = rs.sweep("0.5.23")[("kimi-eagle3", ("--enable-kv-cache-sharding",))]
    assert case.refused and rs.covered_by(case), case.error
    case = rs.sweep("0.5.23")[
        ("kimi-eagle3", ("--enable-kv-cache-sharding", "--disaggregation-mode", "prefill"))
    ]
    assert "speculative decoding only for GLM DSA" in case.error and rs.covered_by(case)


def test_every_not_covered_entry_explains_a_real_refusal() -> None:
    used: set[int] = set()
    for version in VERIFIED_VERSIONS:
        for case in rs.sweep(version).values():
            if case.refused and not rs.covered_by(case):
                entry = not_covered(case.words[0], case.error)
                if entry is not None:
                    used.add(id(entry))
    stale = [f"{n.flags}: {n.words}" for n in NOT_COVERED if id(n) not in used]
    assert not stale, f"entries no verified version refuses with (remove them): {stale}"
    assert {n.kind for n in NOT_COVERED} <= set(KINDS)


def _docs_table(heading: str) -> list[list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def test_the_docs_list_what_check_does_not_refuse_and_why() -> None:
    rows = _docs_table("### Refusals only the serving node decides")
    documented = {(r[0], r[1], r[2]) for r in rows}
    listed = {(", ".join(f"`{f}`" for f in n.flags), f"{n.words}", n.kind) for n in NOT_COVERED}
    assert documented == listed, (
        f"docs/sglang-contract.md lacks {sorted(listed - documented)[:5]}, has extra "
        f"{sorted(documented - listed)[:5]}"
    )


def test_the_docs_list_every_refusal_check_makes() -> None:
    rows = _docs_table("### Refusals check makes")
    documented = {(r[0].strip("`"), r[2].strip("`")) for r in rows}
    flags = {}
    for version in VERIFIED_VERSIONS:
        flags.update({o.dest: o.flags[0] for o in sglang_contract(version).options})
    made = {(flags[rule.dest], rule.hook) for rule in REFUSALS}
    assert documented == made, (sorted(made - documented)[:5], sorted(documented - made)[:5])


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_one_process_answers_as_one_fork_per_argv_would(version: str) -> None:
    # The sweep resolves every argv in one process (os.environ put back after each); the
    # refusals and switch-offs it finds are resolved again, each in a fresh fork.
    picked = [
        (key, c)
        for key, c in rs.sweep(version).items()
        if key[0] == "kimi-eagle3" and (c.refused or c.sglang.get("decode_graph_off"))
    ]
    argvs = [rs.sglang_argv(rs.profile_with(*key), version) for key, _ in picked]
    forked = run_script(version, "sweep_resolution.py", {"argvs": argvs, "isolate": "fork"})
    differ = [key for (key, c), f in zip(picked, forked, strict=True) if f != c.sglang]
    assert len(picked) > 30 and not differ, differ
