"""The profile edit baseline.yml and tune.yml write with the copy module (a backup kept beside
the profile): a thin wrapper over `specserve.tune.edit`, where the edit is decided. The rest of
a tuning run's logic (candidates, state, ranking, report) is `specserve tune`, which the role
runs as a command. Runs on the controller, inside the Python that runs ansible-playbook (the
repo's .venv).
"""

from __future__ import annotations

from typing import Any

try:
    from specserve.tune.edit import profile_edit as _profile_edit
    from specserve.tune.errors import TuneError
except ImportError:  # pragma: no cover - depends on how ansible-playbook was started
    _profile_edit = None  # type: ignore[assignment]
    TuneError = Exception  # type: ignore[assignment,misc]

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests import this without Ansible
    AnsibleFilterError = ValueError  # type: ignore[assignment,misc]


def profile_edit(text: str, *args: Any, **kwargs: Any) -> str:
    """specserve.tune.edit.profile_edit, its refusals as filter errors."""
    if _profile_edit is None:
        raise AnsibleFilterError(
            "the specserve Python package (with its deploy extra, ruamel.yaml) is not importable "
            "by ansible-playbook: run it from the repository's virtual environment "
            "(.venv/bin/ansible-playbook, see docs/ansible.md)"
        )
    try:
        return _profile_edit(text, *args, **kwargs)
    except TuneError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_profile_edit": profile_edit}
