"""The exporter counts the tee's gap markers: output it never saw because the log file could
not be written (issue 16 item 6)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specserve.launch import logtee
from specserve_exporter.collector import LogCollector
from specserve_exporter.ingest import LOG_GAP_MARKER, Ingestor
from specserve_exporter.state import LogState, SpeculationConfig


def _counters(chunks: list[bytes]) -> dict[str, float]:
    state = LogState(SpeculationConfig(draft_tokens=4, baseline={}))
    ingestor = Ingestor(state)
    for chunk in chunks:
        ingestor.feed(chunk, now=1000.0)
    registry = CollectorRegistry()
    registry.register(LogCollector(state))
    text = generate_latest(registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("specserve_log_file_gap")
    }


def test_marker_is_the_tees() -> None:
    assert logtee.GAP_MARKER.encode() == LOG_GAP_MARKER


def test_a_real_outage_of_the_tee_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(logtee, "RETRY_MIN_S", 0.0)
    log = tmp_path / "sglang.log"
    os.symlink("/dev/full", log)  # ENOSPC on every write
    tee = logtee.Tee(io.BytesIO(), log, 10_000_000, 1)
    tee.feed(b"lost line one\nlost line two\n")
    log.unlink()
    tee.feed(b"kept\n")
    tee.close()
    data = log.read_bytes()
    assert data.startswith(LOG_GAP_MARKER)
    lost = len(b"lost line one\nlost line two\n")
    # Split anywhere between lines, and a chunk of two markers: every marker counted once.
    assert _counters([data]) == {
        "specserve_log_file_gaps_total": 1,
        "specserve_log_file_gap_bytes_total": lost,
    }
    assert _counters([data, b"other\n" + data]) == {
        "specserve_log_file_gaps_total": 2,
        "specserve_log_file_gap_bytes_total": 2 * lost,
    }


def test_a_quoted_marker_is_not_a_gap() -> None:
    # Only a line that starts with the marker is the tee's: a server line quoting it is not.
    line = b"[2026-12-01] INFO " + LOG_GAP_MARKER + b"x to y, 5 bytes not written (EIO: x)\n"
    assert _counters([line]) == {
        "specserve_log_file_gaps_total": 0,
        "specserve_log_file_gap_bytes_total": 0,
    }
