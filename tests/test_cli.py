"""The `specserve` entry point: --version, each subcommand's own usage on its errors, `render`
taking `check`'s options and running the same checks, and only the running command's imports.

None of this is timed: benchmarks/cli_startup.py measures the CPU (docs/benchmarks.md). The
import guard is structural, so it holds on a loaded CI machine: `check` and `render` run in a
fresh interpreter and the modules other commands need must not be in its sys.modules.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from specserve import cli
from specserve.profile.likeness import profile_settings
from specserve.profile.model import profile_from_document
from specserve.upstream import PINNED_VERSION
from tests.profile.helpers import KIMI, kimi_doc, run_cli, write_doc

ROOT = Path(__file__).resolve().parents[1]
STANDIN = "profiles/standin-cpu.yaml"
FIXTURE_MODELS = "tests/fixtures/models"

# What `check` and `render` must not load: the other commands' own modules and the third-party
# packages they import (the Grafana SDK for the dashboard, requests / urllib3 for verify and the
# Docker SDK, prometheus_client for metrics parsing, httpx and matplotlib for bench, torch for
# nccl-bench, the Docker and Kubernetes SDKs of the exporter).
HEAVY_PACKAGES = (
    "grafana_foundation_sdk",
    "requests",
    "urllib3",
    "prometheus_client",
    "httpx",
    "matplotlib",
    "torch",
    "docker",
    "kubernetes",
)
OTHER_COMMANDS = ("specserve.monitoring", "specserve.verify", "specserve.bench",
                  "specserve.nccl", "specserve.generate", "specserve.generate.chart")  # fmt: skip

PROBE = """
import contextlib, io, json, sys
from specserve.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _probe(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.mark.parametrize(
    ("command", "printed"),
    [("check", "OK: 0 error(s), 1 warning(s)"), ("render", "specserve-standin")],
)
def test_check_and_render_do_not_import_what_other_commands_need(command, printed):
    result = _probe(command, STANDIN, "--configs-only")
    assert result["code"] == 0 and printed in result["out"], result["out"]
    assert "specserve.profile.checks" in result["modules"]  # it did run the checks
    assert not _loaded(result["modules"], HEAVY_PACKAGES), "heavy imports at `specserve check`"
    assert not _loaded(result["modules"], OTHER_COMMANDS), "other commands' modules loaded"


def test_the_guarded_names_are_real_and_help_loads_every_command():
    # The guard above would pass vacuously on misspelt names: each package is installed here, and
    # `specserve --help` (every command registered) does load the other commands' modules.
    missing = [name for name in HEAVY_PACKAGES if importlib.util.find_spec(name) is None]
    assert not missing, f"not installed, so the import guard cannot see them: {missing}"
    done = subprocess.run(
        [sys.executable, "-c", "import sys, specserve.cli as c; c.build_parser(['--help']); "
         "print('\\n'.join(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    modules = done.stdout.split()
    assert set(cli.SUBCOMMAND_MODULES) <= set(modules)
    assert {"grafana_foundation_sdk", "requests", "prometheus_client"} <= set(modules)


def test_the_command_table_is_what_each_module_registers():
    registered: list[str] = []
    for module in cli.SUBCOMMAND_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        names = list(sub.choices)
        assert names == [c for c, m in cli.COMMANDS.items() if m == module], module
        registered += names
    assert registered == list(cli.COMMANDS)  # `specserve --help` lists them in this order


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_running_a_command_loads_only_its_module(command):
    parser = cli.build_parser([command, "--help"])
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    owner = cli.COMMANDS[command]
    assert list(action.choices) == [c for c, m in cli.COMMANDS.items() if m == owner]


def test_version_names_the_package_and_the_sglang_versions_of_versions_yaml():
    pins = yaml.safe_load((ROOT / "versions.yaml").read_text())["sglang"]
    expected = (f"specserve {version('specserve')} (SGLang: pinned {pins['pinned']}; "
                f"verified {', '.join(pins['verified'])})\n")  # fmt: skip
    # The console script a user runs, and it loads no subcommand for it.
    script = Path(sys.executable).parent / "specserve"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    assert cli._modules_for(["--version"]) == ()  # no subcommand is imported for it
    assert run_cli("--version") == (0, expected, "")


# A mistyped option in each command (and in a nested one) prints that command's usage, not
# `usage: specserve [-h] ...`, which lists none of its options.
USAGE_CASES = [
    (["check", STANDIN, "--config-only"], "specserve check", "--config-only"),
    (["render", STANDIN, "--weights-rot", "x"], "specserve render", "--weights-rot x"),
    (["rules", "render", "--bogus"], "specserve rules render", "--bogus"),
    (
        ["bench", "report", "r.json", "--out-dir", "d", "--bogus"],
        "specserve bench report",
        "--bogus",
    ),
    (["nccl-bench", "--bogus"], "specserve nccl-bench", "--bogus"),
]


@pytest.mark.parametrize(("argv", "prog", "extra"), USAGE_CASES, ids=[c[1] for c in USAGE_CASES])
def test_an_unknown_option_prints_its_own_commands_usage(argv, prog, extra, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(f"usage: {prog} "), err
    assert err.rstrip().endswith(f"{prog}: error: unrecognized arguments: {extra}"), err


def _options(command: str) -> set[str]:
    parser = cli.build_parser([command])
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub = action.choices[command]
    return {s for a in sub._actions for s in a.option_strings} | {
        a.dest for a in sub._actions if not a.option_strings
    }


def test_render_takes_every_option_of_check():
    check, render = _options("check"), _options("render")
    assert {"--weights-root", "--configs-only", "--require-models", "--image",
            "--no-baseline-check", "--sglang-version", "profile"} <= check  # fmt: skip
    # --format is each command's own (a report / a command line); placement is render's.
    assert check - {"--format"} <= render
    assert render - check == {"--node-rank", "--rendezvous-host"}


def _recorded_kimi(tmp_path: Path) -> Path:
    """The Kimi profile with a baseline recorded under its own settings, in image img:1."""
    doc = kimi_doc()
    doc["baseline"].update(profile_settings(profile_from_document(doc), "img:1", PINNED_VERSION))
    return write_doc(tmp_path, doc)


# (profile, options, exit code both commands give). Each option changes the outcome in one
# pair of cases, so render agreeing with check means it passed that option on.
AGREEMENT = [
    (STANDIN, [], 1),  # the fixtures' shards are missing
    (STANDIN, ["--configs-only"], 0),
    (str(KIMI), ["--configs-only"], 0),  # /models absent: warnings
    (str(KIMI), ["--configs-only", "--require-models"], 1),
    (str(KIMI), ["--weights-root", FIXTURE_MODELS], 1),  # found there, without shards
    (str(KIMI), ["--weights-root", FIXTURE_MODELS, "--configs-only"], 0),
    (str(KIMI), ["--configs-only", "--weights-root", "README.md"], 2),  # not a directory
    ("recorded", ["--configs-only", "--image", "img:2"], 1),  # not the baseline's image
    ("recorded", ["--configs-only", "--image", "img:2", "--no-baseline-check"], 0),
    ("recorded", ["--configs-only", "--image", "img:1"], 0),
    (STANDIN, ["--configs-only", "--sglang-version", "0.5.22"], 2),  # not verified
]


@pytest.mark.parametrize(("profile", "options", "code"), AGREEMENT)
def test_render_runs_the_checks_check_runs_with_the_same_options(
    profile, options, code, tmp_path, monkeypatch
):
    monkeypatch.chdir(ROOT)
    path = str(_recorded_kimi(tmp_path)) if profile == "recorded" else profile
    check_code, check_out, check_err = run_cli("check", path, *options)
    render_code, render_out, render_err = run_cli("render", path, *options)
    assert check_code == render_code == code, (check_out, check_err, render_err)
    if code == 1:
        # The same issues, word for word: check's report on stdout, render's refusal on stderr.
        assert render_out == "" and render_err == check_out
    elif code == 2:
        assert render_err == check_err.replace("specserve check:", "specserve render:")
    else:
        assert "--speculative-algorithm EAGLE3" in render_out
