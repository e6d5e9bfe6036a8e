"""Per-alert overrides: validate what users (Ansible, Helm values, a YAML file) ask to change.

Every problem is collected and reported at once, each naming the field, what is wrong and how to
fix it, so a user with three typos fixes them in one round.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from specserve.monitoring.expansion import AlertSettings, default_settings
from specserve.monitoring.rules import (
    ALERTS,
    ALERTS_BY_NAME,
    DEFAULT_RUNBOOK_BASE_URL,
    Alert,
    Threshold,
)

# Prometheus' duration syntax (model.ParseDuration): units largest first, each at most once.
DURATION_RE = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")
LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_ALERT_KEYS = ("enabled", "for", "window", "thresholds")
_FILE_KEYS = ("runbook_base_url", "alerts")


class OverridesError(ValueError):
    """Raised with every problem found in an overrides document, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid alert overrides:\n" + "\n".join(f"  - {p}" for p in problems))


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}valid names: {', '.join(choices)}"


def is_duration(text: str) -> bool:
    return bool(text) and text != "0" and DURATION_RE.match(text) is not None


def is_window(value: object) -> bool:
    """A Prometheus duration longer than zero: what a range selector `[...]` accepts."""
    return (
        isinstance(value, str)
        and is_duration(value)
        and any(int(n) > 0 for n in re.findall(r"\d+", value))
    )


def _check_threshold(where: str, spec: Threshold, value: object, problems: list[str]) -> None:
    if spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{where}: expected a number, got {value!r}")
            return
        number = float(value)
        if not math.isfinite(number):
            problems.append(f"{where}: expected a finite number, got {value!r}")
        elif spec.minimum is not None and number < spec.minimum:
            problems.append(f"{where}: {value!r} is below the minimum {spec.minimum:g}")
        elif spec.maximum is not None and number > spec.maximum:
            problems.append(f"{where}: {value!r} is above the maximum {spec.maximum:g}")
        return
    if not isinstance(value, str):
        problems.append(f"{where}: expected a string, got {value!r}")
        return
    if spec.kind == "regex":
        # The value lands inside a PromQL double-quoted string, where these would end or escape it.
        if not value or any(c in value for c in '"\\\n'):
            problems.append(
                f"{where}: give a non-empty regex without double quotes, backslashes or newlines"
            )
            return
        try:
            re.compile(value)
        except re.error as err:
            problems.append(f"{where}: {value!r} is not a valid regular expression ({err})")
    elif spec.kind == "labels":
        names = [part.strip() for part in value.split(",") if part.strip()]
        bad = [n for n in names if not LABEL_NAME_RE.match(n)]
        if bad:
            problems.append(
                f"{where}: {', '.join(map(repr, bad))} are not label names; give a "
                "comma-separated list such as 'namespace, pod', or '' for none"
            )
    elif spec.kind == "metric" and not METRIC_NAME_RE.match(value):
        problems.append(f"{where}: {value!r} is not a metric name (letters, digits, _ and :)")


def _check_alert(name: str, alert: Alert, raw: object, problems: list[str]) -> None:
    where = f"alerts.{name}"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with {', '.join(_ALERT_KEYS)}, got {raw!r}")
        return
    for key in raw:
        if key not in _ALERT_KEYS:
            hint = _suggest(str(key), list(_ALERT_KEYS))
            problems.append(f"{where}: unknown key {key!r}; {hint}")
    if "enabled" in raw and not isinstance(raw["enabled"], bool):
        problems.append(f"{where}.enabled: expected true or false, got {raw['enabled']!r}")
    if "for" in raw and not (isinstance(raw["for"], str) and is_duration(raw["for"])):
        problems.append(
            f"{where}.for: {raw['for']!r} is not a Prometheus duration; use e.g. '30s', '5m', '1h'"
        )
    if "window" in raw:
        if alert.window is None:
            problems.append(
                f"{where}.window: this alert reads its metric directly and has no rate window; "
                "remove the key (alerts with a window: "
                f"{', '.join(a.name for a in ALERTS if a.window is not None)})"
            )
        elif not is_window(raw["window"]):
            problems.append(
                f"{where}.window: {raw['window']!r} is not a Prometheus duration above zero; "
                "use e.g. '1m', '2m', '5m' (at least 4 scrape intervals)"
            )
    thresholds = raw.get("thresholds", {})
    if not isinstance(thresholds, Mapping):
        problems.append(f"{where}.thresholds: expected a mapping, got {thresholds!r}")
        return
    known = [item.name for item in alert.thresholds]
    for key, value in thresholds.items():
        if key not in known:
            choices = ", ".join(known) if known else "none (this alert has no thresholds)"
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{where}.thresholds: unknown threshold {key!r}; {hint}valid: {choices}"
            )
            continue
        _check_threshold(f"{where}.thresholds.{key}", alert.threshold(key), value, problems)


def validate_overrides(overrides: Mapping[str, Any]) -> list[str]:
    """Problems in an `{alert_name: {...}}` mapping; empty when it is valid."""
    problems: list[str] = []
    if not isinstance(overrides, Mapping):
        return [f"alerts: expected a mapping of alert names, got {overrides!r}"]
    names = [alert.name for alert in ALERTS]
    for name, raw in overrides.items():
        if name not in ALERTS_BY_NAME:
            problems.append(f"alerts: unknown alert {name!r}; {_suggest(str(name), names)}")
            continue
        _check_alert(name, ALERTS_BY_NAME[name], raw, problems)
    return problems


def resolve_settings(overrides: Mapping[str, Any]) -> dict[str, AlertSettings]:
    """Every alert's effective settings; raises OverridesError listing all problems."""
    problems = validate_overrides(overrides)
    if problems:
        raise OverridesError(problems)
    settings: dict[str, AlertSettings] = {}
    for alert in ALERTS:
        base = default_settings(alert)
        raw = overrides.get(alert.name, {})
        thresholds = dict(base.thresholds)
        for key, value in raw.get("thresholds", {}).items():
            thresholds[key] = float(value) if alert.threshold(key).kind == "number" else value
        settings[alert.name] = AlertSettings(
            enabled=raw.get("enabled", True),
            for_=raw.get("for", base.for_),
            thresholds=thresholds,
            window=raw.get("window", base.window),
        )
    return settings


def load_overrides_file(path: Path) -> tuple[dict[str, Any], str]:
    """Read an overrides YAML file: `{runbook_base_url: str, alerts: {name: {...}}}`.

    Returns (alert overrides, runbook base URL); raises OverridesError naming every problem.
    """
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise OverridesError([f"{path}: cannot read the file ({err.strerror})"]) from err
    except yaml.YAMLError as err:
        raise OverridesError([f"{path}: not valid YAML ({err})"]) from err
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise OverridesError(
            [f"{path}: expected a mapping with keys {', '.join(_FILE_KEYS)}, got {document!r}"]
        )
    problems = [
        f"{path}: unknown top-level key {key!r}; {_suggest(str(key), list(_FILE_KEYS))}"
        for key in document
        if key not in _FILE_KEYS
    ]
    base_url = document.get("runbook_base_url", DEFAULT_RUNBOOK_BASE_URL)
    if not isinstance(base_url, str) or not re.match(r"^https?://\S+$", base_url):
        problems.append(
            f"{path}: runbook_base_url must be an http(s) URL without spaces, got {base_url!r}"
        )
    alerts = document.get("alerts", {}) or {}
    problems.extend(f"{path}: {problem}" for problem in validate_overrides(alerts))
    if problems:
        raise OverridesError(problems)
    return dict(alerts), base_url
