"""versions.yaml's sglang section: one pinned version, the verified list, exact venv pins.

The pinned SGLang version is written in three places (sglang.pinned, the upstream image tag, the
specserve image tag) and the contract data in a fourth (specserve.upstream); these tests hold them
together so bumping one without the others fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))
SGLANG: dict[str, Any] = VERSIONS["sglang"]


def test_pinned_agrees_with_the_upstream_image_tag() -> None:
    tag = VERSIONS["upstream_images"]["sglang"]["tag"]
    match = re.fullmatch(r"v(\d+\.\d+\.\d+(?:\.post\d+)?)-cu\d{3}", tag)
    assert match, f"upstream_images.sglang.tag {tag!r} is not v<version>-cu<NNN>"
    assert match[1] == SGLANG["pinned"], (
        f"upstream_images.sglang.tag {tag} ships SGLang {match[1]} but sglang.pinned is "
        f"{SGLANG['pinned']}; change both together"
    )


def test_pinned_agrees_with_the_specserve_image_tag() -> None:
    tag = VERSIONS["specserve_images"]["sglang"]["tag"]
    assert f"-sglang{SGLANG['pinned']}-" in tag, (tag, SGLANG["pinned"])


def test_pinned_is_verified_and_versions_are_unique_strings() -> None:
    verified = SGLANG["verified"]
    assert all(
        isinstance(v, str) and re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", v) for v in verified
    )
    assert len(set(verified)) == len(verified)
    assert SGLANG["pinned"] in verified


def test_venv_packages_are_exact_pins_without_sglang() -> None:
    shared = SGLANG["venv_packages"]
    own = SGLANG["version_packages"]
    assert set(own) == set(SGLANG["verified"]), "every verified version has its own pins"
    for version, packages in [("(shared)", shared), *own.items()]:
        for spec in packages:
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+", spec), (
                f"{version}: not an exact pin: {spec}"
            )
        names = [_name(spec) for spec in packages]
        assert len(set(names)) == len(names), f"{version}: a package is pinned twice"
        # sglang itself is installed per verified version, never from these lists.
        assert "sglang" not in names
    shared_names = {_name(spec) for spec in shared}
    for version, packages in own.items():
        names = {_name(spec) for spec in packages}
        # A package is either shared or per version, never both: the venv's own copy would
        # shadow the shared one and the marker would name two versions of it.
        assert not names & shared_names, (version, sorted(names & shared_names))
        # What SGLang's CPU imports need at least (sglang/__init__ -> srt/utils/common.py).
        assert {"torch", "triton", "numpy", "msgspec", "pydantic"} <= names | shared_names


def _name(spec: str) -> str:
    return spec.split("==")[0].lower().replace("_", "-")


def test_specserve_upstream_agrees_with_versions_yaml() -> None:
    # specserve.upstream reads data/versions.json (the installed package has no versions.yaml);
    # scripts/sglang/regenerate writes it from versions.yaml.
    from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS

    assert SGLANG["pinned"] == PINNED_VERSION, "rerun scripts/sglang/regenerate"
    assert list(VERIFIED_VERSIONS) == SGLANG["verified"], "rerun scripts/sglang/regenerate"


def test_every_verified_version_has_committed_data() -> None:
    data = ROOT / "specserve" / "upstream" / "data"
    for version in SGLANG["verified"]:
        assert (data / f"sglang-{version}.json").is_file(), (
            f"no contract data for SGLang {version}: run scripts/sglang/regenerate {version}"
        )
