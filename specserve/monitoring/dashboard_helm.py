"""The Helm chart's dashboard: a named template that prints the dashboard JSON with the windows
and thresholds of the PrometheusRule's values, as `specserve rules dashboard --overrides` prints
it for the same settings (and as the Ansible monitoring role renders it).

`dashboard.build_dashboard` runs once on stand-in settings: every window and string threshold is
a token, every numeric threshold a sentinel number (the builder formats and compares numbers, so
it needs floats). In the JSON text, escaped for Helm (the legends' own `{{instance}}` reach
Grafana verbatim), each token and sentinel is then replaced by the Helm action of its value
(helm.threshold_action: `.Values.prometheusRule.alerts.<Name>.window` / `.thresholds.<name>`,
or the profile's fact such as SpecServeGpuMissing's GPUs per node).

One panel depends on the values beyond printing them: the accept-length panel draws one mean per
distinct window of its two alerts, so it is built a second time with those windows equal and
the template chooses between the two target lists with `eq`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from specserve.monitoring.dashboard import ACCEPT_LENGTH_ALERTS, build_dashboard
from specserve.monitoring.expansion import AlertSettings, default_settings, format_number
from specserve.monitoring.helm import escape_go_template, profile_threshold, threshold_action
from specserve.monitoring.rules import ALERTS, WINDOW, Alert

TEMPLATE = "specserve.dashboard"
# The numbers stand for thresholds: whole, under 10^6 (so `:g` prints them as they are), and no
# number the dashboard itself holds (checked in `dashboard_helm_template`).
_SENTINEL_BASE = 987000
_SENTINEL = re.compile(r"(?<![0-9.])987([0-9]{3})(?:\.0)?(?!\.?[0-9])")
_TOKEN = re.compile(r"xHelmDash([0-9]+)x")
_TARGETS = "xHelmAcceptLengthTargetsx"


def _action(alert: Alert, name: str, default: float | str) -> str:
    """The Helm action of a threshold's value. A profile fact that comes out 0 (the CPU stand-in
    has no GPUs) keeps the rule's default, as the Ansible role keeps it where no DCGM exporter
    is deployed: the alert is left out then, the panel's line is not."""
    profile = profile_threshold(alert, name)
    if profile is not None:
        assert isinstance(default, float)
        return f"{{{{ int ({profile.action()}) | default {format_number(default)} }}}}"
    return str(threshold_action(alert)(name))


class _Values:
    """Stand-in settings for every alert, and the Helm variable each stand-in value prints:
    `$<Alert>_<threshold>` / `$<Alert>_window`, set once at the top of the template."""

    def __init__(self) -> None:
        self.variables: list[tuple[str, str]] = []  # (name, pipeline)
        self.strings: list[str] = []  # token index -> variable
        self.numbers: list[str] = []  # sentinel index -> variable
        self.settings: dict[str, AlertSettings] = {}
        for alert in ALERTS:
            defaults = default_settings(alert)
            thresholds: dict[str, float | str] = {}
            for name, default in defaults.thresholds.items():
                variable = self._variable(f"{alert.name}_{name}", _action(alert, name, default),
                                          string=isinstance(default, str))
                if isinstance(default, str):
                    thresholds[name] = self._token(variable)
                else:
                    self.numbers.append(variable)
                    thresholds[name] = float(_SENTINEL_BASE + len(self.numbers) - 1)
            window = None
            if alert.window is not None:
                window = self._token(self._variable(
                    f"{alert.name}_window", threshold_action(alert)(WINDOW), string=True))
            self.settings[alert.name] = dataclasses.replace(
                defaults, thresholds=thresholds, window=window)

    def _variable(self, name: str, action: str, *, string: bool) -> str:
        assert action.startswith("{{ ") and action.endswith(" }}"), action
        pipeline = action[3:-3]
        if string:  # printed inside a JSON string: a label value may hold a quote
            pipeline = f'{pipeline} | toJson | trimPrefix "\\"" | trimSuffix "\\""'
        self.variables.append((f"${name}", pipeline))
        return f"${name}"

    def _token(self, variable: str) -> str:
        self.strings.append(variable)
        return f"xHelmDash{len(self.strings) - 1}x"

    def with_equal_accept_windows(self) -> dict[str, AlertSettings]:
        """The same settings with the accept-length alerts' windows one token: the values'
        case where the user sets them equal."""
        first, second = ACCEPT_LENGTH_ALERTS
        return {**self.settings, second: dataclasses.replace(
            self.settings[second], window=self.settings[first].window)}

    def header(self, body: str) -> str:
        """The variables `body` reads, each set from its value."""
        return "".join(f"{{{{- {name} := {pipeline} -}}}}\n" for name, pipeline in self.variables
                       if re.search(re.escape(name) + r"\b", body))

    def live(self, text: str) -> str:
        """`text` (already escaped for Helm) with each token and sentinel printing its value."""
        text = _TOKEN.sub(lambda m: "{{ " + self.strings[int(m[1])] + " }}", text)
        return _SENTINEL.sub(lambda m: "{{ " + self.numbers[int(m[1])] + " }}", text)


def _accept_length_panel(apart: dict[str, Any], together: dict[str, Any]) -> int:
    """Index of the one panel whose targets differ between the two builds; nothing else may."""
    differing = [i for i, (a, b) in enumerate(zip(apart["panels"], together["panels"],
                                                   strict=True)) if a != b]
    if len(differing) != 1:
        raise ValueError(f"expected one panel to depend on the accept-length windows being "
                         f"equal, got {len(differing)}")
    (index,) = differing
    a, b = apart["panels"][index], together["panels"][index]
    if {**a, "targets": None} != {**b, "targets": None}:
        raise ValueError(f"panel {a.get('title')!r}: more than its targets depend on the "
                         "accept-length windows")
    return index


def dashboard_helm_template() -> str:
    """Text of the chart's `templates/_dashboard.tpl`: the named template `specserve.dashboard`
    (called with the root context) prints the dashboard JSON."""
    if _SENTINEL.search(escape_go_template(json.dumps(build_dashboard(), indent=2))):
        raise ValueError("the default dashboard holds a number of the sentinels' range")
    values = _Values()
    apart = build_dashboard(values.settings)
    together = build_dashboard(values.with_equal_accept_windows())
    index = _accept_length_panel(apart, together)

    marked = json.loads(json.dumps(apart))
    marked["panels"][index]["targets"] = _TARGETS
    text = escape_go_template(json.dumps(marked, indent=2))
    at = text.index(json.dumps(_TARGETS))
    indent = " " * (at - text.rindex("\n", 0, at) - 1 - len('"targets": '))

    def targets(model: dict[str, Any]) -> str:
        """The panel's targets as they would sit in the dashboard's text."""
        dumped = json.dumps(model["panels"][index]["targets"], indent=2)
        return escape_go_template(dumped.replace("\n", "\n" + indent))

    first, second = ACCEPT_LENGTH_ALERTS
    choice = (f"{{{{ if eq ${first}_window ${second}_window }}}}{targets(together)}"
              f"{{{{- else }}}}{targets(apart)}{{{{- end }}}}")
    body = values.live(text.replace(json.dumps(_TARGETS), choice))
    return (
        "{{- /* Generated by `specserve generate` from specserve/monitoring/dashboard_helm.py; "
        "do not edit. */}}\n"
        f'{{{{- define "{TEMPLATE}" -}}}}\n'
        + values.header(body)
        + body
        + "\n{{- end }}\n"
    )
