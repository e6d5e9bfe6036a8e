"""Data package: the shipped benchmark prompt set (builtin.jsonl)."""
