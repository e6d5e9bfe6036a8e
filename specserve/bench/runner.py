"""Run the levels: a closed loop of `concurrency` workers, each sending its next request as soon
as its previous one finishes, so the server holds `concurrency` running requests throughout."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

import httpx

from specserve.bench.client import RequestRecord, chat_body, stream_chat
from specserve.bench.exporter import ExporterError, ExporterScraper, Snapshot, window_means
from specserve.bench.native import NativeScraper, level_latency
from specserve.bench.perrequest import level_sections
from specserve.bench.promptset import Prompt
from specserve.bench.stats import summarize_level
from specserve.profile.classlabel import CLASS_LABEL_HEADER, header_value


@dataclass(frozen=True)
class RunSettings:
    base_url: str
    model: str
    concurrency: tuple[int, ...]
    requests_per_level: int | None
    duration_s: float | None
    max_tokens: int
    temperature: float
    request_timeout_s: float
    warmup_requests: int
    headers: dict[str, str]
    # The custom label SGLang's tokenizer metrics carry each request's class in
    # (server.request_class_label); None sends no class.
    class_label: str | None = None

    def request_headers(self, prompt: Prompt) -> dict[str, str] | None:
        """The request's own headers: its prompt's class in SGLang's custom-labels header."""
        if self.class_label is None:
            return None
        return {CLASS_LABEL_HEADER: header_value(self.class_label, prompt.kind)}

    def requests_for(self, level: int) -> int | None:
        """Request budget of a level; None in --duration mode."""
        if self.duration_s is not None:
            return None
        return self.requests_per_level if self.requests_per_level else 4 * level


class Progress:
    """One line per update on stderr: a rewritten line on a terminal, throttled lines in a log."""

    def __init__(self, stream: TextIO = sys.stderr, every_s: float = 2.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.every_s = every_s
        self._last = 0.0
        self._lock = threading.Lock()

    def update(self, text: str, final: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if self.tty:
                self.stream.write("\r\033[K" + text + ("\n" if final else ""))
            elif final or now - self._last >= self.every_s:
                self.stream.write(text + "\n")
            else:
                return
            self._last = now
            self.stream.flush()

    def note(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


class _Level:
    """Shared state of one level's workers."""

    def __init__(
        self, prompts: Sequence[Prompt], budget: int | None, deadline: float | None
    ) -> None:
        self.prompts = prompts
        self.budget = budget
        self.deadline = deadline
        self.next_index = 0
        self.records: list[RequestRecord] = []
        self.lock = threading.Lock()

    def take(self) -> Prompt | None:
        with self.lock:
            if self.budget is not None and self.next_index >= self.budget:
                return None
            if self.deadline is not None and time.monotonic() >= self.deadline:
                return None
            prompt = self.prompts[self.next_index % len(self.prompts)]
            self.next_index += 1
            return prompt

    def add(self, record: RequestRecord) -> tuple[int, int, int]:
        with self.lock:
            self.records.append(record)
            done = len(self.records)
            failed = sum(1 for r in self.records if not r.ok)
            tokens = sum(r.output_tokens for r in self.records if r.ok)
            return done, failed, tokens


def _client(settings: RunSettings) -> httpx.Client:
    timeout = httpx.Timeout(settings.request_timeout_s, connect=10.0)
    return httpx.Client(timeout=timeout, headers=settings.headers)


def _worker(
    settings: RunSettings,
    client: httpx.Client,
    level: _Level,
    on_done: Callable[[int, int, int], None],
) -> None:
    url = f"{settings.base_url}/v1/chat/completions"
    while (prompt := level.take()) is not None:
        body = chat_body(prompt, settings.model, settings.max_tokens, settings.temperature)
        headers = settings.request_headers(prompt)
        on_done(*level.add(stream_chat(client, url, body, prompt, headers)))


def warm_up(settings: RunSettings, prompts: Sequence[Prompt]) -> list[RequestRecord]:
    """A few short requests first, so the first level does not pay for cold caches."""
    url = f"{settings.base_url}/v1/chat/completions"
    records = []
    with _client(settings) as client:
        for i in range(settings.warmup_requests):
            prompt = prompts[i % len(prompts)]
            body = chat_body(
                prompt, settings.model, min(16, settings.max_tokens), settings.temperature
            )
            records.append(
                stream_chat(client, url, body, prompt, settings.request_headers(prompt))
            )
    return records


def run_level(
    settings: RunSettings,
    concurrency: int,
    prompts: Sequence[Prompt],
    progress: Progress,
    header: str,
) -> tuple[list[RequestRecord], float]:
    budget = settings.requests_for(concurrency)
    # Clients (one per worker: its own keep-alive connection) are made before the clock starts:
    # building one costs tens of milliseconds (TLS context), which is not the server's time.
    clients = [_client(settings) for _ in range(concurrency)]
    start = time.monotonic()
    deadline = start + settings.duration_s if settings.duration_s is not None else None
    level = _Level(prompts, budget, deadline)
    total = str(budget) if budget is not None else f"{settings.duration_s:g} s of"

    def on_done(done: int, failed: int, tokens: int) -> None:
        progress.update(
            f"{header}: {done}/{total} requests done, {failed} failed, {tokens} tokens, "
            f"{time.monotonic() - start:.1f} s elapsed"
        )

    progress.update(f"{header}: starting", final=not progress.tty)
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench") as pool:
            futures = [pool.submit(_worker, settings, c, level, on_done) for c in clients]
            for future in futures:
                future.result()
        wall = time.monotonic() - start
    finally:
        for client in clients:
            client.close()
    failed = sum(1 for r in level.records if not r.ok)
    progress.update(
        f"{header}: {len(level.records)} requests ({failed} failed) in {wall:.1f} s", final=True
    )
    return level.records, wall


def _settled(scraper: ExporterScraper) -> tuple[Snapshot | None, str | None]:
    try:
        return scraper.settled(), None
    except ExporterError as exc:
        return None, str(exc)


def run_all(
    settings: RunSettings,
    prompts: Sequence[Prompt],
    scraper: ExporterScraper | None,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Every level's summary, with what the exporter and SGLang's own histograms saw during it."""
    native = NativeScraper(settings.base_url)
    try:
        return _run_levels(settings, prompts, scraper, native, progress)
    finally:
        native.close()


def _run_levels(
    settings: RunSettings,
    prompts: Sequence[Prompt],
    scraper: ExporterScraper | None,
    native: NativeScraper,
    progress: Progress,
) -> list[dict[str, Any]]:
    levels: list[dict[str, Any]] = []
    before: Snapshot | None = None
    native_before = native.scrape()
    for i, concurrency in enumerate(settings.concurrency, 1):
        header = f"level {i}/{len(settings.concurrency)} (concurrency {concurrency})"
        problem: str | None = None
        if scraper is not None and before is None:
            before, problem = _settled(scraper)
        records, wall = run_level(settings, concurrency, prompts, progress, header)
        summary = summarize_level(concurrency, records, wall, settings.max_tokens)
        summary.update(level_sections(records))
        native_after = native.scrape()
        summary["server_latency"] = (
            None
            if native_before is None or native_after is None
            else level_latency(native_before, native_after)
        )
        native_before = native_after
        if scraper is not None and before is not None:
            after, problem = _settled(scraper)
            if after is not None:
                summary["exporter"] = window_means(before, after)
            before = after
        if problem:
            # The level's client-side numbers stay; only its exporter columns are lost.
            progress.note(f"warning: {problem}")
            summary["exporter_error"] = problem
        if summary["ok"] == 0:
            first = summary["errors"][0]["message"] if summary["errors"] else "unknown"
            progress.note(f"{header}: all {summary['requests']} requests failed: {first}")
        levels.append(summary)
    return levels
