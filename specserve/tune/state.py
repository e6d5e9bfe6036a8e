"""A run's state.json: every candidate and how it ended, written atomically after each one, so
a run killed at any moment resumes with the candidates it had not finished."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specserve.tune.errors import TuneError
from specserve.tune.settings import check_settings

FINISHED = ("ok", "failed", "invalid")
STATE = "state.json"


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)  # a kill leaves the old or the new file, never half of one


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def load_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STATE
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TuneError(f"{path} does not exist: run `specserve tune start` first") from None
    except json.JSONDecodeError as exc:
        raise TuneError(f"{path} is not valid JSON ({exc}); remove the run directory") from None
    return state


def start(run_dir: Path, points: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Create or resume the run: finished points keep their outcome, the rest are pending."""
    check_settings(settings)
    path = run_dir / STATE
    if path.exists():
        state = load_state(run_dir)
        if state.get("settings") != settings:
            raise TuneError(
                f"{run_dir} holds a tuning run with other settings ({state.get('settings')}); "
                "resume it with the same variables, or start a new one with another tune_run_id"
            )
        state["resumed_at"] = [*state.get("resumed_at", []), now()]
    else:
        state = {"settings": settings, "started_at": now(), "points": {}}
    known: dict[str, Any] = state["points"]
    for point in points:
        entry = known.get(point["id"])
        if entry is None or entry["status"] not in FINISHED:
            status = "pending" if point["valid"] else "invalid"
            known[point["id"]] = {**point, "status": status, "reason": point.get("reason", "")}
    state["order"] = [p["id"] for p in points]
    write_json(path, state)
    return summary(state)


def summary(state: dict[str, Any]) -> dict[str, list[str]]:
    """The candidates' ids by status, in candidate order."""
    by_status: dict[str, list[str]] = {"pending": [], "ok": [], "failed": [], "invalid": []}
    for ident in state["order"]:
        by_status[state["points"][ident]["status"]].append(ident)
    return by_status


def mark(run_dir: Path, ident: str, status: str, reason: str = "") -> dict[str, list[str]]:
    """Record how one candidate ended (ok, or failed and why)."""
    state = load_state(run_dir)
    if ident not in state["points"]:
        raise TuneError(f"no point {ident!r} in {run_dir}/{STATE}")
    state["points"][ident].update(status=status, reason=reason, finished_at=now())
    write_json(run_dir / STATE, state)
    return summary(state)
