"""Action plugin for the specserve_stability module: a long window in parts, with progress.

The stability window lasts `server_stability_window_s` (60 s by default, more on a GPU node)
and the module reports only at its end. Here the window runs as consecutive parts of at most
`part_s` seconds (each part the module itself: the same container checks, the same load), with
one line after each (`[host] stability window: 20/60 s, 10 requests answered, ...`); the first
part that fails ends it, with the module's message counting from the window's start.
"""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

PART_S = 10.0


def parts(window_s: float, part_s: float) -> list[float]:
    """The window split into consecutive parts of at most part_s (the last one shorter)."""
    if window_s <= 0:
        return [0.0]
    count = max(1, int(-(-window_s // part_s)))
    size = window_s / count
    return [size] * count


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        part_s = float(args.pop("part_s", PART_S))
        window = float(args["window_s"])
        host = (task_vars or {}).get("inventory_hostname", "?")
        begin = time.monotonic()
        requests = 0
        held = 0.0
        last: dict[str, Any] = {}
        for size in parts(window, part_s):
            module_args = dict(args, window_s=size, offset_s=round(held, 1), total_s=window)
            last = self._execute_module(module_name="specserve_stability",
                                        module_args=module_args, task_vars=task_vars)
            requests += int(last.get("requests", 0))
            if last.get("failed"):
                break
            held += size
            display.display(f"  [{host}] stability window: {held:.0f}/{window:.0f} s, "
                            f"{requests} requests answered, the same container")
        elapsed = round(time.monotonic() - begin, 1)
        result.update(last)
        result.update(requests=requests, elapsed_s=elapsed, changed=False)
        if not last.get("failed"):
            result["detail"] = (f"{args['container']} stable for {elapsed:.0f} s: {requests} "
                                "requests answered, the same container throughout")
        return result
