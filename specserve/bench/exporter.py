"""What the specserve exporter saw during a benchmark level: scrape /metrics before and after.

Accept length over a level = delta(_sum) / delta(_count) of `specserve_decode_accept_length`
(all rank label sets together); gen throughput per concurrency bucket likewise from
`specserve_decode_gen_throughput_tokens_per_second`. Both histograms count decode-log windows,
so these are window means, the same numbers the dashboard and the baseline alert use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ACCEPT = "specserve_decode_accept_length"
THROUGHPUT = "specserve_decode_gen_throughput_tokens_per_second"
PARSED = "specserve_log_lines_parsed"


class ExporterError(RuntimeError):
    """The exporter cannot be scraped or is not a specserve exporter."""


@dataclass(frozen=True)
class Snapshot:
    decode_lines: float
    accept_sum: float
    accept_count: float
    # concurrency bucket -> (sum, count)
    throughput: dict[str, tuple[float, float]] = field(default_factory=dict)


def parse_snapshot(text: str) -> Snapshot:
    """Sum the histograms over rank labels; ValueError when the families are missing."""
    decode = accept_sum = accept_count = 0.0
    throughput: dict[str, list[float]] = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for sample in family.samples:
            if family.name == PARSED and sample.labels.get("kind") == "decode":
                decode += sample.value
            elif family.name == ACCEPT:
                if sample.name == ACCEPT + "_sum":
                    accept_sum += sample.value
                elif sample.name == ACCEPT + "_count":
                    accept_count += sample.value
            elif family.name == THROUGHPUT and sample.name in (
                THROUGHPUT + "_sum",
                THROUGHPUT + "_count",
            ):
                slot = throughput.setdefault(sample.labels.get("concurrency", ""), [0.0, 0.0])
                slot[0 if sample.name.endswith("_sum") else 1] += sample.value
    if PARSED not in names:
        raise ValueError(
            f"no {PARSED}_total metric: this is not a specserve-exporter /metrics page"
        )
    return Snapshot(
        decode_lines=decode,
        accept_sum=accept_sum,
        accept_count=accept_count,
        throughput={k: (v[0], v[1]) for k, v in throughput.items()},
    )


def window_means(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """Accept length and throughput per bucket over the decode windows between two scrapes."""
    d_count = after.accept_count - before.accept_count
    accept = (after.accept_sum - before.accept_sum) / d_count if d_count > 0 else None
    buckets: dict[str, float] = {}
    windows: dict[str, int] = {}
    for bucket, (total, count) in after.throughput.items():
        prev_total, prev_count = before.throughput.get(bucket, (0.0, 0.0))
        if count - prev_count > 0:
            buckets[bucket] = (total - prev_total) / (count - prev_count)
            windows[bucket] = int(count - prev_count)
    return {
        "accept_length": accept,
        "accept_windows": int(d_count),
        "decode_lines": int(after.decode_lines - before.decode_lines),
        "gen_throughput_tok_s": buckets,
        "gen_throughput_windows": windows,
    }


class ExporterScraper:
    """Scrapes one exporter; `settled()` waits until the decode-line count stops moving."""

    def __init__(
        self,
        url: str,
        settle_interval: float = 0.3,
        settle_timeout: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.settle_interval = settle_interval
        self.settle_timeout = settle_timeout
        self._sleep = sleep
        self._client = httpx.Client(timeout=httpx.Timeout(10.0))

    def close(self) -> None:
        self._client.close()

    def scrape(self) -> Snapshot:
        try:
            response = self._client.get(self.url)
        except httpx.HTTPError as exc:
            raise ExporterError(
                f"cannot scrape the exporter at {self.url}: {exc}; start specserve-exporter "
                f"(it listens on 127.0.0.1:9433 by default) or leave out --exporter-url"
            ) from None
        if response.status_code != 200:
            raise ExporterError(
                f"{self.url} answered {response.status_code}; --exporter-url must be the "
                f"exporter's /metrics URL, e.g. http://127.0.0.1:9433/metrics"
            )
        try:
            return parse_snapshot(response.text)
        except ValueError as exc:
            raise ExporterError(f"{self.url}: {exc}; check --exporter-url") from None

    def settled(self) -> Snapshot:
        """A scrape taken after the exporter has caught up with the server's log.

        Decode lines reach the exporter through the log (one poll interval behind, more for
        docker/kubernetes sources); a level's last windows must count for that level.
        """
        deadline = time.monotonic() + self.settle_timeout
        last = self.scrape()
        while time.monotonic() < deadline:
            self._sleep(self.settle_interval)
            current = self.scrape()
            if current.decode_lines == last.decode_lines:
                return current
            last = current
        return last
