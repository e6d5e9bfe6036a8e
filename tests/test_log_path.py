"""One log path convention (specserve/logpath.py): every image, deploy path, profile and doc
that names the SGLang log names LOG_DIR / LOG_FILE, and no other log path appears anywhere.

The Dockerfiles, the chart, the Ansible defaults and the docs cannot import the constant, so
this test reads them. Whether the images and deploys really work at that path is proven by the
Docker and Ansible tests (tests/images/test_images.py, tests/ansible/test_deploy.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from specserve.logpath import LOG_DIR, LOG_FILE
from specserve_exporter.config import ENV_PREFIX, build_parser

ROOT = Path(__file__).resolve().parents[1]
IMAGE_USER = "10001"
# Folders and top-level files a user or a deploy reads: everything but tests/ and build outputs.
SCANNED = [
    "README.md", "ansible", "benchmarks", "charts", "docker", "docs", "exporter", "monitoring",
    "playbooks", "profiles", "scripts", "specserve",
]  # fmt: skip
# Log paths that are not the SGLang log, each with the reason and the only files that may name it.
OTHER_LOGS: dict[str, tuple[str, ...]] = {
    # The node's specserve log root: weights staging logs (ansible weights_log_dir); LOG_DIR is
    # a directory of its own under it because it is shared with the exporter.
    "/var/log/specserve": ("ansible/roles/weights/", "docs/ansible.md"),
    # The Docker engine the test set-up starts (scripts/setup/docker.sh).
    "/var/log/specserve-dockerd.log": ("scripts/setup/docker.sh",),
}
# The fleet demo runs three servers on one machine: each node needs a log directory of its own,
# as separate machines would each have /var/log/specserve/sglang.
OTHER_LOGS.update(
    {
        f"/var/log/specserve/node{n}": ("playbooks/inventory/fleet/hosts.yml",)
        for n in (1, 2, 3)
    }
)
LOG_PATH = re.compile(r"/var/log/[A-Za-z0-9_.\-/]*[A-Za-z0-9_\-]")


def _text_files() -> Iterator[Path]:
    for name in SCANNED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts and file.suffix not in (
                ".so", ".png", ".pyc",
            ):  # fmt: skip
                yield file


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_log_file_is_in_the_log_dir() -> None:
    assert LOG_DIR.startswith("/") and not LOG_DIR.endswith("/")
    assert LOG_FILE.rpartition("/")[0] == LOG_DIR


def test_no_other_log_path_anywhere() -> None:
    allowed = {LOG_DIR, LOG_FILE, *OTHER_LOGS}
    stray: list[str] = []
    used: set[str] = set()
    for file in _text_files():
        text = file.read_text(encoding="utf-8", errors="replace")
        for match in LOG_PATH.finditer(text):
            path = match.group(0)
            line = text.count("\n", 0, match.start()) + 1
            if path not in allowed:
                stray.append(f"{_rel(file)}:{line}: {path}")
            elif path in OTHER_LOGS and not _rel(file).startswith(OTHER_LOGS[path]):
                stray.append(f"{_rel(file)}:{line}: {path} (only in {OTHER_LOGS[path]})")
            used.add(path)
    assert not stray, (
        f"log paths other than {LOG_FILE} (specserve/logpath.py):\n" + "\n".join(stray)
        + f"\nFix: use {LOG_DIR} / {LOG_FILE}, or list a different file in OTHER_LOGS with why"
    )
    # The allow-list stays true: an exception nobody uses any more goes.
    assert set(OTHER_LOGS) <= used, f"unused OTHER_LOGS entries: {set(OTHER_LOGS) - used}"


def _shipped_profiles() -> Iterator[tuple[str, dict]]:
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        yield _rel(path), yaml.safe_load(path.read_text(encoding="utf-8"))
    for path in sorted((ROOT / "charts" / "specserve" / "files" / "profiles").glob("*.yaml")):
        yield _rel(path), yaml.safe_load(path.read_text(encoding="utf-8"))
    for path in sorted((ROOT / "charts" / "specserve" / "ci").glob("*.yaml")):
        profile = yaml.safe_load(path.read_text(encoding="utf-8")).get("profile")
        if profile:
            yield _rel(path) + " profile", profile


@pytest.mark.parametrize(("where", "profile"), list(_shipped_profiles()), ids=lambda v: str(v))
def test_shipped_profiles_log_to_the_convention_or_not_at_all(where: str, profile: dict) -> None:
    log_file = (profile.get("logging") or {}).get("file")
    assert log_file in (None, LOG_FILE), f"{where}: logging.file {log_file}, expected {LOG_FILE}"


def test_the_default_and_stand_in_profiles_tee_the_log() -> None:
    # The profiles whose deploys run the exporter must write the file it follows.
    for name in ("kimi-k2.5-int4-eagle3-8gpu.yaml", "standin-cpu.yaml"):
        doc = yaml.safe_load((ROOT / "profiles" / name).read_text(encoding="utf-8"))
        assert doc["logging"]["file"] == LOG_FILE, name


def _dockerfile(image: str) -> str:
    # Continuation lines joined, so a RUN step reads as one command.
    return (ROOT / "docker" / image / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")


def _log_dir_arg(image: str) -> str:
    """The image's SPECSERVE_LOG_DIR build argument (specserve generate writes LOG_DIR there)."""
    (value,) = re.findall(r"^ARG SPECSERVE_LOG_DIR=(\S+)$", _dockerfile(image), flags=re.MULTILINE)
    return value


def test_sglang_image_owns_the_log_dir() -> None:
    text = _dockerfile("sglang")
    assert _log_dir_arg("sglang") == LOG_DIR
    assert re.search(
        rf'install -d -o {IMAGE_USER} -g {IMAGE_USER} -m 0750 "\$SPECSERVE_LOG_DIR"(\s|$)', text
    ), f"docker/sglang/Dockerfile must create {LOG_DIR} for its user {IMAGE_USER}"


def test_standin_image_owns_the_log_dir_as_a_volume() -> None:
    text = _dockerfile("standin")
    assert _log_dir_arg("standin") == LOG_DIR
    assert re.search(r'mkdir -p "\$SPECSERVE_LOG_DIR"(\s|$)', text)
    assert re.search(rf'chown {IMAGE_USER}:{IMAGE_USER} "\$SPECSERVE_LOG_DIR"(\s|$)', text)
    volumes = re.findall(r"^VOLUME (.+)$", text, flags=re.MULTILINE)
    assert [json.loads(v) for v in volumes] == [["${SPECSERVE_LOG_DIR}"]]


def test_exporter_image_follows_the_log_file_by_default() -> None:
    # No path in the image: --file's default is LOG_FILE (the next test).
    cmds = re.findall(r"^CMD (\[.+\])$", _dockerfile("exporter"), flags=re.MULTILINE)
    assert [json.loads(c) for c in cmds] == [["--source", "file"]]


def test_exporter_file_default_is_the_log_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"{ENV_PREFIX}FILE", raising=False)
    assert build_parser().parse_args([]).file == LOG_FILE
    # The environment still wins over the default.
    monkeypatch.setenv(f"{ENV_PREFIX}FILE", "/srv/other.log")
    assert build_parser().parse_args([]).file == "/srv/other.log"


def _role_log_dirs() -> Iterator[tuple[str, str, object]]:
    """(file, variable, default) of every `*_log_dir` in the roles' defaults and specs."""
    for role in sorted((ROOT / "ansible" / "roles").iterdir()):
        defaults = role / "defaults" / "main.yml"
        if defaults.is_file():
            for name, value in (yaml.safe_load(defaults.read_text(encoding="utf-8")) or {}).items():
                if name.endswith("_log_dir"):
                    yield _rel(defaults), name, value
        specs = role / "meta" / "argument_specs.yml"
        if specs.is_file():
            entries = yaml.safe_load(specs.read_text(encoding="utf-8"))["argument_specs"]
            for entry in entries.values():
                for name, option in (entry.get("options") or {}).items():
                    if name.endswith("_log_dir"):
                        yield _rel(specs), name, option.get("default")


def test_ansible_mounts_the_same_host_directory() -> None:
    # The host directory mounted into the server and the exporter has the containers' path.
    # weights_log_dir is the staging logs' directory on the host (OTHER_LOGS).
    found = [(f, name, value) for f, name, value in _role_log_dirs() if name != "weights_log_dir"]
    assert found, "no *_log_dir default in ansible/roles: where does Ansible mount the log?"
    wrong = [f"{f}: {name}: {value}" for f, name, value in found if value != LOG_DIR]
    assert not wrong, f"expected {LOG_DIR}: {wrong}"
