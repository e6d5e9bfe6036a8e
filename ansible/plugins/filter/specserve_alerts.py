"""The alert catalogue's effective thresholds, read with the library that renders the rules.

The verify role's accept-length floor is the SpecDecodeAcceptLengthLow alert's floor, with the
deployment's alert overrides file (specserve_alert_overrides) applied, unless the inventory sets
verify_accept_length_floor: the gate that puts a node in rotation and the alert agree.
Runs on the controller, inside the Python that runs ansible-playbook (the repo's .venv).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from specserve.monitoring.overrides import OverridesError, load_overrides_file
    from specserve.verify.options import FLOOR_ALERT, alert_floor
except ImportError:  # pragma: no cover - depends on how ansible-playbook was started
    alert_floor = None  # type: ignore[assignment]

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests import this without Ansible
    AnsibleFilterError = ValueError  # type: ignore[assignment,misc]


def accept_length_floor(overrides: str = "") -> float:
    """The floor the alert fires under: an overrides file's, or the catalogue's ("" = none)."""
    if alert_floor is None:
        raise AnsibleFilterError(
            "the specserve Python package is not importable by ansible-playbook: run it from the "
            "repository's virtual environment (.venv/bin/ansible-playbook, see docs/ansible.md)"
        )
    if not overrides:
        return alert_floor()
    try:
        alerts, _ = load_overrides_file(Path(overrides))
    except OverridesError as exc:
        raise AnsibleFilterError(f"specserve_alert_overrides: {exc}") from None
    return alert_floor(alerts.get(FLOOR_ALERT, {}).get("thresholds"))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_accept_length_floor": accept_length_floor}
