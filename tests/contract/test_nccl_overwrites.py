"""Which NCCL variables SGLang replaces at startup, held to SGLang's own statements.

`specserve check` warns that an `nccl.overrides` value has no effect only where SGLang's
`engine._set_envs_and_config` writes over it (specserve.profile.nccl.SGLANG_OVERWRITES). The
engine module cannot be imported on this CPU host (uvloop, opentelemetry), so the test runs the
function's own statements that set NCCL variables: every statement of `_set_envs_and_config`
before the first one that sets CUDA_DEVICE_MAX_CONNECTIONS, taken from the installed file of
each verified version, with SGLang's real `resolving_view`, `envs` and the parsed `ServerArgs`,
and `os.environ` replaced by the case's environment. Parsed, not resolved: on this CPU host
resolution turns `--enable-symm-mem` off (`platform_hook._handle_symm_mem_device_support`), which
it does not on a CUDA node. `is_mnnvl_fabric_device` is False (no
multi-node NVLink fabric here; that branch only uses setdefault, so a set value stands anyway).
"""

from __future__ import annotations

from functools import cache
from itertools import product

import pytest

from specserve.profile.nccl import SGLANG_OVERWRITE_VALUE, SGLANG_OVERWRITES, sglang_overwrites
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import run_snippet
from tests.contract.test_resolved_argv import FIXTURES

RUN_NCCL_STATEMENTS = r"""
import ast, contextlib, importlib.util, io, json, sys, types
from pathlib import Path
from sglang.srt.arg_groups.overrides import resolving_view
from sglang.srt.environ import envs
from sglang.srt.server_args import prepare_server_args

source_path = Path(importlib.util.find_spec("sglang").origin).parent / "srt/entrypoints/engine.py"
source = source_path.read_text()
[function] = [n for n in ast.walk(ast.parse(source))
              if isinstance(n, ast.FunctionDef) and n.name == "_set_envs_and_config"]
statements = []
for statement in function.body:
    if "CUDA_DEVICE_MAX_CONNECTIONS" in ast.get_source_segment(source, statement):
        break
    statements.append(statement)
code = compile(ast.Module(body=statements, type_ignores=[]), str(source_path), "exec")
out = []
for environ, argv in json.load(sys.stdin):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        server_args = prepare_server_args(argv)
    names = {"os": types.SimpleNamespace(environ=dict(environ)), "server_args": server_args,
             "resolving_view": resolving_view, "envs": envs,
             "is_mnnvl_fabric_device": lambda: False, "logger": types.SimpleNamespace(
                 info=lambda *a, **k: None, warning=lambda *a, **k: None)}
    exec(code, names)
    out.append(names["os"].environ)
print(json.dumps(out))
"""

VARIABLES = sorted(SGLANG_OVERWRITES)
FLAGS = sorted({flag for flags in SGLANG_OVERWRITES.values() for flag in flags})
# Each variable unset, "0" or "1", under no flag or one of the flags.
CASES = [
    (dict(zip(VARIABLES, values, strict=True)), flag)
    for values in product((None, "0", "1"), repeat=len(VARIABLES))
    for flag in (None, *FLAGS)
]


def _argv(flag: str | None) -> list[str]:
    argv = ["--model-path", str(FIXTURES / "Llama-3.1-8B-Instruct"), "--device", "cpu"]
    return argv + ([flag] if flag else [])


@cache
def _sglang_environ(version: str) -> list[dict[str, str]]:
    payload = [
        [{k: v for k, v in env.items() if v is not None}, _argv(flag)] for env, flag in CASES
    ]
    return run_snippet(version, RUN_NCCL_STATEMENTS, payload)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglang_replaces_a_set_value_exactly_where_check_says(version: str) -> None:
    wrong = []
    for (env, flag), after in zip(CASES, _sglang_environ(version), strict=True):
        claimed = sglang_overwrites({flag} if flag else set())
        for name, value in env.items():
            if value is None:
                continue
            expected = SGLANG_OVERWRITE_VALUE if name in claimed else value
            if after.get(name) != expected:
                wrong.append(f"{name}={value} with {flag}: SGLang leaves {after.get(name)!r}, "
                             f"check expects {expected!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_unset_variable_is_written_by_sglang(version: str) -> None:
    # The other half of the rule: left unset, SGLang writes it (0 without the flags), which is
    # why the product's table is about set values only.
    for (env, flag), after in zip(CASES, _sglang_environ(version), strict=True):
        for name, value in env.items():
            if value is None:
                claimed = name in sglang_overwrites({flag} if flag else set())
                assert after.get(name) == ("1" if claimed else "0"), (name, flag, after)


def test_the_cases_overwrite_and_keep() -> None:
    # Both outcomes occur, so agreement is not vacuous.
    kinds = {bool(sglang_overwrites({f} if f else set())) for _, f in CASES}
    assert kinds == {True, False}
