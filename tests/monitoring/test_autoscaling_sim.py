"""The autoscaler's decisions on recorded series (benchmarks/autoscaling_sim.py).

The replica curves of a ramp, a spike and a drafter losing its speedup, with the chart's default
behavior, held to what the chart README promises: no flapping, the ramp followed within the HPA's
tolerance, a burst shorter than the rule's window adding no node, scale-down one replica per
drain, and the same requests asking for more replicas when speculation delivers less. The
formula the simulation applies is then held to the recording rule itself: promtool evaluates
fleet:specserve_replica_load:ratio5m on gauges taken from the simulated curves.
"""

from __future__ import annotations

import math
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.autoscaling_sim import (
    STEP_S,
    TOLERANCE,
    Behavior,
    Replica,
    Step,
    replica_load,
    reversals,
    run,
)
from specserve.monitoring.rules import ALERTS_BY_NAME, FLEET_REPLICA_LOAD, RECORDING_WINDOW

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "prometheus" / "specserve-rules.yml"
TARGET = 0.8
REPLICA = Replica()


@pytest.fixture(scope="module")
def curves() -> dict[str, list[Step]]:
    return {name: run(name) for name in ("ramp", "spike", "drafter-fades")}


def _between(steps: list[Step], start_min: float, end_min: float) -> list[Step]:
    return [s for s in steps if start_min * 60 <= s.t < end_min * 60]


def _changes(steps: list[Step]) -> list[tuple[int, int]]:
    return [(b.t, b.asked - a.asked) for a, b in pairwise(steps)
            if b.asked != a.asked]


def _needed(demand_tps: float, speedup: float) -> float:
    """Replicas at 100%: the demand over one replica's speculative throughput."""
    return demand_tps / (REPLICA.baseline_tps * speedup)


def test_the_ramp_is_followed_up_then_down_without_flapping(curves: dict[str, list[Step]]) -> None:
    steps = curves["ramp"]
    assert reversals([s.asked for s in steps]) == 1  # up the ramp, down the other side
    peak = max(s.asked for s in steps)
    assert all(b.asked >= a.asked for a, b in pairwise(steps)
               if b.t < 120 * 60)
    # On the plateau (6000 tok/s, 7.5 replicas' worth) the count sits within the tolerance of
    # load / target, and it is the peak.
    plateau = _between(steps, 105, 120)
    needed = _needed(6000, 2.0)
    for s in plateau:
        assert s.asked == peak
        assert abs(needed / (TARGET * s.asked) - 1) <= TOLERANCE + 0.03, s
    # Back at 500 tok/s the fleet returns to what that load needs.
    assert steps[-1].asked == max(1, math.ceil(_needed(500, 2.0) / TARGET))


def test_a_burst_shorter_than_the_window_adds_no_replica(curves: dict[str, list[Step]]) -> None:
    steps = curves["spike"]
    before = _between(steps, 25, 30)[-1].asked
    # The 90 s burst at 30 min lifts the 5 m average for longer than it lasts, and is ridden out.
    assert {s.asked for s in _between(steps, 30, 80)} == {before}


def test_a_surge_scales_up_once_and_down_one_drain_at_a_time(
    curves: dict[str, list[Step]],
) -> None:
    steps = curves["spike"]
    assert reversals([s.asked for s in steps]) == 1
    surge = _between(steps, 80, 100)
    assert max(s.asked for s in steps) >= math.ceil(_needed(5000, 2.0) / TARGET / (1 + TOLERANCE))
    assert all(s.queued > 0 for s in surge[-5:])  # the surge outran the fleet: it had to grow
    behavior = Behavior.chart_default()
    period = behavior.down.policies[0].period_s
    downs = [(t, c) for t, c in _changes(steps) if c < 0]
    assert downs and all(c == -1 for _, c in downs)
    assert all(b - a >= period for (a, _), (b, _) in pairwise(downs))
    # The first replica leaves only after the scale-down window of lower recommendations.
    surge_end = 100 * 60
    assert downs[0][0] - surge_end >= behavior.down.window_s


def test_the_same_requests_need_more_replicas_when_speculation_fades(
    curves: dict[str, list[Step]],
) -> None:
    steps = curves["drafter-fades"]
    good, faded, recovered = (_between(steps, 25, 40), _between(steps, 70, 120),
                              _between(steps, 165, 180))
    assert {s.asked for s in good} == {recovered[-1].asked}
    assert min(s.asked for s in faded) > max(s.asked for s in good)
    # The load rises by the speedup's ratio (2.0 / 1.3) for the same demand.
    ratio = (sum(s.load for s in faded) / len(faded)) / (sum(s.load for s in good) / len(good))
    assert ratio == pytest.approx(2.0 / 1.3, rel=0.03)
    assert reversals([s.asked for s in steps]) == 1


def test_the_alert_stays_silent_where_the_autoscaler_has_settled(
    curves: dict[str, list[Step]],
) -> None:
    """SpecServeFleetNeedsReplicas counts servers short only past the HPA's tolerance, so a
    fleet the autoscaler left within it (9 replicas for 9.4 replicas' worth) never fires."""
    alert = ALERTS_BY_NAME["SpecServeFleetNeedsReplicas"]
    limit = alert.threshold("max_utilisation").default * (1 + alert.threshold("tolerance").default)
    assert isinstance(limit, float)
    settled = (_between(curves["ramp"], 105, 120) + _between(curves["drafter-fades"], 70, 120)
               + _between(curves["spike"], 60, 80))
    assert all(s.load / s.serving <= limit for s in settled)
    # Without the tolerance the ramp's plateau would read short all along.
    assert any(math.ceil(s.load / TARGET) > s.serving for s in _between(curves["ramp"], 105, 120))


# --- the formula is the rule's ------------------------------------------------------------------
def _points(curves: dict[str, list[Step]]) -> list[tuple[str, Step]]:
    """A few moments of each curve: rising, queueing, steady, faded."""
    picks = {"ramp": (30, 92, 150), "spike": (20, 95), "drafter-fades": (30, 80)}
    return [(name, curves[name][int(m * 60 / STEP_S)]) for name, ms in picks.items() for m in ms]


def _gauges(step: Step) -> tuple[float, float, float]:
    """What the fleet's SGLang servers report at this step (no noise: exact expectations)."""
    per_request = REPLICA.baseline_tps * step.speedup / REPLICA.max_running
    wanted = step.demand_tps / per_request
    running = min(wanted, step.serving * REPLICA.max_running)
    return running * per_request, running, wanted - running


def _group(name: str, step: Step) -> dict[str, Any]:
    tokens, running, queued = _gauges(step)
    servers = max(step.serving, 1)
    series = []
    for i in range(servers):
        sglang = (f'job="sglang",instance="node{i}:8000",model_name="kimi",'
                  f'engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"')
        exporter = f'job="specserve-exporter",instance="node{i}:9433"'
        series += [
            {"series": f"sglang:gen_throughput{{{sglang}}}", "values": f"{tokens / servers}x15"},
            {"series": f"sglang:num_running_reqs{{{sglang}}}",
             "values": f"{running / servers}x15"},
            {"series": f"sglang:num_queue_reqs{{{sglang}}}", "values": f"{queued / servers}x15"},
            {"series": "specserve_baseline_gen_throughput_tokens_per_second"
                       f'{{{exporter},concurrency="64"}}',
             "values": f"{REPLICA.baseline_tps}x15"},
            # The exporter's decode lines at bucket 64: baseline x speedup tokens/s.
            {"series": "specserve_decode_gen_throughput_tokens_per_second_sum"
                       f'{{{exporter},dp="0",tp="0",pp="0",concurrency="64"}}',
             "values": f"0+{REPLICA.baseline_tps * step.speedup}x15"},
            {"series": "specserve_decode_gen_throughput_tokens_per_second_count"
                       f'{{{exporter},dp="0",tp="0",pp="0",concurrency="64"}}',
             "values": "0+1x15"},
        ]
    expected = replica_load(tokens, running, queued, REPLICA.baseline_tps, step.speedup)
    return {
        "name": f"{name} at {step.t // 60} min: {step.serving} serving",
        "interval": "1m",
        "input_series": series,
        # Equal to the simulation's value within float rounding (promtool compares exactly).
        "promql_expr_test": [{
            "expr": f"abs({FLEET_REPLICA_LOAD}{RECORDING_WINDOW} - {expected!r}) < bool 1e-9",
            "eval_time": "14m",
            "exp_samples": [{"labels": "{}", "value": 1}],
        }],
    }


def test_prometheus_records_the_simulations_formula(
    curves: dict[str, list[Step]], promtool: str, tmp_path: Path
) -> None:
    points = _points(curves)
    assert any(_gauges(s)[2] > 0 for _, s in points)  # a queueing moment is among them
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
             "tests": [_group(name, step) for name, step in points]}
    path = tmp_path / "autoscaling-sim.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
