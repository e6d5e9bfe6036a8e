"""The autoscaler's decisions on recorded series (benchmarks/autoscaling_sim.py).

The replica curves of a ramp, a spike, a drafter losing its speedup and a replica dropping out of
the router's rotation, with the chart's default behavior, held to what the chart README promises:
no flapping, the ramp followed within the HPA's tolerance, a burst shorter than the rule's window
adding no node, scale-down one replica per drain, the same requests asking for more replicas when
speculation delivers less, and one replica more while one is out of rotation, none more while
the new one loads (no cascade), back after. The formula the simulation applies is then held to
the recording rules themselves: promtool evaluates fleet:specserve_replica_load:ratio5m,
fleet:specserve_workers_out_of_rotation:count5m and the autoscaler's query (KEDA's, and
prometheus-adapter's rule) on series taken from the simulated curves.
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
    BLIP_UNTIL_S,
    OUT_FROM_S,
    OUT_UNTIL_S,
    STEADY_REPLICAS,
    STEP_S,
    TOLERANCE,
    WINDOW_STEPS,
    Behavior,
    Counting,
    Replica,
    Step,
    replica_load,
    reversals,
    run,
)
from specserve.monitoring.dashboard import build_dashboard
from specserve.monitoring.rules import (
    ALERTS_BY_NAME,
    FLEET_REPLICA_LOAD,
    FLEET_WORKERS_OUT,
    RECORDING_WINDOW,
    autoscaler_adapter_query,
    autoscaler_metric,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "prometheus" / "specserve-rules.yml"
TARGET = 0.8
REPLICA = Replica()


@pytest.fixture(scope="module")
def curves() -> dict[str, list[Step]]:
    return {name: run(name)
            for name in ("ramp", "spike", "drafter-fades", "replica-out", "replica-blip")}


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


# --- a replica out of rotation -------------------------------------------------------------------
def _first(steps: list[Step], after_s: int, asked: int) -> int:
    return next(s.t for s in steps if s.t >= after_s and s.asked == asked)


def test_a_replica_out_of_rotation_is_replaced_while_out_and_released_after(
    curves: dict[str, list[Step]],
) -> None:
    steps = curves["replica-out"]
    behavior = Behavior.chart_default()
    window_s = WINDOW_STEPS * STEP_S
    base = STEADY_REPLICAS
    # Replica 0 fails at 40 min. It counts once out for the whole 5 m window, the extra replica
    # is asked for once the scale-up window has seen it, and not before.
    assert all(s.out == 0 and s.asked == base for s in steps if s.t < OUT_FROM_S)
    counted = next(s.t for s in steps if s.out)
    assert OUT_FROM_S + window_s - STEP_S <= counted <= OUT_FROM_S + window_s
    up = _first(steps, OUT_FROM_S, base + 1)
    assert up - counted == behavior.up.window_s
    # One more while it is out, and only one: the new replica, listed with health 0 while it
    # loads its weights, is never counted out (no cascade). Once it serves, the fleet serves the
    # steady count again although replica 0 is still out.
    during = [s for s in steps if up <= s.t < OUT_UNTIL_S]
    assert {s.asked for s in during} == {base + 1}
    assert {s.out for s in during} == {1}
    loaded = up + Replica().load_s
    assert {s.serving for s in during if s.t >= loaded} == {base}
    # Back at 100 min: the count is 0 at once; the extra replica leaves after the scale-down
    # window, and it is the newest that goes, not the one that came back.
    assert all(s.out == 0 for s in steps if s.t >= OUT_UNTIL_S)
    down = _first(steps, OUT_UNTIL_S, base)
    assert down - OUT_UNTIL_S == behavior.down.window_s
    assert all(s.asked == base for s in steps if s.t >= down)
    assert {i for i, _ in steps[-1].health} == set(range(base))
    # No flapping: up once, down once.
    assert reversals([s.asked for s in steps]) == 1
    assert len(_changes(steps)) == 2


def test_the_traps_the_count_avoids_would_misfire(curves: dict[str, list[Step]]) -> None:
    """Counting a replica that was never in rotation (still loading) asks for another while each
    new one loads; counting one removed by scale-down (router_worker_state's -1) holds the count
    up after the outage. The rule's count does neither (the test above)."""
    base = STEADY_REPLICAS
    loading = run("replica-out", Counting(since_in_rotation=False))
    assert max(s.asked for s in loading) > base + 1
    assert max(s.out for s in loading) > 1
    gone = run("replica-out", Counting(gone_counts=True))
    assert gone[-1].asked == base + 1 and reversals([s.asked for s in gone]) > 1
    # The curves with no outage are the ones they were: every replica was asked for by load.
    for name in ("ramp", "spike", "drafter-fades"):
        assert all(s.out == 0 for s in curves[name]), name
        assert max(s.asked for s in run(name, Counting(since_in_rotation=False))) > max(
            s.asked for s in curves[name]), name


def test_an_outage_shorter_than_the_windows_adds_nothing(curves: dict[str, list[Step]]) -> None:
    steps = curves["replica-blip"]
    outage_s = BLIP_UNTIL_S - OUT_FROM_S
    assert outage_s < WINDOW_STEPS * STEP_S + Behavior.chart_default().up.window_s
    assert any(s.out for s in steps)  # counted for a while...
    assert {s.asked for s in steps} == {STEADY_REPLICAS}  # ...but never for the scale-up window


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


# --- the out-of-rotation count and the autoscaler's query are the rules' ------------------------
_WORKER_TARGET = 'job="specserve-router",instance="router:29000"'


def _router_series(steps: list[Step], at: Step) -> list[dict[str, str]]:
    """The router's series of each worker, one sample a minute up to `at`: its health while
    listed (circuit closed), `_` before, `stale` once removed, as Prometheus records them."""
    minutes = [s for s in steps if s.t <= at.t and (at.t - s.t) % 60 == 0]
    ids = sorted({i for s in minutes for i, _ in s.health})
    series = []
    for worker in ids:
        health, circuit, seen = [], [], False
        for s in minutes:
            listed = dict(s.health)
            if worker in listed:
                health.append(str(listed[worker]))
                circuit.append("0")
                seen = True
            else:
                mark = "stale" if seen and health[-1] not in ("stale", "_") else "_"
                health.append(mark)
                circuit.append(mark)
        labels = f'{_WORKER_TARGET},worker="http://replica{worker}:8000"'
        series += [{"series": f"smg_worker_health{{{labels}}}", "values": " ".join(health)},
                   {"series": f"smg_worker_cb_state{{{labels}}}", "values": " ".join(circuit)}]
    return series


def _dashboard_asked() -> str:
    """The capacity panel's "replicas asked for" query, at the default settings."""
    dashboard = build_dashboard()
    (panel,) = [p for p in dashboard["panels"]
                if p.get("title") == "Replicas the load needs (speculation counted)"]
    (target,) = [t for t in panel["targets"] if "asked for" in t["legendFormat"]]
    assert f"at {TARGET:g}" in target["legendFormat"]
    return str(target["expr"])


def _rotation_group(steps: list[Step], at: Step) -> dict[str, Any]:
    tokens, running, queued = _gauges(at)
    samples = at.t // 60
    sglang = ('job="sglang",instance="node0:8000",model_name="kimi",engine_type="unified",'
              'tp_rank="0",pp_rank="0",moe_ep_rank="0"')
    exporter = 'job="specserve-exporter",instance="node0:9433"'
    series = [
        {"series": f"sglang:gen_throughput{{{sglang}}}", "values": f"{tokens}x{samples}"},
        {"series": f"sglang:num_running_reqs{{{sglang}}}", "values": f"{running}x{samples}"},
        {"series": f"sglang:num_queue_reqs{{{sglang}}}", "values": f"{queued}x{samples}"},
        {"series": f'specserve_baseline_gen_throughput_tokens_per_second{{{exporter},'
                   'concurrency="64"}', "values": f"{REPLICA.baseline_tps}x{samples}"},
        {"series": f'specserve_decode_gen_throughput_tokens_per_second_sum{{{exporter},'
                   'dp="0",tp="0",pp="0",concurrency="64"}',
         "values": f"0+{REPLICA.baseline_tps * at.speedup}x{samples}"},
        {"series": f'specserve_decode_gen_throughput_tokens_per_second_count{{{exporter},'
                   'dp="0",tp="0",pp="0",concurrency="64"}', "values": f"0+1x{samples}"},
        *_router_series(steps, at),
    ]
    # What the autoscaler reads, from exact gauges (the simulation's own load is noisy).
    expected = replica_load(tokens, running, queued, REPLICA.baseline_tps, at.speedup) + (
        at.out * TARGET)
    record = f"{FLEET_REPLICA_LOAD}{RECORDING_WINDOW}"
    adapter = autoscaler_adapter_query(TARGET).replace("<<.Series>>", record).replace(
        "<<.LabelMatchers>>", "")
    at_time = f"{at.t // 60}m"
    # The dashboard's capacity panel shows what the autoscaler asks for: ceil(load / target)
    # plus the workers out (its line at the alert's default max_utilisation, the chart's target).
    load = replica_load(tokens, running, queued, REPLICA.baseline_tps, at.speedup)
    asked = math.ceil(load / TARGET) + at.out
    return {
        "name": f"replica-out at {at.t // 60} min: {at.out} out, {at.asked} asked",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {"expr": f"{FLEET_WORKERS_OUT}{RECORDING_WINDOW}", "eval_time": at_time,
             "exp_samples": [{"labels": f"{FLEET_WORKERS_OUT}{RECORDING_WINDOW}",
                              "value": at.out}]},
            {"expr": f"abs(({autoscaler_metric('', TARGET)}) - {expected!r}) < bool 1e-9",
             "eval_time": at_time, "exp_samples": [{"labels": "{}", "value": 1}]},
            {"expr": f"abs(({adapter}) - {expected!r}) < bool 1e-9",
             "eval_time": at_time, "exp_samples": [{"labels": "{}", "value": 1}]},
            {"expr": _dashboard_asked(), "eval_time": at_time,
             "exp_samples": [{"labels": "{}", "value": asked}]},
        ],
    }


def test_prometheus_counts_out_of_rotation_as_the_simulation_does(
    curves: dict[str, list[Step]], promtool: str, tmp_path: Path
) -> None:
    steps = curves["replica-out"]
    by_minute = {s.t // 60: s for s in steps if s.t % 60 == 0}
    # Out and nothing added yet; the new replica loading (listed, health 0 for 8 minutes: out by
    # every test but the rule's); replica 0 back; the added replica removed by scale-down (gone).
    points = [by_minute[m] for m in (47, 58, 105, 130)]
    assert [p.out for p in points] == [1, 1, 0, 0]
    assert [len(p.health) for p in points] == [3, 4, 4, 3]
    assert dict(points[1].health)[3] == 0  # the new replica is still loading at 58 min
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
             "tests": [_rotation_group(steps, p) for p in points]}
    path = tmp_path / "autoscaling-rotation.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
