"""Names shared by the flags (cli.py) and the code behind them, kept free of heavy imports."""

from __future__ import annotations

BUILTIN_PROMPTS = "builtin"
# Where a baseline bucket's number comes from (baseline.py).
METRICS = ("auto", "exporter", "client")
