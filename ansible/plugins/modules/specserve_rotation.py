"""Ansible module: the router's rotation, the deployment's record of which fleet nodes are in.

One file on the router host, one worker URL a line, that the router reads when its process
starts (ansible/roles/router/files/launch.sh turns it into --worker-urls): a router that Docker
restarts after a crash, or that the deploy starts again after a `docker kill`, comes back with
the nodes the deploy last put in, never with one it took out for its replacement. The drain
removes a node before it leaves the router; the join adds it after its gates.

Every change is a read-modify-write under an flock on the file's directory and lands by rename,
so two plays (two controllers) on the same router host never lose each other's update and the
router never reads half a file.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_rotation
short_description: Read, seed, add to and remove from the router's rotation file
description:
  - "The file holds one worker URL (http(s)://HOST:PORT) a line; '#' lines are comments."
  - "seed: the rotation written when the file does not exist yet (otherwise ignored)."
  - "keep_only: drop every URL not in this list (the inventory's nodes)."
  - "Then absent URLs are removed and present URLs appended, in that order."
  - "A malformed line is skipped and counted (malformed), never fatal; a rewrite drops it."
options:
  path: {description: The rotation file, type: path, required: true}
  seed: {description: The rotation when the file is missing, type: list, elements: str}
  keep_only: {description: Only these URLs may stay in, type: list, elements: str}
  present: {description: URLs put in, type: list, elements: str, default: []}
  absent: {description: URLs taken out, type: list, elements: str, default: []}
extends_documentation_fragment: [files]
"""

RETURN = r"""
rotation: {description: the URLs in rotation after the call, type: list, returned: always}
created: {description: the file did not exist and was seeded, type: bool, returned: always}
dropped: {description: URLs keep_only took out, type: list, returned: always}
malformed: {description: lines skipped as not a worker URL, type: int, returned: always}
"""

URL = re.compile(r"^https?://[^/\s]+:[0-9]+$")
HEADER = (
    "# The router's rotation: the fleet nodes in it, one worker URL a line. The router starts\n"
    "# with these (--worker-urls); a deploy takes a node out before its drain and puts it back\n"
    "# after its gates. Written by the specserve_rotation module (docs/router.md).\n"
)


@dataclass
class Rotation:
    urls: list[str] = field(default_factory=list)
    malformed: int = 0


def parse(text: str) -> Rotation:
    rotation = Rotation()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not URL.match(line):
            rotation.malformed += 1
        elif line not in rotation.urls:
            rotation.urls.append(line)
    return rotation


def render(urls: Iterable[str]) -> str:
    return HEADER + "".join(f"{url}\n" for url in urls)


def bad_urls(urls: Iterable[str]) -> list[str]:
    return [url for url in urls if not URL.match(url)]


def apply(urls: list[str], present: list[str], absent: list[str],
          keep_only: list[str] | None) -> tuple[list[str], list[str]]:
    """The rotation after the change, and what keep_only dropped."""
    dropped = [u for u in urls if keep_only is not None and u not in keep_only]
    after = [u for u in urls if u not in dropped and u not in absent]
    after += [u for u in dict.fromkeys(present) if u not in after and u not in absent]
    return after, dropped


@contextmanager
def locked(directory: str) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write(path: str, text: str) -> None:
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".rotation.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "seed": {"type": "list", "elements": "str"},
            "keep_only": {"type": "list", "elements": "str"},
            "present": {"type": "list", "elements": "str", "default": []},
            "absent": {"type": "list", "elements": "str", "default": []},
        },
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    given = [*(params["seed"] or []), *params["present"], *params["absent"],
             *(params["keep_only"] or [])]
    wrong = bad_urls(given)
    if wrong:
        module.fail_json(msg=f"not a worker URL: {', '.join(wrong)}; want http://HOST:PORT "
                             "(router_worker_url of each node)")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory) and module.check_mode:
        # --check on a host the role has not set up: its directory would be created first.
        seeded = list(dict.fromkeys(params["seed"] or []))
        after, dropped = apply(seeded, params["present"], params["absent"], params["keep_only"])
        module.exit_json(changed=True, rotation=after, created=True, dropped=dropped,
                         malformed=0)
    if not os.path.isdir(directory):
        module.fail_json(msg=f"the rotation's directory {directory} does not exist; the router "
                             "role creates it (ansible/roles/router/tasks/up.yml)")
    with locked(directory):
        created = not os.path.exists(path)
        if created:
            current = Rotation(urls=list(dict.fromkeys(params["seed"] or [])))
        else:
            with open(path, encoding="utf-8", errors="replace") as handle:
                current = parse(handle.read())
        after, dropped = apply(current.urls, params["present"], params["absent"],
                               params["keep_only"])
        changed = created or after != current.urls or current.malformed > 0
        if changed and not module.check_mode:
            write(path, render(after))
    if current.malformed:
        module.warn(f"{path}: {current.malformed} line(s) that are not a worker URL skipped"
                    + ("" if module.check_mode else " and dropped"))
    if os.path.exists(path) and not module.check_mode:
        changed = module.set_fs_attributes_if_different(
            module.load_file_common_arguments(params, path=path), changed)
    module.exit_json(changed=changed, rotation=after, created=created, dropped=dropped,
                     malformed=current.malformed)


if __name__ == "__main__":
    main()
