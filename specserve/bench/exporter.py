"""What the specserve exporter saw during a benchmark level: scrape /metrics before and after.

The window itself (accept length and throughput per concurrency bucket as delta(_sum) /
delta(_count) over every rank) is specserve.verify.window's, the verification gate's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from specserve.verify.window import Snapshot, parse_snapshot, window

__all__ = ["ExporterError", "ExporterScraper", "Snapshot", "parse_snapshot", "window_means"]


class ExporterError(RuntimeError):
    """The exporter cannot be scraped or is not a specserve exporter."""


def window_means(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """The level's window as results.json records it (results.schema.json)."""
    seen = window(before, after)
    return {
        "accept_length": seen.accept_length,
        "accept_windows": int(seen.accept_windows),
        "decode_lines": int(seen.decode_lines),
        "gen_throughput_tok_s": {k: mean for k, (mean, _) in seen.throughput.items()},
        "gen_throughput_windows": {k: count for k, (_, count) in seen.throughput.items()},
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
