"""The launch spec: what the server container runs, readable, one line per setting and per
argument, so that `--check --diff` (and last-good/launch-spec.txt) shows what a deploy would
change, not two hashes.

Two parts: the container's settings from the server role's `server_spec` (the image by tag and
by ID, the profile's and API key's hashes, environment, mounts, limits, restart policy, health
check, a multi-node rank's launcher arguments), and the command the image's own launcher
rendered from the profile (`specserve-launch --dry-run`, the validation step's output on
stderr). Nothing secret is in either: the spec holds the key's hash, the launcher prints where
it reads the key.
"""

from __future__ import annotations

from typing import Any

# server_spec's keys in the order a reader looks for them; any other key follows, sorted.
ORDER = (
    "image", "profile_sha256", "secret_sha256", "command", "env", "volumes", "gpus", "shm_size",
    "ulimits", "restart_policy", "stop_timeout", "log_max_size", "log_max_file", "health_url",
    "healthcheck_interval", "healthcheck_start_period",
)
LABELS = {
    "profile_sha256": "profile sha256",
    "secret_sha256": "api key sha256",
    "command": "launcher argument",
    "env": "env",
    "volumes": "volume",
    "ulimits": "ulimit",
}
# `specserve-launch` prints the command after this line, flags one per line joined by " \".
COMMAND_MARK = "specserve-launch: flags for SGLang"


def launch_command(stderr: str) -> list[str]:
    """The command lines of a launcher's dry run, one flag (with its value) or env var each;
    the line naming the SGLang version first. Empty when it printed none."""
    lines = stderr.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(COMMAND_MARK):
            command = [line.removeprefix("specserve-launch: ").strip()]
            for part in lines[index + 1:]:
                text = part.strip()
                more = text.endswith("\\")
                command.append(text.removesuffix("\\").rstrip())
                if not more:
                    break
            return command
    return []


def _value_lines(label: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [f"{label}: {k}={v}" for k, v in sorted(value.items())]
    if isinstance(value, list):
        return [f"{label}: {item}" for item in value] or [f"{label}: (none)"]
    return [f"{label}: {'(none)' if value in ('', None) else value}"]


def launch_spec(spec: dict[str, Any], container: str, image_id: str, stderr: str) -> str:
    """The text of the launch spec (ends with a newline)."""
    out = [
        f"# {container}: what deploy.yml runs (the server role's spec and the command the",
        "# image's launcher renders from the profile; one setting or argument per line).",
    ]
    keys = [k for k in ORDER if k in spec] + sorted(set(spec) - set(ORDER))
    for key in keys:
        out += _value_lines(LABELS.get(key, key.replace("_", " ")), spec[key])
        if key == "image":
            out.append(f"image id: {image_id or '(not on the host yet: pulled by the deploy)'}")
    command = launch_command(stderr)
    if command:
        out.append(f"command ({command[0]}):")
        out += [f"  {line}" for line in command[1:]]
    else:
        out.append("command: (not rendered: the image is not on the host yet)")
    return "\n".join(out) + "\n"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_launch_spec": launch_spec}
