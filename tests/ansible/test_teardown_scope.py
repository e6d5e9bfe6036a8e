"""playbooks/teardown.yml finds every container the roles create, and only by what names one
deployment: the roles are read here, so a container a role adds under another naming (or a
`docker run` without the deployment's label) fails this test instead of outliving a teardown.
test_teardown.py runs the play against two real deployments side by side."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .harness import tasks_in

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "ansible" / "roles"
PLAY = ROOT / "playbooks" / "teardown.yml"
# What the play matches by name: the server's container and the prepared one (server role),
# every *_container(_name) setting of these roles that defaults to a name after the server,
# and, on the router's host, the router's.
NAMED_AFTER_THE_SERVER = ("exporter", "dcgm_exporter", "monitoring")
TEMPLATE = re.compile(r"^\{\{ *(\w+) *\}\}$")


def _role_tasks() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(ROLES.glob("*/tasks/*.yml")) + sorted(ROLES.glob("*/handlers/*.yml")):
        for task in tasks_in(yaml.safe_load(path.read_text(encoding="utf-8"))):
            yield f"{path.relative_to(ROOT)}: {task.get('name')}", task


def _defaults(role: str) -> dict[str, Any]:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text(encoding="utf-8"))


def test_every_container_a_role_creates_is_one_the_teardown_finds() -> None:
    named = {"server_next_name", "router_container_name"}
    for role in NAMED_AFTER_THE_SERVER:
        for key, value in _defaults(role).items():
            if re.fullmatch(r".*_container(_name)?", key):
                assert str(value).startswith("{{ specserve_container_name }}-"), (key, value)
                named.add(key)
    server_vars = yaml.safe_load((ROLES / "server/vars/main.yml").read_text(encoding="utf-8"))
    assert server_vars["server_next_name"] == "{{ specserve_container_name }}-next"
    seen = set()
    for where, task in _role_tasks():
        module = task.get("community.docker.docker_container")
        if isinstance(module, dict):
            match = TEMPLATE.match(str(module["name"]))
            assert match and match[1] in named, f"{where}: a container the teardown misses"
            seen.add(match[1])
    assert {"server_next_name", "exporter_container_name", "router_container_name",
            "monitoring_prometheus_container"} <= seen


def test_every_throwaway_container_carries_the_servers_label() -> None:
    # `docker run` from a role (the launcher's dry run, the verification gate): a play killed
    # while one runs leaves it; the teardown finds it by io.specserve.server.
    runs = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")) + sorted(ROLES.glob("*/vars/*.yml")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"'docker', 'run'|- docker\n\s+- run\b|^\s+- run$", text, re.MULTILINE):
            runs.append(path.relative_to(ROOT))
            assert "io.specserve.server=" in text and "specserve_container_name" in text, path
    assert {Path("ansible/roles/server/tasks/validate.yml"),
            Path("ansible/roles/verify/vars/main.yml")} <= set(runs)


def test_the_play_reads_those_roles_and_matches_no_prefix() -> None:
    text = PLAY.read_text(encoding="utf-8")
    for role in NAMED_AFTER_THE_SERVER:
        assert f"/../ansible/roles/{role}/defaults/main.yml" in text
    assert "'^' ~ (teardown_name | regex_escape) ~ '-prev-[0-9]+$'" in text
    # Chosen by exact names, the server label, or the anchored -prev-N pattern: never a name
    # that merely starts with the deployment's.
    assert "startswith" not in text and "name=^" not in text
