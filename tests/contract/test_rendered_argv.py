"""Every argv the product can render parses with SGLang's real `prepare_server_args`.

For every verified SGLang version and every source in tests/contract/rendered_sources.py
(shipped profiles, chart CI values, the default tuning grid, the baseline's no-drafter variant,
the docs' examples). Parametrized by (source, version) so a failure names both. All argvs of a
version go through one subprocess in that version's venv (tests/contract/sglang_venv.py).

Only parsing runs here; test_resolved_argv.py runs SGLang's resolution (`ServerArgs.resolve_once`)
on the same argvs, and docs/sglang-contract.md lists what only a GPU node checks.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.rendered_sources import Source, all_sources
from tests.contract.sglang_venv import parse_argvs

SOURCES: list[Source] = all_sources()
CASES = [(s, v) for v in VERIFIED_VERSIONS for s in SOURCES]
IDS = [f"{s.name}@{v}" for s, v in CASES]


@cache
def rendered(version: str) -> dict[str, list[str] | str]:
    """Each source's argv for `version`, or the exception its rendering raised (as text)."""
    out: dict[str, list[str] | str] = {}
    for source in SOURCES:
        try:
            out[source.name] = source.argv(version)
        except Exception as exc:  # a source that cannot render fails its own case only
            out[source.name] = f"{type(exc).__name__}: {exc}"
    return out


@cache
def parsed(version: str) -> dict[str, dict[str, Any]]:
    argvs = {name: argv for name, argv in rendered(version).items() if isinstance(argv, list)}
    results = parse_argvs(version, list(argvs.values()))
    return dict(zip(argvs, results, strict=True))


def argv_of(source: Source, version: str) -> list[str]:
    argv = rendered(version)[source.name]
    if isinstance(argv, str):
        pytest.fail(f"{source.name}: the product cannot render it for SGLang {version}: {argv}")
    return argv


def test_there_is_something_to_check() -> None:
    kinds = {s.name.split(":", 1)[0] for s in SOURCES}
    assert kinds == {"profile", "chart", "tune", "baseline", "docs"}, kinds
    assert sum(s.name.startswith("tune:") for s in SOURCES) >= 10


@pytest.mark.parametrize(("source", "version"), CASES, ids=IDS)
def test_sglang_parses_the_rendered_argv(source: Source, version: str) -> None:
    argv = argv_of(source, version)
    result = parsed(version)[source.name]
    assert result["ok"], (
        f"{source.name}: SGLang {version}'s prepare_server_args rejects the rendered argv "
        f"(exit {result.get('exit_code')}): {result.get('error')}\n  argv: {' '.join(argv)}"
    )


@pytest.mark.parametrize(("source", "version"), CASES, ids=IDS)
def test_rendered_argv_uses_exact_non_deprecated_flags(source: Source, version: str) -> None:
    # SGLang's parser accepts unambiguous abbreviations; the product must spell flags exactly,
    # so a flag added upstream cannot silently change what an abbreviation means. And a flag
    # SGLang marks deprecated will go: the product must render its replacement.
    contract = sglang_contract(version)
    problems = []
    for token in argv_of(source, version):
        if not token.startswith("--"):
            continue
        option = contract.option(token)
        if option is None:
            problems.append(f"{token}: not an exact SGLang {version} flag")
        elif option.deprecated:
            problems.append(f"{token}: deprecated in SGLang {version} ({option.help})")
    assert not problems, f"{source.name}: " + "; ".join(problems)
