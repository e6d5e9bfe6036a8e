"""The router's worker list as the rolling deploy reads it.

smg (1.x) keeps a removed worker in its list for a settle time with `"status": "draining"`: not
routed to, and gone a few seconds later. The deploy counts it as out already (its drain waits on
the node's own in-flight count, SGLang's /v1/loads). Entries without a status (sglang-router
0.3.2, the release a fleet upgrades from) are routable entries as before.
"""

from __future__ import annotations

from typing import Any

DRAINING = "draining"


def router_routable(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of GET /workers that are not draining out of the router."""
    return [w for w in workers if w.get("status") != DRAINING]


def router_draining(workers: list[dict[str, Any]]) -> list[str]:
    """The URLs of the entries draining out of the router: a POST of one answers 409 until the
    router drops it, so an add waits for them first."""
    return [str(w.get("url")) for w in workers if w.get("status") == DRAINING]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"router_routable": router_routable, "router_draining": router_draining}
