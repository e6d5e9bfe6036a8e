"""Action plugin: run a module on the host again and again until it reports `done`, printing
progress at every poll.

Ansible's `until`/`retries` only says "N retries left"; loading 600 GB takes tens of minutes and
an operator must see what the wait is waiting for (port closed, HTTP 503, bytes copied). Each poll
prints one line with the elapsed time and the module's own description of what it saw.
"""

from __future__ import annotations

import time
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

_COMMAND = "ansible.legacy.command"


def is_done(result: dict[str, Any], key: str, values: list[str], prefix: str | None) -> bool:
    """Whether one poll's module result ends the wait."""
    value = result.get(key)
    text = "" if value is None else str(value).strip()
    if prefix is not None:
        return text.startswith(prefix)
    return text in values


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        (
            "module", "module_args", "command", "done_key", "done_values", "done_prefix",
            "interval", "timeout", "label", "progress_key",
        )
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        command = args.get("command")
        module = args.get("module") or (_COMMAND if command else None)
        if module is None:
            raise AnsibleActionFail("specserve_poll needs `module` or `command`")
        module_args = dict(args.get("module_args") or {})
        if command:
            module_args["_raw_params"] = command
        key = args.get("done_key", "stdout")
        values = [str(v) for v in args.get("done_values", [""])]
        prefix = args.get("done_prefix")
        interval = float(args.get("interval", 5))
        timeout = float(args.get("timeout", 600))
        label = args.get("label", module)
        progress_key = args.get("progress_key", "detail" if not command else "stdout")
        host = (task_vars or {}).get("inventory_hostname", "?")
        start = time.monotonic()
        polls = 0
        while True:
            polls += 1
            last = self._execute_module(
                module_name=module, module_args=module_args, task_vars=task_vars
            )
            elapsed = time.monotonic() - start
            # A command exiting non-zero is a poll like any other; a module that could not run
            # at all (no interpreter, bad arguments) ends the wait at once.
            if last.get("failed") and (module != _COMMAND or "rc" not in last):
                result.update(failed=True, msg=f"{label}: {last.get('msg')}", poll=last)
                return result
            done = is_done(last, key, values, prefix)
            seen = str(last.get(progress_key, "") or last.get("stderr", "")).strip()
            seen = seen.replace("\n", " | ")
            display.display(
                f"  [{host}] {label}: {elapsed:.0f}/{timeout:.0f} s, {seen or '-'}"
                + (" (done)" if done else "")
            )
            if done or elapsed + interval > timeout:
                break
            time.sleep(interval)
        result.update(
            changed=False,
            done=done,
            timed_out=not done,
            elapsed_s=round(elapsed, 1),
            polls=polls,
            poll=last,
        )
        return result
