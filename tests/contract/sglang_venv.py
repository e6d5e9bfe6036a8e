"""Run code inside an SGLang venv (.sglang/<version>/) from the tests, JSON in and JSON out.

Importing SGLang costs 5-8 s of CPU (torch, transformers), so callers batch (one request handles
many argvs) and every request of a test worker runs in a fork of one process per version that
has imported SGLang once (scripts/sglang/forkserver.py): the same code as `python SCRIPT`, in
the state a fresh interpreter has after that import.
A missing venv FAILS the test (never skips) and names the command that creates it.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "sglang"
SETUP_HINT = "run bash scripts/setup/sglang.sh"
TIMEOUT_S = 300


def venv_root() -> Path:
    # The same override scripts/setup/sglang.sh reads.
    return Path(os.environ.get("SPECSERVE_SGLANG_VENVS", ROOT / ".sglang"))


def wanted_packages(version: str) -> set[str]:
    """What scripts/setup/sglang.sh installs for `version`: sglang itself, the pins that version
    declares differently (version_packages) and the shared venv_packages."""
    section = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))["sglang"]
    own = (section.get("version_packages") or {}).get(version) or []
    return {f"sglang=={version}", *own, *section["venv_packages"]}


def venv_python(version: str) -> Path:
    python = venv_root() / version / "bin" / "python"
    marker = venv_root() / version / ".specserve-packages"
    if not python.is_file() or not marker.is_file():
        pytest.fail(
            f"the SGLang {version} venv is missing or incomplete ({python.parent.parent}); "
            f"{SETUP_HINT}",
            pytrace=False,
        )
    # The marker lists the packages the venv was built with (then the Python version): a venv
    # of an older set fails in obscure imports (resolution needs torchvision, for one).
    built = {line for line in marker.read_text(encoding="utf-8").splitlines()}
    built = {line for line in built if line and not line.startswith("python ")}
    if built != wanted_packages(version):
        stale = sorted(built ^ wanted_packages(version))[:6]
        pytest.fail(
            f"the SGLang {version} venv ({python.parent.parent}) holds another package set than "
            f"versions.yaml sglang.venv_packages + version_packages[{version!r}] (differing: "
            f"{', '.join(stale)}); {SETUP_HINT}",
            pytrace=False,
        )
    return python


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECSERVE_"))}
    env["PYTHONUNBUFFERED"] = "1"
    # The venvs are installed without bytecode (scripts/setup/sglang.sh); let the first run
    # write it, or every later import of SGLang and torch recompiles (~10 s instead of ~1 s).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # SGLang prints nothing useful to stdout on import, but its warnings go to stderr.
    return env


class _ForkServer:
    """scripts/sglang/forkserver.py in one version's venv, for this test process."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (lives as long as the server)
            prefix=f"specserve-forkserver-{version}-", suffix=".log")
        # SGLang's resolution writes relative to its working directory (a probe's
        # --debug-tensor-dump-output-folder is created there): never in the checkout.
        self.workdir = tempfile.TemporaryDirectory(prefix=f"specserve-forkserver-{version}-cwd-")
        self.proc = subprocess.Popen(
            [str(venv_python(version)), str(SCRIPTS / "forkserver.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=self.workdir.name, env=_env())  # fmt: skip
        atexit.register(self.close)

    def run(self, args: list[str], stdin: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"args": args, "stdin": stdin}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # reported below with the server's own last words
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            _SERVERS.pop(self.version, None)
            self.log.seek(0)
            pytest.fail(
                f"SGLang {self.version}: the fork server "
                f"{'gave no answer in ' + str(TIMEOUT_S) + ' s' if not ready else 'ended'} "
                f"running {' '.join(args[:2])[:200]}:\n"
                f"{self.log.read().decode(errors='replace')[-4000:]}", pytrace=False)
        return dict(json.loads(line))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.workdir.cleanup()


_SERVERS: dict[str, _ForkServer] = {}


def run_python(version: str, args: list[str], payload: Any) -> Any:
    """`python <args>` in the venv with `payload` as JSON on stdin; return its JSON stdout."""
    server = _SERVERS.get(version)
    if server is None:
        server = _SERVERS[version] = _ForkServer(version)
    answer = server.run(args, json.dumps(payload))
    if answer["rc"] != 0:
        pytest.fail(
            f"SGLang {version}: {' '.join(args[:2])} exited {answer['rc']}:\n"
            f"{answer['stderr'][-4000:]}",
            pytrace=False,
        )
    try:
        return json.loads(answer["stdout"])
    except json.JSONDecodeError:
        pytest.fail(f"SGLang {version}: no JSON on stdout:\n{answer['stdout'][-2000:]}",
                    pytrace=False)


def run_script(version: str, script: str, payload: Any = None) -> Any:
    """One of scripts/sglang/*.py, e.g. run_script("0.5.21", "parse_argv.py", [[...]])."""
    return run_python(version, [str(SCRIPTS / script)], payload)


def run_snippet(version: str, code: str, payload: Any = None) -> Any:
    """Python code that reads JSON from stdin and prints JSON (imports sglang itself)."""
    return run_python(version, ["-c", code], payload)


@cache
def _parse(
    version: str, argvs: tuple[tuple[str, ...], ...], fields: tuple[str, ...] | None, resolve: bool
) -> tuple[dict[str, Any], ...]:
    request: dict[str, Any] = {"argvs": [list(a) for a in argvs], "resolve": resolve}
    if fields:
        request["fields"] = list(fields)
    results = run_script(version, "parse_argv.py", request)
    assert len(results) == len(argvs), "parse_argv.py returned a result per argv"
    return tuple(results)


@cache
def _resolve(version: str, argvs: tuple[tuple[str, ...], ...]) -> tuple[dict[str, Any], ...]:
    results = run_script(version, "resolve_argv.py", {"argvs": [list(a) for a in argvs]})
    assert len(results) == len(argvs), "resolve_argv.py returned a result per argv"
    return tuple(results)


def resolve_argvs(version: str, argvs: list[list[str]]) -> list[dict[str, Any]]:
    """SGLang's `prepare_server_args` + `ServerArgs.resolve_once` on each argv (pass
    `--device cpu` here), in one subprocess (cached per batch): scripts/sglang/resolve_argv.py."""
    return list(_resolve(version, tuple(tuple(a) for a in argvs)))


def parse_argvs(
    version: str,
    argvs: list[list[str]],
    fields: list[str] | None = None,
    resolve: bool = False,
) -> list[dict[str, Any]]:
    """SGLang's `prepare_server_args` on each argv, in one subprocess (cached per batch)."""
    key = tuple(tuple(a) for a in argvs)
    return list(_parse(version, key, tuple(fields) if fields else None, resolve))
