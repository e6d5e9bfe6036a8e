"""Every measurement the alert catalogue makes has a place in diagnose's reading of it."""

from __future__ import annotations

from specserve.diagnose.causes import MEANINGS, Role
from specserve.monitoring.rules import ALERTS, ALERTS_BY_NAME


def test_every_alert_has_a_meaning_and_no_meaning_names_a_lost_alert() -> None:
    names = {alert.name for alert in ALERTS}
    assert names - set(MEANINGS) == set(), "alerts diagnose would silently ignore"
    assert set(MEANINGS) - names == set(), "meanings of alerts the catalogue no longer has"


def test_only_causes_explain_and_nothing_explains_itself_back() -> None:
    for name, meaning in MEANINGS.items():
        for other in meaning.explains:
            assert other in ALERTS_BY_NAME, (name, other)
            assert MEANINGS[other].role is not Role.BLIND, (name, other)
            # No cycle: what this explains never explains it (the verdict would hide both).
            assert name not in MEANINGS[other].explains, (name, other)
        if meaning.role is not Role.CAUSE:
            assert meaning.explains == (), name
