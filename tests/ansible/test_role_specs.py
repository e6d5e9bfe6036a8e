"""The variable contract of the Ansible roles (docs/ansible.md, "Settings").

Each role's variables are its own, prefixed with its name; the settings more than one role reads
are the specserve role's (ansible/roles/specserve), prefixed `specserve_`. Proven here by parsing
the roles' YAML and Jinja: defaults and argument specs agree (as prometheus-community/ansible's
CI checks), and every variable a role's tasks, handlers, vars or templates reference is its own,
shared, registered by it or by a role it calls, or Ansible's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ansible.vars.manager
import jinja2
import jinja2.meta
import pytest
import yaml
from ansible.inventory.host import Host
from ansible.playbook.loop_control import LoopControl
from ansible.vars.reserved import get_reserved_names

from .harness import tasks_in

ROOT = Path(__file__).resolve().parents[2]
ROLES_DIR = ROOT / "ansible" / "roles"
ROLES = sorted(p for p in ROLES_DIR.iterdir() if p.is_dir())
COMMON = "specserve"
SHARED_PREFIX = "specserve_"
SYNC_COMMENT = f"# Kept in sync with defaults/main.yml by {Path(__file__).relative_to(ROOT)}."
# Keys whose values Ansible evaluates as bare Jinja expressions.
CONDITIONALS = {"when", "that", "until", "changed_when", "failed_when"}


class _AnyName(dict):  # type: ignore[type-arg]
    """Every filter and test name is known: the check is about variables, not plugins."""

    def __contains__(self, key: object) -> bool:
        return True

    def get(self, key: str, default: Any = None) -> Any:
        return _any_plugin

    def __missing__(self, key: str) -> Any:
        return _any_plugin


def _any_plugin(*args: Any, **kwargs: Any) -> None:
    return None


JINJA = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
JINJA.filters = _AnyName()
JINJA.tests = _AnyName()

def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None


def _prefix(role: str) -> str:
    return SHARED_PREFIX if role == COMMON else role + "_"


def _ansible_names() -> set[str]:
    """Ansible's own names, read from Ansible: reserved words and Jinja globals, the magic
    variables its VariableManager and Host set, and the default loop variable."""
    source = Path(ansible.vars.manager.__file__).read_text(encoding="utf-8")
    magic = set(re.findall(r"(?:variables|all_vars)\[['\"](\w+)['\"]\]", source))
    return set(get_reserved_names()) | magic | set(Host("x").get_magic_vars()) | {
        LoopControl().loop_var}


ANSIBLE_NAMES = _ansible_names()


def _strings(node: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v, key)
    elif isinstance(node, str):
        yield key, node


def _referenced(text: str, bare: bool) -> set[str]:
    source = "{{ " + text + " }}" if bare and "{{" not in text else text
    if "{{" not in source and "{%" not in source:
        return set()
    return set(jinja2.meta.find_undeclared_variables(JINJA.parse(source)))


def _yaml_files(role: Path) -> list[Path]:
    return [p for sub in ("tasks", "handlers", "vars", "defaults")
            for p in sorted((role / sub).glob("*.yml"))]


def references(role: Path) -> set[str]:
    names: set[str] = set()
    for path in _yaml_files(role):
        for key, text in _strings(_load(path)):
            names |= _referenced(text, bare=key in CONDITIONALS)
    for path in sorted((role / "templates").glob("*.j2")):
        names |= _referenced(path.read_text(encoding="utf-8"), bare=False)
    return names


def _role_tasks(role: Path) -> Iterator[dict[str, Any]]:
    for sub in ("tasks", "handlers"):
        for path in sorted((role / sub).glob("*.yml")):
            yield from tasks_in(_load(path))


def registered(role: Path) -> set[str]:
    """Names this role's tasks register or set as facts, and loop variables."""
    names: set[str] = set()
    for task in _role_tasks(role):
        if isinstance(task.get("register"), str):
            names.add(task["register"])
        facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
        if isinstance(facts, dict):
            names |= set(facts)
        loop_var = (task.get("loop_control") or {}).get("loop_var")
        if loop_var:
            names.add(loop_var)
    return names


def called_roles(role: Path) -> set[str]:
    called = set()
    for task in _role_tasks(role):
        for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if isinstance(task.get(action), dict):
                called.add(task[action]["name"])
    return called


def _reachable(role: str) -> set[str]:
    seen, todo = set(), [role]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(called_roles(ROLES_DIR / name))
    return seen


def shared_names() -> set[str]:
    common = ROLES_DIR / COMMON
    return (set(_load(common / "defaults/main.yml")) | set(_load(common / "vars/main.yml") or {})
            | registered(common))


def _callers_tasks() -> Iterator[dict[str, Any]]:
    for role in ROLES:
        yield from _role_tasks(role)
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in _load(path) or []:
            for key in ("pre_tasks", "tasks", "post_tasks"):
                yield from tasks_in(play.get(key))


def passed_vars(role: str) -> set[str]:
    """The variables callers pass explicitly (`vars:`) where they include or import `role`."""
    names: set[str] = set()
    for task in _callers_tasks():
        for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if isinstance(task.get(action), dict) and task[action]["name"] == role:
                names |= set(task.get("vars") or {})
    return names


# Roles that run other roles in order (ansible/roles/node: one node's deploy for every play).
COMPOSERS = frozenset({"node"})


def foreign_references(role: Path) -> set[str]:
    """References that are not the role's own, shared, passed by its callers, registered by it
    or a role it calls, or Ansible's."""
    allowed = shared_names() | ANSIBLE_NAMES | passed_vars(role.name)
    for name in _reachable(role.name):
        allowed |= registered(ROLES_DIR / name)
        if role.name in COMPOSERS and name != role.name:
            # Its job is the wiring: it hands one role's settings to another it runs.
            allowed |= set(_load(ROLES_DIR / name / "defaults/main.yml") or {})
    own = _prefix(role.name)
    return {n for n in references(role) - allowed
            if not n.startswith(own) and not n.startswith("ansible_")}


def test_every_role_is_there() -> None:
    assert [r.name for r in ROLES] == sorted(
        ["specserve", "node", "preflight", "host", "weights", "server", "verify", "exporter",
         "monitoring", "tune", "router", "dcgm_exporter"])


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_match_defaults(role: Path) -> None:
    # Every default is specified with the same default and a description, and every specified
    # option without `required` has a default; both carry the role's prefix.
    defaults = _load(role / "defaults" / "main.yml") or {}
    options = _load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == {k for k, v in options.items() if not v.get("required")}, role.name
    for name, value in defaults.items():
        assert options[name].get("default") == value, f"{role.name}: {name}"
        assert options[name].get("description"), f"{role.name}: {name} has no description"
    for name in options:
        assert name.startswith(_prefix(role.name)), f"{name} lacks the prefix {_prefix(role.name)}"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_the_sync_comment_names_this_test(role: Path) -> None:
    text = (role / "meta" / "argument_specs.yml").read_text(encoding="utf-8")
    assert text.splitlines()[1] == SYNC_COMMENT, role.name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_roles_read_only_their_own_and_shared_variables(role: Path) -> None:
    foreign = foreign_references(role)
    assert not foreign, f"{role.name} reads other roles' variables: {sorted(foreign)}"


def test_the_reference_check_sees_a_foreign_read(tmp_path: Path) -> None:
    # The check itself: a task reading another role's private variable is found, in a
    # condition, a template and a plain string alike.
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "main.yml").write_text(
        "- name: x\n  ansible.builtin.debug:\n"
        "    msg: '{{ server_state_dir }} {{ inventory_hostname }}'\n"
        "  when: exporter_image | length > 0\n  register: demo_result\n"
    )
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.j2").write_text("{% for x in monitoring_dir %}{{ x }}{% endfor %}")
    assert references(tmp_path) - ANSIBLE_NAMES == {"server_state_dir", "exporter_image",
                                                    "monitoring_dir"}
    assert registered(tmp_path) == {"demo_result"}


def _inventory_settings() -> Iterator[tuple[str, str]]:
    for path in sorted((ROOT / "playbooks" / "inventory").rglob("*.yml")):
        doc = _load(path) or {}
        groups = [doc] if "group_vars" in path.parts else [
            g for g in tasks_in(list(doc.values())) if isinstance(g, dict)]
        for group in groups:
            variables = group if "group_vars" in path.parts else group.get("vars") or {}
            for name in variables:
                yield str(path.relative_to(ROOT)), name


def test_inventories_set_only_declared_settings() -> None:
    # A renamed setting left in an inventory would be silently ignored.
    declared = {n for role in ROLES for n in (_load(role / "defaults/main.yml") or {})}
    unknown = [(path, name) for path, name in _inventory_settings()
               if name not in declared and not name.startswith("ansible_")]
    assert not unknown, unknown


def _task_names_with_loop_variables() -> list[tuple[str, str]]:
    """Tasks whose name reads their loop variable: Ansible renders a name before the loop runs
    (the task banner), so the name fails to render ("'item' is undefined", a template error
    every run prints; CI of bda968e had one in the monitoring role)."""
    found = []
    paths = [p for role in ROLES for sub in ("tasks", "handlers")
             for p in sorted((role / sub).glob("*.yml"))]
    for path in paths + sorted((ROOT / "playbooks").glob("*.yml")):
        doc = _load(path) or []
        plays = [doc] if "roles" in path.parts else [
            [play, *(play.get(k) or [] for k in ("pre_tasks", "tasks", "post_tasks", "handlers"))]
            for play in doc if isinstance(play, dict)]
        for task in tasks_in(plays):
            if "loop" not in task and not any(k.startswith("with_") for k in task):
                continue
            loop_var = (task.get("loop_control") or {}).get("loop_var", LoopControl().loop_var)
            if loop_var in _referenced(str(task.get("name", "")), bare=False):
                found.append((str(path.relative_to(ROOT)), str(task["name"])))
    return found


def test_no_task_name_reads_its_loop_variable() -> None:
    assert not _task_names_with_loop_variables()
