"""The Grafana-managed SLO burn-rate rules against the rule file's, on the real promtool.

Grafana's query A inlines the SLO records (slo.inline_burn_expr); the rule file's alerts read
them by name. Both are evaluated by promtool's PromQL engine on the same counters, the rule file's
SLO group loaded for the second only: at no burn, a burn just begun (short windows only), a slow
burn (the ticket), the 6h/30m and 1h/5m pages, and a burn just stopped (the 1h window still
above 14.4, the 5m one clean), three objectives on two replicas, they must return the same series
(every label, `slo` and the scope's) with the same values: `(G unless R) or (R unless G)` and
`G != R` empty, and the series expected by hand present. The ticket's Grafana query must equal
the rule file's ticket less the series where the page's condition holds (Grafana has no
inhibition), for the same objective and scope only. Then the same comparison with a Grafana query
that drops an objective or a window, or the ticket's `unless`, must fail: the comparison can tell.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from specserve.monitoring import slo
from specserve.monitoring.grafana_alerting import grafana_alert_rules
from specserve.monitoring.overrides import resolve_slos
from specserve.monitoring.prometheus import ALERT_GROUP, SLO_GROUP, render_rules
from specserve.monitoring.slo import OBJECTIVES, BurnRate, inline_burn_expr
from specserve.monitoring.yamlio import dump_yaml

from .conftest import PROMTOOL_TESTS_TIMEOUT, run

PAGE, TICKET = "SpecServeErrorBudgetBurn", "SpecServeErrorBudgetBurnSlow"
TTFT = "sglang:time_to_first_token_seconds"
ITL = "sglang:inter_token_latency_seconds"
ROUTER = {"job": "specserve-router", "instance": "router:29000", "router_type": "regular"}
NODE1, NODE2 = "node1:8000", "node2:8000"
SERVER = {"job": "sglang", "model_name": "kimi", "engine_type": "unified"}


def _text(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{value}"' for key, value in labels.items())


def counter(*segments: tuple[float, int]) -> str:
    """promtool values: `per_minute` more each minute for `minutes`, segment after segment; the
    first segment's `a+bxn` holds n+1 samples (from t=0), each later one starts a step on."""
    parts: list[str] = []
    value = 0.0
    for index, (per_minute, minutes) in enumerate(segments):
        if index:
            value += per_minute
            minutes -= 1
        parts.append(f"{value:g}+{per_minute:g}x{minutes}")
        value += per_minute * minutes
    return " ".join(parts)


TTFT_BOUNDS = ("1.0", "2.0", "4.0", "8.0", "16.0")
ITL_BOUNDS = ("0.06", "0.1", "0.2", "0.4", "0.8")


def histogram(
    name: str, bounds: tuple[str, ...], instance: str, good_le: str, bad_le: str,
    *phases: tuple[float, float, int], **extra: str,
) -> dict[str, str]:
    """Per phase (good, bad, minutes): `good` observations a minute in the `good_le` bucket,
    `bad` in the `bad_le` one, bounds written as SGLang's exposition writes them ("2.0")."""
    labels = {**SERVER, "instance": instance, **extra}
    series = {}
    for le in (*bounds, "+Inf"):
        top = float(le)
        series[f"{name}_bucket{{{_text({**labels, 'le': le})}}}"] = counter(*(
            (good * (top >= float(good_le)) + bad * (top >= float(bad_le)), minutes)
            for good, bad, minutes in phases
        ))  # fmt: skip
    series[f"{name}_count{{{_text(labels)}}}"] = counter(*((g + b, m) for g, b, m in phases))
    return series


def router(*phases: tuple[float, int]) -> dict[str, str]:
    """100 requests a minute, each phase's share of them failing: one 200 per success, three 503
    attempts per failure with the two retries between them (as the pinned smg counts them)."""
    request = _text({**ROUTER, "backend_type": "regular", "connection_mode": "http",
                     "model": "kimi", "endpoint": "chat", "streaming": "false"})  # fmt: skip
    retries = _text({"job": ROUTER["job"], "instance": ROUTER["instance"],
                     "worker_type": "regular", "endpoint": "chat"})  # fmt: skip
    responses = "smg_router_upstream_responses_total"
    ok = _text({**ROUTER, "status_code": "200", "error_code": ""})
    failed = _text({**ROUTER, "status_code": "503", "error_code": "no_available_workers"})
    return {
        f"smg_router_requests_total{{{request}}}": counter(*((100, m) for _, m in phases)),
        f"{responses}{{{ok}}}": counter(*((100 * (1 - bad), m) for bad, m in phases)),
        f"{responses}{{{failed}}}": counter(*((300 * bad, m) for bad, m in phases)),
        f"smg_worker_retries_total{{{retries}}}": counter(*((200 * bad, m) for bad, m in phases)),
    }


def series(ttft_bad: str, itl_bad: str) -> dict[str, str]:
    """220 minutes. TTFT on node1: 10 a minute, good (1 s) for 60 minutes, all bad (`ttft_bad`)
    for 90, good again. node2: 60 good first tokens a minute throughout, so the fleet's TTFT
    burns slowly (10 bad of 70 a minute while node1's are bad): a ticket, never a page. ITL on
    node1 only: 10% bad throughout (2x at 95%: a ticket per replica and for the fleet, never a
    page). The router: half the requests failing from minute 60 to 90 (the fleet's
    availability pages)."""
    return {
        **histogram(TTFT, TTFT_BOUNDS, NODE1, "1.0", ttft_bad, (10, 0, 60), (0, 10, 90),
                    (10, 0, 70), is_streaming="false"),
        **histogram(TTFT, TTFT_BOUNDS, NODE2, "1.0", ttft_bad, (60, 0, 220),
                    is_streaming="false"),
        **histogram(ITL, ITL_BOUNDS, NODE1, "0.06", itl_bad, (9, 1, 220)),
        **router((0, 60), (0.5, 30), (0, 130)),
    }


def scope(name: str, instance: str | None) -> dict[str, str]:
    """The labels of one objective's burn series: the replica's, or the fleet's (no instance)."""
    if name == "availability":
        return {"job": ROUTER["job"], "router_type": "regular", "slo": name}
    base = {**SERVER, "slo": name}
    return {**base, "instance": instance} if instance else base


TTFT1, TTFT_FLEET = scope("ttft", NODE1), scope("ttft", None)
ITL1, ITL_FLEET = scope("itl", NODE1), scope("itl", None)
AVAILABILITY = scope("availability", None)

# eval time -> (the page's series, the ticket's series as Grafana must give it: less the paged).
# The 3d and 6h windows hold the whole history (220 minutes), so the ticket counts every bad
# event since the start: 5% bad (1% for availability) overall is 1x.
EXPECTED: dict[str, tuple[tuple[dict[str, str], ...], tuple[dict[str, str], ...]]] = {
    # Nothing burns but ITL's 2x: a ticket per replica and for the fleet.
    "30m": ((), (ITL1, ITL_FLEET)),
    # node1's TTFT bad for 5 minutes: 5 of 65 overall (1.5x: a ticket), the 1h window under 2x
    # (no page though the 5m one burns 20x); availability 2.5 of 65 (3.8x).
    "65m": ((), (TTFT1, ITL1, ITL_FLEET, AVAILABILITY)),
    # Availability pages on the 6h/30m pair (its ticket, which holds, left out); node1's TTFT
    # 14 of 74 (3.8x: a ticket, below the page's 6x over 6h).
    "74m": ((AVAILABILITY,), (TTFT1, ITL1, ITL_FLEET)),
    # node1's TTFT pages on the 6h/30m pair (6.7x), availability still: both tickets left out;
    # the fleet's TTFT is no ticket yet (300 bad of 6300: 0.95x).
    "90m": ((TTFT1, AVAILABILITY), (ITL1, ITL_FLEET)),
    # node1's TTFT on the 1h/5m pair (20x); the fleet's TTFT burns 1.5x: a ticket, not silenced
    # by node1's page (another scope); availability's page over (its 30m window clean), its
    # ticket back (15 of 130 minutes failed: 11.5x).
    "130m": ((TTFT1,), (TTFT_FLEET, ITL1, ITL_FLEET, AVAILABILITY)),
    # Five minutes good again: the 1h window still above 14.4 but the 5m one clean: the 6h/30m
    # pair's value (the 6h burn), not the 1h's.
    "155m": ((TTFT1,), (TTFT_FLEET, ITL1, ITL_FLEET, AVAILABILITY)),
    # The 30m window clean: no page; node1's TTFT ticket is back.
    "200m": ((), (TTFT1, TTFT_FLEET, ITL1, ITL_FLEET, AVAILABILITY)),
}
# node1's TTFT page by hand (target 95%): the long window's burn rate of the pair that holds.
# 90m: 30 of 90 minutes bad over 6h (all the history) / 0.05; 130m: the 1h window all bad;
# 155m: 90 of 155 minutes over 6h, the 1h/5m pair off (the 1h at 18.3 but the 5m clean).
NODE1_PAGE_VALUES = {"90m": 6.7, "130m": 20.0, "155m": 11.6}
# Grafana's queries at these settings vs the rule file rendered with them: the defaults (bad
# first tokens at 4 s, bad intervals at 0.2 s), and TTFT's threshold at 4 s (bad at 8 s),
# ITL's at 0.2 s (bad at 0.4 s) with a 96% target (2.5x: still a ticket only), availability
# off (no series on either side).
SETTINGS: dict[str, tuple[dict[str, Any], str, str]] = {
    "defaults": ({}, "4.0", "0.2"),
    "set": ({"ttft": {"threshold_seconds": 4},
             "itl": {"threshold_seconds": 0.2, "target": 0.96, "period": "30d"},
             "availability": {"enabled": False}}, "8.0", "0.4"),
}  # fmt: skip


def rule_file_alerts(slos: dict[str, Any]) -> dict[str, str]:
    """The rule file's two alert expressions (records by name) at `slos`."""
    document = render_rules(slos=slos)
    (alerts,) = [g for g in document["groups"] if g["name"] == ALERT_GROUP]
    return {r["alert"]: r["expr"] for r in alerts["rules"] if r["alert"] in (PAGE, TICKET)}


def grafana_alerts(slos: dict[str, Any]) -> dict[str, str]:
    """Grafana's two rules as they fire: query A, then C's threshold on its last value."""
    found = {}
    for rule in grafana_alert_rules(slos=slos)["groups"][0]["rules"]:
        if rule["title"] in (PAGE, TICKET):
            evaluator = rule["data"][2]["model"]["conditions"][0]["evaluator"]
            assert evaluator["type"] == "gt" and rule["data"][1]["model"]["reducer"] == "last"
            found[rule["title"]] = (
                f"(\n{rule['data'][0]['model']['expr']}\n) > {evaluator['params'][0]:g}"
            )
    return found


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def _empty(expr: str, at: str) -> dict[str, Any]:
    return {"expr": expr, "eval_time": at, "exp_samples": []}


def _present(expr: str, at: str, labels: tuple[dict[str, str], ...]) -> dict[str, Any]:
    return {"expr": f"(\n{expr}\n) * 0 + 1", "eval_time": at,
            "exp_samples": [{"labels": _labels(item), "value": 1} for item in labels]}


def comparisons(
    grafana: dict[str, str], rules: dict[str, str], objectives: set[str]
) -> list[dict[str, Any]]:
    """promql_expr_tests: Grafana's two queries against the rule file's alerts."""
    page_r = rules[PAGE]
    # Grafana's ticket must be the rule file's less the series where the page's condition holds.
    ticket_r = f"(\n{rules[TICKET]}\n)\nunless\n(\n{page_r}\n)"
    tests: list[dict[str, Any]] = []
    for at, (pages, tickets) in EXPECTED.items():
        for g, r in ((grafana[PAGE], page_r), (grafana[TICKET], ticket_r)):
            # The same series, every label compared...
            tests.append(_empty(f"(\n{g}\n)\nunless\n(\n{r}\n)\nor\n(\n{r}\n)\nunless\n"
                                f"(\n{g}\n)", at))
            # ...with the same values, exactly.
            tests.append(_empty(f"(\n{g}\n)\n!=\n(\n{r}\n)", at))
        # Which series, by hand: the comparisons above are not of two empty results.
        tests.append(_present(grafana[PAGE], at, tuple(p for p in pages
                                                        if p["slo"] in objectives)))
        tests.append(_present(grafana[TICKET], at, tuple(t for t in tickets
                                                          if t["slo"] in objectives)))
        if at in NODE1_PAGE_VALUES:
            node1 = f'label_replace(vector(1), "instance", "{NODE1}", "", "")'
            tests.append({
                "expr": f"round((\n{grafana[PAGE]}\n), 0.1) and on (instance) {node1}",
                "eval_time": at,
                "exp_samples": [{"labels": _labels(TTFT1), "value": NODE1_PAGE_VALUES[at]}],
            })
    # The ticket's `unless` leaves something out: the rule file's ticket and page both hold.
    tests.append(_present(f"(\n{rules[TICKET]}\n) and (\n{page_r}\n)", "130m", (TTFT1,)))
    return tests


def promtool_file(directory: Path, name: str, settings: str, grafana: dict[str, str]) -> Path:
    """A promtool test file of `comparisons` over `series` with the rule file's SLO group
    rendered at SETTINGS[settings] (the records its alerts read; nothing else loaded)."""
    slos, ttft_bad, itl_bad = SETTINGS[settings]
    document = render_rules(slos=slos)
    (group,) = [g for g in document["groups"] if g["name"] == SLO_GROUP]
    rules = directory / f"{name}-rules.yml"
    rules.write_text(dump_yaml({"groups": [group]}))
    enabled = {o.name for o in OBJECTIVES if resolve_slos(slos)[o.name].enabled}
    test = directory / f"{name}.yml"
    test.write_text(dump_yaml({
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [{
            "name": name,
            "interval": "1m",
            "input_series": [{"series": k, "values": v}
                             for k, v in series(ttft_bad, itl_bad).items()],
            "promql_expr_test": comparisons(grafana, rule_file_alerts(slos), enabled),
        }],
    }))  # fmt: skip
    return test


@pytest.mark.parametrize("settings", list(SETTINGS), ids=str)
def test_grafana_burn_rules_fire_as_the_rule_files_alerts(
    promtool: str, tmp_path: Path, settings: str
) -> None:
    slos = SETTINGS[settings][0]
    grafana = grafana_alerts(slos)
    assert set(grafana) == {PAGE, TICKET}
    # Grafana runs without the rule file: its queries name no SLO record.
    assert not re.search(r"\b(fleet_)?slo:", "\n".join(grafana.values()))
    # A disabled objective is left out as the rule file leaves out its records.
    assert ("smg_router" in grafana[PAGE]) == (settings == "defaults")
    test = promtool_file(tmp_path, settings, settings, grafana)
    result = run(promtool, "test", "rules", str(test), cwd=tmp_path,
                 timeout=PROMTOOL_TESTS_TIMEOUT)  # fmt: skip
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]


def _defaults() -> list[tuple[slo.Objective, Any]]:
    objectives = resolve_slos({})
    return [(o, objectives[o.name].text) for o in OBJECTIVES]


def _mutants() -> dict[str, dict[str, str]]:
    """Grafana queries each missing one piece: an objective, the pairs' short or long windows,
    the ticket's `unless` of the page."""
    def both(objectives: Any = None, rates: Any = slo.BURN_RATES) -> dict[str, str]:
        objectives = objectives or _defaults()
        return {alert: f"(\n{inline_burn_expr(severity, objectives, rates)}\n) > 0"
                for alert, severity in ((PAGE, "critical"), (TICKET, "warning"))}  # fmt: skip

    mutants = {
        f"without-{objective.name}": both([item for item in _defaults() if item[0] != objective])
        for objective in OBJECTIVES
    }
    mutants["without-short-windows"] = both(
        rates=[BurnRate(r.severity, r.long, r.long, r.factor) for r in slo.BURN_RATES])
    mutants["without-long-windows"] = both(
        rates=[BurnRate(r.severity, r.short, r.short, r.factor) for r in slo.BURN_RATES])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(slo, "SILENCED_BY", {})
        mutants["ticket-without-unless"] = both()
    return mutants


def test_the_comparison_fails_without_an_objective_a_window_or_the_unless(
    promtool: str, tmp_path: Path
) -> None:
    # The mutants are built by the function the provisioned rules come from.
    unchanged = {alert: f"(\n{inline_burn_expr(severity, _defaults())}\n) > 0"
                 for alert, severity in ((PAGE, "critical"), (TICKET, "warning"))}  # fmt: skip
    assert unchanged == grafana_alerts({})
    for name, grafana in _mutants().items():
        test = promtool_file(tmp_path, name, "defaults", grafana)
        result = run(promtool, "test", "rules", str(test), cwd=tmp_path,
                     timeout=PROMTOOL_TESTS_TIMEOUT)  # fmt: skip
        failed = result.stdout + result.stderr
        assert result.returncode == 1 and "FAILED" in failed, (name, failed[-3000:])
        # Failed on a comparison with the rule file's alerts, not only on the series by hand:
        # promtool prints the failing expression, newlines escaped, and only the comparisons
        # join two queries with a `!=` or an `or` at the start of a line.
        assert r"\n!=\n" in failed or r")\nor\n(" in failed, (name, failed[-3000:])
