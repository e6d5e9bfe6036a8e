"""The order of a run, what its subprocesses share, and what needs a Docker engine.

- The heaviest files first (tests/ordering.py), so that parallel workers finish together, and a
  line per finished file with its seconds (tests/progress.py).
- A bytecode cache for the zip imports of the tests' subprocesses (tests/zipimport_cache): every
  Ansible task compiles its AnsiballZ payload's sources afresh, half of what its module costs.
- Only tests marked `docker` reach the Docker engine: every other test runs with `DOCKER_HOST`
  at a socket that does not exist, so `scripts/test-fast` (`-m "not docker"`, no engine needed)
  selects exactly the tests that need none, and every full run proves that selection again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import progress
from tests.ordering import heaviest_files_first, load_seconds

ZIPIMPORT_CACHE = Path(__file__).parent / "zipimport_cache"
NO_ENGINE = "unix:///nonexistent/specserve-tests-not-marked-docker/docker.sock"


def _cache_zip_imports() -> None:
    """Set here, at import, so every worker's subprocesses inherit it (ansible-playbook and its
    modules, which the local connection runs with the controller's environment)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    paths = [str(ZIPIMPORT_CACHE), *filter(None, inherited)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("SPECSERVE_ZIPIMPORT_CACHE",
                          str(Path(tempfile.gettempdir()) / f"specserve-zipimport-{os.getuid()}"))


_cache_zip_imports()


def pytest_configure(config: pytest.Config) -> None:
    progress.register(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = heaviest_files_first(items, load_seconds())


def _without_engine(item: pytest.Item) -> Iterator[None]:
    """The docker CLI, the Docker SDK and community.docker all read DOCKER_HOST: an unmarked test
    that reaches the engine fails with "No such file or directory" naming this socket. Setup
    (fixtures included) and call only: a module fixture's teardown may follow a marked test's
    use of the engine and must reach it."""
    if item.get_closest_marker("docker"):
        yield
        return
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = NO_ENGINE
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _without_engine(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _without_engine(item)
