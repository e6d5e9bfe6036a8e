"""Ansible module: one read-only look at the server container and its health endpoint.

The server role calls it in an `until` loop while SGLang loads (minutes to tens of minutes for
600 GB), so every retry prints progress, and a crash ends the wait at once instead of after the
whole load budget.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_server_probe
short_description: Report the phase of the specserve server container (read-only)
description:
  - Inspects the container with the docker CLI and requests the health URL once.
  - "phase: absent, crashed (exited, dead, restarting, or restarted since start), loading
    (port refuses connections), warming (HTTP status not 200), healthy (HTTP 200)."
options:
  container:
    description: Container name.
    type: str
    required: true
  url:
    description: Health URL, e.g. http://127.0.0.1:30000/health_generate.
    type: str
    required: true
  timeout:
    description: Seconds for the HTTP request (/health_generate runs a real generation and
      answers 503 only after SGLang's own 20 s, so wait longer than that).
    type: float
    default: 30
  docker_cli:
    description: The docker client binary.
    type: str
    default: docker
"""

RETURN = r"""
phase: {description: see above, type: str, returned: always}
status: {description: the container's State.Status, type: str, returned: always}
restart_count: {description: RestartCount, type: int, returned: always}
exit_code: {description: State.ExitCode, type: int, returned: always}
http_status: {description: HTTP status, 0 when there was no answer, type: int, returned: always}
uptime_s: {description: seconds since the container started, type: float, returned: always}
detail: {description: what the probe saw, in words, type: str, returned: always}
"""

_CRASHED_STATES = ("exited", "dead")


def _uptime(started_at: str) -> float:
    # Docker prints nanoseconds; datetime takes microseconds.
    head, _, frac = started_at.rstrip("Z").partition(".")
    try:
        start = datetime.fromisoformat(f"{head}.{(frac or '0')[:6]}+00:00")
    except ValueError:
        return 0.0
    return max(0.0, time.time() - start.timestamp())


def classify(state: dict[str, Any] | None, restart_count: int, http_status: int) -> str:
    """The phase from the container state and the health answer (0 = no answer)."""
    if state is None:
        return "absent"
    if state.get("Status") in _CRASHED_STATES or state.get("Restarting") or restart_count > 0:
        return "crashed"
    if http_status == 200:
        return "healthy"
    return "warming" if http_status else "loading"


def _health(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, "HTTP 200"
    except urllib.error.HTTPError as exc:
        return exc.code, f"HTTP {exc.code}"
    except (OSError, urllib.error.URLError) as exc:
        return 0, f"no answer ({getattr(exc, 'reason', exc)})"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "container": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "timeout": {"type": "float", "default": 30},
            "docker_cli": {"type": "str", "default": "docker"},
        },
        supports_check_mode=True,
    )
    p = module.params
    rc, out, err = module.run_command([p["docker_cli"], "inspect", p["container"]])
    state: dict[str, Any] | None = None
    restart_count = 0
    if rc == 0:
        info = json.loads(out)[0]
        state = info["State"]
        restart_count = int(info.get("RestartCount") or 0)
    elif "No such" not in (err + out):
        module.fail_json(msg=f"docker inspect {p['container']} failed: {err.strip()}")
    http_status, answer = (0, "not asked")
    if state is not None and state.get("Running"):
        http_status, answer = _health(p["url"], p["timeout"])
    phase = classify(state, restart_count, http_status)
    state = state or {}
    uptime = _uptime(state.get("StartedAt", "")) if state else 0.0
    detail = (
        f"container {p['container']} {state.get('Status', 'absent')}, restarts {restart_count}, "
        f"exit code {state.get('ExitCode', 0)}, up {uptime:.0f} s, {p['url']}: {answer}"
    )
    module.exit_json(
        changed=False,
        phase=phase,
        status=state.get("Status", "absent"),
        restart_count=restart_count,
        exit_code=int(state.get("ExitCode") or 0),
        http_status=http_status,
        uptime_s=round(uptime, 1),
        detail=detail,
    )


if __name__ == "__main__":
    main()
