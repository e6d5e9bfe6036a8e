"""Action plugin: stop the old server container and start the prepared one, one shell command
per step on the host, printing each.

The server role prepares everything a restart needs while the old server still serves: the
image pulled, the new profile validated by the image's own launcher and staged on the host, the
new container created (not started) as `<name>-next`. What is left between the stop and the
start is only this, each step one command (no module transfer, no task boundary):

  1. turn the old container's restart policy off, stop it (`docker stop --time T`: SIGTERM,
     SIGKILL after T; also when it exited on its own, which cancels a restart Docker has
     scheduled) and wait until its processes are gone, with a progress line every few seconds;
  2. wait until the server port is closed (something else listening there is an error);
  3. with GPUs, wait until `nvidia-smi` lists no compute process;
  4. keep the stopped container as `<name>-prev-1` with its `docker logs` (restart policy `no`,
     older ones shift up to `<name>-prev-<keep>`), or remove it (keep 0, or a container that
     never started: a prepared one a killed play left under the live name);
  5. install the staged profile (copied beside the live one, then renamed over it): a server
     restarting on its own never read a profile that had not been through the sequence;
  6. rename `<name>-next` to `<name>` and start it.

Without `next` it stops and keeps only (the rollback's "no last good spec" and the multi-node
ranks). Every failure names the variable that sets its bound.
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
# Docker's zero time: a container that was created and never started.
NEVER_STARTED = "0001-01-01"
# A wait prints a line at most this often (and on its first and last poll).
PROGRESS_EVERY_S = 5.0
# The engine refuses `docker update` while a crash-looping container's process is exiting
# ("cannot update a stopped container", "container not running") and keeps the old policy:
# measured on Docker 20.10, about 1 update in 60 on a container crashing every 0.3 s. The
# refusal lasts as long as the exit, so the update is tried again this many times, this far apart.
UPDATE_TRIES = 20
UPDATE_RETRY_S = 0.25

_PORT_PROBE = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)\n"
    "s.settimeout(1)\n"
    "sys.exit(0 if s.connect_ex((sys.argv[1], int(sys.argv[2]))) == 0 else 1)\n"
)

_KEEP = r"""set -e
name="$1"; keep="$2"; id="$3"; started="$4"
docker update --restart=no "$id" >/dev/null
if [ "$keep" -lt 1 ] || [ "${started#0001-01-01}" != "$started" ]; then
  docker rm "$id" >/dev/null; echo "removed ${id%"${id#????????????}"}"; exit 0
fi
docker rm -f "$name-prev-$keep" >/dev/null 2>&1 || true
i=$((keep - 1))
while [ "$i" -ge 1 ]; do
  docker rename "$name-prev-$i" "$name-prev-$((i + 1))" >/dev/null 2>&1 || true
  i=$((i - 1))
done
docker rename "$id" "$name-prev-1"
echo "kept as $name-prev-1 (docker logs $name-prev-1)"
"""

# The profile it replaces is kept beside it (.specserve-prev): what the stopped server read, for
# a rollback that has no readable last good record (restore_previous.yml).
_INSTALL = r"""set -e
src="$1"; dest="$2"; tmp="$dest.specserve-new"
if [ -f "$dest" ]; then cp -p "$dest" "$dest.specserve-prev"; fi
cp "$src" "$tmp"; chown 0:0 "$tmp"; chmod 0644 "$tmp"; mv -f "$tmp" "$dest"
"""


def _said(out: str, err: str) -> str:
    """Both streams of a failed command: over SSH with a TTY, the command's own error arrives
    on stdout and stderr holds only "Shared connection to ... closed"."""
    return " / ".join(part for part in (err.strip(), out.strip()) if part) or "(no output)"


def q(*words: object) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def sh(script: str, *args: object) -> str:
    return q("sh", "-c", script, "sh", *args)


class Swap:
    """The sequence, over a runner of shell commands on the host (tested with a fake one)."""

    def __init__(self, run: Runner, args: dict[str, Any], say: Callable[[str], None]) -> None:
        self.run, self.args, self.say = run, args, say
        self.name = str(args["name"])
        self.poll = float(args.get("poll", 0.5))
        self.result: dict[str, Any] = {"old_id": "", "kept": "", "started_id": "", "waits": {}}

    # --- helpers ------------------------------------------------------------------------------
    def _ok(self, command: str, what: str) -> str:
        rc, out, err = self.run(command)
        if rc != 0:
            raise AnsibleActionFail(f"{what} failed (exit {rc}): {_said(out, err)}")
        return out.strip()

    def _restart_policy_off(self, old_id: str) -> None:
        command = q("docker", "update", "--restart=no", old_id)
        for attempt in range(1, UPDATE_TRIES + 1):
            rc, out, err = self.run(command)
            if rc == 0:
                return
            if attempt == UPDATE_TRIES:
                raise AnsibleActionFail(
                    f"docker update --restart=no failed (exit {rc}, {UPDATE_TRIES} tries "
                    f"{UPDATE_RETRY_S} s apart): {_said(out, err)}")
            self.say(f"docker update --restart=no {old_id[:12]}: refused ({_said(out, err)}), "
                     f"trying again ({attempt}/{UPDATE_TRIES})")
            time.sleep(UPDATE_RETRY_S)

    def _wait(self, label: str, probe: Callable[[], tuple[bool, str]], timeout: float,
              knob: str, why: str) -> float:
        """Poll `probe` (done, what it saw) until done or `timeout`; one line at the start,
        then every PROGRESS_EVERY_S, and at the end."""
        start = time.monotonic()
        last_said = -PROGRESS_EVERY_S
        while True:
            done, seen = probe()
            elapsed = time.monotonic() - start
            if done or elapsed - last_said >= PROGRESS_EVERY_S or elapsed + self.poll > timeout:
                end = " (done)" if done else ""
                self.say(f"{label}: {elapsed:.1f}/{timeout:.0f} s, {seen}{end}")
                last_said = elapsed
            if done:
                self.result["waits"][label] = round(elapsed, 2)
                return elapsed
            if elapsed + self.poll > timeout:
                raise AnsibleActionFail(
                    f"{label}: still {seen} after {timeout:.0f} s ({knob}); {why}")
            time.sleep(self.poll)

    # --- steps --------------------------------------------------------------------------------
    def inspect_old(self) -> tuple[str, str, str] | None:
        rc, out, err = self.run(q("docker", "inspect", "--format",
                                  "{{.Id}} {{.State.Status}} {{.State.StartedAt}}", self.name))
        if rc != 0:
            if "No such" in err + out:
                return None
            raise AnsibleActionFail(f"docker inspect {self.name} failed: {_said(out, err)}")
        old_id, status, started = out.split()
        return old_id, status, started

    def stop(self, old_id: str, status: str) -> None:
        timeout = int(self.args.get("stop_timeout", 120))
        drain = float(self.args.get("drain_timeout", 300))
        label = f"old server {old_id[:12]} (pid, status)"
        if status == "created":
            return  # never started: nothing runs, and Docker's restart policy never starts it
        # Its restart policy off first: a container that exited on its own (a rank that lost its
        # group) or is between two restarts would otherwise be started again by Docker between
        # this wait and the keep below, and be kept as <name>-prev-1 still running.
        self._restart_policy_off(old_id)
        self.say(f"stopping the old server {old_id[:12]} ({status}): docker stop --time "
                 f"{timeout} (SIGTERM, SIGKILL after {timeout} s)")
        # Also for an exited one: `docker stop` cancels a restart Docker has already scheduled.
        # In the background, so that the wait below prints while a slow server shuts down.
        self._ok(sh('docker stop --time "$1" "$2" >/dev/null 2>&1 </dev/null &',
                    timeout, old_id), "docker stop")
        self.result["stopped"] = status in ("running", "restarting", "paused")

        def gone() -> tuple[bool, str]:
            rc, out, err = self.run(q("docker", "inspect", "--format",
                                      "{{.State.Pid}} {{.State.Status}}", old_id))
            if rc == 0:
                seen = out.strip()
            elif "No such" in err + out:
                seen = "0 removed"
            else:  # the engine did not answer: nothing is known, so it is not gone
                seen = f"unknown (docker inspect: {_said(out, err)[:200]})"
            # "0 restarting" has no process but one is coming: not gone.
            return seen in ("0 exited", "0 dead", "0 removed"), seen

        self._wait(label, gone, timeout + drain, "server_stop_timeout + server_drain_timeout_s",
                   "not starting a second server on top of it")

    def port_closed(self) -> None:
        host, port = str(self.args["port_host"]), int(self.args["port"])
        python = str(self.args.get("python") or "python3")

        def closed() -> tuple[bool, str]:
            rc, out, err = self.run(q(python, "-c", _PORT_PROBE, host, port))
            if rc not in (0, 1):
                raise AnsibleActionFail(
                    f"the port probe ({python} on the host) failed (exit {rc}): "
                    f"{_said(out, err)}")
            return rc == 1, "open" if rc == 0 else "closed"

        self._wait(f"port {host}:{port}", closed, float(self.args.get("port_close_timeout", 180)),
                   "server_port_close_timeout_s",
                   f"something else listens there (`ss -ltnp sport = :{port}`)")

    def gpus_drained(self) -> None:
        def drained() -> tuple[bool, str]:
            rc, out, err = self.run("nvidia-smi --query-compute-apps=pid --format=csv,noheader")
            pids = " ".join(out.split())
            if rc != 0:
                return False, f"nvidia-smi: {err.strip()}"
            return not pids, pids or "none"

        self._wait("GPU compute processes (PIDs)", drained,
                   float(self.args.get("drain_timeout", 300)), "server_drain_timeout_s",
                   "starting now would crash the new server (out of GPU memory); find them with "
                   "`nvidia-smi` and stop them")

    def keep(self, old_id: str, started: str) -> None:
        said = self._ok(sh(_KEEP, self.name, int(self.args.get("keep", 2)), old_id, started),
                        "keeping the old container")
        self.result["kept"] = said
        self.say(said)

    def install_profile(self) -> None:
        src, dest = self.args["profile_src"], self.args["profile_dest"]
        self._ok(sh(_INSTALL, src, dest), f"installing the profile {dest}")
        self.say(f"profile {dest} installed from {src}")

    def start(self, began: float) -> None:
        nxt = str(self.args["next"])
        new_id = self._ok(sh('docker rename "$1" "$2" && docker start "$2" >/dev/null && '
                             'docker inspect --format "{{.Id}}" "$2"', nxt, self.name),
                          f"starting {nxt} as {self.name}")
        self.result["started_id"] = new_id
        self.result["down_s"] = round(time.monotonic() - began, 2)
        self.say(f"started {self.name} ({new_id[:12]}, prepared as {nxt}) "
                 f"{self.result['down_s']:.1f} s after the stop began")

    def __call__(self) -> dict[str, Any]:
        began = time.monotonic()
        old = self.inspect_old()
        if old is not None:
            self.result["old_id"] = old[0]
            self.stop(old[0], old[1])
        self.port_closed()
        if self.args.get("gpu"):
            self.gpus_drained()
        if old is not None:
            self.keep(old[0], old[2])
        if self.args.get("profile_src"):
            self.install_profile()
        if self.args.get("next"):
            self.start(began)
        self.result["changed"] = old is not None or bool(self.args.get("next"))
        return self.result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset((
        "name", "next", "keep", "stop_timeout", "drain_timeout", "port_host", "port",
        "port_close_timeout", "poll", "gpu", "python", "profile_src", "profile_dest",
    ))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        for key in ("name", "port_host", "port"):
            if not args.get(key):
                raise AnsibleActionFail(f"specserve_swap needs `{key}`")
        if bool(args.get("profile_src")) != bool(args.get("profile_dest")):
            raise AnsibleActionFail("specserve_swap: profile_src and profile_dest go together")
        if self._task.check_mode:
            result.update(changed=True, msg=f"would replace {args['name']}")
            return result
        host = (task_vars or {}).get("inventory_hostname", "?")
        label = f"swap {args['name']}"

        def run(command: str) -> tuple[int, str, str]:
            out = self._low_level_execute_command(command, sudoable=True)
            return int(out.get("rc", 1)), str(out.get("stdout", "")), str(out.get("stderr", ""))

        def say(line: str) -> None:
            display.display(f"  [{host}] {label}: {line}")

        try:
            result.update(Swap(run, args, say)())
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
        return result
