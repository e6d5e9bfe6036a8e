"""Scraping the exporters the gate reads: one URL, or every address a name resolves to (one
exporter per server pod behind a headless Service)."""

from __future__ import annotations

import json
import socket
import urllib.parse
from pathlib import Path

import requests

from specserve.verify.window import Snapshot, Window, combined, parse_snapshot, window


class ScrapeError(Exception):
    """An exporter could not be read; the message names the URL and what happened."""


def expand(urls: list[str], each_address: bool) -> list[str]:
    """The URLs to scrape: as given, or one per address each URL's host resolves to."""
    if not each_address:
        return list(urls)
    expanded: list[str] = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port or 80
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ScrapeError(f"cannot resolve {host} (no ready server pod?): {exc}") from None
        for address in sorted({str(info[4][0]) for info in infos}):
            netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
            expanded.append(urllib.parse.urlunsplit(parts._replace(netloc=netloc)))
    return expanded


def scrape(session: requests.Session, url: str, timeout: float = 10.0) -> Snapshot:
    try:
        response = session.get(url, timeout=timeout)
    except requests.RequestException as exc:
        raise ScrapeError(f"cannot scrape the exporter at {url}: {exc}") from None
    if response.status_code != 200:
        raise ScrapeError(f"the exporter at {url} answered HTTP {response.status_code}: "
                          "the URL must be specserve-exporter's /metrics")
    try:
        return parse_snapshot(response.text)
    except ValueError as exc:
        raise ScrapeError(f"{url}: {exc}") from None


def scrape_all(session: requests.Session, urls: list[str]) -> dict[str, Snapshot]:
    return {url: scrape(session, url) for url in urls}


def window_since(before: dict[str, Snapshot], after: dict[str, Snapshot]) -> Window:
    """Every exporter's window as one; an exporter first seen at `after` counts from zero."""
    return combined(window(before.get(url, Snapshot()), snap) for url, snap in after.items())


def save(path: Path, snapshots: dict[str, Snapshot]) -> None:
    """The counters a later `--since` run subtracts (graph state is read fresh then)."""
    doc = {url: {"decode_lines": s.decode_lines, "accept_sum": s.accept_sum,
                 "accept_count": s.accept_count,
                 "throughput": {k: list(v) for k, v in s.throughput.items()}}
           for url, s in snapshots.items()}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def load(path: Path) -> dict[str, Snapshot]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {url: Snapshot(decode_lines=float(s["decode_lines"]),
                              accept_sum=float(s["accept_sum"]),
                              accept_count=float(s["accept_count"]),
                              throughput={k: (float(v[0]), float(v[1]))
                                          for k, v in s["throughput"].items()})
                for url, s in doc.items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ScrapeError(f"--since {path}: not a snapshot saved by `specserve verify "
                          f"--save-snapshot` ({exc})") from None
