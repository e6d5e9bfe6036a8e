"""Action plugin: one deploy at a time per node.

Takes the node's lock file (module specserve_lock, O_EXCL on the host) naming who holds it:
the controller's hostname, the PID of its `ansible-playbook` and that process's start time,
the user, the play, and since when. A second deploy waits (bounded) and then fails naming the
holder. A holder is stale, and its lock taken over, when

  - it was taken from this controller (the same machine and boot, not merely the same
    hostname) and its `ansible-playbook` process is gone (a SIGKILL or SIGINT skips the play's
    release), or this controller has rebooted since;
  - the node has rebooted since it was taken; or
  - its lease ran out: it was taken or last renewed (each phase of a deploy renews it) more than
    `stale_s` ago by the node's own monotonic clock (a holder on another controller, whose PID
    cannot be checked from here). A controller's wall clock, hours off or another machine's,
    never decides.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


def _proc_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" where /proc is not there)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def playbook_pid() -> int:
    """The `ansible-playbook` process this task runs under: the outermost ancestor with that
    command line (its forked workers, which run this plugin and exit after each task, carry
    the same command line)."""
    pid, found = os.getpid(), 0
    for _ in range(16):
        if "ansible-playbook" in _cmdline(pid):
            found = pid
        elif found:
            break
        pid = _parent(pid)
        if pid <= 1:
            break
    return found or os.getppid()


def alive(pid: int, start: str) -> bool:
    """Whether `pid` still runs and is the same process (its start time, against PID reuse)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not start or _proc_start(pid) == start


def controller_id() -> str:
    """This controller, exactly: its machine and its boot. A hostname is not an identity (two
    controllers in containers are both `ansible`), and a PID means something only on the
    machine and boot that issued it."""
    parts = []
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path, encoding="ascii") as handle:
                parts.append(handle.read().strip())
        except OSError:
            parts.append("")
    return "/".join(parts)


def stale_reason(holder: dict[str, Any], controller: str, seen: dict[str, Any],
                 stale_s: float, me: str | None = None) -> str:
    """Why `holder` no longer holds the lock, or "" while it does. `seen` is the host's view of
    the lock (its age by the host's monotonic clock, renewed by the holder at each phase; or
    that the host rebooted since): a controller's wall clock never decides."""
    me = controller_id() if me is None else me
    age = seen.get("age_s")
    if seen.get("host_rebooted"):
        return "the node has rebooted since it was taken"
    if holder.get("unreadable"):
        return (f"the lock file is unreadable and {age:.0f} s old, more than the stale age "
                f"{stale_s:.0f} s") if age is not None and age > stale_s else ""
    mine = holder.get("controller_id") == me and bool(me.strip("/"))
    if mine and not alive(int(holder.get("pid") or 0), str(holder.get("pid_start") or "")):
        return f"its ansible-playbook (pid {holder.get('pid')}) is gone on {controller}"
    same_machine = str(holder.get("controller_id", "")).split("/")[0] == me.split("/")[0]
    if same_machine and me.split("/")[0] and not mine and holder.get("controller_id"):
        return f"{controller} has rebooted since it was taken (its ansible-playbook is gone)"
    if age is not None and age > stale_s:
        return (f"it was last renewed {age:.0f} s ago by the node's clock, more than the stale "
                f"age {stale_s:.0f} s")
    return ""


def describe(holder: dict[str, Any], now: float) -> str:
    if holder.get("unreadable"):
        return "an unreadable lock file"
    age = now - float(holder.get("since_epoch") or now)
    return (
        f"{holder.get('user', '?')}@{holder.get('controller', '?')} pid {holder.get('pid', '?')}"
        f" (play {holder.get('play', '?')!r} on {holder.get('node', '?')})"
        f" since {holder.get('since', '?')} ({age:.0f} s ago)"
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "state", "token", "wait_s", "stale_s", "poll_s", "play",
                             "wait_var", "stale_var"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        path = args.get("path")
        if not path:
            raise AnsibleActionFail("specserve_lock needs `path`")
        node = (task_vars or {}).get("inventory_hostname", "?")
        if args.get("state", "acquired") == "renewed":
            out = self._execute_module("specserve_lock", module_args={
                "path": path, "state": "renewed", "holder": {"token": str(args.get("token"))}},
                task_vars=task_vars)
            result.update(changed=False, renewed=bool(out.get("renewed")))
            if not out.get("renewed"):
                result.update(failed=True, msg=(
                    f"The deploy lock {path} is no longer this play's: it is held by "
                    f"{describe(out.get('holder') or {}, time.time())}. Another deploy took it "
                    "over; this one stops here."))
            return result
        if args.get("state", "acquired") == "released":
            out = self._execute_module("specserve_lock", module_args={
                "path": path, "state": "released", "holder": {"token": str(args.get("token"))}},
                task_vars=task_vars)
            result.update(changed=False, released=bool(out.get("released")),
                          msg=f"deploy lock {path} released" if out.get("released")
                          else f"deploy lock {path} was not ours any more: {out.get('holder')}")
            return result
        wait_s = float(args.get("wait_s", 0))
        stale_s = float(args.get("stale_s", 86400))
        poll_s = max(0.2, float(args.get("poll_s", 2)))
        wait_var = args.get("wait_var", "wait_s")
        stale_var = args.get("stale_var", "stale_s")
        controller = socket.gethostname()
        pid = playbook_pid()
        now = time.time()
        holder = {
            "token": uuid.uuid4().hex,
            "controller": controller,
            "pid": pid,
            "pid_start": _proc_start(pid),
            "controller_id": controller_id(),
            "user": getpass.getuser(),
            "play": str(args.get("play", "")),
            "node": node,
            "since": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "since_epoch": now,
        }
        start = time.monotonic()
        took_over = ""
        while True:
            out = self._execute_module("specserve_lock", module_args={
                "path": path, "holder": holder}, task_vars=task_vars)
            if out.get("failed"):
                result.update(failed=True, msg=f"deploy lock {path}: {out.get('msg')}")
                return result
            if out.get("acquired"):
                break
            other = out.get("holder") or {}
            reason = stale_reason(other, controller, out, stale_s)
            if reason:
                taken = self._execute_module("specserve_lock", module_args={
                    "path": path, "holder": holder, "takeover_token": str(other.get("token", ""))},
                    task_vars=task_vars)
                if taken.get("acquired"):
                    took_over = (f"took over a stale deploy lock from "
                                 f"{describe(other, time.time())}: {reason}")
                    display.display(f"  [{node}] {took_over}")
                    break
                continue
            waited = time.monotonic() - start
            if waited + poll_s > wait_s:
                result.update(failed=True, holder=other, msg=(
                    f"Another deploy is running on {node}: the deploy lock {path} is held by "
                    f"{describe(other, time.time())}. Waited {waited:.0f} s ({wait_var} = "
                    f"{wait_s:.0f}); run again when it has finished. A lock is taken over when "
                    f"its ansible-playbook is gone on the same controller, or after "
                    f"{stale_var} = {stale_s:.0f} s."))
                return result
            display.display(
                f"  [{node}] deploy lock held by {describe(other, time.time())}: waiting "
                f"{waited:.0f}/{wait_s:.0f} s ({wait_var})")
            time.sleep(poll_s)
        result.update(changed=False, acquired=True, holder=holder, took_over=took_over,
                      msg=f"deploy lock {path} held by {describe(holder, time.time())}"
                      + (f"; {took_over}" if took_over else ""))
        return result
