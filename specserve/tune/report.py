"""A run directory ranked and written out: report.json, report.md and plot.png beside its
state.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specserve.tune.markdown import markdown
from specserve.tune.plot import plot
from specserve.tune.rank import rank
from specserve.tune.settings import parse_mix
from specserve.tune.state import load_state, now, write_json


def report(run_dir: Path, concurrency: int, baseline: dict[str, float], current: str,
           host: str, mix: Any = None) -> dict[str, Any]:
    """Rank the run at `concurrency` (or over `mix`) against the profile's recorded `baseline`
    (printed for reference), `current` being the profile's own point; write the three files."""
    state = load_state(run_dir)
    benched = [int(c) for c in state["settings"].get("bench_concurrency") or [concurrency]]
    result = rank(state, run_dir, concurrency, {str(k): float(v) for k, v in baseline.items()},
                  parse_mix(mix, benched))
    result.update(
        host=host,
        profile=state["settings"].get("profile", ""),
        run_dir=str(run_dir),
        current=current,
        generated_at=now(),
    )
    write_json(run_dir / "report.json", result)
    (run_dir / "report.md").write_text(markdown(result), encoding="utf-8")
    plot(result, run_dir / "plot.png")
    return result
