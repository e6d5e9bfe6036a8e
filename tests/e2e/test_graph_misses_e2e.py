"""Issue 31 item 1 end to end: decode batches above the largest captured CUDA graph.

The stand-in runs with `server.cuda_graph_max_bs: 2` (rendered `--cuda-graph-max-bs-decode 2`)
under its profile's cap of 48 running requests, the profile `check` refuses on a GPU: like
SGLang, it decodes a batch above 2 eagerly and its decode line says `cuda graph: False`. Two
clients keep batches of up to 2 running throughout (on the graphs, concurrency bucket "2"); four
more switch on and off every few seconds, so batches of 3 to 6 (buckets "4" and "8") run off the
graphs between them. SpecDecodeGraphMisses must reach the webhook naming such a bucket (never "2")
within its (test) window + `for` + slack, and be delivered resolved once the large batches stop.
The chain and the 20 s windows are tests/e2e/stack.py's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.e2e.diagnose import diagnosed, first_beyond_blind
from tests.e2e.load import LoadGenerator
from tests.e2e.processes import wait_until
from tests.e2e.stack import WINDOW, Stack, _seconds, running_stack
from tests.e2e.webhook import Delivered

pytestmark = pytest.mark.slow

ALERT = "SpecDecodeGraphMisses"
GRAPH_MAX_BS = 2
# The window, `for`, a scrape, an evaluation, Alertmanager's group_wait and a slow machine.
DEADLINE_S = _seconds(WINDOW) + 25
TOGGLE_S = 2.0


@contextmanager
def _toggling(load: LoadGenerator) -> Iterator[None]:
    """`load` switched on and off every TOGGLE_S until the block ends (then off)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            load.on()
            stop.wait(TOGGLE_S)
            load.off()
            stop.wait(TOGGLE_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        load.off()


def _delivered(stack: Stack, status: str, since: float, bucket: str | None = None) -> Delivered:
    def found() -> list[Delivered]:
        return [d for d in stack.receiver.find(ALERT, status) if d.received_at >= since
                and bucket in (None, d.labels.get("concurrency"))]  # fmt: skip

    wait_until(f"{ALERT} delivered {status}", lambda: bool(found()),
               since + DEADLINE_S - time.time(), services=stack.services)  # fmt: skip
    return found()[0]


def test_large_batches_off_the_graphs_are_delivered_naming_the_bucket(tmp_path) -> None:
    server = {"cuda_graph_max_bs": GRAPH_MAX_BS}
    with running_stack(tmp_path / "stack", {"acceptance": 0.4}, server_extra=server) as stack:
        small = LoadGenerator(stack.standin_url, 2, 64, deadline_s=240)
        large = LoadGenerator(stack.standin_url, 4, 32, deadline_s=240)
        small.start()
        large.start()
        try:
            small.on()
            # Small batches alone for a window: on the graphs, nothing to say.
            time.sleep(_seconds(WINDOW) + 3)
            assert ALERT not in stack.prometheus.alert_states()
            since = time.time()
            with _toggling(large):
                fired = _delivered(stack, "firing", since)
                # The operator's next step names the same cause, first, with the bucket.
                code, findings, text = diagnosed(stack)
                assert code == 1, text
                assert first_beyond_blind(findings) == ("cause", ALERT), text
                assert f"concurrency={fired.labels['concurrency']}" in text, text
            # Bucket 4 (3-4 running) or 8 (5-6), both above the graphs; never 2.
            bucket = fired.labels["concurrency"]
            assert bucket in ("4", "8") and fired.labels["graph"] == "cuda", fired.labels
            assert f"up to {bucket} running requests" in fired.annotations["description"]
            assert "server.cuda_graph_max_bs" in fired.annotations["description"]
            # Only the small batches again: the window empties of eager lines.
            _delivered(stack, "resolved", time.time(), bucket)
        finally:
            small.stop()
            large.stop()
        assert not small.errors and not large.errors, (small.errors, large.errors)
