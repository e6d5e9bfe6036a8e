"""The contract tests' requests run in forks of one process that imported SGLang
(scripts/sglang/forkserver.py): each must behave as `python SCRIPT` would, in a fresh state."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve.upstream import PINNED_VERSION
from tests.contract.sglang_venv import ROOT, SCRIPTS, run_python, run_snippet

STATE = """
import json, os, sys
import sglang.srt.server_args as server_args
seen = [os.environ.get("SPECSERVE_FORKSERVER_PROBE"), getattr(server_args, "probe", None),
        "probe_module" in sys.modules]
os.environ["SPECSERVE_FORKSERVER_PROBE"] = "set"
server_args.probe = "set"
sys.modules["probe_module"] = server_args
print(json.dumps({"seen": seen, "argv": sys.argv, "stdin": json.load(sys.stdin)}))
"""


def test_no_request_sees_what_another_changed() -> None:
    first = run_snippet(PINNED_VERSION, STATE, {"n": 1})
    second = run_snippet(PINNED_VERSION, STATE, {"n": 2})
    assert first["seen"] == second["seen"] == [None, None, False]
    assert (first["stdin"], second["stdin"]) == ({"n": 1}, {"n": 2})
    assert first["argv"] == ["-c"]


def test_a_script_runs_as_main_with_its_own_directory_on_the_path() -> None:
    # resolve_argv.py imports its sibling parse_argv.py, as `python scripts/sglang/...` allows.
    results = run_python(PINNED_VERSION, [str(SCRIPTS / "resolve_argv.py")],
                         {"argvs": [["--model-path", "/nonexistent", "--device", "cpu"]]})
    assert len(results) == 1 and "ok" in results[0]


def test_sglang_writes_nothing_into_the_checkout() -> None:
    # SGLang's resolution creates a relative --debug-tensor-dump-output-folder in its working
    # directory: the sweep's probe value once appeared as ./specserve-probe in a CI checkout.
    folder = "specserve-forkserver-cwd-probe"
    results = run_python(PINNED_VERSION, [str(SCRIPTS / "resolve_argv.py")], {"argvs": [[
        "--model-path", "/nonexistent", "--device", "cpu",
        "--debug-tensor-dump-output-folder", folder]]})
    cwd = run_snippet(PINNED_VERSION, "import json, os; print(json.dumps(os.getcwd()))")
    assert len(results) == 1 and "ok" in results[0]
    assert not (ROOT / folder).exists()
    assert not Path(cwd).resolve().is_relative_to(ROOT), cwd


@pytest.mark.parametrize(("code", "expected"), [
    ("import sys; sys.exit(3)", "exited 3"),
    ("raise ValueError('boom')", "ValueError: boom"),
    ("print('not json')", "no JSON on stdout"),
])
def test_a_failing_request_fails_the_test_with_its_status_and_output(code: str,
                                                                      expected: str) -> None:
    with pytest.raises(pytest.fail.Exception, match=expected):
        run_snippet(PINNED_VERSION, code)
