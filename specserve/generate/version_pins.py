"""docs/ansible.md's pinned versions, from versions.yaml.

versions.yaml holds every pinned image and tool version (specserve/generate/pins.py writes its
copies into the Dockerfiles, role defaults and chart values). `specserve generate` writes two blocks
from it (specserve/docblocks.py): the controller's Ansible install line, and a table of every
pin: an image as `repository:tag` (with its digest where resolved), a scalar as it is, a list of
package pins by its count.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from specserve.docblocks import Block, ReadSource, code, table

VERSIONS = "versions.yaml"
DOC = "docs/ansible.md"
# An image's own keys, shown as one reference; the others of its mapping get rows of their own.
_IMAGE_KEYS = {"repository", "tag", "digest", "dockerfile"}
# A list this long or shorter is shown whole; a longer one (a package closure) by its count.
_SHOWN_LIST = 4


def _rows(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, item in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        name = code(path)
        if isinstance(item, Mapping) and {"repository", "tag"} <= item.keys():
            digest = f"@{item['digest']}" if item.get("digest") else ""
            yield name, code(f"{item['repository']}:{item['tag']}{digest}")
            rest = {k: v for k, v in item.items() if k not in _IMAGE_KEYS}
            yield from _rows(rest, path)
        elif isinstance(item, Mapping):
            yield from _rows(item, path)
        elif isinstance(item, list):
            shown = len(item) <= _SHOWN_LIST
            listed = ", ".join(code(str(v)) for v in item) or "none"
            yield name, listed if shown else f"{len(item)} pins"
        elif item is not None:
            yield name, code(str(item))


def _versions(read: ReadSource) -> dict[str, Any]:
    pins: dict[str, Any] = yaml.safe_load(read(VERSIONS))
    pins.pop("schema", None)  # the file's format version, not a pin
    return pins


def pins_table(_root: Path, read: ReadSource) -> str:
    return table(("`versions.yaml` key", "pinned"), _rows(_versions(read)))


def ansible_install(_root: Path, read: ReadSource) -> str:
    ansible = _versions(read)["ansible"]
    return (
        "```bash\n"
        f".venv/bin/pip install ansible-core=={ansible['ansible_core']} "
        f"ansible=={ansible['ansible']}   # ships the pinned collections\n"
        "# or, with Ansible Galaxy reachable:\n"
        ".venv/bin/ansible-galaxy collection install -r ansible/requirements.yml\n"
        "```\n"
    )


BLOCKS: tuple[Block, ...] = (
    Block(DOC, "ansible-install", VERSIONS, ansible_install),
    Block(DOC, "versions", VERSIONS, pins_table),
)
