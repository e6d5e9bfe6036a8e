"""The ranking: blindness, then causes with the symptoms they explain, then what is unexplained."""

from __future__ import annotations

from specserve.diagnose.causes import Role
from specserve.diagnose.evidence import Evidence, Seen
from specserve.diagnose.verdict import judge
from specserve.profile.issues import warning

BELOW, REJECTED = "SpecDecodeBelowBaseline", "SpecDecodeDraftsRejected"
QUEUE, TTFT = "SpecDecodeQueueBacklog", "SpecServeTimeToFirstTokenHigh"
ITL = "SpecServeInterTokenLatencyHigh"
LOG_DOWN = "SpecServeLogSourceDown"
HOST = {"instance": "node-a:9400", "concurrency": "8"}
BASELINE = warning("baseline", "the baseline records none of its settings", "re-measure it")


def _evidence(*names: str) -> Evidence:
    return Evidence(tuple(Seen(name, HOST, 0.5) for name in names), {REJECTED: "firing"},
                    {"node-a:9400": (True, 3.0)})  # fmt: skip


def test_nothing_holds_no_cause_and_profile_findings_are_latent() -> None:
    verdict = judge(_evidence(), [BASELINE])
    assert not verdict.found and verdict.findings == ()
    text = verdict.render()
    assert "no cause found" in text
    assert "profile, latent (warning): baseline" in text
    assert "adaptive speculation on, draft tokens now 3" in text


def test_a_cause_folds_the_symptoms_it_explains() -> None:
    verdict = judge(_evidence(BELOW, REJECTED, TTFT))
    [finding] = verdict.findings
    assert finding.title == REJECTED and finding.explained == (BELOW, TTFT)
    assert "(alert firing)" in finding.evidence[0]
    # A backlog explains slow first tokens, not slow tokens after them.
    verdict = judge(_evidence(QUEUE, TTFT, ITL))
    assert [(f.title, f.explained) for f in verdict.findings] == [(QUEUE, (TTFT,)), (ITL, ())]


def test_blindness_ranks_first_and_unexplained_symptoms_last() -> None:
    verdict = judge(_evidence(BELOW, LOG_DOWN, QUEUE), [BASELINE])
    roles = [(f.role, f.title) for f in verdict.findings]
    assert roles[0] == (Role.BLIND, LOG_DOWN)
    assert roles[1] == (Role.CAUSE, QUEUE)
    assert (Role.CAUSE, "profile: baseline") in roles
    # The backlog explains the throughput below the baseline at that concurrency.
    assert all(title != BELOW for _, title in roles)
    assert "node-a:9400" in verdict.render() and "alert firing" not in verdict.render()


def test_an_unexplained_symptom_is_a_finding_with_where_to_look() -> None:
    verdict = judge(_evidence(BELOW))
    assert verdict.found
    [finding] = verdict.findings
    assert finding.role is Role.SYMPTOM and "verify or draft step" in finding.cause
    assert "instance=node-a:9400, concurrency=8: value 0.5" in finding.evidence[0]


def test_graph_misses_fold_the_graphs_off_reading_of_the_same_passes() -> None:
    verdict = judge(_evidence("SpecDecodeGraphDisabled", "SpecDecodeGraphMisses", BELOW))
    [finding] = verdict.findings
    assert finding.title == "SpecDecodeGraphMisses"
    assert finding.explained == (BELOW, "SpecDecodeGraphDisabled")
    # Graphs off altogether (no bucket on them): the misses do not hold, graphs off is the cause.
    verdict = judge(_evidence("SpecDecodeGraphDisabled", BELOW))
    assert [(f.title, f.explained) for f in verdict.findings] == [
        ("SpecDecodeGraphDisabled", (BELOW,))]
