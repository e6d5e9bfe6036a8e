"""Facts about a deployment profile, read with the same library the launcher uses.

The roles need a few values out of the profile (GPU count, port, draft tokens, model paths);
reading them through `specserve.profile` keeps schema defaults and path rules in one place.
Runs on the controller, inside the Python that runs ansible-playbook (the repo's .venv).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

try:
    from specserve.profile.loader import ProfileError, load_profile
except ImportError:  # pragma: no cover - depends on how ansible-playbook was started
    load_profile = None  # type: ignore[assignment]
    ProfileError = Exception  # type: ignore[assignment,misc]

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests import this without Ansible
    AnsibleFilterError = ValueError  # type: ignore[assignment,misc]

_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def profile_facts(path: str) -> dict[str, Any]:
    """The values the roles use, with the library's defaults filled in.

    Absent values are "" or 0, never None: Ansible 2.19 conditionals must be booleans.
    """
    if load_profile is None:
        raise AnsibleFilterError(
            "the specserve Python package is not importable by ansible-playbook: run it from the "
            "repository's virtual environment (.venv/bin/ansible-playbook, see docs/ansible.md)"
        )
    try:
        profile = load_profile(path)
    except ProfileError as exc:
        raise AnsibleFilterError(str(exc)) from None
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    server = profile.server
    spec = profile.speculative
    secret = server.api_key
    probe_host = "127.0.0.1" if server.host in _WILDCARD_HOSTS else server.host
    return {
        "name": profile.name,
        "gpu_count": profile.gpu.count,
        "gpu_min_memory_gib": float(profile.gpu.min_memory_gib),
        "gpu_topology": profile.gpu.topology,
        "nccl_preset": profile.nccl.preset,
        "server_host": server.host,
        "server_port": server.port,
        "probe_host": probe_host,
        "enable_metrics": server.enable_metrics,
        "speculative": spec is not None,
        "algorithm": "" if spec is None else spec.algorithm,
        "draft_tokens": profile.speculative_draft_tokens or 0,
        "api_key_file": (secret.file if secret else None) or "",
        "api_key_env": (secret.env if secret else None) or "",
        "logging_file": profile.logging.file or "",
        "baseline": ",".join(f"{k}={v:g}" for k, v in profile.baseline.items()),
        "baseline_tok_s": dict(profile.baseline),
        # As written in the profile: the paths the server sees inside its container.
        "target_path": raw["target"]["path"],
        "drafter_path": (raw.get("drafter") or {}).get("path") or "",
        "served_model_name": profile.target.served_model_name or "",
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_profile_facts": profile_facts}
