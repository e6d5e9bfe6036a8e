"""Names shared by the flags (cli.py) and the code behind them, kept free of heavy imports."""

from __future__ import annotations

BUILTIN_PROMPTS = "builtin"
# Where a baseline bucket's number comes from (baseline.py).
METRICS = ("auto", "exporter", "client")
# The shipped prompt set's classes (prompts/builtin.jsonl's kinds; a test holds them equal): the
# class label values the per-class recording rules keep, every other value folded into "other".
BUILTIN_CLASSES = ("chat", "code", "math", "long-context", "multilingual")
