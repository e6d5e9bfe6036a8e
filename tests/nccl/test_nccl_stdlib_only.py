"""Where the benchmark runs: the parent needs only the stdlib and this package (in the image it
runs from specserve's venv, which has no torch); workers need only torch (SGLang's python3)."""

import json
import os
import subprocess
import sys

import pytest

from specserve.profile.nccl import PRESETS

# specserve's other dependencies; none is in the SGLang image.
ABSENT = ("yaml", "jsonschema", "prometheus_client", "jinja2", "requests", "docker", "kubernetes")

# Runs the CLI in a parent process that cannot import torch at all.
PARENT_WITHOUT_TORCH = """
import runpy, sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("the parent must not import torch", name=name)
        return None

sys.meta_path.insert(0, NoTorch())
sys.argv = ["specserve.nccl", *sys.argv[1:]]
runpy.run_module("specserve.nccl", run_name="__main__")
"""


# What the parent imports, where the profile's loader cannot be imported: the presets and their
# validator are the profile schema's own module, reached through a package face that imports
# nothing (no bare-package workaround, no copy of the presets).
PRESETS_WITHOUT_LOADER = """
import sys
from specserve.nccl import cli, presets
from specserve.profile import nccl
assert "specserve.profile.loader" not in sys.modules, sorted(sys.modules)
assert presets.builtin_presets() == nccl.PRESETS
print(",".join(presets.builtin_presets()))
"""


def _blocked_env(tmp_path):
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    for name in ABSENT:
        (blocker / f"{name}.py").write_text(
            f"raise ModuleNotFoundError('{name} is not in the SGLang image', name='{name}')\n"
        )
    # PYTHONPATH comes before site-packages, in the parent and in every worker.
    return {**os.environ, "PYTHONPATH": str(blocker)}


def test_presets_are_the_profile_schemas_own_without_its_loader(tmp_path):
    done = subprocess.run([sys.executable, "-c", PRESETS_WITHOUT_LOADER],
                          env=_blocked_env(tmp_path), capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ",".join(PRESETS)


@pytest.mark.slow
def test_parent_without_torch_or_deps_drives_torch_workers(tmp_path):
    env = _blocked_env(tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", "import yaml"], env=env, capture_output=True, text=True, check=False
    )
    assert "yaml is not in the SGLang image" in probe.stderr
    out = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PARENT_WITHOUT_TORCH,
         "--python", sys.executable, "--device", "cpu", "--topology", "pcie",
         "--presets", "pcie-8gpu-seeds", "--sizes", "1", "--iters", "2", "--warmup", "1",
         "--json-out", str(out)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    statuses = {e["name"]: e["status"] for e in document["presets"]}
    assert statuses == {"default": "ok", "pcie-8gpu-seeds": "ok"}
    assert document["machine"]["python"] == sys.executable
    assert document["machine"]["torch_version"].startswith("2.13.0")
