"""Where a deployed server is reached: the address a client on its own host uses, and SGLang's
endpoints (entrypoints/http_server.py) for the gate, liveness and metrics.

It imports nothing, so the checks, the stand-in, the gate and the facts all take these from
one place.
"""

from __future__ import annotations

# A server bound to every address is probed on loopback from its own host.
WILDCARD_HOSTS: tuple[str, ...] = ("0.0.0.0", "::", "")
LOOPBACK = "127.0.0.1"

# The gate: a real one-token generation, 503 until warm-up is done. Liveness: answers at once,
# generates nothing. Prometheus text, served only with --enable-metrics (server.enable_metrics).
HEALTH_PATH = "/health_generate"
LIVENESS_PATH = "/ready"
METRICS_PATH = "/metrics"


def probe_host(host: str) -> str:
    """The address a client on the server's own host uses: loopback for a wildcard bind."""
    return LOOPBACK if host in WILDCARD_HOSTS else host


def url_host(host: str) -> str:
    """`host` as it stands in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host
