"""Decode lines off the graphs, by batch size (issue 31 item 1): a batch above the largest
captured CUDA graph prints `cuda graph: False` while smaller ones print True. The exporter counts
both per concurrency bucket of #running-req (`specserve_decode_graph_lines`), on the scanner's
path and the reference parser's alike, so an alert can take the share off the graphs at high
batch and name the bucket."""

from __future__ import annotations

from specserve_exporter import names
from specserve_exporter.ingest import Ingestor
from specserve_exporter.state import LogState

from .test_ingest import CONFIG, assert_same


def _line(running: int, graph: bool) -> bytes:
    # SGLang 0.5.23's decode line of an EAGLE-3 server (tests/fixtures/sglang-logs/).
    return (
        b"[2026-02-23 17:53:14 TP0] Decode batch, #running-req: %d, #token: 900, token usage: "
        b"0.05, accept len: 2.40, accept rate: 0.47, cuda graph: %s, gen throughput (token/s): "
        b"310.00, #queue-req: 0\n" % (running, b"True" if graph else b"False")
    )


def _key(suffix: str, bucket: str, **extra: str) -> tuple[str, tuple]:
    labels = {"dp": "0", "tp": "0", "pp": "0", "graph": "cuda", "concurrency": bucket, **extra}
    return names.DECODE_GRAPH_LINES.name + suffix, tuple(sorted(labels.items()))


def test_lines_off_the_graphs_are_counted_per_concurrency_bucket_on_both_paths() -> None:
    small = [_line(4, True)] * 30
    large = [_line(40, False)] * 10 + [_line(40, True)] * 5 + [_line(300, False)] * 3
    teach = small[0]
    chunk = b"".join(small + large)
    ingestor = Ingestor(LogState(CONFIG))
    ingestor.feed(teach)
    # True and False share one shape: a chunk mixing them stays on the scanner's path.
    assert ingestor._fast(chunk, len(small) + len(large), 0.0)
    samples = assert_same([teach, chunk])  # fast path == reference path
    off, count, on = (_key("_bucket", "4", le="0.0"), _key("_count", "4"), _key("_sum", "4"))
    assert (samples[off], samples[count], samples[on]) == (0, 31, 31)
    off, count = _key("_bucket", "64", le="0.0"), _key("_count", "64")
    assert (samples[off], samples[count]) == (10, 15)
    assert samples[_key("_bucket", "inf", le="0.0")] == 3
