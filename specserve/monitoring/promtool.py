"""Where the promtool unit-test files under monitoring/prometheus/tests/ come from.

They are test fixtures: hand-written scenarios with hand-computed expectations, kept as test code
in the checkout's tests/monitoring/promtool_cases.py and not shipped in the package. The files
they lay out are committed under monitoring/ for `promtool test rules`, so the one regenerate
command (run in a checkout) reads the scenarios from there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CASES_MODULE = "tests.monitoring.promtool_cases"
CASES_FILE = Path(__file__).resolve().parents[2] / "tests" / "monitoring" / "promtool_cases.py"
_PRIVATE_NAME = "_specserve_promtool_cases"


def promtool_cases() -> ModuleType:
    """The checkout's scenario module (the one pytest imported, when it did)."""
    for name in (CASES_MODULE, _PRIVATE_NAME):
        if name in sys.modules:
            return sys.modules[name]
    if not CASES_FILE.is_file():
        raise FileNotFoundError(
            f"{CASES_FILE}: the promtool scenarios are test code in a specserve checkout; "
            "regenerate monitoring/ from a checkout (an editable install), not an installed wheel"
        )
    spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, CASES_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: dataclasses look their module up in sys.modules.
    sys.modules[_PRIVATE_NAME] = module
    spec.loader.exec_module(module)
    return module
