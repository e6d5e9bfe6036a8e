"""Each verified SGLang runs in its contract venv on the dependency versions it declares itself.

The venvs are installed --no-deps (scripts/setup/sglang.sh), so pip never compares them with
SGLang's wheel: 0.5.23 once ran on transformers 5.12.1 where its METADATA says ==5.19.0, and its
Kimi resolution rested on a transformers users never run. Here, per verified version:
- versions.yaml's pins (venv_packages + version_packages[version]) satisfy every Requires-Dist
  of SGLang's own METADATA (read from the installed wheel), and every exact pin SGLang makes on
  something the venv holds is one of them;
- the venv holds exactly those pins, and every requirement from sglang down through what is
  installed (torch's nvidia-* and setuptools too) is met (scripts/setup/sglang_declared.py, the
  check set-up runs);
- every distribution SGLang's import and resolution of the Kimi and Llama fixtures load is
  either reached from SGLang's requirements (so version-checked above) or pinned.
"""

from __future__ import annotations

import json
from email.parser import Parser
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import ROOT, run_python, venv_python, venv_root, wanted_packages

CHECKER = ROOT / "scripts" / "setup" / "sglang_declared.py"
MODELS = ROOT / "tests" / "fixtures" / "models"
# Resolved as the contract suite resolves them: the Kimi target's own configuration module runs
# (trust_remote_code), as it does for a user with the checkpoint.
RESOLVE = [
    ["--model-path", str(MODELS / "Kimi-K2.5"), "--trust-remote-code", "--tp-size", "8",
     "--speculative-algorithm", "EAGLE3",
     "--speculative-draft-model-path", str(MODELS / "kimi-k2.5-eagle3"), "--device", "cpu"],
    ["--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--device", "cpu"],
]  # fmt: skip


def _pins(version: str) -> dict[str, Version]:
    pins = {}
    for pin in wanted_packages(version):
        name, _, value = pin.partition("==")
        pins[canonicalize_name(name)] = Version(value)
    return pins


def _declared(version: str) -> list[Requirement]:
    """SGLang's Requires-Dist that apply here (no extra, markers for this interpreter), from the
    METADATA of the wheel installed in its venv."""
    venv_python(version)  # fails, naming the set-up command, when the venv is missing or stale
    found = list(
        (venv_root() / version).glob(
            f"lib/python*/site-packages/sglang-{version}.dist-info/METADATA"
        )
    )
    assert len(found) == 1, f"SGLang {version}'s METADATA in its venv: {found}"
    lines = Parser().parsestr(found[0].read_text(encoding="utf-8")).get_all("Requires-Dist") or []
    requirements = [Requirement(line) for line in lines]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


@cache
def _checked(version: str) -> dict[str, Any]:
    payload = {"pins": sorted(wanted_packages(version)), "resolve": RESOLVE}
    result: dict[str, Any] = run_python(version, [str(CHECKER)], payload)
    return result


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_versions_yaml_pins_satisfy_sglangs_own_metadata(version: str) -> None:
    pins = _pins(version)
    declared = _declared(version)
    broken = []
    for requirement in declared:
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is not None and not requirement.specifier.contains(pinned, prereleases=True):
            broken.append(f"versions.yaml pins {requirement.name} {pinned}; SGLang {version} "
                          f"declares {requirement}")  # fmt: skip
    assert broken == [], broken
    # SGLang's exact pins on what resolution loads are all pinned here (none left floating).
    exact = {
        canonicalize_name(r.name) for r in declared if any(s.operator == "==" for s in r.specifier)
    }
    assert {"torch", "transformers", "tokenizers"} <= exact & set(pins), exact & set(pins)
    held = set(_checked(version)["walked"])
    assert exact & held <= set(pins), sorted((exact & held) - set(pins))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_venv_holds_what_sglang_declares(version: str) -> None:
    result = _checked(version)
    assert result["sglang"] == version
    assert result["problems"] == [], "\n".join(result["problems"])
    walked = result["walked"]
    # The walk went through what resolution needs, down to torch's own requirements.
    assert {"torch", "torchvision", "transformers", "tokenizers", "triton", "setuptools",
            "nvidia-cudnn-cu13", "huggingface-hub"} <= set(walked), sorted(walked)  # fmt: skip
    assert walked["transformers"] == str(_pins(version)["transformers"])


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_everything_resolution_loads_is_declared_or_pinned(version: str) -> None:
    result = _checked(version)
    loaded = result["imported"]
    assert {"sglang", "torch", "transformers"} <= set(loaded), sorted(loaded)
    loose = sorted(set(loaded) - set(result["walked"]) - set(_pins(version)))
    assert loose == [], f"SGLang {version} loads {loose}, neither declared nor pinned"


def test_the_kimi_fixture_carries_its_configuration_module() -> None:
    """transformers 5.19 (SGLang 0.5.23's) runs the checkpoint's own configuration module under
    --trust-remote-code: the config-only fixture must carry it, or resolution cannot load the
    config at all (test_everything_resolution_loads_is_declared_or_pinned resolves it)."""
    fixture: Path = MODELS / "Kimi-K2.5"
    auto = json.loads((fixture / "config.json").read_text(encoding="utf-8"))["auto_map"]
    module = auto["AutoConfig"].split(".")[0]
    assert (fixture / f"{module}.py").is_file(), f"{fixture}/{module}.py is missing"
