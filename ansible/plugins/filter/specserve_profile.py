"""Facts about a deployment profile, read with the same library the launcher uses.

A thin wrapper over `specserve.profile.facts`, where every derived value (GPU count, port, probe
host and URLs, speculation, draft tokens, log file, model paths as written) is decided once.
Runs on the controller, inside the Python that runs ansible-playbook (the repo's .venv).
"""

from __future__ import annotations

from typing import Any

try:
    from specserve.profile.endpoints import probe_host, url_host
    from specserve.profile.facts import load_facts
    from specserve.profile.loader import ProfileError
except ImportError:  # pragma: no cover - depends on how ansible-playbook was started
    load_facts = None  # type: ignore[assignment]
    ProfileError = Exception  # type: ignore[assignment,misc]

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests import this without Ansible
    AnsibleFilterError = ValueError  # type: ignore[assignment,misc]


def _library() -> None:
    if load_facts is None:
        raise AnsibleFilterError(
            "the specserve Python package is not importable by ansible-playbook: run it from the "
            "repository's virtual environment (.venv/bin/ansible-playbook, see docs/ansible.md)"
        )


def profile_facts(path: str) -> dict[str, Any]:
    """The values the roles use (ProfileFacts.as_ansible_dict: "" or 0, never None)."""
    _library()
    try:
        return load_facts(path).as_ansible_dict()
    except ProfileError as exc:
        raise AnsibleFilterError(str(exc)) from None


def local_host(host: str) -> str:
    """The address that reaches a listener bound to `host` from its own machine (a wildcard
    bind is reached on 127.0.0.1): the same rule the profile's probe_host follows."""
    _library()
    return probe_host(str(host or ""))


def host_in_url(host: str) -> str:
    """`host` as it stands before `:port` (an IPv6 address in brackets)."""
    _library()
    return url_host(str(host or ""))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_profile_facts": profile_facts, "specserve_local_host": local_host,
                "specserve_url_host": host_in_url}
