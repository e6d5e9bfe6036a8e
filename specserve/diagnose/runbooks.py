"""The first section of every alert's runbook: run `specserve diagnose`, and what it will say.

Generated into docs/runbooks/<alert>.md between markers (specserve/docblocks.py) from the one
table of meanings (causes.py), so a runbook never says something diagnose does not.
"""

from __future__ import annotations

from specserve.diagnose.causes import MEANINGS, Role
from specserve.docblocks import Block, code
from specserve.monitoring.rules import ALERTS, Alert

COMMAND = ("specserve diagnose --prometheus http://127.0.0.1:9090 "
           "--overrides <the deployment's alert overrides file> --profile <the deployed profile>")
_ROLE_WORDS = {
    Role.BLIND: "a blind spot (ranked first: the log-derived verdicts cannot be trusted)",
    Role.CAUSE: "a cause",
    Role.SYMPTOM: "a symptom (listed on its own only when no measured cause explains it)",
}


def _section(alert: Alert) -> str:
    meaning = MEANINGS[alert.name]
    explained_by = sorted(n for n, m in MEANINGS.items() if alert.name in m.explains)
    lines = [
        "## First: `specserve diagnose`",
        "",
        "```sh",
        COMMAND,
        "```",
        "",
        "It evaluates every alert's condition now, at the deployment's windows and thresholds, "
        "adds the profile's own findings, and prints the ranked causes with evidence and fix "
        "(exit 0: no cause found). It reads this alert as "
        f"{_ROLE_WORDS[meaning.role]}: {meaning.cause}.",
    ]
    if meaning.explains:
        lines += ["", "It explains, when they hold too: "
                  + ", ".join(code(name) for name in meaning.explains) + "."]
    if explained_by:
        lines += ["", "Explained by, when one of them holds too: "
                  + ", ".join(code(name) for name in explained_by) + "."]
    lines += ["", f"Its fix: {meaning.fix}."]
    return "\n".join(lines) + "\n"


def _block(alert: Alert) -> Block:
    return Block(f"docs/runbooks/{alert.runbook_slug}.md", "diagnose",
                 "specserve/diagnose/causes.py",
                 lambda _root, _read, alert=alert: _section(alert))  # type: ignore[misc]


BLOCKS: tuple[Block, ...] = tuple(_block(alert) for alert in ALERTS)
