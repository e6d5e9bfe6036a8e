"""The exporter refuses at start (exit 2, a clear message) a profile whose baseline was measured
under other settings, rather than publish it as the alert threshold; the comparison is the
profile library's, the one `specserve check` uses."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from specserve.profile.likeness import profile_settings
from specserve.profile.model import profile_from_document
from specserve.upstream import PINNED_VERSION
from tests.exporter.conftest import clean_env, exporter_binary

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "specserve/sglang:0.1.0-sglang0.5.21-cu130"


def _profile(tmp_path: Path, **recorded: Any) -> Path:
    doc = yaml.safe_load((ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml").read_text())
    doc["baseline"].update(profile_settings(profile_from_document(doc), IMAGE, PINNED_VERSION))
    doc["baseline"].update(recorded)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exporter_binary(), "--source", "stdin", "--once", *args], input="",
                          capture_output=True, text=True, env=clean_env(), timeout=60,
                          check=False)  # fmt: skip


def test_an_unlike_baseline_is_refused_with_exit_2(tmp_path: Path) -> None:
    run = _run("--profile", str(_profile(tmp_path, max_running_requests=None, tp=4)))
    assert run.returncode == 2, run
    assert "specserve_baseline" not in run.stdout  # nothing published
    said = run.stderr
    assert "not like for like" in said
    assert "baseline.max_running_requests = null but server.max_running_requests" in said
    assert "baseline.tp = 4 but parallelism.tp = 8" in said
    assert "re-run playbooks/baseline.yml" in said


def test_another_image_is_refused_when_the_exporter_is_told_the_servers(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    run = _run("--profile", str(path), "--server-image", "specserve/sglang:other")
    assert run.returncode == 2, run
    assert "baseline.image = " in run.stderr and "specserve/sglang:other" in run.stderr
    same = _run("--profile", str(path), "--server-image", IMAGE)
    assert same.returncode == 0, same.stderr
    assert 'specserve_baseline_gen_throughput_tokens_per_second{concurrency="1"} 90.0' in (
        same.stdout
    )


def test_a_like_baseline_is_published_and_an_unrecorded_one_with_a_warning(
    tmp_path: Path,
) -> None:
    like = _run("--profile", str(_profile(tmp_path)))
    assert like.returncode == 0, like.stderr
    assert "warning" not in like.stderr
    assert 'specserve_baseline_gen_throughput_tokens_per_second{concurrency="1"} 90.0' in (
        like.stdout
    )
    seeds = _run("--profile", str(ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"))
    assert seeds.returncode == 0, seeds.stderr
    assert "warning" in seeds.stderr and "records none of the settings" in seeds.stderr
    assert "specserve_baseline_gen_throughput_tokens_per_second" in seeds.stdout
    # An explicit --baseline replaces the profile's: nothing of the profile's is judged.
    explicit = _run("--profile", str(_profile(tmp_path, tp=4)), "--baseline", "1=80")
    assert explicit.returncode == 0, explicit.stderr
