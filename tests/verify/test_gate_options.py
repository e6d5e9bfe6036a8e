"""The gate's budgets and floors have one home (specserve.verify.options): the library's
defaults, `specserve verify`'s flags and the verify role's defaults and argument specs all read
it, and the floor is the SpecDecodeAcceptLengthLow alert's on both deploy paths. Each test
changes the source once and watches every consumer follow."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from specserve.generate import command as generate
from specserve.monitoring.rules import ALERTS_BY_NAME
from specserve.verify import cli, gate, options, role_files

ROOT = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return parser


def _cli_defaults() -> argparse.Namespace:
    return _parser().parse_args(["verify"])


def _role_files() -> tuple[dict, dict]:
    texts = {path: produce() for path, produce in role_files.files(
        lambda relative: (ROOT / relative).read_text(encoding="utf-8")).items()}
    defaults = yaml.safe_load(texts[role_files.DEFAULTS])
    specs = yaml.safe_load(texts[role_files.SPECS])["argument_specs"]["main"]["options"]
    return defaults, specs


def test_the_library_the_command_and_the_role_default_every_option_alike() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(gate.Settings)}
    parsed = _cli_defaults()
    defaults, specs = _role_files()
    for option in options.OPTIONS:
        assert fields[option.name] == option.default, option.name
        assert getattr(parsed, option.name) == option.default, option.name
        if option.role_var:
            assert defaults[option.role_var] == option.default, option.role_var
            assert specs[option.role_var]["default"] == option.default, option.role_var
    # The repository's role files are what the table generates (specserve generate --check).
    assert role_files.DEFAULTS not in generate.stale(ROOT)
    assert role_files.SPECS not in generate.stale(ROOT)


def test_a_default_changed_in_the_table_is_the_commands_and_the_roles(
        monkeypatch: pytest.MonkeyPatch) -> None:
    changed = tuple(dataclasses.replace(o, default=7) if o.name == "requests" else o
                    for o in options.OPTIONS)
    monkeypatch.setattr(options, "OPTIONS", changed)
    monkeypatch.setattr(cli, "OPTIONS", changed)
    monkeypatch.setattr(role_files, "OPTIONS", changed)
    assert _cli_defaults().requests == 7
    defaults, specs = _role_files()
    assert defaults["verify_warmup_requests"] == 7
    assert specs["verify_warmup_requests"]["default"] == 7
    assert "specserve verify --requests" in specs["verify_warmup_requests"]["description"]


def test_the_floor_is_the_alerts_own_default() -> None:
    """Changed in the alert catalogue alone (in a fresh interpreter, as the defaults are read at
    import), the floor moves in the library, the command and the Ansible filter together."""
    code = """
import dataclasses, json, argparse, importlib.util
from specserve.monitoring import rules
alert = rules.ALERTS_BY_NAME["SpecDecodeAcceptLengthLow"]
moved = dataclasses.replace(alert, compare_to=dataclasses.replace(alert.compare_to, default=2.75))
rules.ALERTS_BY_NAME["SpecDecodeAcceptLengthLow"] = moved
from specserve.verify import cli, gate
parser = argparse.ArgumentParser(); cli.register(parser.add_subparsers())
spec = importlib.util.spec_from_file_location("f", "ansible/plugins/filter/specserve_alerts.py")
f = importlib.util.module_from_spec(spec); spec.loader.exec_module(f)
print(json.dumps([gate.Settings.floor, parser.parse_args(["verify"]).floor,
                  f.accept_length_floor("")]))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == [2.75, 2.75, 2.75]
    floor = ALERTS_BY_NAME["SpecDecodeAcceptLengthLow"].threshold("floor").default
    assert gate.Settings.floor == _cli_defaults().floor == floor


def _alerts_filter() -> ModuleType:
    path = ROOT / "ansible/plugins/filter/specserve_alerts.py"
    spec = importlib.util.spec_from_file_location("specserve_alerts", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_role_floor_follows_the_deployments_alert_overrides(tmp_path: Path) -> None:
    plugin = _alerts_filter()
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump(
        {"alerts": {"SpecDecodeAcceptLengthLow": {"thresholds": {"floor": 2.25}}}}))
    assert plugin.accept_length_floor(str(overrides)) == 2.25
    # Another alert overridden, or none: the catalogue's floor.
    overrides.write_text(yaml.safe_dump({"alerts": {"SpecDecodeDraftsRejected": {"for": "5m"}}}))
    assert plugin.accept_length_floor(str(overrides)) == options.alert_floor() == 1.5
    assert plugin.accept_length_floor("") == 1.5
    # A bad file is the monitoring role's own refusal, named by the variable that set it.
    overrides.write_text(yaml.safe_dump(
        {"alerts": {"SpecDecodeAcceptLengthLow": {"thresholds": {"flor": 2}}}}))
    with pytest.raises(Exception, match=r"(?s)^specserve_alert_overrides: .*did you mean .floor."):
        plugin.accept_length_floor(str(overrides))


def test_the_role_sets_no_floor_of_its_own() -> None:
    defaults, specs = _role_files()
    assert defaults[role_files.FLOOR_VAR] is None and specs[role_files.FLOOR_VAR]["default"] is None
    # Nor does an inventory the repository ships.
    for path in (ROOT / "playbooks/inventory").rglob("*.yml"):
        assert role_files.FLOOR_VAR not in (yaml.safe_load(path.read_text()) or {}), path
