"""Per-alert overrides: validate what users (Ansible, Helm values, a YAML file) ask to change.

Every problem is collected and reported at once, each naming the field, what is wrong and how to
fix it, so a user with three typos fixes them in one round.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specserve.monitoring.expansion import AlertSettings, default_settings, format_number
from specserve.monitoring.rules import (
    ALERTS,
    ALERTS_BY_NAME,
    DEFAULT_RUNBOOK_BASE_URL,
    Alert,
    Threshold,
)
from specserve.monitoring.slo import (
    OBJECTIVES,
    OBJECTIVES_BY_NAME,
    SETTING_KEYS,
    SLO_WINDOWS,
    Objective,
)

# Prometheus' duration syntax (model.ParseDuration): units largest first, each at most once.
DURATION_RE = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")
LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_ALERT_KEYS = ("enabled", "for", "window", "thresholds")
_FILE_KEYS = ("runbook_base_url", "alerts", "slos")


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
            enabled=raw.get("enabled", base.enabled),
            for_=raw.get("for", base.for_),
            thresholds=thresholds,
            window=raw.get("window", base.window),
        )
    return settings


# --- SLO settings (`slos:`; specserve.monitoring.slo) ----------------------------------------


@dataclass(frozen=True)
class SloSettings:
    enabled: bool
    target: float
    period: str
    threshold_seconds: float | None

    def text(self, key: str) -> str:
        if key == "period":
            return self.period
        value = self.target if key == "target" else self.threshold_seconds
        if value is None:
            raise KeyError(f"no setting {key!r}")
        return format_number(value)


def default_slo_settings(objective: Objective) -> SloSettings:
    return SloSettings(True, objective.target, objective.period, objective.threshold_seconds)


def _check_slo(name: str, objective: Objective, raw: object, problems: list[str]) -> None:
    where = f"slos.{name}"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with {', '.join(SETTING_KEYS)}, got {raw!r}")
        return
    keys = SETTING_KEYS if objective.histogram else SETTING_KEYS[:3]
    for key in raw:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(f"{where}: unknown key {key!r}; {hint}valid: {', '.join(keys)}")
    if "enabled" in raw and not isinstance(raw["enabled"], bool):
        problems.append(f"{where}.enabled: expected true or false, got {raw['enabled']!r}")
    if "target" in raw:
        target = raw["target"]
        if (isinstance(target, bool) or not isinstance(target, int | float)
                or not math.isfinite(target) or not 0 < target < 1):
            problems.append(
                f"{where}.target: expected a share strictly between 0 and 1 (0.99 = 99% good), "
                f"got {target!r}"
            )
    if "period" in raw and (not is_window(raw["period"]) or raw["period"] in SLO_WINDOWS):
        problems.append(f"{where}.period: {raw['period']!r} is not a Prometheus duration above "
                        f"zero other than the alert windows ({', '.join(SLO_WINDOWS)}); use "
                        "e.g. '28d', '30d'")
    if "threshold_seconds" in raw and objective.histogram:
        value = raw["threshold_seconds"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not any(
            math.isclose(value, bound) for bound in objective.buckets
        ):
            bounds = ", ".join(f"{b:g}" for b in objective.buckets)
            problems.append(
                f"{where}.threshold_seconds: {value!r} is not a bound of SGLang's "
                f"{objective.histogram} buckets, so it cannot be counted exactly; choose "
                f"one of {bounds}"
            )


def validate_slos(raw: object) -> list[str]:
    """Problems in a `{objective: {...}}` mapping; empty when it is valid."""
    if not isinstance(raw, Mapping):
        return [f"slos: expected a mapping of objective names, got {raw!r}"]
    problems: list[str] = []
    names = list(OBJECTIVES_BY_NAME)
    for name, value in raw.items():
        if name not in OBJECTIVES_BY_NAME:
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(f"slos: unknown objective {name!r}; {hint}valid: {', '.join(names)}")
            continue
        _check_slo(name, OBJECTIVES_BY_NAME[name], value, problems)
    return problems


def resolve_slos(raw: Mapping[str, Any] | None) -> dict[str, SloSettings]:
    """Every objective's effective settings; raises OverridesError listing all problems."""
    raw = raw or {}
    problems = validate_slos(raw)
    if problems:
        raise OverridesError(problems)
    settings: dict[str, SloSettings] = {}
    for objective in OBJECTIVES:
        base = default_slo_settings(objective)
        given = raw.get(objective.name, {})
        threshold = given.get("threshold_seconds", base.threshold_seconds)
        settings[objective.name] = SloSettings(
            enabled=given.get("enabled", True),
            target=float(given.get("target", base.target)),
            period=given.get("period", base.period),
            threshold_seconds=None if threshold is None else float(threshold),
        )
    return settings


def load_overrides_file(path: Path) -> tuple[dict[str, Any], str]:
    """Read an overrides YAML file: `{runbook_base_url: str, alerts: {name: {...}}, slos: {...}}`.

    Returns (alert overrides, runbook base URL); raises OverridesError naming every problem,
    the SLO settings' included (load_overrides_document returns them too).
    """
    alerts, base_url, _ = load_overrides_document(path)
    return alerts, base_url


def load_overrides_document(path: Path) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(alert overrides, runbook base URL, SLO settings) of an overrides YAML file."""
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
    slos = document.get("slos", {}) or {}
    problems.extend(f"{path}: {problem}" for problem in validate_slos(slos))
    if problems:
        raise OverridesError(problems)
    return dict(alerts), base_url, dict(slos)
