"""SGLang 0.5.23's `--watermark-config` keys (`key`, `key_b`) are secrets like the API key: found
inline and in the file the flag names, shown as the marker by every rendering and the launcher's
command echo, redacted by the tee (stdout and every log generation), refused when too short to
redact, and a warning when written into the profile itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.loader import profile_from_document
from specserve.profile.render import format_argv, format_json, format_shell, render
from specserve.secrets import (
    MARKER,
    redact_argv,
    secret_forms,
    secrets_in_argv,
    secrets_in_server_info,
    watermark_keys,
)

KEY_A = "0x5e6f7a8b9c0d1e2f"
KEY_B = "0xa1b2c3d4e5f60718"
INLINE = json.dumps({"key": KEY_A, "key_b": KEY_B, "context_window": 4})
ADMIN = "adm-watermark-7788aa"
API_KEY = "sk-watermark-launch-99"
VERSION = "0.5.23"  # the first verified SGLang with --watermark-config


def _leaks(text: str, *secrets: str) -> list[str]:
    return [form for s in secrets for form in secret_forms(s) if form in text]


def test_keys_are_found_inline_in_both_spellings_and_in_the_named_file(tmp_path: Path) -> None:
    assert secrets_in_argv(["--watermark-config", INLINE]) == [KEY_A, KEY_B]
    assert secrets_in_argv([f"--watermark-config={INLINE}"]) == [KEY_A, KEY_B]
    config = tmp_path / "watermark.json"
    config.write_text(json.dumps({"key": KEY_B, "enforce_all": True}))
    # A path is SGLang's other form: its keys are read only where the file is (the launcher).
    assert secrets_in_argv(["--watermark-config", str(config)]) == []
    assert secrets_in_argv(["--watermark-config", str(config)], read_files=True) == [KEY_B]
    assert watermark_keys("not json {") == {} and watermark_keys(str(tmp_path / "absent")) == {}


def test_server_info_keys_are_found_by_field_in_the_config_and_in_launch_command() -> None:
    # A server that answers them in clear (SGLang 0.5.23 answers MARKER; this is the fallback).
    command = f"sglang serve --model-path /m --watermark-config {INLINE} --enable-watermark"
    info = {"watermark_key_b": KEY_B, "watermark_config": json.dumps({"key": KEY_A}),
            "launch_command": command}  # fmt: skip
    assert set(secrets_in_server_info(info)) == {KEY_A, KEY_B}
    # The launch command alone: its JSON holds spaces, so splitting on them would miss the keys.
    assert set(secrets_in_server_info({"launch_command": command})) == {KEY_A, KEY_B}
    assert secrets_in_server_info({"watermark_key": MARKER, "watermark_config": MARKER}) == []


def test_redact_argv_keeps_everything_but_the_secrets() -> None:
    argv = ["x", "--watermark-config", INLINE, "--admin-api-key", ADMIN,
            f"--ssl-keyfile-password={ADMIN}2", "--api-key", "<from secret>"]  # fmt: skip
    shown = redact_argv(argv, keep=len(argv) - 1)
    assert json.loads(shown[2]) == {"key": MARKER, "key_b": MARKER, "context_window": 4}
    assert shown[4] == MARKER and shown[5] == f"--ssl-keyfile-password={MARKER}"
    assert shown[-1] == "<from secret>"  # the API key's placeholder, left to format_shell
    assert redact_argv(["--watermark-config", "/run/secrets/wm.json"])[1] == "/run/secrets/wm.json"


def _doc(tmp: Path, extra: list[str], launch: list[str] | None = None) -> dict[str, object]:
    key_file = tmp / "api-key"
    key_file.write_text(API_KEY + "\n")
    doc: dict[str, object] = {
        "version": 1, "name": "wm", "target": {"path": str(tmp / "no-model")},
        "parallelism": {"tp": 1}, "gpu": {"count": 0},
        "server": {"launch_command": launch or ["python3", "-m", "sglang.launch_server"],
                   "api_key": {"file": str(key_file)}, "extra_args": extra},
    }  # fmt: skip
    return doc


def test_every_rendering_shows_the_marker_for_the_keys(tmp_path: Path) -> None:
    extra = ["--watermark-config", INLINE, "--enable-watermark", "--admin-api-key", ADMIN]
    profile = profile_from_document(_doc(tmp_path, extra), tmp_path / "p.yaml")
    rendered = render(profile, VERSION)
    assert KEY_A in rendered.argv[rendered.argv.index("--watermark-config") + 1]  # what runs
    for name, text in (("shell", format_shell(rendered)), ("json", format_json(rendered)),
                       ("argv", format_argv(rendered))):  # fmt: skip
        assert _leaks(text, KEY_A, KEY_B, ADMIN, API_KEY) == [], name
        assert MARKER in text and "context_window" in text, name


def test_check_refuses_a_key_too_short_to_redact_and_warns_about_inline_keys(
    tmp_path: Path,
) -> None:
    short = json.dumps({"key": "0x1f", "key_b": KEY_B})
    profile = profile_from_document(_doc(tmp_path, ["--watermark-config", short]), tmp_path / "p")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=VERSION))
    found = {(i.severity.value, i.field, i.problem.split(":")[0]) for i in issues}
    assert ("error", "server.extra_args[1]", "--watermark-config key") in found, issues
    assert not any("key_b: the secret" in i.problem for i in issues)  # the long one is fine
    warned = [i for i in issues if i.severity.value == "warning" and "inline" in i.problem]
    assert warned and "/run/secrets/watermark.json" in warned[0].fix
    assert all("0x1f" not in i.render() for i in issues)  # no key in what check prints


# A server that prints what a parser prints when it refuses the flag (SGLang 0.5.21's, the
# stand-in's: the value in clear), its arguments as a dict repr, and records its real argv.
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, sys
    argv = sys.argv[1:]
    config = argv[argv.index("--watermark-config") + 1]
    if not config.lstrip().startswith("{"):
        config = open(config).read().strip()
    print("error: unrecognized arguments: --watermark-config " + config, file=sys.stderr,
          flush=True)
    print(f"server_args={{'watermark_config': {config!r}, 'x': 1}}", flush=True)
    print(json.dumps({"launch_command": " ".join(argv)}), flush=True)
    for i in range(60):  # enough to rotate the log past the lines above
        print(f"[TP0] Decode batch. #running-req: 1, filler line {i:03d}", flush=True)
    with open(os.environ["FAKE_ARGV_FILE"], "w") as fh:
        json.dump(argv, fh)
    """
)


def _launch(tmp: Path, extra: list[str], log: bool) -> subprocess.CompletedProcess[str]:
    script = tmp / "fake_sglang.py"
    script.write_text(FAKE_SERVER)
    doc = _doc(tmp, extra, [sys.executable, str(script)])
    if log:
        doc["logging"] = {"file": str(tmp / "logs" / "sglang.log"), "max_bytes": 1024,
                          "backup_count": 20}  # fmt: skip
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "FAKE_ARGV_FILE": str(tmp / "argv"), "SPECSERVE_SGLANG_VERSION": VERSION}
    command = [sys.executable, "-m", "specserve.launch.launcher", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


@pytest.mark.parametrize("form", ["inline", "file"])
def test_server_gets_the_keys_echo_and_tee_get_the_marker(tmp_path: Path, form: str) -> None:
    config = INLINE
    if form == "file":
        path = tmp_path / "watermark.json"
        path.write_text(INLINE)
        path.chmod(0o600)
        config = str(path)
    done = _launch(tmp_path, ["--watermark-config", config, "--admin-api-key", ADMIN], log=True)
    assert done.returncode == 0, done.stderr
    argv = json.loads((tmp_path / "argv").read_text())
    assert argv[argv.index("--watermark-config") + 1] == config  # the server got them as given
    echo = done.stderr.split("running:")[1]  # the server's output goes through the tee to stdout
    assert "--watermark-config" in echo and _leaks(echo, KEY_A, KEY_B, ADMIN) == [], echo
    logs = sorted((tmp_path / "logs").glob("sglang.log*"))
    assert len(logs) >= 2, logs  # rotated: the first lines are in an older generation
    outputs = {"stdout": done.stdout, "stderr": done.stderr,
               "log files": "".join(p.read_text() for p in logs)}  # fmt: skip
    for name, text in outputs.items():
        assert _leaks(text, KEY_A, KEY_B, ADMIN, API_KEY) == [], name
    # The marker stands where each key was printed (the redaction ran, nothing was dropped).
    for name in ("stdout", "log files"):
        text = outputs[name]
        assert f'--watermark-config {{"key": "{MARKER}", "key_b": "{MARKER}"' in text, name
        assert f'\'watermark_config\': \'{{"key": "{MARKER}"' in text, name


@pytest.mark.parametrize("form", ["inline", "file"])
def test_a_key_too_short_to_redact_is_refused_before_exec(tmp_path: Path, form: str) -> None:
    config = json.dumps({"key": "0xab12"})
    where = "server.extra_args --watermark-config key"
    if form == "file":
        path = tmp_path / "watermark.json"
        path.write_text(config)
        config, where = str(path), f"server.extra_args --watermark-config (file {path}) key"
    # The inline form is refused by check already; the file form only the launcher can read.
    done = _launch(tmp_path, ["--watermark-config", config], log=False)
    assert done.returncode == 1 and not (tmp_path / "argv").exists(), done.stderr
    last = done.stderr.strip().splitlines()[-1]
    if form == "file":
        assert last.startswith(f"specserve-launch: {where}: the secret is 6 characters"), last
        assert "openssl rand -hex 8" in last
    else:
        assert "--watermark-config key: the secret is 6 characters long" in done.stderr
    assert "0xab12" not in done.stdout + done.stderr


# -- the real chain: the launcher running the stand-in (SGLang 0.5.23's options), verify, bench --


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every output of a stand-in served with inline watermark keys and an admin key: the
    launcher's own output, the log file, `specserve verify` (the Helm test's command) and
    `specserve bench`'s results. The stand-in answers /server_info with the keys in clear (0.5.23
    itself answers the marker), so bench and verify find them there by themselves."""
    from tests.verify.conftest import BIN, serving

    work = tmp_path_factory.mktemp("watermark-chain")
    extra = ["--watermark-config", INLINE, "--admin-api-key", ADMIN]
    os.environ["SPECSERVE_SGLANG_VERSION"] = VERSION  # the launcher's check, then the stand-in's
    try:
        with serving(work, api_key=API_KEY, **{"server.extra_args": extra,
                     "env.SPECSERVE_STANDIN_SGLANG_VERSION": VERSION}) as served:  # fmt: skip
            verify = served.verify("--api", "chat")
            out = work / "bench"
            bench = subprocess.run(
                [str(BIN / "specserve"), "bench", "--url", served.server,
                 "--api-key-file", str(served.key_file), "--concurrency", "1",
                 "--max-tokens", "16", "--requests-per-level", "2", "--out-dir", str(out)],
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
            info = requests_server_info(served.server, API_KEY)
    finally:
        os.environ.pop("SPECSERVE_SGLANG_VERSION", None)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    # The server really holds the keys (zero hits below are the redaction's doing).
    assert KEY_A in info["launch_command"] and info["admin_api_key"] == ADMIN
    return {
        "launcher output": (work / "server.out").read_text(),
        "log file": (work / "logs" / "sglang.log").read_text(),
        "specserve verify": verify.stdout + verify.stderr,
        "bench stdout/stderr": bench.stdout + bench.stderr,
        "bench results.json": (out / "results.json").read_text(),
        "bench results.md": (out / "results.md").read_text(),
    }


def requests_server_info(url: str, key: str) -> dict[str, object]:
    import requests

    answer = requests.get(url + "/server_info", headers={"Authorization": f"Bearer {key}"},
                          timeout=10)  # fmt: skip
    answer.raise_for_status()
    doc: dict[str, object] = answer.json()
    return doc


@pytest.mark.parametrize("cell", ["launcher output", "log file", "specserve verify",
                                  "bench stdout/stderr", "bench results.json",
                                  "bench results.md"])  # fmt: skip
def test_no_output_of_the_chain_carries_a_key(chain: dict[str, str], cell: str) -> None:
    text = chain[cell]
    assert text.strip(), f"{cell}: empty"
    assert _leaks(text, KEY_A, KEY_B, ADMIN, API_KEY) == [], cell
    where = {"launcher output": f"--watermark-config '{{\"key\": \"{MARKER}\"",
             "log file": f"'watermark_config': '{{\"key\": \"{MARKER}\"",
             "bench results.json": f'\\"key\\": \\"{MARKER}\\"'}  # fmt: skip
    if cell in where:  # the marker stands where the keys were printed
        assert where[cell] in text, (cell, text[:3000])
