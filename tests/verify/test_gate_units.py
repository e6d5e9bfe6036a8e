"""The gate's pure parts: the window over several exporters, the checks on a window, and the
/server_info fallback, without a server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from specserve.profile.loader import load_profile
from specserve.verify import gate, server
from specserve.verify.window import GraphSample, Snapshot, Window, combined, window
from tests.verify.conftest import STANDIN

PROFILE = load_profile(STANDIN)


def _graphs(*values: float) -> tuple[GraphSample, ...]:
    return tuple(GraphSample({"dp": "0", "tp": str(i), "pp": "0", "graph": "cuda"}, v)
                 for i, v in enumerate(values))


def _window(lines: float, accept_sum: float, windows: float, *graphs: float) -> Window:
    return Window(lines, accept_sum, windows, {}, _graphs(*graphs))


def test_window_is_a_delta_and_exporters_add_up() -> None:
    before = Snapshot(decode_lines=10, accept_sum=30, accept_count=10,
                      throughput={"1": (900.0, 10.0)})
    after = Snapshot(decode_lines=14, accept_sum=40, accept_count=14,
                     throughput={"1": (1300.0, 14.0), "2": (200.0, 1.0)})
    seen = window(before, after)
    assert (seen.decode_lines, seen.accept_windows, seen.accept_length) == (4, 4, 2.5)
    assert seen.throughput == {"1": (100.0, 4), "2": (200.0, 1)}
    other = window(Snapshot(), Snapshot(decode_lines=2, accept_sum=2, accept_count=2))
    both = combined([seen, other])
    # Windows weigh equally: (10 + 2) / (4 + 2), not the mean of the two means.
    assert both.decode_lines == 6 and both.accept_length == 2.0
    assert window(after, after).accept_length is None


def test_graph_state_needs_every_rank_on() -> None:
    s = gate.Settings(server="", exporters=[], profile=PROFILE)
    assert gate.judge(s, _window(4, 10, 4, 1.0, 1.0)).passed
    mixed = gate.judge(s, _window(4, 10, 4, 1.0, 0.0))
    assert not mixed.passed
    assert mixed.lines[0].startswith("FAIL graph state per rank: dp0 pp0 tp0 cuda=1, "
                                     "dp0 pp0 tp1 cuda=0")
    assert not gate.judge(s, _window(4, 10, 4)).passed  # no rank reported any
    assert gate.judge(gate.Settings(server="", exporters=[], profile=PROFILE,
                                    require_graph=False), _window(4, 10, 4)).passed


def test_floor_is_strict_and_named_by_the_caller() -> None:
    s = gate.Settings(server="", exporters=[], profile=PROFILE, floor=1.5,
                      knobs={**gate.DEFAULT_KNOBS, "floor": "verify_accept_length_floor"})
    at_floor = gate.judge(s, _window(4, 6, 4, 1.0))
    assert not at_floor.passed
    assert at_floor.lines[0] == ("FAIL mean accept length: 1.5 over 4 decode windows (need > "
                                 "1.5: verify_accept_length_floor; 1.00 means no draft token "
                                 "is accepted)")
    assert gate.judge(s, _window(4, 6.04, 4, 1.0)).passed


@contextmanager
def _old_sglang(missing: str) -> Iterator[tuple[str, list[str]]]:
    """A server that answers 404 on `missing` and a server_info document anywhere else."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            status = 404 if self.path == missing else 200
            body = json.dumps({"version": "0.4.0", "speculative_algorithm": "EAGLE3",
                               "api_key": "sk-in-info-1234567",
                               "launch_command": "sglang --api-key sk-in-info-1234567"}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_server_info_falls_back_to_the_deprecated_alias_only_on_404() -> None:
    assert server.SERVER_INFO_PATHS == ("/server_info", "/get_server_info")
    for missing, expected in (
        ("/nothing", ["/server_info"]),  # a current SGLang: the alias is never asked
        ("/server_info", ["/server_info", "/get_server_info"]),  # an older one
    ):
        with _old_sglang(missing) as (url, asked):
            summary = server.summary(server.server_info(requests.Session(), url), api_key=None)
        assert asked == expected
        assert summary.startswith("SGLang 0.4.0, speculative algorithm EAGLE3"), summary
        assert "launch command: sglang --api-key" in summary and "sk-in-info" not in summary


def test_the_gate_says_which_server_setting_silenced_the_decode_lines() -> None:
    s = gate.Settings(server="", exporters=[], profile=PROFILE, max_tokens=64)
    for info, why in [
        ({"log_level": "warning"}, "; the server's log level is warning (server_info log_level)"),
        ({"log_level": "ERROR"}, "; the server's log level is ERROR"),
        ({"log_level": "info", "decode_log_interval": 100},
         "; the server's decode_log_interval is 100 (server_info): one Decode batch line per "
         "100 decode steps, and a warm-up request decodes 64 tokens"),
    ]:  # fmt: skip
        served = gate.Served(silent_because=server.why_no_decode_lines(info, s.max_tokens))
        verdict = gate.judge(s, _window(0, 0, 0, 1.0), served)
        assert not verdict.passed
        assert verdict.lines[0].startswith("FAIL decode lines from the warm-up: 0 "), verdict
        assert why in verdict.lines[0], verdict.lines[0]
    # Settings that print the lines give no reason; nor does a server_info that is not there.
    for info in ({"log_level": "debug", "decode_log_interval": 40}, {"log_level": "info"},
                 "/server_info not readable here"):
        assert server.why_no_decode_lines(info, 64) is None
    # Enough lines: no reason is given even if the server says warning (a logging config file).
    said = gate.Served(silent_because="the server's log level is warning")
    assert "log level" not in gate.judge(s, _window(4, 10, 4, 1.0), said).lines[-1]


def test_the_draft_tokens_bound_the_accept_length_and_match_the_server() -> None:
    s = gate.Settings(server="", exporters=[], profile=PROFILE)  # tree 3 / 1 / 4
    assert gate.judge(s, _window(4, 16, 4, 1.0), gate.Served(draft_tokens=4)).passed  # 4.0
    above = gate.judge(s, _window(4, 17, 4, 1.0), gate.Served(draft_tokens=4))
    assert not above.passed
    assert above.lines[0] == "FAIL mean accept length: 4.25 within the 4 draft tokens"
    other = gate.judge(s, _window(4, 10, 4, 1.0), gate.Served(draft_tokens=8))
    assert not other.passed
    assert other.lines[0] == ("FAIL draft tokens: the server runs 8 (server_info), the profile 4 "
                              "(its tree, or SGLang's choice for it)")
    # A server_info without the field (older servers) is not a failure.
    assert gate.judge(s, _window(4, 10, 4, 1.0), gate.Served()).passed
