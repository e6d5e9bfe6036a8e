"""docs/ansible.md's variable tables, from the roles' argument specs.

Every role validates its variables against `meta/argument_specs.yml` at its start, and
tests/ansible/test_role_specs.py holds the specs' defaults to `defaults/main.yml`: the specs are
the one place a variable's type, default and meaning are written. `specserve generate` writes
two tables from them (specserve/docblocks.py): the shared contract (the `specserve` role's
variables, which every playbook imports first) and every other role's variables.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from specserve.docblocks import Block, ReadSource, code, table, value

ROLES = "ansible/roles"
SHARED = "specserve"
MAIN = "main"


def spec_path(role: str) -> str:
    return f"{ROLES}/{role}/meta/argument_specs.yml"


def roles(root: Path) -> list[str]:
    return sorted(p.parents[1].name for p in (root / ROLES).glob("*/meta/argument_specs.yml"))


def _options(spec: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(entry point, variable, option) of every variable, once, the main entry point's first."""
    points = spec["argument_specs"]
    seen: set[str] = set()
    for point in sorted(points, key=lambda p: p != MAIN):
        for name, option in (points[point].get("options") or {}).items():
            if name not in seen:
                seen.add(name)
                yield point, name, option


def _description(option: Mapping[str, Any]) -> str:
    text = option.get("description") or ""
    return " ".join(text) if isinstance(text, list) else str(text)


def _default(option: Mapping[str, Any]) -> str:
    if "default" in option:
        return value(option["default"])
    return "required" if option.get("required") else value(None)


def role_table(role: str, read: ReadSource) -> str:
    spec = yaml.safe_load(read(spec_path(role)))
    if not any(point.get("options") for point in spec["argument_specs"].values()):
        return "No variables of its own.\n"
    rows = []
    for point, name, option in _options(spec):
        where = "" if point == MAIN else f"Entry point {code(point)} only. "
        rows.append((code(name), _default(option), where + _description(option)))
    return table(("variable", "default", "meaning"), rows)


def shared_table(_root: Path, read: ReadSource) -> str:
    return role_table(SHARED, read)


def roles_tables(root: Path, read: ReadSource) -> str:
    parts = []
    for role in roles(root):
        if role == SHARED:
            continue
        summary = yaml.safe_load(read(spec_path(role)))["argument_specs"][MAIN]
        about = str(summary.get("short_description", "")).rstrip(".")
        parts.append(f"#### `{role}`\n\n{about}.\n\n"
                     + role_table(role, read))  # fmt: skip
    return "\n".join(parts)


BLOCKS: tuple[Block, ...] = (
    Block("docs/ansible.md", "ansible-shared", f"{spec_path(SHARED)}", shared_table),
    Block("docs/ansible.md", "ansible-roles", f"{ROLES}/*/meta/argument_specs.yml", roles_tables),
)
