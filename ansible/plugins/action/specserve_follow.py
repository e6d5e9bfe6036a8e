"""Action plugin: run a command on the host and print its output while it runs.

`ansible.builtin.command` shows nothing until the command ends: a 65 s benchmark, a gate that
sends warm-up requests to a slow server or a 30 GB image pull looked like a hung play. This
runs the command in the background on the host (its own process group, stdout and stderr to
files in a private temporary directory), and every `interval` seconds (sooner in its first
seconds: a quick command is not held up) prints the new lines of its output (`echo`: all,
stderr only, or none), one `[host] label: line` each, or, when it has printed nothing for
`heartbeat` seconds, that it is still running. At the end it returns what
`command` returns (rc, stdout, stderr and their lines), so `failed_when` / `changed_when` and
`register` work as with `command`. Past `timeout` seconds, or when the play is interrupted, the
command's whole process group is terminated.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

Runner = Callable[[str], tuple[int, str, str]]
# The first poll's wait; each next one doubles, up to `interval`.
FIRST_POLL_S = 0.1
# The directory's files: the command's output, and its exit status once it ended.
_START = (
    'd=$1; shift; setsid sh -c \'d=$1; shift; "$@" >"$d/out" 2>"$d/err" </dev/null; '
    'echo $? >"$d/rc"\' sh "$d" "$@" </dev/null >/dev/null 2>&1 & echo $!'
)
_READ = (
    'd=$1; for f in out err; do tail -n "+$(( $2 + 1 ))" "$d/$f" 2>/dev/null; printf "\\036"; '
    'shift; done; cat "$d/rc" 2>/dev/null || true'
)


def q(*words: object) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def complete_lines(text: str) -> list[str]:
    """The whole lines of `text` (a last line without its newline is not done yet)."""
    lines = text.split("\n")
    return lines[:-1]


class Follow:
    """The background command and its polling, over a runner of shell commands on the host."""

    def __init__(self, run: Runner, say: Callable[[str], None], argv: list[str],
                 interval: float, heartbeat: float, timeout: float, echo: str) -> None:
        self.run, self.say, self.argv = run, say, argv
        self.interval, self.heartbeat, self.timeout, self.echo = interval, heartbeat, timeout, echo
        self.dir = ""
        self.pid = ""
        self.seen = {"out": 0, "err": 0}
        self.timed_out = False

    def _ok(self, command: str, what: str) -> str:
        rc, out, err = self.run(command)
        if rc != 0:
            raise AnsibleActionFail(f"{what} failed (exit {rc}): {(err or out).strip()}")
        return out.strip()

    def start(self) -> None:
        self.dir = self._ok("mktemp -d", "a temporary directory on the host")
        self.pid = self._ok(q("sh", "-c", _START, "sh", self.dir, *self.argv),
                            f"starting {self.argv[0]}")

    def read(self) -> tuple[list[str], str | None]:
        """New whole lines (stdout's, then stderr's) and the exit status once it ended."""
        rc, out, _ = self.run(q("sh", "-c", _READ, "sh", self.dir, self.seen["out"],
                                self.seen["err"]))
        parts = out.split("\x1e") if rc == 0 else []
        if len(parts) != 3:
            return [], None
        lines: list[str] = []
        for name, text in zip(("out", "err"), parts[:2], strict=True):
            new = complete_lines(text)
            self.seen[name] += len(new)
            if self.echo == "all" or self.echo == name.replace("err", "stderr"):
                lines += new
        status = parts[2].strip()
        return lines, status or None

    def stop(self) -> None:
        if self.pid:
            self.run(q("kill", "-TERM", f"-{self.pid}") + " 2>/dev/null || true")

    def cleanup(self) -> None:
        if self.dir:
            self.run(q("rm", "-rf", self.dir))

    def whole(self) -> tuple[str, str]:
        texts = []
        for name in ("out", "err"):
            _, text, _ = self.run(q("cat", f"{self.dir}/{name}") + " 2>/dev/null || true")
            texts.append(text.rstrip("\n"))
        return texts[0], texts[1]

    def __call__(self) -> dict[str, Any]:
        begin = time.monotonic()
        last_said = begin
        polls = 0
        self.start()
        try:
            while True:
                lines, status = self.read()
                now = time.monotonic()
                if lines:
                    for line in lines:
                        self.say(line)
                    last_said = now
                if status is not None:
                    break
                if now - last_said >= self.heartbeat:
                    self.say(f"running, {now - begin:.0f} s")
                    last_said = now
                if self.timeout and now - begin > self.timeout:
                    self.stop()
                    status = "124"
                    self.timed_out = True
                    break
                # Quick commands end quickly: the first polls come fast, then every `interval`.
                time.sleep(min(self.interval, FIRST_POLL_S * 2 ** polls))
                polls += 1
            out, err = self.whole()
        except BaseException:
            # An interrupted play (Ctrl-C) or a failure here: the command does not outlive it.
            self.stop()
            raise
        finally:
            self.cleanup()
        rc = int(status) if status.lstrip("-").isdigit() else 1
        msg = (f"{self.argv[0]} still running after {self.timeout:.0f} s: stopped it"
               if self.timed_out else f"non-zero return code {rc}")
        return {
            "cmd": self.argv, "rc": rc, "stdout": out, "stderr": err,
            "stdout_lines": out.splitlines(), "stderr_lines": err.splitlines(),
            "elapsed_s": round(time.monotonic() - begin, 1), "changed": True,
            "timed_out": self.timed_out, "failed": rc != 0, **({"msg": msg} if rc else {}),
        }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("argv", "label", "interval", "heartbeat", "timeout", "echo"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        argv = args.get("argv")
        if not isinstance(argv, list) or not argv:
            raise AnsibleActionFail("specserve_follow needs `argv`, a non-empty list")
        argv = [str(a) for a in argv]
        if self._task.check_mode:
            result.update(changed=True, skipped=True, msg="check mode: not run", rc=0, stdout="",
                          stderr="", stdout_lines=[], stderr_lines=[])
            return result
        host = (task_vars or {}).get("inventory_hostname", "?")
        label = str(args.get("label") or argv[0])

        def run(command: str) -> tuple[int, str, str]:
            out = self._low_level_execute_command(command, sudoable=True)
            return int(out.get("rc", 1)), str(out.get("stdout", "")), str(out.get("stderr", ""))

        def say(line: str) -> None:
            display.display(f"  [{host}] {label}: {line}")

        echo = str(args.get("echo", "all"))
        if echo not in ("all", "stderr", "none"):
            raise AnsibleActionFail(
                f"specserve_follow: echo must be all, stderr or none, not {echo!r}")
        follow = Follow(run, say, argv, float(args.get("interval", 2)),
                        float(args.get("heartbeat", 10)), float(args.get("timeout", 0)), echo)
        result.update(follow())
        return result
