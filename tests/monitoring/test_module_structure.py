"""specserve.monitoring's modules: each imports alone, none imports another in a cycle, and each
one ships because product code uses it (test-only code lives in tests/monitoring/)."""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = "specserve.monitoring"
SOURCE = REPO / "specserve" / "monitoring"
MODULES = sorted(f"{PACKAGE}.{p.stem}" for p in SOURCE.glob("*.py") if p.stem != "__init__")
# The product's entry points into the package: the CLI and the one regenerate command.
ENTRY_POINTS = (REPO / "specserve" / "cli.py", REPO / "specserve" / "generate" / "command.py")


def _imported(path: Path) -> set[str]:
    """specserve.monitoring modules `path` imports anywhere in it (function bodies included, so
    a cycle cannot hide behind a lazy import)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in MODULES)
    return found


def _entered(path: Path) -> set[str]:
    """Modules an entry point imports, or names as a string (specserve.cli loads its
    subcommands by module name)."""
    strings = {
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in MODULES
    }
    return _imported(path) | strings


def _graph() -> dict[str, set[str]]:
    return {module: _imported(SOURCE / f"{module.rsplit('.', 1)[1]}.py") for module in MODULES}


def test_the_split_modules_exist() -> None:
    for stem in ("rules", "expansion", "prometheus", "overrides", "metrics"):
        assert f"{PACKAGE}.{stem}" in MODULES


def test_no_import_cycle() -> None:
    graph = _graph()
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        pytest.fail(f"import cycle in {PACKAGE}: {' -> '.join(err.args[1])}")
    # The layering the split is for: the catalogue imports no other monitoring module but the
    # metric names and the SLO catalogue (itself on the metric names only), the expansion only
    # the catalogue, the renderers come after both.
    assert graph[f"{PACKAGE}.rules"] <= {f"{PACKAGE}.metrics", f"{PACKAGE}.slo"}
    assert graph[f"{PACKAGE}.slo"] <= {f"{PACKAGE}.metrics"}
    assert graph[f"{PACKAGE}.expansion"] == {f"{PACKAGE}.rules"}
    assert f"{PACKAGE}.prometheus" not in graph[f"{PACKAGE}.overrides"]
    assert order.index(f"{PACKAGE}.rules") < order.index(f"{PACKAGE}.expansion")
    assert order.index(f"{PACKAGE}.expansion") < order.index(f"{PACKAGE}.prometheus")


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    # The walker must report an import inside a function body, the form the old cycle took.
    path = tmp_path / "late.py"
    path.write_text(f"def f():\n    from {PACKAGE}.overrides import resolve_settings\n")
    assert _imported(path) == {f"{PACKAGE}.overrides"}


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=REPO,
        timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr


def test_every_module_is_used_by_the_product() -> None:
    graph = _graph()
    reached: set[str] = set()
    pending = [module for path in ENTRY_POINTS if path.is_file() for module in _entered(path)]
    while pending:
        module = pending.pop()
        if module not in reached:
            reached.add(module)
            pending.extend(graph[module])
    unused = sorted(set(MODULES) - reached)
    assert not unused, f"not used by specserve's CLI or generate: {unused} (test-only? tests/)"


def test_no_product_module_imports_tests() -> None:
    for path in SOURCE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("tests"), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("tests") for a in node.names), path.name
