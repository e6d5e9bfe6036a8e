"""Ansible module: the stability window after the gates.

A server that crashes a few seconds after its gate passed (a leak, a bad kernel on the first
long batch) looked verified, and Docker's restart policy hid the crash loop. Before a spec is
recorded as last good, this keeps the server under the gate's warm-up load for a window and
checks at every poll that the container is the one that passed the gates: same Id, same
StartedAt, same RestartCount, running; and that every request was answered.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_stability
short_description: Hold the server under load for a window; fail on a restart or a failed request
options:
  container: {description: Container name, type: str, required: true}
  expect_id: {description: The container Id that passed the gates, type: str, required: true}
  expect_started_at: {description: Its State.StartedAt, type: str, required: true}
  expect_restart_count: {description: Its RestartCount, type: int, required: true}
  url: {description: "Generation URL (POST, SGLang's /generate)", type: str, required: true}
  body: {description: JSON body of each request, type: dict, required: true}
  api_key: {description: Bearer token, type: str, default: ""}
  window_s: {description: Length of the window, type: float, required: true}
  poll_s: {description: Seconds between polls (one request each), type: float, default: 2}
  request_timeout_s: {description: Seconds per request, type: float, default: 300}
  offset_s:
    description: Seconds of the whole window already held before this part (the action plugin
      runs a long window in parts, printing progress between them); messages count from there
    type: float
    default: 0
  total_s:
    description: The whole window's length, for messages (0 = window_s)
    type: float
    default: 0
  window_var:
    description: The variable that sets window_s (named in messages)
    type: str
    default: window_s
  docker_cli: {description: The docker client, type: str, default: docker}
"""

RETURN = r"""
requests: {description: requests answered, type: int, returned: always}
elapsed_s: {description: length of the window, type: float, returned: always}
detail: {description: what the window saw, in words, type: str, returned: always}
"""


def _inspect(module: AnsibleModule, cli: str, name: str) -> dict[str, Any] | None:
    fmt = ("{{json .Id}} {{json .State.StartedAt}} {{.RestartCount}} {{json .State.Status}} "
           "{{.State.ExitCode}}")
    rc, out, _ = module.run_command([cli, "inspect", "--format", fmt, name])
    if rc != 0:
        return None
    cid, started, count, status, code = out.split()
    return {"id": json.loads(cid), "started_at": json.loads(started), "restart_count": int(count),
            "status": json.loads(status), "exit_code": int(code)}


def changed(seen: dict[str, Any] | None, p: dict[str, Any]) -> str:
    """How the container differs from the one that passed the gates, or ""."""
    if seen is None:
        return f"container {p['container']} is gone"
    diffs = []
    if seen["id"] != p["expect_id"]:
        diffs.append(f"Id {p['expect_id'][:12]} -> {seen['id'][:12]}")
    if seen["restart_count"] != p["expect_restart_count"]:
        diffs.append(f"RestartCount {p['expect_restart_count']} -> {seen['restart_count']}")
    if seen["started_at"] != p["expect_started_at"]:
        diffs.append(f"StartedAt {p['expect_started_at']} -> {seen['started_at']}")
    if seen["status"] != "running":
        diffs.append(f"status {seen['status']} (exit code {seen['exit_code']})")
    return ", ".join(diffs)


def _request(p: dict[str, Any]) -> str:
    """One generation; "" when answered 200, else what went wrong."""
    headers = {"Content-Type": "application/json"}
    if p["api_key"]:
        headers["Authorization"] = f"Bearer {p['api_key']}"
    data = json.dumps(p["body"]).encode()
    request = urllib.request.Request(p["url"], data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=p["request_timeout_s"]) as response:
            response.read()
            return "" if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, urllib.error.URLError) as exc:
        return f"no answer ({getattr(exc, 'reason', exc)})"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "container": {"type": "str", "required": True},
            "expect_id": {"type": "str", "required": True},
            "expect_started_at": {"type": "str", "required": True},
            "expect_restart_count": {"type": "int", "required": True},
            "url": {"type": "str", "required": True},
            "body": {"type": "dict", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "window_s": {"type": "float", "required": True},
            "poll_s": {"type": "float", "default": 2},
            "request_timeout_s": {"type": "float", "default": 300},
            "offset_s": {"type": "float", "default": 0},
            "total_s": {"type": "float", "default": 0},
            "window_var": {"type": "str", "default": "window_s"},
            "docker_cli": {"type": "str", "default": "docker"},
        },
        supports_check_mode=True,
    )
    p = module.params
    offset = p["offset_s"]
    total = p["total_s"] or p["window_s"]
    start = time.monotonic()
    requests = 0
    while True:
        elapsed = time.monotonic() - start
        diff = changed(_inspect(module, p["docker_cli"], p["container"]), p)
        if diff:
            module.fail_json(
                msg=(f"Stability window FAILED: {p['container']} did not stay the server that "
                     f"passed the gates, {offset + elapsed:.0f} s into the {total:.0f} s window "
                     f"({p['window_var']}): {diff}. Not recorded as last good."),
                requests=requests, elapsed_s=round(elapsed, 1), detail=diff)
        if elapsed >= p["window_s"]:
            break
        error = _request(p)
        if error:
            # A crash shows first as a refused request: say so with the container's state.
            time.sleep(0.5)
            diff = changed(_inspect(module, p["docker_cli"], p["container"]), p)
            module.fail_json(
                msg=(f"Stability window FAILED: request {requests + 1} to {p['url']} got {error} "
                     f"{offset + elapsed:.0f} s into the {total:.0f} s window ({p['window_var']})"
                     + (f"; the container changed: {diff}" if diff else "")
                     + ". Not recorded as last good."),
                requests=requests, elapsed_s=round(elapsed, 1), detail=error)
        requests += 1
        time.sleep(max(0.0, min(p["poll_s"], p["window_s"] - (time.monotonic() - start))))
    elapsed = time.monotonic() - start
    module.exit_json(
        changed=False, requests=requests, elapsed_s=round(elapsed, 1),
        detail=(f"{p['container']} {p['expect_id'][:12]} stable for {elapsed:.0f} s "
                f"({p['window_var']} = {p['window_s']:.0f}): {requests} requests answered, "
                f"RestartCount {p['expect_restart_count']}, StartedAt {p['expect_started_at']}"),
    )


if __name__ == "__main__":
    main()
