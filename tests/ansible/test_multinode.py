"""Multi-node profiles and the Ansible deploy (issue 19 item 3), with the real ansible-playbook.

The deploy runs one server per node; starting a multi-node group as one unit (every rank
started, the gate on rank 0, the group rolled back together) is not built yet. Until it is, the
preflight refuses a profile with nodes.count > 1 before anything on the host changes, naming
the profile, the node count and the fix, instead of starting rank 0 alone to wait for ranks that
never come.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import _cleanup, new_deployment, require_docker
from .harness import ROOT, playbook

pytestmark = [pytest.mark.docker]


def test_a_multinode_profile_is_refused_before_anything_changes(tmp_path: Path) -> None:
    require_docker()
    dep = new_deployment(tmp_path, f"ssg{os.getpid()}")
    try:
        doc = yaml.safe_load(dep.profile.read_text(encoding="utf-8"))
        multi = yaml.safe_load(
            (ROOT / "tests/fixtures/profiles/multinode-standin-2rank.yaml").read_text("utf-8")
        )
        doc["parallelism"], doc["nodes"] = multi["parallelism"], multi["nodes"]
        dep.profile.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        run = playbook(dep.inventory)
        assert run.rc != 0, run.output[-3000:]
        assert "spans nodes.count 2 nodes" in run.output, run.output[-3000:]
        assert "Fix: deploy it with the Helm chart" in run.output
        # `specserve check` accepted the profile first: the refusal is the deploy's, not a typo.
        assert "Preflight | one node per server" in run.output
        assert "refused by `specserve check`" not in run.output
        assert "Replacing" not in run.output
        names = subprocess.run(
            ["docker", "ps", "-a", "--filter", f"name=^{dep.prefix}", "--format", "{{.Names}}"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        assert names == [], names
        assert not (dep.workdir / "etc/profile.yaml").exists()
    finally:
        _cleanup(dep.prefix)
