"""Does this SGLang venv hold the dependency versions SGLang itself declares? Run INSIDE it.

scripts/setup/sglang.sh installs everything --no-deps (so nothing floats), which also means pip
never compares what it installs with what SGLang's wheel asks for: a venv once ran SGLang 0.5.23
on transformers 5.12.1 where 0.5.23 declares 5.19.0. This walks the requirements from the
installed `sglang` distribution's METADATA (Requires-Dist, markers evaluated for this
interpreter, no extras) through every installed distribution they reach, and reports each one
whose installed version a requirement on the way does not allow. Requirements on distributions
that are not installed are left out: the set is what SGLang's imports and resolution load, which
set-up proves by running the resolution.

stdin: JSON {"pins": ["name==version", ...], "resolve": [[argv], ...]}, both optional. `pins`
(versions.yaml's set for this version): each must also be installed at exactly that version
string (`==2.13.0` also admits a local build 2.13.0+cpu, which is not the release SGLang
declares). `resolve`: argvs run through SGLang's prepare_server_args + resolve_once first, so
`imported` lists the distribution of every module that import and resolution loaded.
stdout: JSON {"sglang": VERSION, "walked": {name: version}, "imported": {name: version},
"problems": ["...", ...]}.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def _installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def _applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


def walk() -> tuple[dict[str, str], list[str]]:
    """Every installed distribution reachable from sglang's requirements, and each requirement
    on the way that its installed version breaks."""
    root = _installed("sglang")
    if root is None:
        return {}, ["sglang is not installed in this venv"]
    walked = {"sglang": root.version}
    problems: list[str] = []
    todo = [root]
    while todo:
        dist = todo.pop()
        who = f"{dist.metadata['Name']} {dist.version}"
        for line in dist.requires or []:
            requirement = Requirement(line)
            if not _applies(requirement):
                continue
            name = canonicalize_name(requirement.name)
            found = _installed(name)
            if found is None:
                continue
            if not requirement.specifier.contains(Version(found.version), prereleases=True):
                problems.append(
                    f"{name} {found.version} is installed; {who} requires {requirement}"
                )
            if name not in walked:
                walked[name] = found.version
                todo.append(found)
    return walked, problems


def pin_problems(pins: list[str]) -> list[str]:
    problems = []
    for pin in pins:
        name, _, version = pin.partition("==")
        found = _installed(canonicalize_name(name))
        held = found.version if found is not None else None
        if held != version:
            problems.append(
                f"{name}: versions.yaml pins {version} but the venv holds {held or 'nothing'}"
            )
    return problems


def imported(argvs: list[list[str]]) -> dict[str, str]:
    """The distributions of the modules loaded once `argvs` are resolved (none: nothing run)."""
    if not argvs:
        return {}
    import contextlib
    import io

    from sglang.srt.server_args import prepare_server_args

    for argv in argvs:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            prepare_server_args(argv).resolve_once()
    owners = metadata.packages_distributions()
    names = {d for module in list(sys.modules) for d in owners.get(module.split(".")[0], [])}
    found = {}
    for name in names:
        dist = _installed(name)
        if dist is not None:
            found[canonicalize_name(name)] = dist.version
    return found


def main() -> int:
    raw = sys.stdin.read().strip()
    request = json.loads(raw) if raw else {}
    loaded = imported(list(request.get("resolve", [])))
    walked, problems = walk()
    problems += pin_problems(list(request.get("pins", [])))
    doc = {"sglang": walked.get("sglang"), "walked": walked, "imported": loaded,
           "problems": problems}  # fmt: skip
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
