"""The order and the selection of a run.

- The long tier: scenario tests that take minutes each and that CI's 30-minute budget cannot
  also hold (docs/testing.md). They are deselected, not skipped, unless `--long` is given or a
  `-m` expression chooses for itself; every one has a cheaper counterpart that CI runs (the one
  its `long` mark names).
- The heaviest files first (tests/ordering.py), so that parallel workers finish together.
- A bytecode cache for the zip imports of the tests' subprocesses (tests/zipimport_cache): every
  Ansible task compiles its AnsiballZ payload's sources afresh, half of what its module costs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.ordering import heaviest_files_first, load_seconds

LONG = "long"
ZIPIMPORT_CACHE = Path(__file__).parent / "zipimport_cache"


def _cache_zip_imports() -> None:
    """Set here, at import, so every worker's subprocesses inherit it (ansible-playbook and its
    modules, which the local connection runs with the controller's environment)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    paths = [str(ZIPIMPORT_CACHE), *filter(None, inherited)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("SPECSERVE_ZIPIMPORT_CACHE",
                          str(Path(tempfile.gettempdir()) / f"specserve-zipimport-{os.getuid()}"))


_cache_zip_imports()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False,
                     help="also run the long tier (tests marked `long`); `-m long` runs only it")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = heaviest_files_first(items, load_seconds())
    if config.getoption("--long") or config.getoption("markexpr"):
        return
    long = [item for item in items if item.get_closest_marker(LONG)]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not item.get_closest_marker(LONG)]
        config.stash[_DESELECTED] = len(long)
        # Under xdist this runs in each worker; the controller hears the count at the end.
        if hasattr(config, "workeroutput"):
            config.workeroutput[LONG] = len(long)


_DESELECTED = pytest.StashKey[int]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: every worker collected the same tests, so any one's count is it."""
    count = getattr(node, "workeroutput", {}).get(LONG)  # none from a crashed worker
    if count:
        node.config.stash[_DESELECTED] = count


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    count = config.stash.get(_DESELECTED, 0)
    if count:
        terminalreporter.write_line(
            f"{count} long-tier tests not run (deselected): `scripts/test --long` runs "
            "everything, `scripts/test -m long` only them (docs/testing.md)")
