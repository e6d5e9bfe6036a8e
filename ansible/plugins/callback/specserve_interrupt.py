"""Callback plugin: an interrupted deploy says what state it left each node in.

Ctrl-C (or a SIGTERM) in the middle of a restart used to end with Ansible's one line, "User
interrupted execution", while the node might have no server running. This plugin follows each
host through the server role's restart sequence (by the tasks' actions and names, which do not
depend on templating) and, when the play ends without its summary, prints per host the step it
was in, what that means for the server, and the exact command that converges it: the re-run,
which reads the node's deploy-in-progress.json and finishes the replacement through its gates.
"""

from __future__ import annotations

import atexit
import shlex
import sys
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: specserve_interrupt
type: aggregate
short_description: After an interrupted deploy, the state of each node and the converging command
description:
  - Prints, when a play ends without its summary (Ctrl-C, SIGTERM), where each host's server
    restart was and the command that converges it.
"""

# Where in the sequence a host was, in the order they happen.
BEFORE, SWAPPING, STARTED, ROLLING_BACK, ENDED = range(5)


def _section(name: str) -> str:
    return name.split(" | ", 1)[0].strip() if " | " in name else ""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "specserve_interrupt"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.where: dict[str, int] = {}
        self.last_task: dict[str, str] = {}
        self.finished = False
        self.argv = list(sys.argv)
        atexit.register(self.report)

    # --- following the hosts ----------------------------------------------------------------
    def _step(self, host: str, task: Any, done: bool) -> None:
        name, action = task.get_name(), str(getattr(task, "action", ""))
        section = _section(name)
        self.last_task[host] = name
        state = self.where.get(host, BEFORE)
        if section in ("Rollback", "Group rollback", "Restore previous"):
            state = max(state, ROLLING_BACK)
        elif action.endswith("specserve_swap"):
            if state < ROLLING_BACK:
                state = STARTED if done else max(state, SWAPPING)
        elif name.startswith(("Restart | the sequence ended", "Group | the sequence ended")):
            state = ENDED if done else state
        elif name.startswith(("Restart | why", "Group | why")) and state == ENDED:
            state = BEFORE  # a second restart in the same play (tune.yml, baseline.yml)
        self.where[host] = state

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        self._step(str(host), task, done=False)

    def v2_runner_on_ok(self, result: Any) -> None:
        self._step(str(result._host), result._task, done=True)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self.finished = True

    # --- at exit -----------------------------------------------------------------------------
    def lines(self) -> list[str]:
        """What to tell the user about each host left mid-sequence (nothing when the play
        finished or never touched a server)."""
        if self.finished:
            return []
        meaning = {
            SWAPPING: "interrupted while the old server was being stopped and the new one started:"
                      " the node may have NO server running (the old one is kept as"
                      " <name>-prev-1 with its logs)",
            STARTED: "interrupted after the new server was started, before it was verified (health"
                     " gate, verification gate or stability window): it is running UNVERIFIED",
            ROLLING_BACK: "interrupted during the rollback: the node may have NO verified server",
        }
        out = []
        for host, state in sorted(self.where.items()):
            if state in meaning:
                out.append(f"specserve: {host}: {meaning[state]}; last step: "
                           f"\"{self.last_task.get(host, '?')}\".")
        if out:
            command = shlex.join(["ansible-playbook", *self.argv[1:]])
            out.append("specserve: the node's deploy-in-progress.json records the phase; to "
                       f"converge, run the same play again: {command}")
        return out

    def report(self) -> None:
        for line in self.lines():
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
