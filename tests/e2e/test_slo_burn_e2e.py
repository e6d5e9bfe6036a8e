"""Issue 32 item 1 end to end: an injected latency regression burns the TTFT error budget and
pages at the fast-burn windows, through the real Prometheus and Alertmanager on the stand-in.

The rules are rendered as users render them (`specserve rules render --overrides`), with the
chain's 2 s `for` (tests/e2e/stack.py) and an `slos:` section that sets the TTFT objective's
threshold to SGLang's smallest bucket bound, 0.1 s. The stand-in's clock runs 20x fast; healthy
here is every step 20x slower than its model (behaviour throughput_scale 0.05: first tokens in
tens of milliseconds, a dozen requests a second) and the regression 200x (0.005: first tokens
above 0.1 s). The burn-rate windows are the workbook's own (1h/5m, 6h/30m): on a Prometheus a
minute old every window holds the whole history, so each window's error ratio is the share of
bad first tokens since the load started, counted in requests. After HEALTHY_S of good traffic
the 6x pair (30% bad) is passed once the bad requests are 0.43 times the good ones, the 14.4x
pair (72%) at 2.6 times: SpecServeErrorBudgetBurn must reach the webhook as a page (severity
critical, the critical receiver) for slo="ttft", per replica and for the fleet, within the
deadline; then, still firing, its value (the long window's burn) passes 14.4 for the fleet: the
page holds on the 1h/5m pair too. Nothing burns before the regression, and availability (no
5xx) never pages.

The ticket, SpecServeErrorBudgetBurnSlow (1x over 3d and 6h, both the whole history here), holds
from a few seconds after the switch, as soon as the bad first tokens pass 5%; its `for` is set
to TICKET_FOR, past the page's delivery, so it turns firing while the page fires. Without the
Alertmanager example's inhibit rule it would then reach the warning webhook (Alertmanager holds
it, routed to the warning receiver); with it, Alertmanager marks it inhibited by the page of
the same objective and scope, and the warning webhook never receives a TTFT ticket.
"""

from __future__ import annotations

import time

import pytest

from specserve.monitoring.slo import TTFT_BUCKETS
from tests.e2e.load import LoadGenerator
from tests.e2e.processes import wait_until
from tests.e2e.stack import Stack, running_stack
from tests.e2e.webhook import Delivered

pytestmark = pytest.mark.slow

ALERT = "SpecServeErrorBudgetBurn"
TICKET = "SpecServeErrorBudgetBurnSlow"
# The ticket holds about 3 s after the switch and the page is delivered about 25 s after it
# (DEADLINE_S allows 120 s): firing after 120 s, the ticket comes while the page fires.
TICKET_FOR = "120s"
TICKET_DEADLINE_S = 120 + 60
HEALTHY_S = 5.0
HEALTHY = {"acceptance": 0.6, "throughput_scale": 0.05}
REGRESSION = {"acceptance": 0.6, "throughput_scale": 0.005}
# Bad requests come about ten times slower than good ones did: the 6x pair is passed within
# ~5 x HEALTHY_S; then `for`, an evaluation, Alertmanager's group_wait and a slow machine.
DEADLINE_S = 120.0
# The 14.4x pair: bad requests 2.6 times the good ones.
FAST_PAIR_DEADLINE_S = 300.0


def _pages(stack: Stack, since: float) -> list[Delivered]:
    return [d for d in stack.receiver.find(ALERT, "firing")
            if d.received_at >= since and d.labels.get("slo") == "ttft"]  # fmt: skip


def _fleet_burns(stack: Stack, above: float) -> list[float]:
    """The firing page's values for the fleet's TTFT (no instance label) above `above`."""
    return [float(a["value"]) for a in stack.prometheus.alerts()
            if a["labels"]["alertname"] == ALERT and a["state"] == "firing"
            and a["labels"].get("slo") == "ttft" and "instance" not in a["labels"]
            and float(a["value"]) > above]  # fmt: skip


def _firing(stack: Stack, alert: str) -> set[bool]:
    """Whether the TTFT series of `alert` firing in Prometheus are per replica (True) and/or
    the fleet's (False)."""
    return {"instance" in a["labels"] for a in stack.prometheus.alerts()
            if a["labels"]["alertname"] == alert and a["state"] == "firing"
            and a["labels"].get("slo") == "ttft"}  # fmt: skip


def _tickets_held(stack: Stack) -> list[dict]:
    """Alertmanager's TTFT tickets (its API reports each one's inhibition and receivers)."""
    return [a for a in stack.alertmanager_alerts()
            if a["labels"]["alertname"] == TICKET and a["labels"].get("slo") == "ttft"]


def _tickets_delivered(stack: Stack) -> list[Delivered]:
    return [d for d in stack.receiver.find(TICKET, "firing") if d.labels.get("slo") == "ttft"]


def _ticket_inhibited_while_the_page_fires(stack: Stack, switched: float) -> None:
    wait_until(f"{TICKET} firing in Prometheus for slo=ttft per replica and for the fleet",
               lambda: _firing(stack, TICKET) == {True, False},
               TICKET_DEADLINE_S - (time.time() - switched), services=stack.services)
    print(f"ticket firing {time.time() - switched:.0f} s after the regression")
    # While the page fires, for both scopes.
    assert _firing(stack, ALERT) == {True, False}
    # Alertmanager has both tickets, routed to the warning receiver, and holds them back:
    # inhibited by a page (which the scenario above would otherwise deliver).
    wait_until(f"Alertmanager holding both TTFT {TICKET} alerts",
               lambda: len(_tickets_held(stack)) == 2, 20, services=stack.services)
    for alert in _tickets_held(stack):
        assert [r["name"] for r in alert["receivers"]] == ["specserve-warning"], alert
    # Past group_wait and group_interval (1 s each here) several times over: nothing sent.
    time.sleep(5)
    assert not _tickets_delivered(stack), _tickets_delivered(stack)
    wait_until(f"both TTFT {TICKET} alerts inhibited",
               lambda: all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"]
                           for a in _tickets_held(stack)), 10, services=stack.services)
    pages = {a["fingerprint"]: a["labels"] for a in stack.alertmanager_alerts()
             if a["labels"]["alertname"] == ALERT}  # fmt: skip
    for alert in _tickets_held(stack):
        # Each by the page of its own scope: the same `instance`, or none for the fleet.
        (source,) = alert["status"]["inhibitedBy"]
        assert pages[source]["slo"] == "ttft", pages[source]
        assert pages[source].get("instance") == alert["labels"].get("instance"), pages[source]


def test_a_latency_regression_burns_the_budget_and_pages(tmp_path) -> None:
    slos = {"ttft": {"threshold_seconds": TTFT_BUCKETS[0]}}
    with running_stack(tmp_path / "stack", HEALTHY, slos=slos,
                       alerts={TICKET: {"for": TICKET_FOR}}) as stack:  # fmt: skip
        load = LoadGenerator(stack.standin_url, 8, 32, deadline_s=300)
        load.start()
        try:
            load.on()
            time.sleep(HEALTHY_S)
            # Healthy: every first token within 0.1 s, no burn at all.
            ratio_query = 'fleet_slo:sli_error:ratio_rate5m{slo="ttft"}'
            wait_until("the fleet's TTFT error ratio recorded",
                       lambda: bool(stack.prometheus.query(ratio_query)), 10,
                       services=stack.services)  # fmt: skip
            ratio = stack.prometheus.query(ratio_query)
            assert all(float(s["value"][1]) == 0.0 for s in ratio), ratio
            assert ALERT not in stack.prometheus.alert_states()
            assert not stack.receiver.find(ALERT, "firing")

            switched = time.time()
            stack.set_behaviour(REGRESSION)
            try:
                wait_until(
                    f"{ALERT} paged for slo=ttft per replica and for the fleet",
                    lambda: {"instance" in d.labels for d in _pages(stack, switched)}
                    == {True, False},
                    DEADLINE_S, services=stack.services,
                )
            except AssertionError:
                for window in ("5m", "1h"):
                    print(window, stack.prometheus.query(
                        f'fleet_slo:sli_error:ratio_rate{window}{{slo="ttft"}}'))
                print(stack.prometheus.query(
                    "sum by (le) (sglang:time_to_first_token_seconds_bucket)"))
                raise
            pages = _pages(stack, switched)
            assert {d.labels["severity"] for d in pages} == {"critical"}
            # Routed as a page: the critical severity's receiver.
            assert {d.path for d in pages} == {"/critical"}, {d.path for d in pages}
            print(f"paged {pages[0].received_at - switched:.1f} s after the regression")
            # The ticket holds already, pending for TICKET_FOR: it fires while the page fires.
            assert not _tickets_delivered(stack)
            _ticket_inhibited_while_the_page_fires(stack, switched)
            wait_until(
                f"{ALERT} firing for the fleet's TTFT at a burn above 14.4 (the 1h/5m pair)",
                lambda: bool(_fleet_burns(stack, 14.4)), FAST_PAIR_DEADLINE_S,
                services=stack.services,
            )
            print(f"fleet burn {_fleet_burns(stack, 14.4)} {time.time() - switched:.0f} s after "
                  "the regression")
            short = stack.prometheus.value(
                'fleet_slo:sli_error:ratio_rate5m{slo="ttft"} / on (slo) group_left () '
                "slo:error_budget:ratio"
            )
            assert short is not None and short > 14.4, short
            assert not [d for d in stack.receiver.find(ALERT, "firing")
                        if d.labels.get("slo") == "availability"]  # fmt: skip
            # Still firing, still inhibited: no TTFT ticket reached the warning webhook.
            assert _firing(stack, TICKET) == {True, False}
            assert not _tickets_delivered(stack), _tickets_delivered(stack)
        finally:
            load.stop()
