"""The chart's autoscaler replayed on a load ramp, a spike, a drafter losing its edge and a
replica dropping out of the router's rotation.

    .venv/bin/python -m benchmarks.autoscaling_sim [--csv DIR]

prints, per scenario, the replica curve (time, demanded tokens/s, the recorded load, replicas
asked for and serving) and its summary: scale events, direction reversals, the most queued.

Each 30 s step a fleet of replicas serves the demand it can: one replica decodes at most
`baseline x speedup` tokens/s (the profile's best baseline bucket times the speedup speculation
reaches); a request decodes at that rate over the replica's running-request cap, so requests
past the fleet's cap queue. The fleet's gauges are what SGLang exports (gen_throughput,
num_running_reqs, num_queue_reqs, with a few percent of noise), read the way the recording rule
fleet:specserve_replica_load:ratio5m reads them: each gauge averaged over the last 5 minutes,
then `tokens x (running + queued) / running / (baseline x speedup)` (replica_load, the rule's
formula; tests/monitoring/test_autoscaling_sim.py evaluates the rule itself with promtool on the
same samples). The autoscaler is Kubernetes' HPA algorithm for an AverageValue external metric
(pkg/controller/podautoscaler: tolerance 0.1, stabilization windows, scale policies, min/max)
with the chart's default behavior, polled every 30 s as KEDA does; a replica asked for serves
only after loading its weights, one asked away stops serving at once (the router drains it).

The router lists every replica asked for, with health 0 while it loads its weights (the harder
case: smg's Kubernetes discovery adds a pod only once it is Ready); a replica out of rotation
(failing its health checks) keeps its pod and serves nothing; a replica asked away leaves the
list. The autoscaler's metric is the KEDA query's: the load plus the workers out of rotation
(fleet:specserve_workers_out_of_rotation:count5m, `out_of_rotation` here) at the target, so
desired = ceil(load / target) + out. Scale-down takes replicas that are not Ready first (out of
rotation or loading), then the newest, as a ReplicaSet does.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STEP_S = 30
WINDOW_STEPS = 10  # the rule's 5m window in 30 s scrapes
LOOKBACK_STEPS = 6 * 3600 // STEP_S  # metrics.ROUTER_RETIRED_LOOKBACK: "was in rotation"
TOLERANCE = 0.1  # the HPA controller's default --horizontal-pod-autoscaler-tolerance


def replica_load(tokens: float, running: float, queued: float, baseline: float,
                 speedup: float | None) -> float:
    """The recording rule's formula: decode tokens/s demanded over one replica's speculative
    tokens/s. No speedup measured: no credit (1). Nothing running: 0."""
    if running <= 0:
        return 0.0
    return tokens * (running + queued) / running / (baseline * (speedup or 1.0))


@dataclass
class Worker:
    """One replica asked for, as the router lists it: its health samples (1 in rotation, 0 loading
    or out of rotation), newest last."""

    id: int
    asked_at: int
    ready_at: int
    health: deque[int] = field(default_factory=lambda: deque(maxlen=LOOKBACK_STEPS))
    removed_at: int | None = None


@dataclass(frozen=True)
class Counting:
    """What counts as out of rotation. The rule's: out at every sample of the window, listed now,
    in rotation some time in the lookback. The two traps it avoids can be switched back on to show
    what they would do: counting a replica that never was in rotation (one still loading its
    weights) and counting one removed from the list (router_worker_state's -1)."""

    since_in_rotation: bool = True
    gone_counts: bool = False


def out_of_rotation(listed: Sequence[Worker], removed: Sequence[Worker], now: int,
                    counting: Counting = Counting()) -> int:
    """fleet:specserve_workers_out_of_rotation:count5m over the router's workers."""
    out = 0
    for w in listed:
        window = list(w.health)[-WINDOW_STEPS:]
        if window and not any(window) and (not counting.since_in_rotation or any(w.health)):
            out += 1
    if counting.gone_counts:
        out += sum(1 for w in removed
                   if w.removed_at is not None and now - w.removed_at < LOOKBACK_STEPS * STEP_S)
    return out


@dataclass(frozen=True)
class Policy:
    type: str  # Pods | Percent
    value: int
    period_s: int


@dataclass(frozen=True)
class Rules:
    window_s: int
    select: str  # Max | Min
    policies: tuple[Policy, ...]


@dataclass(frozen=True)
class Behavior:
    up: Rules
    down: Rules

    @classmethod
    def chart_default(cls) -> Behavior:
        values = yaml.safe_load((REPO / "charts/specserve/values.yaml").read_text("utf-8"))
        behavior = values["autoscaling"]["behavior"]

        def rules(doc: dict) -> Rules:
            return Rules(doc["stabilizationWindowSeconds"], doc.get("selectPolicy", "Max"),
                         tuple(Policy(p["type"], p["value"], p["periodSeconds"])
                               for p in doc["policies"]))

        return cls(rules(behavior["scaleUp"]), rules(behavior["scaleDown"]))


@dataclass
class Hpa:
    """Kubernetes' replica calculation and behavior (normalizeDesiredReplicasWithBehaviors)."""

    target: float
    min_replicas: int
    max_replicas: int
    behavior: Behavior
    replicas: int
    recommendations: deque[tuple[int, int]] = field(default_factory=deque)
    events: list[tuple[int, int]] = field(default_factory=list)  # (time, change)

    def raw(self, metric: float) -> int:
        # GetExternalPerPodMetricReplicas: usage / (target x current) within tolerance keeps it.
        ratio = metric / (self.target * self.replicas)
        if abs(1.0 - ratio) <= TOLERANCE:
            return self.replicas
        return math.ceil(metric / self.target)

    def _changed_within(self, now: int, period: int, sign: int) -> int:
        return sum(c for t, c in self.events if now - t < period and c * sign > 0) * sign

    def _limit(self, now: int, rules: Rules, sign: int) -> int:
        changed = self._changed_within
        limits = []
        for p in rules.policies:
            start = self.replicas - sign * changed(now, p.period_s, sign)
            step = p.value if p.type == "Pods" else math.ceil(start * p.value / 100)
            limits.append(start + sign * step)
        pick = max if (rules.select == "Max") == (sign > 0) else min
        return pick(limits)

    def sync(self, now: int, metric: float) -> int:
        raw = self.raw(metric)
        self.recommendations.append((now, raw))
        keep = max(self.behavior.up.window_s, self.behavior.down.window_s)
        while self.recommendations and now - self.recommendations[0][0] > keep:
            self.recommendations.popleft()
        up = min(r for t, r in self.recommendations if now - t <= self.behavior.up.window_s)
        down = max(r for t, r in self.recommendations if now - t <= self.behavior.down.window_s)
        desired = self.replicas
        if desired < up:
            desired = min(up, self._limit(now, self.behavior.up, +1))
        elif desired > down:
            desired = max(down, self._limit(now, self.behavior.down, -1))
        desired = max(self.min_replicas, min(self.max_replicas, desired))
        if desired != self.replicas:
            self.events.append((now, desired - self.replicas))
            self.replicas = desired
        return desired


@dataclass(frozen=True)
class Replica:
    """One replica as the profile measures it."""

    baseline_tps: float = 400.0  # best bucket of the non-speculative baseline
    max_running: int = 64  # the profile's running-request cap
    load_s: int = 600  # from scheduled to serving: weights load and warm-up


@dataclass(frozen=True)
class Step:
    t: int
    demand_tps: float
    speedup: float
    load: float
    asked: int
    serving: int
    queued: float
    out: int = 0  # workers out of rotation, as the rule counts them
    metric: float = 0.0  # what the autoscaler reads: load + out x target
    health: tuple[tuple[int, int], ...] = ()  # (worker id, health) of each listed worker


def no_outage(t: int) -> frozenset[int]:
    return frozenset()


def simulate(demand: Callable[[int], float], speedup: Callable[[int], float], duration_s: int,
             *, outage: Callable[[int], frozenset[int]] = no_outage,
             counting: Counting = Counting(), replica: Replica = Replica(),
             target: float = 0.8, min_replicas: int = 1, max_replicas: int = 16, start: int = 1,
             noise: float = 0.03, seed: int = 7) -> list[Step]:
    """`outage(t)`: ids of the replicas out of rotation at t (the first `start` are 0, 1, ...)."""
    rng = random.Random(seed)
    hpa = Hpa(target, min_replicas, max_replicas, Behavior.chart_default(), start)
    workers = [Worker(i, 0, 0) for i in range(start)]
    removed: list[Worker] = []
    gauges: deque[tuple[float, float, float, float]] = deque(maxlen=WINDOW_STEPS)
    steps = []
    for t in range(0, duration_s, STEP_S):
        down = outage(t)
        for w in workers:
            w.health.append(1 if w.ready_at <= t and w.id not in down else 0)
        serving = sum(w.health[-1] for w in workers)
        s = speedup(t)
        per_replica_tps = replica.baseline_tps * s
        request_tps = per_replica_tps / replica.max_running  # one request's decode rate
        wanted = demand(t) / request_tps  # requests wanting service
        running = min(wanted, serving * replica.max_running)
        queued = wanted - running

        def jitter(x: float) -> float:
            return x * (1 + rng.uniform(-noise, noise))

        gauges.append((jitter(running * request_tps), jitter(running), jitter(queued), s))
        n = len(gauges)
        tokens, run, queue, measured = (sum(g[i] for g in gauges) / n for i in range(4))
        load = replica_load(tokens, run, queue, replica.baseline_tps, measured)
        out = out_of_rotation(workers, removed, t, counting)
        metric = load + out * target
        listed = tuple((w.id, w.health[-1]) for w in workers)
        asked = hpa.sync(t, metric)
        if asked > len(workers):
            next_id = max((w.id for w in workers + removed), default=-1) + 1
            workers += [Worker(next_id + i, t, t + replica.load_s)
                        for i in range(asked - len(workers))]
        elif asked < len(workers):
            # Not Ready first (out of rotation, or still loading), then the newest.
            workers.sort(key=lambda w: (w.health[-1] == 1, -w.asked_at, -w.id))
            for w in workers[:len(workers) - asked]:
                w.removed_at = t
                removed.append(w)
            workers = workers[len(workers) - asked:]
        steps.append(Step(t, demand(t), s, load, asked, serving, queued, out, metric, listed))
    return steps


def ramp(t: int) -> float:
    """500 tok/s rising to 6000 over 90 min, held 30 min, back to 500 over 60 min."""
    m = t / 60
    if m < 90:
        return 500 + 5500 * m / 90
    if m < 120:
        return 6000.0
    if m < 180:
        return 6000 - 5500 * (m - 120) / 60
    return 500.0


def spike(t: int) -> float:
    """1500 tok/s with a 90 s burst to 5000 at 30 min and a 20 min surge to 5000 at 80 min."""
    m = t / 60
    if 30 <= m < 31.5 or 80 <= m < 100:
        return 5000.0
    return 1500.0


def constant_speedup(t: int) -> float:
    return 2.0


def drafter_fades(t: int) -> float:
    """Speculation's speedup falls from 2.0 to 1.3 at 40 min (a drafter that stops matching the
    traffic) and recovers at 120 min; the requests stay the same."""
    return 1.3 if 40 * 60 <= t < 120 * 60 else 2.0


# A steady 1900 tok/s: 2.4 replicas' worth at speedup 2.0, 3 replicas at the 0.8 target.
STEADY_TPS = 1900.0
STEADY_REPLICAS = 3
OUT_FROM_S, OUT_UNTIL_S = 40 * 60, 100 * 60
BLIP_UNTIL_S = 48 * 60


def replica_out(t: int) -> frozenset[int]:
    """Replica 0 fails its health checks from 40 to 100 min: out of rotation, its pod kept."""
    return frozenset({0}) if OUT_FROM_S <= t < OUT_UNTIL_S else frozenset()


def replica_blip(t: int) -> frozenset[int]:
    """Replica 0 out for 8 minutes (40 to 48): shorter than the window and the scale-up window."""
    return frozenset({0}) if OUT_FROM_S <= t < BLIP_UNTIL_S else frozenset()


@dataclass(frozen=True)
class Scenario:
    demand: Callable[[int], float]
    speedup: Callable[[int], float]
    duration_s: int
    outage: Callable[[int], frozenset[int]] = no_outage
    start: int = 1


SCENARIOS: dict[str, Scenario] = {
    "ramp": Scenario(ramp, constant_speedup, 240 * 60),
    "spike": Scenario(spike, constant_speedup, 150 * 60),
    "drafter-fades": Scenario(lambda t: 2400.0, drafter_fades, 180 * 60),
    "replica-out": Scenario(lambda t: STEADY_TPS, constant_speedup, 160 * 60, replica_out,
                            STEADY_REPLICAS),
    "replica-blip": Scenario(lambda t: STEADY_TPS, constant_speedup, 100 * 60, replica_blip,
                             STEADY_REPLICAS),
}


def reversals(values: Sequence[int]) -> int:
    """Direction changes of a step curve (up then down counts one; steady runs are skipped)."""
    moves = [b - a for a, b in pairwise(values) if b != a]
    return sum(1 for a, b in pairwise(moves) if (a > 0) != (b > 0))


def run(name: str, counting: Counting = Counting()) -> list[Step]:
    sc = SCENARIOS[name]
    return simulate(sc.demand, sc.speedup, sc.duration_s, outage=sc.outage, counting=counting,
                    start=sc.start)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, help="also write <scenario>.csv here")
    args = parser.parse_args(argv)
    for name in SCENARIOS:
        steps = run(name)
        asked = [s.asked for s in steps]
        print(f"== {name}: {sum(1 for a, b in pairwise(asked) if a != b)} "
              f"scale events, {reversals(asked)} reversals, max queued "
              f"{max(s.queued for s in steps):.0f}")
        print(f"{'min':>5} {'demand':>7} {'speedup':>7} {'load':>6} {'out':>4} {'asked':>5} "
              f"{'serving':>7}")
        for s in steps[::10]:  # every 5 minutes
            print(f"{s.t // 60:>5} {s.demand_tps:>7.0f} {s.speedup:>7.2f} {s.load:>6.2f} "
                  f"{s.out:>4} {s.asked:>5} {s.serving:>7}")
        if args.csv:
            args.csv.mkdir(parents=True, exist_ok=True)
            with (args.csv / f"{name}.csv").open("w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["t_s", "demand_tps", "speedup", "load", "out", "asked",
                                 "serving", "queued"])
                for s in steps:
                    writer.writerow([s.t, s.demand_tps, s.speedup, round(s.load, 4), s.out,
                                     s.asked, s.serving, round(s.queued, 2)])


if __name__ == "__main__":
    main()
