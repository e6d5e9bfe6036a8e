"""SGLang's native gRPC server and the secrets: `check` and the launcher refuse what would hand a
secret to whoever reaches the gRPC port, and SGLang's own code (both verified versions) is held
to the premises: it refuses an API key with the port itself, in the words `check` quotes, on the
leader and on a follower alike; it starts with an SSL key password and its follower's
GetServerInfo (0.5.23) serves that password in clear, the watermark keys redacted."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.secrets import SGLANG_GRPC_KEY_REFUSAL
from specserve.profile.model import Profile, profile_from_document
from specserve.profile.nodes import Placement
from specserve.profile.render import render_argv
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import DUMMY_API_KEY, ROOT
from tests.contract.sglang_venv import run_snippet
from tests.contract.test_resolved_argv import cpu_argv

KIMI = ROOT / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"
LEADER = "specserve-0.specserve.inference.svc.cluster.local"
SSL_PASSWORD = "ssl-keyfile-pw-31337"


def _kimi(extra: list[str], env: dict[str, str] | None = None, api_key: bool = True) -> Profile:
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(KIMI.read_text(encoding="utf-8")))
    doc["server"]["extra_args"] = extra
    doc["env"] = env or {}
    if not api_key:
        del doc["server"]["api_key"]
    return profile_from_document(doc, KIMI)


def _grpc_errors(profile: Profile, version: str) -> list[str]:
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    return [
        i.render() for i in issues if i.severity.value == "error" and "grpc" in i.problem.lower()
    ]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize(
    ("extra", "env", "field"),
    [(["--grpc-port", "30010"], {}, "server.extra_args[0]"),
     (["--grpc-port=30010"], {}, "server.extra_args[0]"),
     ([], {"SGLANG_GRPC_PORT": "30010"}, "env.SGLANG_GRPC_PORT")],
)  # fmt: skip
def test_check_refuses_grpc_with_the_api_key_on_the_two_node_profile(
    version: str, extra: list[str], env: dict[str, str], field: str
) -> None:
    found = _grpc_errors(_kimi(extra, env), version)
    assert len(found) == 1, found
    assert found[0].startswith(f"error: {field}: SGLang {version}: "), found
    assert SGLANG_GRPC_KEY_REFUSAL in found[0] and "Fix: remove --grpc-port" in found[0]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_refuses_grpc_with_an_ssl_key_password_without_an_api_key(version: str) -> None:
    extra = ["--grpc-port", "30010", "--ssl-certfile", "/c.pem", "--ssl-keyfile", "/k.pem",
             "--ssl-keyfile-password", SSL_PASSWORD]  # fmt: skip
    found = _grpc_errors(_kimi(extra, api_key=False), version)
    assert len(found) == 1 and "--ssl-keyfile-password" in found[0], found
    assert SSL_PASSWORD not in found[0]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize(
    ("extra", "api_key"),
    [([], True),  # no gRPC server at all
     (["--grpc-port", "30010"], False),  # gRPC, nothing secret to serve
     (["--grpc-port", "30010", "--smg-grpc-mode"], True)],  # legacy mode: no native server
)  # fmt: skip
def test_check_accepts_grpc_where_no_secret_is_served(
    version: str, extra: list[str], api_key: bool
) -> None:
    assert _grpc_errors(_kimi(extra, api_key=api_key), version) == []


@pytest.mark.parametrize("dry_run", [False, True])
def test_launcher_refuses_grpc_from_its_environment_before_exec(
    tmp_path: Path, dry_run: bool
) -> None:
    """SGLANG_GRPC_PORT from the container's environment, which `check` never sees; the dry run
    (what a deploy validates with) says the same."""
    key = tmp_path / "api-key"
    key.write_text("sk-grpc-launch-123456\n")
    marker = tmp_path / "started"
    doc = {"version": 1, "name": "grpc", "target": {"path": str(tmp_path / "no-model")},
           "parallelism": {"tp": 1}, "gpu": {"count": 0},
           "server": {"launch_command": [sys.executable, "-c",
                                         f"open({str(marker)!r}, 'w').close()"],
                      "api_key": {"file": str(key)}}}  # fmt: skip
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    flags = ["--dry-run"] if dry_run else []
    done = subprocess.run([sys.executable, "-m", "specserve.launch.launcher", *flags, str(path)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "SGLANG_GRPC_PORT": "30010"})  # fmt: skip
    assert done.returncode == 1 and not marker.exists(), done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("specserve-launch: SGLANG_GRPC_PORT=30010 with an API key"), last
    assert last.endswith("nothing was started") and "sk-grpc-launch" not in done.stderr


# -- SGLang's own code ----------------------------------------------------------------------

# Resolution of each argv under an environment of its own: "ok" or SGLang's exception.
RESOLVE = r"""
import contextlib, io, json, os, sys
from sglang.srt.server_args import prepare_server_args
out = []
for case in json.load(sys.stdin):
    os.environ.pop("SGLANG_GRPC_PORT", None)
    os.environ.update(case["env"])
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            prepare_server_args(case["argv"]).resolve_once()
        out.append("ok")
    except BaseException as exc:
        out.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


def _rank_flags(version: str, rank: int, extra: list[str]) -> list[str]:
    profile = _kimi(extra)
    argv = render_argv(profile, version, Placement(rank, LEADER))
    flags = argv[len(profile.server.launch_command) :]
    flags[flags.index("--api-key") + 1] = DUMMY_API_KEY
    return cpu_argv(flags)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_sglang_refuses_an_api_key_with_grpc_on_every_rank_in_checks_words(version: str) -> None:
    cases = []
    for rank in (0, 1):  # the leader and a follower of the 2-node profile, as rendered
        cases.append({"argv": _rank_flags(version, rank, ["--grpc-port", "30010"]), "env": {}})
        cases.append({"argv": _rank_flags(version, rank, []), "env": {"SGLANG_GRPC_PORT": "30010"}})
    cases.append({"argv": _rank_flags(version, 1, []), "env": {}})  # control: no gRPC
    results = run_snippet(version, RESOLVE, cases)
    assert results[-1] == "ok", results[-1]
    for result in results[:-1]:
        assert result == f"ValueError: {SGLANG_GRPC_KEY_REFUSAL}.", result


# What a 0.5.23 follower's gRPC server would serve: SGLang's start_follower_grpc_server on a
# resolved and published ServerArgs, with only the Rust listener replaced by one that records
# the JSON it was given.
FOLLOWER = r"""
import contextlib, io, json, sys
from sglang.srt.server_args import prepare_server_args
from sglang.srt.runtime_context import publish
import sglang.srt.rust_extensions as rust
from sglang.srt.utils import common

request = json.load(sys.stdin)
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    args = prepare_server_args(request["argv"])
    args.resolve_once()
    publish(args, role="scheduler")
served = {}

class Listener:
    def start_metadata_server(self, **kwargs):
        served.update(kwargs)
        return "handle"

rust.load_rust_extension = lambda name: Listener()
assert common.start_follower_grpc_server(args, {}) == "handle"
served["server_info"] = json.loads(served.pop("server_info_json"))
print(json.dumps(served))
"""


def test_sglang_0_5_23_followers_serve_the_ssl_password_and_redact_the_watermark(
    tmp_path: Path,
) -> None:
    assert "0.5.23" in VERIFIED_VERSIONS
    cert, keyfile = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.touch()
    keyfile.touch()
    watermark = json.dumps({"key": "0x5e6f7a8b9c0d1e2f", "key_b": "0xa1b2c3d4e5f60718"})
    model = ROOT / "tests" / "fixtures" / "models" / "Llama-3.1-8B-Instruct"
    argv = cpu_argv(["--model-path", str(model), "--grpc-port", "30010", "--host", "0.0.0.0",
                     "--ssl-certfile", str(cert),
                     "--ssl-keyfile", str(keyfile), "--ssl-keyfile-password", SSL_PASSWORD,
                     "--watermark-config", watermark, "--enable-watermark"])  # fmt: skip
    served = run_snippet("0.5.23", FOLLOWER, {"argv": argv})
    assert (served["host"], served["port"]) == ("0.0.0.0", 30010)  # --host's, not loopback
    info = served["server_info"]
    # The premise of refusing --ssl-keyfile-password with gRPC: served in clear, twice.
    assert info["ssl_keyfile_password"] == SSL_PASSWORD
    assert f"--ssl-keyfile-password {SSL_PASSWORD}" in info["launch_command"]
    # The premise of accepting the watermark with gRPC: SGLang redacts it there itself.
    assert info["watermark_key"] == "<redacted>" and info["watermark_key_b"] == "<redacted>"
    assert info["watermark_config"] == "<redacted>"
    assert "0x5e6f7a8b9c0d1e2f" not in json.dumps(info)


def test_sglang_0_5_21_has_no_follower_grpc_server() -> None:
    """0.5.21 serves gRPC on the node that serves HTTP only (entrypoints/http_server.py)."""
    code = "import json; from sglang.srt.utils import common\n" \
           "print(json.dumps(hasattr(common, 'start_follower_grpc_server')))"  # fmt: skip
    assert run_snippet("0.5.21", code) is False
