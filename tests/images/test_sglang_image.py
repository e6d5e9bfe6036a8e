"""The SGLang image on the real Docker engine, up to the first thing that needs a GPU.

Built FROM CI's stand-in for lmsysorg/sglang (docker/sglang-local-base: the real sglang package of
the pinned version and versions.yaml's sglang.venv_packages, CUDA builds of torch and torchvision
as upstream ships, in the system python3; no GPU, no driver). The launcher validates the default
profile against the fixture model configs mounted at /models, then runs
`python3 -m sglang.launch_server` as its child: SGLang's own parser must accept the argv, and the
run stops in SGLang's argument resolution at the first thing that needs an accelerator: the
serving hook asks for the device to fill in its defaults and SGLang finds none.
Host networking, nothing listens: the run stops before SGLang binds a port.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

# A fresh CI machine builds the ~9 GB local base first (CUDA torch + torchvision wheels).
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))
PINNED = VERSIONS["sglang"]["pinned"]
DEFAULT_PROFILE = ROOT / "profiles/kimi-k2.5-int4-eagle3-8gpu.yaml"
# Named like the default profile's /models/Kimi-K2.5 and /models/kimi-k2.5-eagle3-mla: configs
# only.
MODELS = ROOT / "tests/fixtures/models"
IMAGE_USER = 10001  # docker/sglang/Dockerfile USER

# Where SGLang stops here, read from its own code (0.5.21): launch_server's __main__ runs
# `server_args = prepare_server_args(sys.argv[1:])`, then `run_server(server_args)`, whose
# resolve_once() -> run_resolution_pipeline() runs serving_hook.handle_missing_default_values,
# which calls get_device(): with no CUDA/XPU/HPU/NPU/MUSA/MPS device it raises.
PAST_PARSER = re.compile(
    r'sglang/launch_server\.py", line \d+, in <module>\n\s+run_server\(server_args\)'
)
RESOLUTION = (
    "in resolve_once",
    "in run_resolution_pipeline",
    "sglang/srt/arg_groups/serving_hook.py",
    "in handle_missing_default_values",
    "in get_device",
)
STOP = re.compile(r"^RuntimeError: No accelerator \(CUDA, XPU, HPU, NPU, MUSA, MPS\)", re.MULTILINE)
# launch_server's `finally: kill_process_tree(os.getpid(), include_parent=False)`: logged only
# after prepare_server_args returned. Through the launcher, parent_pid is not 1: the launcher is
# PID 1 and SGLang its child, so the tree SGLang kills does not hold the launcher's tee.
FINALLY = re.compile(r"kill_process_tree called: parent_pid=(\d+), include_parent=False")
# What argparse prints when SGLang's parser refuses the argv (exit 2).
PARSER_ERRORS = ("usage:", "error: unrecognized arguments", "error: ambiguous option")


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def image_ref() -> str:
    image = VERSIONS["specserve_images"]["sglang"]
    return f"{image['repository']}:{image['tag']}"


def local_base_ref() -> str:
    image = VERSIONS["upstream_images"]["sglang_local_base"]
    return f"{image['repository']}:{image['tag']}"


def build() -> tuple[float, str]:
    start = time.monotonic()
    result = subprocess.run(
        [str(ROOT / "scripts/build-images.sh"), "--local-base", "--images", "sglang"],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return time.monotonic() - start, result.stdout


@pytest.fixture(scope="module")
def image() -> str:
    if docker("info", timeout=30).returncode != 0:
        pytest.fail("no Docker engine answers: run scripts/setup/docker.sh")
    build()
    return image_ref()


def owned_by_image_user(path: Path, mode: int) -> None:
    """The key file as Ansible writes it (owner = the image's user, 0400); world-readable when
    these tests do not run as root and cannot chown."""
    try:
        os.chown(path, IMAGE_USER, IMAGE_USER)
        path.chmod(mode)
    except PermissionError:
        path.chmod(mode | 0o044 | (0o011 if path.is_dir() else 0))


class Container:
    """One `docker run` of the image with a profile, its secret and the fixture model dirs."""

    def __init__(self, image: str, tmp_path: Path, doc: dict[str, Any]) -> None:
        self.image, self.doc = image, doc
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.key = f"sk-{secrets.token_hex(16)}"
        self.profile = tmp_path / "profile.yaml"
        self.profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
        self.key_file = tmp_path / "api-key"
        self.key_file.write_text(self.key, encoding="utf-8")
        owned_by_image_user(self.key_file, 0o400)
        self.log_dir = tmp_path / "log"
        self.log_dir.mkdir()
        owned_by_image_user(self.log_dir, 0o750)

    def mounts(self) -> list[str]:
        args = [
            "-v",
            f"{self.profile}:/etc/specserve/profile.yaml:ro",
            "-v",
            f"{MODELS}:/models:ro",
        ]
        key = (self.doc["server"].get("api_key") or {}).get("file")
        if key:
            args += ["-v", f"{self.key_file}:{key}:ro"]
        log = (self.doc.get("logging") or {}).get("file")
        if log:
            args += ["-v", f"{self.log_dir}:{Path(log).parent}"]
        return args

    def run(self, *args: str, entrypoint: str | None = None) -> tuple[int, str]:
        name = f"ss-sglang-{uuid.uuid4().hex[:8]}"
        cmd = ["run", "--rm", "--name", name, "--network", "host", *self.mounts()]
        if entrypoint:
            cmd += ["--entrypoint", entrypoint]
        try:
            result = docker(*cmd, self.image, *args, timeout=300)
        finally:
            docker("rm", "-f", name, timeout=30)
        output = result.stdout + result.stderr
        # Issue 15: the API key never reaches the container's output.
        assert self.key not in output, "the API key reached the container's output"
        return result.returncode, output

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log_dir.iterdir()))


def rendered_argv(container: Container, tmp_path: Path) -> list[str]:
    """The default profile's argv as the image's own `specserve render` prints it, with the
    container's key in place of the secret reference (what the launcher execs)."""
    # --configs-only: /models holds the fixtures' configs, no shards (render checks as check does).
    rc, rendered = Container(container.image, tmp_path, default_doc()).run(
        "render", "--format", "json", "--configs-only", "/etc/specserve/profile.yaml",
        entrypoint="specserve",
    )  # fmt: skip
    assert rc == 0, rendered
    argv: list[str] = json.loads(rendered[rendered.index("{") :])["argv"]
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"], argv
    return [container.key if a == "<from secret>" else a for a in argv]


def default_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(DEFAULT_PROFILE.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        doc[section][key] = value
    return doc


def test_image_is_non_root_and_declares_its_sglang_version(image: str, tmp_path: Path) -> None:
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == f"{IMAGE_USER}:{IMAGE_USER}"
    assert f"SPECSERVE_SGLANG_VERSION={PINNED}" in config["Env"]
    assert config["Entrypoint"] == ["specserve-launch"]
    # The base holds the real sglang of that version, imported by the image's python3.
    rc, out = Container(image, tmp_path, default_doc()).run(
        "-c", "import importlib.metadata as m; print(m.version('sglang'))", entrypoint="python3"
    )
    assert (rc, out.strip()) == (0, PINNED)


def test_specserve_command_works_in_the_image(image: str, tmp_path: Path) -> None:
    # The image puts `specserve` on PATH; it imports every subcommand (rules needs
    # grafana-foundation-sdk, which the lean install once left out).
    container = Container(image, tmp_path, default_doc())
    rc, out = container.run(
        "check", "--configs-only", "/etc/specserve/profile.yaml", entrypoint="specserve"
    )
    assert rc == 0, out


def test_rebuild_keeps_the_sglang_local_base(image: str) -> None:
    # The base (~9 GB: sglang, CUDA torch + torchvision) is the expensive layer: unchanged pins must
    # never rebuild it. (The specserve layer on top follows the sources others may be editing.)
    base_id = docker("image", "inspect", "--format", "{{.Id}}", local_base_ref()).stdout.strip()
    seconds, stdout = build()
    assert f"SGLang local base {local_base_ref()} up to date" in stdout
    assert (
        docker("image", "inspect", "--format", "{{.Id}}", local_base_ref()).stdout.strip()
        == base_id
    )
    assert seconds < 90, f"rebuild with an unchanged base took {seconds:.0f} s"


def test_dry_run_validates_the_default_profile_and_prints_the_command(
    image: str, tmp_path: Path
) -> None:
    container = Container(image, tmp_path, default_doc())
    rc, out = container.run("--dry-run")
    assert rc == 0, out
    assert "python3 -m sglang.launch_server" in out
    assert "--speculative-algorithm EAGLE3" in out and "--tp-size 8" in out
    assert '--api-key "$(cat /run/secrets/specserve/api-key)"' in out
    assert "NCCL_PROTO=LL" in out  # the profile's preset, applied by the launcher
    # The dry run ends with the image's own SGLang parser (issue 16 item 3).
    assert f"SGLang {PINNED}'s own parser accepts the command" in out


def test_dry_run_is_refused_by_the_images_own_sglang_parser(image: str, tmp_path: Path) -> None:
    # `specserve check` knows the flag; only SGLang's parser knows its value is not an int. What
    # Ansible runs in a throwaway container before it stops the old server.
    doc = default_doc(server__extra_args=["--chunked-prefill-size", "abc"])
    rc, out = Container(image, tmp_path, doc).run("--dry-run")
    assert rc == 1, out
    assert "own parser refuses the command (exit 2)" in out
    assert "sglang serve: error: argument --chunked-prefill-size: invalid int value: 'abc'" in out
    assert not FINALLY.search(out) and "usage:" not in out


def test_launcher_refuses_eagle_for_the_fixture_eagle3_drafter(image: str, tmp_path: Path) -> None:
    # The field notes' bug, inside the image: the default drafter's config.json (its fixture,
    # mounted where the profile's path points) names an EAGLE-3 class, so EAGLE is refused before
    # SGLang.
    doc = default_doc(drafter__algorithm="EAGLE")
    config = MODELS / Path(doc["drafter"]["path"]).name / "config.json"
    [drafter_class] = json.loads(config.read_text(encoding="utf-8"))["architectures"]
    container = Container(image, tmp_path, doc)
    rc, out = container.run()
    assert rc == 1, out
    assert "drafter.algorithm" in out and f"declares {drafter_class} (an EAGLE-3 drafter)" in out
    assert "launch_server" not in out.split("error:", 1)[1]


def test_exec_gets_past_sglangs_parser_and_stops_at_the_missing_accelerator(
    image: str, tmp_path: Path
) -> None:
    # No API key and no log file: the launcher starts no tee; SGLang writes to the output itself.
    container = Container(image, tmp_path, default_doc(server__api_key=None, logging__file=None))
    rc, out = container.run()
    assert rc == 1, out
    assert not any(marker in out for marker in PARSER_ERRORS), out
    finally_ = FINALLY.search(out)
    assert finally_ and finally_.group(1) != "1", out
    assert PAST_PARSER.search(out), out
    assert all(where in out for where in RESOLUTION), out
    assert STOP.search(out), out
    # That is SGLang's code of the base, run by its python3.
    assert "/usr/local/lib/python3.11/dist-packages/sglang/launch_server.py" in out


def test_default_profile_argv_with_api_key_passes_sglangs_parser(
    image: str, tmp_path: Path
) -> None:
    # The launcher's whole argv, --api-key and its value included, run by the image's python3
    # without the launcher and its tee.
    container = Container(image, tmp_path, default_doc())
    argv = rendered_argv(container, tmp_path / "render")
    assert "--api-key" in argv
    rc, out = container.run(*argv[1:], entrypoint="python3")
    assert rc == 1, out
    assert not any(marker in out for marker in PARSER_ERRORS), out
    assert PAST_PARSER.search(out) and STOP.search(out), out
    # And through the launcher and its tee: exit 1, not argparse's 2, and no usage message. The
    # key never reaches the log file.
    rc, out = container.run()
    assert rc == 1, out
    assert not any(marker in out for marker in PARSER_ERRORS), out
    assert container.key not in container.log_text()


def test_tee_keeps_sglangs_last_words(image: str, tmp_path: Path) -> None:
    # launch_server's finally calls kill_process_tree(os.getpid(), include_parent=False), which
    # SIGKILLs every descendant of SGLang: the launcher is SGLang's parent, so its tee copies
    # the traceback saying why SGLang stopped to `docker logs` and to the log file.
    container = Container(image, tmp_path, default_doc())
    rc, out = container.run()
    assert rc == 1, out
    # Wherever SGLang stops on this GPU-less base (STOP names today's place), the log file's
    # last line is the exception that stopped it, printed after kill_process_tree ran, and the
    # container's output (the tee's other copy) has it too.
    log = container.log_text()
    last = log.rstrip("\n").rsplit("\n", 1)[-1]
    assert re.match(r"^[A-Za-z_.]+(Error|Exception): ", last), log
    assert log.index("kill_process_tree called: parent_pid=") < log.rindex(last)
    assert f"\n{last}\n" in out, out


def test_flag_sglang_refuses_fails_with_sglangs_own_usage_error(image: str, tmp_path: Path) -> None:
    doc = default_doc(server__extra_args=["--no-such-flag", "1"])
    container = Container(image, tmp_path, doc)
    # Through the launcher: refused before or by SGLang, never started.
    rc, out = container.run()
    assert rc in (1, 2) and "--no-such-flag" in out, out
    assert not FINALLY.search(out)
    # SGLang's own parser in the image, on the argv the image's specserve renders for the
    # default profile plus the bad flag: argparse's usage error, exit 2 (issue 16 item 3).
    argv = rendered_argv(container, tmp_path / "render")
    rc, out = container.run(*argv[1:], "--no-such-flag", "1", entrypoint="python3")
    assert rc == 2, out
    assert re.search(r"^usage: sglang serve ", out, flags=re.MULTILINE), out
    assert "error: unrecognized arguments: --no-such-flag 1" in out
    assert not FINALLY.search(out)
